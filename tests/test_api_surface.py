"""The Python mirror of tl.h equals the compiled C, and the public surface is
what it says it is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import trajlog
from trajlog import _format, codec, errors
from trajlog._format import MESSAGES, Status

from conftest import kernel_or_skip


def test_api_status_codes_equal_c_constants():
    c = kernel_or_skip("c")
    lib = c.lib if hasattr(c, "lib") else __import__("trajlog._tlcore", fromlist=["lib"]).lib
    for status in Status:
        assert getattr(lib, f"TL_{status.name}") == status.value, status
    assert len(Status) == lib.TL_STATUS_COUNT
    pairs = {
        "TL_FORMAT_VERSION": _format.FORMAT_VERSION, "TL_HEADER_SIZE": _format.HEADER_SIZE,
        "TL_ALIGN": _format.ALIGN, "TL_MAX_STORED": _format.MAX_STORED,
        "TL_MAX_RAW": _format.MAX_RAW, "TL_SECTOR": _format.SECTOR,
        "TL_MAX_SEQ": _format.MAX_SEQ, "TL_FLAG_ZSTD": _format.FLAG_ZSTD,
        "TL_FLAG_ZSTD_DICT": _format.FLAG_ZSTD_DICT, "TL_FLAGS_KNOWN": _format.FLAGS_KNOWN,
        "TL_TYPE_OPTIONAL_MIN": _format.TYPE_OPTIONAL_MIN,
        "TL_HINT_ZERO_SECTOR": _format.HINT_ZERO_SECTOR,
    }
    for name, value in pairs.items():
        assert getattr(lib, name) == value, name
    for t in _format.FrameType:
        assert getattr(lib, f"TL_TYPE_{t.name}") == t.value


def test_api_messages_identical_in_both_kernels(kernel):
    for status in range(-1, len(Status) + 2):
        assert kernel.strerror(status) == MESSAGES.get(status, "unknown status")
    assert kernel.format_version() == _format.FORMAT_VERSION


def test_api_every_failing_status_has_an_exception():
    for status in Status:
        if status in (Status.OK, Status.END, Status.MORE):
            with pytest.raises(ValueError):
                errors.error_for(status)
            continue
        exc = errors.error_for(status, offset=8, seq=1, session="s")
        assert isinstance(exc, errors.TrajlogError)
        assert MESSAGES[status] in str(exc)


def test_api_all_names_exist():
    for module in (trajlog, codec, errors):
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
    assert (Path(trajlog.__file__).parent / "py.typed").exists()


def test_api_only_module_init_is_exported():
    """-fvisibility=hidden: the extension exports PyInit__tlcore and nothing of ours."""
    kernel_or_skip("c")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    from trajlog import _tlcore

    out = subprocess.run([nm, "-D", "--defined-only", _tlcore.__file__],
                         capture_output=True, text=True, check=True).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    ours = {n for n in names if n.startswith(("tl_", "tl__", "PyInit"))}
    assert ours == {"PyInit__tlcore"}
