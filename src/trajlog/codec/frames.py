"""Frames: encoding, iteration, verification and the torn / corrupt rule.

The codec package is the only one that knows the byte layout (with the kernels
under it).  This module is written once over either kernel: the kernel walks the bytes and
reports a status; this module decides what the status means with the durable
watermark (FORMAT.md section 6):

* a defect **after** the watermark is a torn write (an append that was never
  acknowledged): drop it;
* a defect **at or below** the watermark is corruption: refuse, and say where;
* with no watermark, a defect is torn only if it has the shape of an
  interrupted write and no valid frame follows it.

Every function takes an optional ``kernel`` (a module from
``trajlog._backend.load_kernel``); by default the one ``TRAJLOG_BACKEND`` chose.
"""

from __future__ import annotations

import enum
import uuid as uuid_mod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _backend
from .._format import (
    HEADER_SIZE,
    HINT_ZERO_SECTOR,
    MASK64,
    MAX_SEQ,
    Cursor,
    FrameHeader,
    FrameType,
    Kernel,
    Status,
)
from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    TrajlogError,
    error_for,
    head_mismatch,
)

# Frames per kernel call when frames are collected: big enough to amortise a
# call, small enough to bound memory whatever the log's length.
_CHUNK = 4096


class Verdict(str, enum.Enum):
    """What a scan found: ``clean``, ``torn`` (drop the tail) or ``corrupt`` (refuse)."""

    CLEAN = "clean"
    TORN = "torn"
    CORRUPT = "corrupt"


@dataclass(frozen=True, slots=True)
class Watermark:
    """The durable watermark: the last seq acknowledged as durable, and
    optionally the chain that frame must carry.

    ``seq = -1`` says that nothing is durable yet (every defect is torn).
    In SQLite it is the session head (``last_seq``, ``chain_head``); in an
    export file, the SEAL frame.
    """

    seq: int
    chain: int | None = None


@dataclass(frozen=True, slots=True)
class Frame:
    """One verified frame.  ``payload`` is a read-only view into the scanned
    buffer (no copy); ``bytes(frame.payload)`` makes an independent copy."""

    seq: int
    type: int
    flags: int
    offset: int
    raw_len: int
    payload_check: int
    chain: int
    payload: memoryview

    @property
    def payload_offset(self) -> int:
        """Offset of the payload's first byte in the scanned buffer."""
        return self.offset + HEADER_SIZE


@dataclass(frozen=True, slots=True)
class ScanReport:
    """The outcome of verifying a buffer of frames.

    ``valid_len`` is the offset just past the last verified frame, where a
    torn tail would be cut; ``torn_bytes`` what lies after it.  ``status`` is
    the kernel status at the stop (``END`` when clean) and ``reason`` a
    sentence for people.
    """

    verdict: Verdict
    status: Status
    valid_len: int
    frames: int
    last_seq: int | None
    cursor: Cursor
    torn_bytes: int
    hints: int
    reason: str
    watermark: Watermark | None
    head_mismatch: bool = False  # the defect is a disagreement with the session head

    @property
    def ok(self) -> bool:
        """True unless the verdict is corrupt."""
        return self.verdict is not Verdict.CORRUPT

    def error(self, session: str | None = None) -> TrajlogError:
        """The exception describing this report's defect (not for clean reports)."""
        if self.verdict is Verdict.CLEAN:
            raise ValueError("a clean scan has no error")
        if self.head_mismatch:
            return head_mismatch(self.status, self.reason, offset=self.cursor.offset,
                                 seq=self.cursor.next_seq, session=session)
        return error_for(self.status, reason=self.reason, offset=self.cursor.offset,
                         seq=self.cursor.next_seq, session=session,
                         corrupt=self.verdict is Verdict.CORRUPT)

    def raise_for(self, session: str | None = None, *, strict: bool = False) -> None:
        """Raise on corruption, and on a torn tail too when ``strict``."""
        if self.verdict is Verdict.CORRUPT or (strict and self.verdict is Verdict.TORN):
            raise self.error(session)


def _kernel(kernel: Kernel | None) -> Kernel:
    return _backend.get_kernel() if kernel is None else kernel


def kernel_name() -> str:
    """The kernel in use: ``"c"`` or ``"python"`` (``TRAJLOG_BACKEND``)."""
    return str(_backend.get_kernel().NAME)


def _check_key(key: int, name: str = "key") -> None:
    if not isinstance(key, int) or isinstance(key, bool):
        raise ArgumentTypeError(f"{name} must be int, not {type(key).__name__}")
    if not 0 <= key <= MASK64:
        raise InvalidArgumentError(f"{name} must be an unsigned 64-bit integer")


def _watermark(value: Any) -> Watermark | None:
    """A caller's watermark (a :class:`Watermark`, a seq, or None), checked
    before any kernel sees it: a seq from -1 (nothing durable) to the
    format's last, a chain that is an unsigned 64-bit integer or None.  (A
    value outside the format is the caller's mistake, never a verdict -- and
    the two kernels would not agree on it.)"""
    if value is None:
        return None
    wm = Watermark(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(wm, Watermark):
        raise ArgumentTypeError(f"watermark must be a Watermark, an int seq or None, not "
                                f"{type(value).__name__}")
    if not isinstance(wm.seq, int) or isinstance(wm.seq, bool):
        raise ArgumentTypeError(f"watermark seq must be int, not {type(wm.seq).__name__}")
    if not -1 <= wm.seq <= MAX_SEQ:
        raise InvalidArgumentError(f"watermark seq {wm.seq} is outside -1 .. {MAX_SEQ}")
    if wm.chain is not None:
        if not isinstance(wm.chain, int) or isinstance(wm.chain, bool):
            raise ArgumentTypeError(f"watermark chain must be int or None, not "
                                    f"{type(wm.chain).__name__}")
        if not 0 <= wm.chain <= MASK64:
            raise InvalidArgumentError(f"watermark chain {wm.chain} is not an unsigned "
                                       "64-bit integer")
    return wm


def _cursor(cursor: Any, length: int | None = None, what: str = "cursor") -> Cursor:
    """A caller's cursor, checked before any kernel sees it (the two kernels
    must not disagree on a value outside the format, nor report a caller's
    mistake as corruption): unsigned 64-bit seq and chain, an offset within
    the buffer."""
    if isinstance(cursor, (str, bytes)):
        raise ArgumentTypeError(f"{what} must be a Cursor(offset, next_seq, chain), not "
                                f"{type(cursor).__name__}")
    try:
        offset, seq, chain = cursor
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{what} must be a Cursor(offset, next_seq, chain)") from None
    for name, value in (("offset", offset), ("next_seq", seq), ("chain", chain)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ArgumentTypeError(f"{what} {name} must be int, not {type(value).__name__}")
        if not 0 <= value <= MASK64:
            raise InvalidArgumentError(f"{what} {name} {value} is not an unsigned 64-bit "
                                       "integer")
    if length is not None and offset > length:
        raise InvalidArgumentError(f"{what} offset {offset} is beyond the buffer "
                                   f"({length} bytes)")
    return Cursor(offset, seq, chain)


def _buffer(buf: Any, name: str = "buf") -> memoryview:
    if isinstance(buf, str):
        raise ArgumentTypeError(f"{name} must be bytes-like, not str")
    try:
        mv = memoryview(buf)
    except TypeError:
        raise ArgumentTypeError(f"{name} must be bytes-like, not {type(buf).__name__}") from None
    if not mv.c_contiguous:
        raise InvalidArgumentError(f"{name} must be C-contiguous")
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def session_key(session_uuid: uuid_mod.UUID | bytes, *, kernel: Kernel | None = None) -> int:
    """The 64-bit key that seeds a session's checks: XXH3-64 of its 16-byte UUID."""
    if isinstance(session_uuid, uuid_mod.UUID):
        raw = session_uuid.bytes
    else:
        # bytes(16) would be sixteen zero bytes: only bytes-like values are a UUID's bytes
        raw = bytes(_buffer(session_uuid, "session_uuid"))
    if len(raw) != 16:
        raise InvalidArgumentError("a session UUID has 16 bytes")
    return int(_kernel(kernel).checksum(raw, 0))


def checksum(data: Any, seed: int = 0, *, kernel: Kernel | None = None) -> int:
    """XXH3-64 of ``data`` with ``seed``, computed by the selected kernel."""
    _check_key(seed, "seed")
    return int(_kernel(kernel).checksum(_buffer(data, "data"), seed))


def start_cursor(key: int) -> Cursor:
    """The cursor of an empty log: offset 0, seq 0, chain seeded with the key."""
    _check_key(key)
    return Cursor(0, 0, key)


def encode(payloads: Sequence[Any], key: int, cursor: Cursor, *,
           types: Sequence[int] | int = FrameType.EVENT,
           flags: Sequence[int] | None = None, raw_lens: Sequence[int] | None = None,
           kernel: Kernel | None = None) -> tuple[bytes, Cursor]:
    """Encode payloads as consecutive frames continuing ``cursor``.

    Returns the frame bytes and the cursor after them.  All or nothing: an
    invalid payload anywhere raises (:class:`PayloadTooLargeError`,
    :class:`InvalidArgumentError`) and nothing is returned.
    """
    _check_key(key)
    views = [_buffer(p, "payload") for p in payloads]
    type_list = [int(types)] * len(views) if isinstance(types, int) else list(types)
    status, out, new_cursor = _kernel(kernel).encode_batch(
        key, views, type_list, _cursor(cursor),
        None if flags is None else list(flags), None if raw_lens is None else list(raw_lens))
    if status != Status.OK:
        raise error_for(status, seq=cursor.next_seq)
    return out, new_cursor


def split_frames(blob: bytes, stored_lengths: Sequence[int]) -> list[tuple[bytes, int]]:
    """Cut a blob of consecutive frames just encoded (so trusted) into one
    ``(frame bytes, chain)`` per frame."""
    out, pos = [], 0
    for n in stored_lengths:
        end = pos + HEADER_SIZE + n + (-n & 7)
        out.append((blob[pos:end], int.from_bytes(blob[pos + 32:pos + 40], "little")))
        pos = end
    return out


def payload_of(frame: Any, header: FrameHeader) -> memoryview:
    """The stored payload bytes of a frame whose header was decoded (no copy)."""
    start = header.offset + HEADER_SIZE
    return memoryview(frame)[start:start + header.stored_len]


def decode_header(buf: Any, offset: int = 0, *, kernel: Kernel | None = None) -> FrameHeader:
    """Decode the header at ``buf[offset:]`` without verifying checksums.

    For tools that look at damaged logs.  Raises :class:`FormatError` when
    the bytes cannot be a header (too short, bad magic, impossible field).
    """
    mv = _buffer(buf)
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise ArgumentTypeError(f"offset must be int, not {type(offset).__name__}")
    if not 0 <= offset <= len(mv):
        raise InvalidArgumentError(f"offset {offset} outside the buffer")
    status, header = _kernel(kernel).decode_header(mv[offset:])
    if status != Status.OK or header is None:
        raise error_for(status, offset=offset)
    return header._replace(offset=offset)


def _is_torn_shape(status: int, hints: int) -> bool:
    if status in (Status.TRUNCATED, Status.ZERO_TAIL):
        return True
    return status in (Status.BAD_MAGIC, Status.BAD_HEADER, Status.BAD_PAYLOAD) and bool(
        hints & HINT_ZERO_SECTOR)


def classify(buf: Any, key: int, status: int, stop: Cursor, hints: int,
             watermark: Watermark | None, *, kernel: Kernel | None = None) -> Verdict:
    """Apply the torn / corrupt rule (FORMAT.md 6) to where a scan stopped.

    ``stop`` is the cursor left by the scan (at the failing frame), ``status``
    and ``hints`` what the kernel returned there.
    """
    k = _kernel(kernel)
    stop = _cursor(stop, what="stop")
    watermark = _watermark(watermark)
    last_valid = stop.next_seq - 1
    if status == Status.END:
        if watermark is not None and last_valid < watermark.seq:
            return Verdict.CORRUPT  # the log ends before acknowledged data does
        return Verdict.CLEAN
    if status == Status.UNSUPPORTED:
        return Verdict.CORRUPT  # a newer writer's frame is never a torn write
    if watermark is not None:
        return Verdict.CORRUPT if last_valid < watermark.seq else Verdict.TORN
    if not _is_torn_shape(status, hints):
        return Verdict.CORRUPT
    if status in (Status.TRUNCATED, Status.ZERO_TAIL):
        # A short header at the end, a verified header whose body runs past the
        # end, or zeros to the end: nothing can follow, so nothing is a hole.
        return Verdict.TORN
    # A checksum failure over a zeroed sector is torn unless a valid later
    # frame makes it a hole.  When the failing frame's header verified (a bad
    # payload), its own body is trusted to end where the header says.
    mv = _buffer(buf)
    start = stop.offset + 8
    if status == Status.BAD_PAYLOAD:
        status_h, header = k.decode_header(mv[stop.offset:])
        if status_h == Status.OK and header is not None:
            start = stop.offset + header.size
    if k.find_frame(mv, key, start, stop.next_seq) >= 0:
        return Verdict.CORRUPT
    return Verdict.TORN


def _reason(status: int, hints: int, verdict: Verdict, watermark: Watermark | None,
            kernel: Kernel) -> str:
    text = str(kernel.strerror(status))
    if verdict is not Verdict.CORRUPT or status == Status.UNSUPPORTED:
        return text
    if watermark is not None:
        return f"{text} at or below the durable watermark seq={watermark.seq}"
    if _is_torn_shape(status, hints):
        return f"{text}, followed by a valid frame (a hole, not a torn tail)"
    return text


def scan(buf: Any, key: int, cursor: Cursor | None = None, *,
         watermark: Watermark | int | None = None,
         kernel: Kernel | None = None) -> ScanReport:
    """Verify every frame of ``buf`` from ``cursor`` and classify where it stops.

    Never raises for bad data: the report says clean, torn or corrupt, where
    and why.  With a watermark that names a chain, the frame at the watermark
    must also carry that chain.
    """
    k = _kernel(kernel)
    _check_key(key)
    mv = _buffer(buf)
    start = start_cursor(key) if cursor is None else _cursor(cursor, len(mv))
    wm = _watermark(watermark)
    cur = start
    frames = 0
    status: int = Status.END
    hints = 0
    reason_override: str | None = None
    # With a chain to check, verify exactly up to the watermark frame first.
    if wm is not None and wm.chain is not None:
        if wm.seq == start.next_seq - 1:
            if start.chain != wm.chain:
                status, reason_override = Status.BAD_CHAIN, "chain at the durable watermark differs"
        elif wm.seq >= start.next_seq:
            status, _, cur, hints = k.scan(mv, key, cur, wm.seq - start.next_seq + 1, False)
            frames += cur.next_seq - start.next_seq
            if status in (Status.MORE, Status.END) and cur.next_seq == wm.seq + 1:
                if cur.chain != wm.chain:
                    status = Status.BAD_CHAIN
                    reason_override = (f"chain of frame seq={wm.seq} differs from the durable "
                                       "watermark's")
                elif status == Status.MORE:
                    status = Status.OK
    if status in (Status.OK, Status.END) and reason_override is None:
        before = cur.next_seq
        status, _, cur, hints = k.scan(mv, key, cur, MAX_SEQ, False)
        frames += cur.next_seq - before
    if reason_override is not None:
        verdict = Verdict.CORRUPT
    else:
        verdict = classify(mv, key, status, cur, hints, wm, kernel=k)
    if status == Status.END and verdict is Verdict.CORRUPT:
        status = Status.TRUNCATED
        reason_override = (f"log ends at seq={cur.next_seq - 1}, before the durable "
                           f"watermark seq={wm.seq if wm else None}")
    reason = reason_override or ("" if verdict is Verdict.CLEAN
                                 else _reason(status, hints, verdict, wm, k))
    return ScanReport(
        verdict=verdict, status=Status(status), valid_len=cur.offset, frames=frames,
        last_seq=cur.next_seq - 1 if cur.next_seq > 0 else None,
        cursor=cur, torn_bytes=len(mv) - cur.offset, hints=hints, reason=reason,
        watermark=wm)


def verify(buf: Any, key: int, cursor: Cursor | None = None, *,
           watermark: Watermark | int | None = None, session: str | None = None,
           strict: bool = False, kernel: Kernel | None = None) -> ScanReport:
    """:func:`scan`, then raise :class:`CorruptionError` (or a subclass) on
    corruption, and :class:`TornTailError` on a torn tail when ``strict``."""
    report = scan(buf, key, cursor, watermark=watermark, kernel=kernel)
    report.raise_for(session, strict=strict)
    return report


def iter_frames(buf: Any, key: int, cursor: Cursor | None = None, *,
                watermark: Watermark | int | None = None, strict: bool = False,
                session: str | None = None,
                kernel: Kernel | None = None) -> Iterator[Frame]:
    """Yield every verified frame of ``buf`` in order, in bounded memory.

    At the first defect: a torn tail ends the iteration quietly (or raises
    :class:`TornTailError` when ``strict``); corruption raises.  Frames before
    the defect have been yielded by then -- they verified, including their
    chain, so they are exactly what was written.
    """
    k = _kernel(kernel)
    _check_key(key)
    mv = _buffer(buf)
    cur = start_cursor(key) if cursor is None else _cursor(cursor, len(mv))
    wm = _watermark(watermark)
    while True:
        status, headers, cur, hints = k.scan(mv, key, cur, _CHUNK, True)
        for h in headers:
            if wm is not None and wm.chain is not None and h.seq == wm.seq and h.chain != wm.chain:
                raise error_for(Status.BAD_CHAIN,
                                reason="chain differs from the durable watermark's",
                                offset=h.offset, seq=h.seq, session=session, corrupt=True)
            start = h.offset + HEADER_SIZE
            yield Frame(h.seq, h.type, h.flags, h.offset, h.raw_len, h.payload_check, h.chain,
                        mv[start:start + h.stored_len].toreadonly())
        if status == Status.MORE:
            continue
        verdict = classify(mv, key, status, cur, hints, wm, kernel=k)
        if verdict is Verdict.CLEAN:
            return
        if verdict is Verdict.TORN and not strict:
            return
        if status == Status.END:
            raise error_for(Status.TRUNCATED, reason=(
                f"log ends at seq={cur.next_seq - 1}, before the durable watermark "
                f"seq={wm.seq if wm else None}"), offset=cur.offset, seq=cur.next_seq,
                session=session, corrupt=True)
        raise error_for(status, reason=_reason(status, hints, verdict, wm, k), offset=cur.offset,
                        seq=cur.next_seq, session=session, corrupt=verdict is Verdict.CORRUPT)
