"""cffi builder for trajlog's C core (out-of-line API mode).

The cdef is the block between ``/* cdef-begin */`` and ``/* cdef-end */`` in
``tl.h``: one header is both the C contract and the Python binding, and cffi
checks every constant and struct layout against the compiled code.

Environment:
    TRAJLOG_SANITIZE=1   build with AddressSanitizer + UndefinedBehaviorSanitizer
    TRAJLOG_ABS_SOURCES=1  absolute source paths, for ffibuilder.compile(tmpdir=...)
    TRAJLOG_CFLAGS       extra compiler flags (appended)
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from cffi import FFI

CSRC = Path(__file__).resolve().parent
ROOT = CSRC.parent


def _cdef() -> str:
    text = (CSRC / "tl.h").read_text(encoding="utf-8")
    start = text.index("/* cdef-begin */") + len("/* cdef-begin */")
    return text[start : text.index("/* cdef-end */")]


def _rel(path: Path) -> str:
    # setuptools wants sources relative to the project root (the cwd of a build);
    # ffibuilder.compile() compiles inside its tmpdir and needs absolute ones.
    if os.environ.get("TRAJLOG_ABS_SOURCES") == "1":
        return str(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _flags() -> tuple[list[str], list[str]]:
    cflags = ["-std=c11", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden"]
    ldflags: list[str] = []
    if os.environ.get("TRAJLOG_SANITIZE") == "1":
        san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
               "-fno-omit-frame-pointer", "-g"]
        cflags += san
        ldflags += san
    cflags += shlex.split(os.environ.get("TRAJLOG_CFLAGS", ""))
    return cflags, ldflags


ffibuilder = FFI()
ffibuilder.cdef(_cdef())
_cflags, _ldflags = _flags()
ffibuilder.set_source(
    "trajlog._tlcore",
    '#include "tl.h"',
    sources=[_rel(p) for p in sorted(CSRC.glob("tl_*.c"))],
    include_dirs=[_rel(CSRC)],
    extra_compile_args=_cflags,
    extra_link_args=_ldflags,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
