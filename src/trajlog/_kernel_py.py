"""The pure-Python reference kernel.

It implements the same functions as the C kernel (``_kernel_c``) with the same
arguments, results and status codes, written to be read next to FORMAT.md
rather than to be fast.  It never raises for bad data: every outcome is a
``Status``.  Checksums come from the ``xxhash`` package, an independent build
of xxHash, so the known-answer tests compare two implementations.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import xxhash

from ._format import (
    ALIGN,
    FLAG_ZSTD,
    FLAG_ZSTD_DICT,
    FLAGS_KNOWN,
    FORMAT_VERSION,
    HEADER_SIZE,
    HINT_ZERO_SECTOR,
    MAGIC,
    MASK64,
    MAX_RAW,
    MAX_SEQ,
    MAX_STORED,
    MESSAGES,
    SECTOR,
    TYPE_OPTIONAL_MIN,
    Cursor,
    FrameHeader,
    FrameTable,
    FrameType,
    Status,
    encode_args_ok,
    frame_size,
)

NAME = "python"

_xxh3 = xxhash.xxh3_64_intdigest
# magic, type, flags, stored_len, raw_len, hdr_check, seq, payload_check, chain
_HEADER = struct.Struct("<2sBBIIIQQQ")
_PREFIX = struct.Struct("<2sBBII")  # bytes 0..12
_MID = struct.Struct("<QQ")  # bytes 16..32


def format_version() -> int:
    return FORMAT_VERSION


def checksum(data: Any, seed: int) -> int:
    """XXH3-64 of ``data`` with ``seed`` (0 <= seed < 2**64)."""
    return _xxh3(data, seed=seed)


def check_bodies(buf: Any, key: int, rows: Sequence[int]) -> bytes:
    """One flag a row (1: its body check holds) for the stored bodies of
    ``len(rows) // 3`` chunk rows laid end to end in ``buf``; ``rows`` gives
    ``first_seq, len(body), body_check`` of each.  A row holds when the
    checksum of its body, seeded with ``key + first_seq`` (mod 2**64),
    equals its check (FORMAT.md 7.2); a body that would run past the end of
    ``buf`` fails, and so does every row after it."""
    n = len(rows) // 3
    ok = bytearray(n)
    view = memoryview(buf).cast("B")
    at = 0
    for i in range(n):
        first, size, check = rows[3 * i], rows[3 * i + 1], rows[3 * i + 2]
        if size > len(view) - at:
            break
        ok[i] = _xxh3(view[at:at + size], seed=(key + first) & MASK64) == check
        at += size
    return bytes(ok)


def strerror(status: int) -> str:
    return MESSAGES.get(status, "unknown status")


def _type_status(type_: int) -> Status:
    if type_ == 0:
        return Status.BAD_FIELD
    if type_ <= FrameType.CHUNK or TYPE_OPTIONAL_MIN <= type_ <= 0xFF:
        return Status.OK
    return Status.UNSUPPORTED


def _check_encode(type_: int, flags: int, raw_len: int, length: int) -> Status:
    # Same order as check_encode() in csrc/tl_frame.c.
    if _type_status(type_) != Status.OK:
        return Status.INVALID_ARG
    if flags & ~FLAGS_KNOWN:
        return Status.INVALID_ARG
    if flags & FLAG_ZSTD_DICT and not flags & FLAG_ZSTD:
        return Status.INVALID_ARG
    if length > MAX_STORED or raw_len > MAX_RAW:
        return Status.TOO_LARGE
    if not flags & FLAG_ZSTD and raw_len != length:
        return Status.INVALID_ARG
    return Status.OK


def _header_check(header: bytes, key: int) -> int:
    return _xxh3(header[0:12] + header[16:40], seed=key) & 0xFFFFFFFF


def _chain_of(header: bytes, prev: int) -> int:
    return _xxh3(header[0:12] + header[16:32], seed=prev)


def _frame(key: int, type_: int, flags: int, raw_len: int, payload: Any, seq: int,
           prev: int) -> tuple[bytes, int]:
    length = len(payload)
    prefix = _PREFIX.pack(MAGIC, type_, flags, length, raw_len)
    mid = _MID.pack(seq, _xxh3(payload, seed=key ^ seq))
    chain = _xxh3(prefix + mid, seed=prev)
    tail = mid + chain.to_bytes(8, "little")
    hcheck = _xxh3(prefix + tail, seed=key) & 0xFFFFFFFF
    return (prefix + hcheck.to_bytes(4, "little") + tail + bytes(payload)
            + bytes(-length & 7)), chain


def encode_batch(key: int, payloads: Sequence[Any], types: Sequence[int], cursor: Cursor,
                 flags: Sequence[int] | None = None,
                 raw_lens: Sequence[int] | None = None) -> tuple[int, bytes, Cursor]:
    """Encode ``payloads`` as consecutive frames; all or nothing.

    Returns ``(status, frames, cursor)``: on ``Status.OK`` the encoded bytes and
    the advanced cursor, otherwise ``b""`` and the cursor unchanged.
    """
    n = len(payloads)
    if n == 0:
        return Status.OK, b"", cursor
    if not encode_args_ok(n, types, cursor, flags, raw_lens):
        return Status.INVALID_ARG, b"", cursor
    if cursor.next_seq > MAX_SEQ or n - 1 > MAX_SEQ - cursor.next_seq:
        return Status.INVALID_ARG, b"", cursor
    lengths = [len(p) for p in payloads]
    for i, length in enumerate(lengths):
        fl = flags[i] if flags is not None else 0
        raw = raw_lens[i] if raw_lens is not None else length
        status = _check_encode(types[i], fl, raw, length)
        if status != Status.OK:
            return status, b"", cursor
    parts = []
    seq, chain = cursor.next_seq, cursor.chain
    for i, payload in enumerate(payloads):
        fl = flags[i] if flags is not None else 0
        raw = raw_lens[i] if raw_lens is not None else lengths[i]
        frame, chain = _frame(key, types[i], fl, raw, payload, seq, chain)
        parts.append(frame)
        seq += 1
    out = b"".join(parts)
    total = sum(frame_size(x) for x in lengths)
    assert len(out) == total
    return Status.OK, out, Cursor(cursor.offset + total, seq, chain)


_JSON_MAX_DEPTH = 128   # (tl_json.c: deeper requests are clamped)
_BE16, _BE32 = struct.Struct(">H"), struct.Struct(">I")


def json_ok(payload: Any, max_depth: int) -> bool:
    """True when ``payload`` is exactly one MessagePack value JSON can say:
    no bin, ext or the unused 0xC1, no NaN or infinity, map keys str only,
    containers nested less than ``max_depth`` deep (the value at depth 0).
    Text is not decoded.  The table of rules is at the top of csrc/tl_json.c."""
    data = bytes(memoryview(payload).cast("B"))
    depth_cap = min(max_depth, _JSON_MAX_DEPTH)
    length = len(data)
    # owed[d]: items still owed by the container open at depth d (a map: key
    # and value each count), is_map[d]: whether it is a map
    owed: list[int] = [0]
    is_map: list[bool] = [False]
    pos = 0
    while True:
        if pos >= length:
            return False
        b = data[pos]
        pos += 1
        depth = len(owed) - 1
        if depth and is_map[depth] and owed[depth] % 2 == 0 and not (
                0xA0 <= b <= 0xBF or 0xD9 <= b <= 0xDB):
            return False
        skip, items, opens, is_a_map = 0, 0, False, False
        left = length - pos
        if b <= 0x7F or b >= 0xE0 or b in (0xC0, 0xC2, 0xC3):
            pass
        elif 0xA0 <= b <= 0xBF:
            skip = b & 0x1F
        elif 0x90 <= b <= 0x9F:
            opens, items = True, b & 0x0F
        elif 0x80 <= b <= 0x8F:
            opens, is_a_map, items = True, True, 2 * (b & 0x0F)
        elif b in (0xCC, 0xD0):
            skip = 1
        elif b in (0xCD, 0xD1):
            skip = 2
        elif b in (0xCE, 0xD2):
            skip = 4
        elif b in (0xCF, 0xD3):
            skip = 8
        elif b == 0xCA:   # float32: the exponent all ones is NaN or an infinity
            if left < 4 or _BE16.unpack_from(data, pos)[0] & 0x7F80 == 0x7F80:
                return False
            skip = 4
        elif b == 0xCB:
            if left < 8 or _BE16.unpack_from(data, pos)[0] & 0x7FF0 == 0x7FF0:
                return False
            skip = 8
        elif b == 0xD9:
            if left < 1:
                return False
            skip = 1 + data[pos]
        elif b == 0xDA:
            if left < 2:
                return False
            skip = 2 + _BE16.unpack_from(data, pos)[0]
        elif b == 0xDB:
            if left < 4:
                return False
            skip = 4 + _BE32.unpack_from(data, pos)[0]
        elif b in (0xDC, 0xDE):
            if left < 2:
                return False
            skip, opens, is_a_map = 2, True, b == 0xDE
            items = _BE16.unpack_from(data, pos)[0] * (2 if is_a_map else 1)
        elif b in (0xDD, 0xDF):
            if left < 4:
                return False
            skip, opens, is_a_map = 4, True, b == 0xDF
            items = _BE32.unpack_from(data, pos)[0] * (2 if is_a_map else 1)
        else:   # bin, ext, 0xC1
            return False
        if skip > length - pos:
            return False
        pos += skip
        if depth:
            owed[depth] -= 1
        if opens:
            if depth >= depth_cap or items > length - pos:
                return False
            owed.append(items)
            is_map.append(is_a_map)
        while len(owed) > 1 and owed[-1] == 0:
            owed.pop()
            is_map.pop()
        if len(owed) == 1:
            return pos == length


def encode_events(key: int, payloads: Sequence[Any], cursor: Cursor,
                  json_depth: int) -> tuple[int, bytes, Cursor, int, int]:
    """EVENT frames of ``payloads`` (flags 0), each first checked by
    :func:`json_ok` when ``json_depth`` > 0, and the body check of the frames
    as one uncompressed chunk row (XXH3-64 seeded with ``key + first seq``).

    Returns ``(status, frames, cursor, body_check, failed)``: ``failed`` is the
    index of the payload refused with ``NOT_JSON`` or ``TOO_LARGE`` (else 0);
    on a failure the frames are ``b""``, the cursor unchanged, the check 0.
    """
    n = len(payloads)
    if n == 0:
        return Status.OK, b"", cursor, 0, 0
    if not encode_args_ok(n, [FrameType.EVENT] * n, cursor, None, None) or not (
            type(json_depth) is int and 0 <= json_depth <= 0xFFFFFFFF):
        return Status.INVALID_ARG, b"", cursor, 0, 0
    if cursor.next_seq > MAX_SEQ or n - 1 > MAX_SEQ - cursor.next_seq:
        return Status.INVALID_ARG, b"", cursor, 0, 0
    for i, payload in enumerate(payloads):   # same order as tl_encode_events
        if len(payload) > MAX_STORED:
            return Status.TOO_LARGE, b"", cursor, 0, i
        if json_depth and not json_ok(payload, json_depth):
            return Status.NOT_JSON, b"", cursor, 0, i
    status, out, end = encode_batch(key, payloads, [FrameType.EVENT] * n, cursor)
    if status != Status.OK:  # pragma: no cover - every refusal was found above
        return status, b"", cursor, 0, 0
    return status, out, end, _xxh3(out, seed=(key + cursor.next_seq) & 0xFFFFFFFFFFFFFFFF), 0


def _check_fields(type_: int, flags: int, stored: int, raw: int, seq: int) -> Status:
    status = _type_status(type_)
    if status != Status.OK:
        return status
    if flags & ~FLAGS_KNOWN:
        return Status.UNSUPPORTED
    if flags & FLAG_ZSTD_DICT and not flags & FLAG_ZSTD:
        return Status.BAD_FIELD
    if stored > MAX_STORED or raw > MAX_RAW:
        return Status.BAD_FIELD
    if not flags & FLAG_ZSTD and raw != stored:
        return Status.BAD_FIELD
    if seq > MAX_SEQ:
        return Status.BAD_FIELD
    return Status.OK


def _header(offset: int, fields: tuple[Any, ...]) -> FrameHeader:
    _, type_, flags, stored, raw, _, seq, pcheck, chain = fields
    return FrameHeader(offset, seq, pcheck, chain, stored, raw, type_, flags)


def decode_header(buf: Any) -> tuple[int, FrameHeader | None]:
    """Parse the header at ``buf[0:40]`` without verifying checksums."""
    mv = memoryview(buf).cast("B")
    if len(mv) < HEADER_SIZE:
        return Status.TRUNCATED, None
    fields = _HEADER.unpack(mv[:HEADER_SIZE])
    if fields[0] != MAGIC:
        return Status.BAD_MAGIC, None
    status = _check_fields(fields[1], fields[2], fields[3], fields[4], fields[6])
    if status != Status.OK:
        return status, None
    return Status.OK, _header(0, fields)


def _all_zero(mv: memoryview, start: int, end: int) -> bool:
    return bytes(mv[start:end]).count(0) == end - start


def _has_zero_sector(mv: memoryview, start: int, end: int) -> bool:
    """etcd's isTornEntry: a piece cut at 512-byte multiples is all zero."""
    while start < end:
        nxt = min(end, (start // SECTOR + 1) * SECTOR)
        if _all_zero(mv, start, nxt):
            return True
        start = nxt
    return False


def scan(buf: Any, key: int, cursor: Cursor, max_frames: int,
         collect: bool, checked: tuple[int, int] | None = None,
         ) -> tuple[int, list[FrameHeader], Cursor, int]:
    """Verify frames from ``cursor.offset``; stop at the end, the cap, or a defect.

    Returns ``(status, frames, cursor, hints)``.  ``frames`` holds the verified
    headers when ``collect`` is true (else it is empty); ``max_frames`` caps
    how many frames this call verifies.  See FORMAT.md section 5 for the order.
    ``checked = (lo, hi)``: the payload check (step 8) only for seqs
    ``lo .. hi`` -- for a chunk row whose body check just held, of which only
    those payloads are handed out (why that keeps the guarantee: tl_scan.c,
    tl_scan_some); every other step for every frame.
    """
    lo, hi = (0, MASK64) if checked is None else checked
    mv = memoryview(buf).cast("B")
    length = len(mv)
    if cursor.offset < 0 or cursor.offset > length or cursor.offset % ALIGN:
        return Status.INVALID_ARG, [], cursor, 0
    p, seq, chain = cursor.offset, cursor.next_seq, cursor.chain
    frames: list[FrameHeader] = []
    count, hints = 0, 0
    while True:
        left = length - p
        if left == 0:
            status = Status.END
            break
        if count == max_frames:
            status = Status.MORE
            break
        if left < HEADER_SIZE:
            status = Status.ZERO_TAIL if _all_zero(mv, p, length) else Status.TRUNCATED
            break
        header = bytes(mv[p:p + HEADER_SIZE])
        fields = _HEADER.unpack(header)
        if fields[0] != MAGIC:
            if _all_zero(mv, p, length):
                status = Status.ZERO_TAIL
            else:
                status = Status.BAD_MAGIC
                if _has_zero_sector(mv, p, p + HEADER_SIZE):
                    hints |= HINT_ZERO_SECTOR
            break
        if _header_check(header, key) != fields[5]:
            status = Status.BAD_HEADER
            if _has_zero_sector(mv, p, p + HEADER_SIZE):
                hints |= HINT_ZERO_SECTOR
            break
        _, type_, flags, stored, raw, _, fseq, pcheck, fchain = fields
        status = _check_fields(type_, flags, stored, raw, fseq)
        if status != Status.OK:
            break
        body = stored + (-stored & 7)
        if left - HEADER_SIZE < body:
            status = Status.TRUNCATED
            break
        if fseq != seq:
            status = Status.SEQ_MISMATCH
            break
        start = p + HEADER_SIZE
        if lo <= seq <= hi and _xxh3(mv[start:start + stored], seed=key ^ seq) != pcheck:
            status = Status.BAD_PAYLOAD
            if _has_zero_sector(mv, start, start + stored):
                hints |= HINT_ZERO_SECTOR
            break
        if not _all_zero(mv, start + stored, start + body):
            status = Status.BAD_PADDING
            break
        next_chain = _chain_of(header, chain)
        if next_chain != fchain:
            status = Status.BAD_CHAIN
            break
        if collect:
            frames.append(_header(p, fields))
        count += 1
        p += HEADER_SIZE + body
        seq += 1
        chain = next_chain
    return status, frames, Cursor(p, seq, chain), hints


def find_frame(buf: Any, key: int, start: int, min_seq: int) -> int:
    """Offset of the first 8-aligned frame at or after ``start`` whose header
    verifies under ``key`` and whose seq is ``>= min_seq``; -1 when none."""
    data = bytes(memoryview(buf).cast("B"))
    length = len(data)
    q = start + (-start & 7)
    while q + HEADER_SIZE <= length:
        q = data.find(MAGIC, q)
        if q < 0 or q + HEADER_SIZE > length:
            return -1
        if q % ALIGN == 0:
            header = data[q:q + HEADER_SIZE]
            fields = _HEADER.unpack(header)
            if _header_check(header, key) == fields[5] and fields[6] >= min_seq:
                return q
            q += ALIGN
        else:
            q += -q & 7
    return -1


def scan_table(buf: Any, key: int, cursor: Cursor, max_frames: int,
               checked: tuple[int, int] | None = None) -> tuple[int, FrameTable, Cursor, int]:
    """:func:`scan` with the verified headers packed as ``struct tl_frame``
    (the C kernel's own array; see :class:`FrameTable`)."""
    status, headers, end, hints = scan(buf, key, cursor, max_frames, True, checked)
    return status, FrameTable.pack(headers), end, hints


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
