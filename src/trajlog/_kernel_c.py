"""The C kernel: thin cffi wrappers over ``csrc/`` with the reference kernel's API.

Inputs cross the boundary without copies (``ffi.from_buffer``); each call does
a whole batch, because one cffi call costs about as much as verifying a small
frame.  Statuses come back unchanged; nothing here raises for bad data.
"""

from __future__ import annotations

import struct
import threading
from array import array
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from ._format import (
    HEADER_SIZE,
    MASK64,
    Cursor,
    FrameHeader,
    FrameTable,
    Status,
    encode_args_ok,
)
from ._tlcore import ffi, lib  # type: ignore[import-not-found]

NAME = "c"

# struct tl_frame in native byte order: 4 x u64, 2 x u32, 2 x u8, 6 reserved.
_FRAME = struct.Struct("=QQQQIIBB6x")
if ffi.sizeof("struct tl_frame") != _FRAME.size:  # pragma: no cover - build mismatch
    raise ImportError("trajlog._tlcore: struct tl_frame layout differs from _kernel_c")


def format_version() -> int:
    return int(lib.tl_format_version())


def checksum(data: Any, seed: int) -> int:
    """XXH3-64 of ``data`` with ``seed``, from our own C implementation."""
    if type(data) is bytes:  # passed as is: no buffer object to make
        return int(lib.tl_checksum(data, len(data), seed))
    buf = ffi.from_buffer(data)
    return int(lib.tl_checksum(buf, len(buf), seed))


def check_bodies(buf: Any, key: int, rows: Sequence[int]) -> bytes:
    """One flag a row (1: its body check holds) for the stored bodies of
    ``len(rows) // 3`` chunk rows laid end to end in ``buf``, ``rows`` giving
    ``first_seq, len(body), body_check`` of each (tl_check_bodies)."""
    n = len(rows) // 3
    ok = bytearray(n)
    if n:
        triples = array("Q", rows)   # (OverflowError for a value outside u64, as cffi's)
        cbuf = ffi.from_buffer(buf)
        lib.tl_check_bodies(cbuf, len(cbuf), key & MASK64,
                            ffi.from_buffer("uint64_t[]", triples), n, ffi.from_buffer(ok))
    return bytes(ok)


def strerror(status: int) -> str:
    return str(ffi.string(lib.tl_strerror(status)).decode("ascii"))


_tls = threading.local()
_from_buffer, _NULL, _new = ffi.from_buffer, ffi.NULL, tuple.__new__


def _scratch() -> Any:
    """Per-thread cdata reused across calls (ffi.new costs about a microsecond)."""
    sc = getattr(_tls, "sc", None)
    if sc is None:
        sc = _tls.sc = (ffi.new("struct tl_cursor *"), ffi.new("size_t *"),
                        ffi.new("uint32_t *"), ffi.new("struct tl_frame *"))
    return sc


def _event_scratch() -> Any:
    """:func:`_scratch` for encode_events: cursor, written, body check, failed."""
    sc = getattr(_tls, "ev", None)
    if sc is None:
        sc = _tls.ev = (ffi.new("struct tl_cursor *"), ffi.new("size_t *"),
                        ffi.new("uint64_t *"), ffi.new("size_t *"))
    return sc


def json_ok(payload: Any, max_depth: int) -> bool:
    """True when ``payload`` is one MessagePack value JSON can say (tl_json.c)."""
    buf = ffi.from_buffer(payload)
    return bool(lib.tl_json_ok(buf, len(buf), min(max(max_depth, 0), 0xFFFFFFFF)))


def encode_events(key: int, payloads: Sequence[Any], cursor: Cursor,
                  json_depth: int) -> tuple[int, bytes, Cursor, int, int]:
    """EVENT frames of ``payloads``, JSON-checked, with their body check as one
    row (tl_encode_events); see the reference kernel."""
    n = len(payloads)
    if n == 0:
        return Status.OK, b"", cursor, 0, 0
    offset, next_seq, chain = cursor
    if not (type(offset) is int and type(next_seq) is int and type(chain) is int
            and 0 <= offset <= MASK64 and 0 <= next_seq <= MASK64 and 0 <= chain <= MASK64
            and type(json_depth) is int and 0 <= json_depth <= 0xFFFFFFFF):
        return Status.INVALID_ARG, b"", cursor, 0, 0
    sc = getattr(_tls, "ev", None)   # (_event_scratch inlined: this runs on every append)
    cur, written, check, failed = _event_scratch() if sc is None else sc
    cur.offset, cur.next_seq, cur.chain = offset, next_seq, chain
    if n == 1:  # one payload: no arrays to build
        payload = payloads[0]
        size = len(payload)
        out = bytearray(HEADER_SIZE + size + (-size & 7))
        status = lib.tl_encode_events(_from_buffer(out), len(out), key, _from_buffer(payload),
                                      size, _NULL, 1, json_depth, cur, written, check, failed)
    else:
        blob = b"".join(payloads)
        ends = list(accumulate(map(len, payloads)))
        # (a list, not a generator: no Python frame resumed per payload)
        out = bytearray(sum([HEADER_SIZE + x + (-x & 7) for x in map(len, payloads)]))
        status = lib.tl_encode_events(ffi.from_buffer(out), len(out), key, ffi.from_buffer(blob),
                                      len(blob), ffi.new("uint64_t[]", ends), n, json_depth,
                                      cur, written, check, failed)
    if status:   # (not Status.OK, 0)
        return status, b"", cursor, 0, int(failed[0])
    # (a Cursor made in C: a NamedTuple's own __new__ is a Python call)
    return status, bytes(out), _new(Cursor, (cur.offset, cur.next_seq, cur.chain)), check[0], 0


def encode_batch(key: int, payloads: Sequence[Any], types: Sequence[int], cursor: Cursor,
                 flags: Sequence[int] | None = None,
                 raw_lens: Sequence[int] | None = None) -> tuple[int, bytes, Cursor]:
    """Encode ``payloads`` as consecutive frames; all or nothing (tl_encode_batch)."""
    n = len(payloads)
    if n == 0:
        return Status.OK, b"", cursor
    if not encode_args_ok(n, types, cursor, flags, raw_lens):
        return Status.INVALID_ARG, b"", cursor
    cur, written, _, _ = _scratch()
    cur.offset, cur.next_seq, cur.chain = cursor
    if n == 1:  # one frame: no arrays to build (same checks, same order, in tl_encode)
        payload = payloads[0]
        size = len(payload)
        out = bytearray(size + 47)
        status = lib.tl_encode(ffi.from_buffer(out), len(out), key, types[0],
                               0 if flags is None else flags[0],
                               size if raw_lens is None else raw_lens[0],
                               ffi.from_buffer(payload), size, cur, written)
    else:
        blob = b"".join(payloads)
        ends = list(accumulate(map(len, payloads)))
        # Frames need at most 47 bytes beyond their payload; C validates the
        # whole batch (limits included) before it writes, and reports the size.
        out = bytearray(ends[-1] + 47 * n)
        status = lib.tl_encode_batch(
            ffi.from_buffer(out), len(out), key, ffi.from_buffer(blob), len(blob),
            ffi.new("uint64_t[]", ends), ffi.new("uint8_t[]", types),
            ffi.NULL if flags is None else ffi.new("uint8_t[]", flags),
            ffi.NULL if raw_lens is None else ffi.new("uint32_t[]", raw_lens),
            n, cur, written)
    if status != Status.OK:
        return status, b"", cursor
    return status, bytes(memoryview(out)[:written[0]]), Cursor(cur.offset, cur.next_seq,
                                                                 cur.chain)


def decode_header(buf: Any) -> tuple[int, FrameHeader | None]:
    """Parse the header at ``buf[0:40]`` without verifying checksums."""
    cbuf = ffi.from_buffer(buf)
    frame = _scratch()[3]
    status = lib.tl_decode_header(cbuf, len(cbuf), frame)
    if status != Status.OK:
        return status, None
    return status, FrameHeader._make(_FRAME.unpack(ffi.buffer(frame)))


def scan(buf: Any, key: int, cursor: Cursor, max_frames: int,
         collect: bool) -> tuple[int, list[FrameHeader], Cursor, int]:
    """Verify frames from ``cursor.offset`` (tl_scan); see the reference kernel."""
    cbuf = ffi.from_buffer(buf)
    cur, n, hints, _ = _scratch()
    cur.offset, cur.next_seq, cur.chain = cursor
    if collect:
        # No more frames can verify than 40-byte headers fit in what is left.
        cap = max(0, min(max_frames, (len(cbuf) - cursor.offset) // HEADER_SIZE + 1))
        array = ffi.new("struct tl_frame[]", max(cap, 1))
        status = lib.tl_scan(cbuf, len(cbuf), key, cur, array, cap, n, hints)
        frames = list(map(FrameHeader._make,
                          _FRAME.iter_unpack(ffi.buffer(array, n[0] * _FRAME.size))))
    else:
        status = lib.tl_scan(cbuf, len(cbuf), key, cur, ffi.NULL, max_frames, n, hints)
        frames = []
    return status, frames, Cursor(cur.offset, cur.next_seq, cur.chain), int(hints[0])


def scan_table(buf: Any, key: int, cursor: Cursor, max_frames: int,
               checked: tuple[int, int] | None = None) -> tuple[int, FrameTable, Cursor, int]:
    """:func:`scan`, the verified headers left packed as tl_scan wrote them;
    ``checked``: only these seqs' payload checks (tl_scan_some; see the
    reference kernel)."""
    cbuf = ffi.from_buffer(buf)
    cur, n, hints, _ = _scratch()
    cur.offset, cur.next_seq, cur.chain = cursor
    cap = max(0, min(max_frames, (len(cbuf) - cursor.offset) // HEADER_SIZE + 1))
    array = ffi.new("struct tl_frame[]", max(cap, 1))
    if checked is None:
        status = lib.tl_scan(cbuf, len(cbuf), key, cur, array, cap, n, hints)
    else:
        status = lib.tl_scan_some(cbuf, len(cbuf), key, cur, array, cap, n, hints,
                                  max(0, checked[0]), max(0, checked[1]))
    table = FrameTable(bytes(ffi.buffer(array, n[0] * _FRAME.size)))
    return status, table, Cursor(cur.offset, cur.next_seq, cur.chain), int(hints[0])


def find_frame(buf: Any, key: int, start: int, min_seq: int) -> int:
    """Offset of the first later frame whose header verifies (tl_find_frame); -1 if none."""
    cbuf = ffi.from_buffer(buf)
    found = ffi.new("uint64_t *")  # rare (classification without a watermark)
    if lib.tl_find_frame(cbuf, len(cbuf), key, start, min_seq, found) == Status.OK:
        return int(found[0])
    return -1


__all__ = [
    "NAME",
    "check_bodies",
    "checksum",
    "decode_header",
    "encode_batch",
    "encode_events",
    "find_frame",
    "format_version",
    "json_ok",
    "scan",
    "scan_table",
    "strerror",
]
