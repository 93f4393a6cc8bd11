"""Golden frames frozen under tests/vectors/: both kernels must produce exactly
these bytes, and read back exactly these headers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trajlog import codec
from trajlog._format import Cursor, Status

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
CASES = json.loads((VECTORS / "frames_v1.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vectors_encode_is_byte_exact(kernel, case):
    frames = case["frames"]
    log, end = codec.encode([bytes.fromhex(f["payload"]) for f in frames], case["key"],
                            Cursor(*case["cursor"]), types=[f["type"] for f in frames],
                            flags=[f["flags"] for f in frames],
                            raw_lens=[f["raw_len"] for f in frames], kernel=kernel)
    assert log == (VECTORS / f"{case['name']}_v1.bin").read_bytes()
    assert list(end) == case["end_cursor"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vectors_scan_reads_frozen_headers(kernel, case):
    log = (VECTORS / f"{case['name']}_v1.bin").read_bytes()
    status, headers, end, hints = kernel.scan(log, case["key"], Cursor(*case["cursor"]),
                                              10_000, True)
    assert (status, hints, list(end)) == (Status.END, 0, case["end_cursor"])
    assert [h._asdict() for h in headers] == case["headers"]
