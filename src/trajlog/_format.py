"""Frame format v1 constants, status codes and the tuples both kernels return.

Everything here mirrors ``csrc/tl.h``; ``tests/project/test_api_surface.py`` checks that
each value equals the compiled C constant, so the two kernels cannot drift.
The normative description of the bytes is ``FORMAT.md``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, NamedTuple, Protocol

FORMAT_VERSION = 1
HEADER_SIZE = 40
ALIGN = 8
MAX_STORED = 16 * 1024 * 1024
MAX_RAW = 64 * 1024 * 1024
SECTOR = 512
MAX_SEQ = 2**63 - 1
MASK64 = 2**64 - 1
MAGIC = b"\xa7\xf1"


class FrameType(IntEnum):
    """Byte 2 of a frame.  0x80-0xFF are optional types a reader may skip."""

    SESSION_HEADER = 1
    EVENT = 2
    MEMORY = 3
    TOMBSTONE = 4
    SEAL = 5
    CHUNK = 6


TYPE_OPTIONAL_MIN = 0x80
FLAG_ZSTD = 1
FLAG_ZSTD_DICT = 2
FLAGS_KNOWN = 3
HINT_ZERO_SECTOR = 1


class Status(IntEnum):
    """Status codes shared by the C and the Python kernel (tl.h ``TL_*``)."""

    OK = 0
    END = 1
    MORE = 2
    TRUNCATED = 3
    ZERO_TAIL = 4
    BAD_MAGIC = 5
    BAD_HEADER = 6
    BAD_FIELD = 7
    UNSUPPORTED = 8
    SEQ_MISMATCH = 9
    BAD_PAYLOAD = 10
    BAD_PADDING = 11
    BAD_CHAIN = 12
    TOO_LARGE = 13
    BUFFER_TOO_SMALL = 14
    INVALID_ARG = 15
    NOT_JSON = 16


# tl_strerror's table, kept equal to csrc/tl_status.c by a test.
MESSAGES: dict[int, str] = {
    Status.OK: "ok",
    Status.END: "clean end of log",
    Status.MORE: "frame array full; call again to continue",
    Status.TRUNCATED: "frame truncated by the end of the data",
    Status.ZERO_TAIL: "zero-filled tail",
    Status.BAD_MAGIC: "bad frame magic",
    Status.BAD_HEADER: "header checksum mismatch",
    Status.BAD_FIELD: "header field out of range",
    Status.UNSUPPORTED: "unsupported frame type or flag",
    Status.SEQ_MISMATCH: "unexpected frame seq",
    Status.BAD_PAYLOAD: "payload checksum mismatch",
    Status.BAD_PADDING: "non-zero padding",
    Status.BAD_CHAIN: "chain mismatch",
    Status.TOO_LARGE: "payload over the size limit",
    Status.BUFFER_TOO_SMALL: "output buffer too small",
    Status.INVALID_ARG: "invalid argument",
    Status.NOT_JSON: "payload is not JSON-compatible",
}

# The JSON rules' depth for an event payload: the payload array holds the
# data at depth 1, and data nests at most trajlog.events.MAX_DEPTH (64) deep.
EVENT_JSON_DEPTH = 65


class Cursor(NamedTuple):
    """Continuity state between frames and between calls (``struct tl_cursor``).

    A fresh log starts at ``Cursor(0, 0, key)``; a fork's own frames start at
    ``Cursor(0, seed_length, chain of the parent's frame seed_length - 1)``.
    """

    offset: int
    next_seq: int
    chain: int


class FrameHeader(NamedTuple):
    """One verified (or merely decoded) frame header (``struct tl_frame``)."""

    offset: int
    seq: int
    payload_check: int
    chain: int
    stored_len: int
    raw_len: int
    type: int
    flags: int

    @property
    def size(self) -> int:
        """Bytes the whole frame occupies, padding included."""
        return HEADER_SIZE + self.stored_len + (-self.stored_len & 7)

    @property
    def payload_offset(self) -> int:
        return self.offset + HEADER_SIZE


# struct tl_frame in native byte order: 4 x u64, 2 x u32, 2 x u8, 6 reserved
# (48 bytes; csrc/tl_internal.h asserts the layout).
FRAME_STRUCT = struct.Struct("=QQQQIIBB6x")


class FrameTable:
    """The headers of a verified scan, packed as an array of ``struct
    tl_frame`` (what ``tl_scan`` fills in): read field by field without making
    a tuple per frame -- the read path's hot loop.  ``table[i]`` gives the
    :class:`FrameHeader` of frame ``i`` for everything else."""

    __slots__ = ("_b", "_i", "_q", "erased", "n")

    def __init__(self, packed: bytes) -> None:
        view = memoryview(packed)
        self._q = view.cast("Q")   # 6 words a frame: offset, seq, payload_check, chain, ...
        self._i = view.cast("I")   # 12 half-words: ... stored_len at 8, raw_len at 9
        self._b = view.cast("B")   # 48 bytes: type at 40, flags at 41
        self.n = len(packed) // FRAME_STRUCT.size
        # seq -> the payload readers get instead of an erased one (its
        # tombstone's view); None when no frame of the table was erased
        self.erased: dict[int, bytes] | None = None

    @property
    def packed(self) -> bytes:
        """The table as ``struct tl_frame`` bytes."""
        return bytes(self._b)

    @property
    def arrays(self) -> tuple[memoryview, memoryview, memoryview]:
        """``(words, half-words, bytes)`` views for loops that read many frames."""
        return self._q, self._i, self._b

    def __len__(self) -> int:
        return self.n

    def offset(self, i: int) -> int:
        return int(self._q[6 * i])

    def seq(self, i: int) -> int:
        return int(self._q[6 * i + 1])

    def chain(self, i: int) -> int:
        return int(self._q[6 * i + 3])

    def stored_len(self, i: int) -> int:
        return int(self._i[12 * i + 8])

    def raw_len(self, i: int) -> int:
        return int(self._i[12 * i + 9])

    def flags(self, i: int) -> int:
        return int(self._b[48 * i + 41])

    def __getitem__(self, i: int) -> FrameHeader:
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return FrameHeader._make(FRAME_STRUCT.unpack_from(self._b, 48 * i))

    @classmethod
    def pack(cls, headers: Sequence[FrameHeader]) -> FrameTable:
        return cls(b"".join(FRAME_STRUCT.pack(*h) for h in headers))


def frame_size(stored_len: int) -> int:
    """Encoded size of a frame with ``stored_len`` payload bytes; 0 over the limit."""
    if stored_len < 0 or stored_len > MAX_STORED:
        return 0
    return HEADER_SIZE + stored_len + (-stored_len & 7)


def encode_args_ok(n: int, types: Sequence[int], cursor: Cursor,
                   flags: Sequence[int] | None, raw_lens: Sequence[int] | None) -> bool:
    """The argument check both kernels run first in ``encode_batch``.

    It rejects what the C arrays cannot even hold (types and flags outside a
    byte, raw lengths outside u32, cursor fields outside u64, arrays of the
    wrong length), so that every remaining check happens in the same order in
    both kernels and yields the same status.
    """
    if len(types) != n or (flags is not None and len(flags) != n) or (
            raw_lens is not None and len(raw_lens) != n):
        return False
    if not _ints_within(types, 0xFF):
        return False
    if flags is not None and not _ints_within(flags, 0xFF):
        return False
    if raw_lens is not None and not _ints_within(raw_lens, 0xFFFFFFFF):
        return False
    offset, next_seq, chain = cursor
    return (type(offset) is int and type(next_seq) is int and type(chain) is int
            and 0 <= offset <= MASK64 and 0 <= next_seq <= MASK64 and 0 <= chain <= MASK64)


def _ints_within(values: Sequence[int], top: int) -> bool:
    if len(values) > 8:
        try:  # long arrays usually repeat a few values: check each distinct one once
            values = list(set(values))
        except TypeError:  # unhashable: certainly not ints
            return False
    for v in values:  # noqa: SIM110 - a plain loop, no generator: runs on every append
        if not isinstance(v, int) or v < 0 or v > top:
            return False
    return True


class Kernel(Protocol):
    """What both kernels (``_kernel_c``, ``_kernel_py``) provide: the same
    functions, arguments, results and status codes.  See ``_kernel_py`` for
    each function's contract."""

    NAME: str

    def format_version(self) -> int: ...

    def checksum(self, data: Any, seed: int) -> int: ...

    def check_bodies(self, buf: Any, key: int, rows: Sequence[int]) -> bytes: ...

    def strerror(self, status: int) -> str: ...

    def encode_batch(self, key: int, payloads: Sequence[Any], types: Sequence[int],
                     cursor: Cursor, flags: Sequence[int] | None = None,
                     raw_lens: Sequence[int] | None = None) -> tuple[int, bytes, Cursor]: ...

    def decode_header(self, buf: Any) -> tuple[int, FrameHeader | None]: ...

    def scan(self, buf: Any, key: int, cursor: Cursor, max_frames: int,
             collect: bool) -> tuple[int, list[FrameHeader], Cursor, int]: ...

    def scan_table(self, buf: Any, key: int, cursor: Cursor, max_frames: int,
                   checked: tuple[int, int] | None = None,
                   ) -> tuple[int, FrameTable, Cursor, int]: ...

    def find_frame(self, buf: Any, key: int, start: int, min_seq: int) -> int: ...

    def json_ok(self, payload: Any, max_depth: int) -> bool: ...

    def encode_events(self, key: int, payloads: Sequence[Any], cursor: Cursor,
                      json_depth: int) -> tuple[int, bytes, Cursor, int, int]: ...
