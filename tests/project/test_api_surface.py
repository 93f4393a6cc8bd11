"""The Python mirror of tl.h equals the compiled C, and the public surface is
what it says it is: a small front door (``trajlog.__all__``), the frame
vocabulary under :mod:`trajlog.codec`, and an ``import trajlog`` that loads
neither asyncio nor the rooms a host may never use."""

from __future__ import annotations

import shutil
import subprocess
import sys
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


#: the front door: what a host uses every day (the rest lives in its room)
FRONT_DOOR = {
    "open", "Store", "Session", "Event", "SessionHeader", "Identity", "replay",
    "VerifyReport", "StoreAudit", "PurgeReport", "ReplayResult", "TrajlogError",
    "aio", "codec", "errors", "memory", "projections", "backend", "__version__",
}
#: the frame vocabulary, at home in trajlog.codec
FRAME_VOCABULARY = {"Cursor", "FrameHeader", "FrameType", "Status", "Frame", "ScanReport",
                    "Verdict", "Watermark", "FORMAT_VERSION"}


def test_api_the_front_door_is_small_and_every_name_imports():
    assert set(trajlog.__all__) == FRONT_DOOR and len(trajlog.__all__) <= 20
    assert len(set(trajlog.__all__)) == len(trajlog.__all__)
    for name in trajlog.__all__:
        namespace: dict[str, object] = {}
        exec(f"from trajlog import {name}", namespace)
        assert namespace[name] is getattr(trajlog, name), name
    assert trajlog.Store is trajlog.api.Store and trajlog.open is trajlog.api.open
    assert trajlog.aio.open is trajlog.api.async_store.open


def test_api_the_frame_vocabulary_lives_under_codec():
    assert set(codec.__all__) >= FRAME_VOCABULARY
    for name in FRAME_VOCABULARY:
        assert not hasattr(trajlog, name), name   # one home: trajlog.codec
    assert codec.Status is Status and codec.FORMAT_VERSION == _format.FORMAT_VERSION
    assert codec.Cursor is _format.Cursor and codec.FrameHeader is _format.FrameHeader
    assert codec.FrameType is _format.FrameType


def test_api_import_trajlog_loads_only_what_a_host_needs():
    """``import trajlog`` brings the store, not asyncio (``trajlog.aio`` is
    loaded on first use), the export formats and importers (loaded by the
    first export or import), the adapters, the viewer or the command line."""
    probe = (
        "import sys, trajlog\n"
        "loaded = sorted(m for m in sys.modules if m == 'asyncio' or m.startswith(("
        "'trajlog.adapters', 'trajlog.viewer', 'trajlog.cli', 'trajlog.aio', "
        "'trajlog.api.async_', 'trajlog.interop.export', 'trajlog.interop.importer', "
        "'trajlog.providers')))\n"
        "print(','.join(loaded))\n"
        "trajlog.aio.open\n"
        "print('asyncio' in sys.modules and 'trajlog.aio' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["", "True"]


def test_api_the_provider_requests_are_three_functions():
    import trajlog.providers as providers

    assert providers.__all__ == ["to_anthropic", "to_openai_chat", "to_openai_responses"]
    for name in providers.__all__:
        assert callable(getattr(providers, name)), name


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
