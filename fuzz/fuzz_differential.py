"""atheris harness: the C kernel and the Python reference kernel on the same bytes.

    python fuzz/fuzz_differential.py -atheris_runs=1000000 fuzz/corpus/scan

Every input is read as (key, cursor seq, capacity, log bytes); both kernels
scan it, classify it with and without a watermark, decode its first header and
search it for a frame.  Any difference, or any exception, is a finding.  The
input is also cut into payloads and encoded by both kernels, which must agree
byte for byte, and checked against the JSON rules (``json_ok``,
``encode_events``) with the same verdicts; chunk rows cut from it get the
same body-check flags (``check_bodies``).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from trajlog import codec
    from trajlog._backend import load_kernel
    from trajlog._format import Cursor

C = load_kernel("c")
PY = load_kernel("python")


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    key = fdp.ConsumeIntInRange(0, 2**64 - 1)
    seq = fdp.ConsumeIntInRange(0, 2**63)
    cap = fdp.ConsumeIntInRange(0, 40)
    watermark = fdp.ConsumeIntInRange(-2, 30)
    buf = fdp.ConsumeBytes(fdp.remaining_bytes())
    cursor = Cursor(0, seq, key)
    for collect in (True, False):
        assert C.scan(buf, key, cursor, cap, collect) == PY.scan(buf, key, cursor, cap, collect)
    wm = None if watermark < -1 else watermark
    assert codec.scan(buf, key, cursor, watermark=wm, kernel=C) == codec.scan(
        buf, key, cursor, watermark=wm, kernel=PY)
    assert C.decode_header(buf) == PY.decode_header(buf)
    assert C.find_frame(buf, key, 0, seq) == PY.find_frame(buf, key, 0, seq)
    pieces = [buf[i:i + 97] for i in range(0, len(buf), 97)] or [b""]
    types = [(b % 9) or 2 for b in buf[: len(pieces)]] + [2] * (len(pieces) - len(buf))
    assert C.encode_batch(key, pieces, types, cursor) == PY.encode_batch(key, pieces, types,
                                                                         cursor)
    # chunk rows cut from the bytes (lengths from the bytes, some past the
    # end), every other check the true one: the same flags from both
    rows: list[int] = []
    at = 0
    for i, b in enumerate(buf[:cap]):
        size = b * 3
        check = C.checksum(buf[at:at + size], (key + seq + i) & (2**64 - 1)) if i % 2 else b
        rows += [(seq + i) & (2**64 - 1), size, check]
        at += size
    assert C.check_bodies(buf, key, rows) == PY.check_bodies(buf, key, rows)
    depth = cap * 4   # 0..160: past the 128 the core honours
    assert C.json_ok(buf, depth) == PY.json_ok(buf, depth)
    assert C.encode_events(key, pieces, cursor, depth) == PY.encode_events(key, pieces, cursor,
                                                                           depth)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
