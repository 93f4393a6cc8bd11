"""Chunk rows: how a run of a session's frames is stored as one unit (FORMAT.md 7).

A chunk is ``n`` consecutive v1 frames of one session -- the same bytes as
ever -- concatenated into a body of ``raw_len`` bytes, stored as is or
compressed as one zstd frame, with:

* ``body_check`` = XXH3-64 of the *stored* body, seeded with
  ``(session key + first_seq) mod 2^64``: a body moved to another session or
  position fails like random damage, and damage is found before the
  decompressor sees the bytes;
* ``seed_chain`` = the chain before its first frame, ``last_chain`` = the
  chain of its last frame.

:func:`open_chunk` verifies a stored row in the order FORMAT.md 7.2 gives and
returns the raw body and its frame table, or a :class:`ChunkDefect` that
says what failed where.  :func:`cut` splits a batch just framed into chunks
at the size cap; :func:`pack` makes the row of one run.
"""

from __future__ import annotations

import bisect
import operator
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import zstandard

from .._format import (
    FRAME_STRUCT,
    HEADER_SIZE,
    MASK64,
    MAX_RAW,
    MESSAGES,
    Cursor,
    FrameHeader,
    FrameTable,
    Kernel,
    Status,
)
from ..errors import CorruptionError
from .frames import _kernel, checksum, decode_header

# seq -> the replacement payload of an erased frame (its tombstone's), or None;
# it raises CorruptionError for a tombstone that does not verify
Erased = Callable[[int], bytes | None]

CAP = 64 * 1024        # raw bytes a chunk grows to (docs/storage.md, docs/performance.md: measured)
# zstd level of chunk bodies: at 100k events of benchmarks/workload.py, level 1
# stores 377 B/event, level 3 361 (-4.3 %: the bytes target), at a batch append
# rate within this VM's noise of level 1 (four interleaved runs).
LEVEL = 3
# zstd level of the rows an append writes: level 1 costs 2.4 us of CPU per
# workload event against 3.6 at level 3 (a batch of 1000 is ~6.5 us/event
# in all), for 0.374 of the JSONL bytes against 0.359; storing rows raw
# saves the 2.4 us but keeps 1.0 of the JSONL bytes until a rewrite
# compresses them.
WRITE_LEVEL = 1
RAW, ZSTD = 0, 1       # the row's codec
# (a Chunk's fields by position, for map() over many rows)
_FIRST, _CODEC, _CHECK, _BODY = (operator.itemgetter(i) for i in (0, 3, 4, 7))
_CHAIN_AT = 32         # the chain is the last field of a frame header
MAX_BODY = MAX_RAW + HEADER_SIZE + 8  # one frame of the largest payload, as a bound


class Chunk(NamedTuple):
    """One chunk row, as the codec makes it and the storage keeps it.

    A named tuple, not a frozen dataclass: a read over small rows makes one
    a row, and a frozen dataclass costs ~1.1 us to make against ~0.3 (the
    storage makes it with ``tuple.__new__``, without even the call of
    ``__new__``)."""

    first_seq: int
    n: int
    raw_len: int
    codec: int
    body_check: int
    seed_chain: int
    last_chain: int
    body: bytes

    @property
    def last_seq(self) -> int:
        return self.first_seq + self.n - 1


@dataclass(frozen=True, slots=True)
class ChunkDefect:
    """Why a stored chunk row did not verify: a kernel status, a sentence,
    the offset in the raw body where it was found and the seq it concerns."""

    status: Status
    reason: str
    offset: int
    seq: int


def body_seed(key: int, first_seq: int) -> int:
    return (key + first_seq) & MASK64


def chain_of(blob: Any, frame_offset: int) -> int:
    """The chain field of the frame at ``frame_offset`` of bytes already verified or just made."""
    return int.from_bytes(blob[frame_offset + _CHAIN_AT:frame_offset + HEADER_SIZE], "little")


def frame_sizes(stored_lens: Sequence[int]) -> list[int]:
    return [HEADER_SIZE + n + (-n & 7) for n in stored_lens]


def cut(blob: Any, sizes: Sequence[int], first_seq: int, seed_chain: int,
        cap: int = CAP) -> list[tuple[Any, int, int, int, int]]:
    """Split a blob of consecutive frames just framed (so trusted) into runs
    of at most ``cap`` raw bytes, as even as the frames allow (a bigger frame
    is a run of its own): ``(body, first_seq, n, seed_chain, last_chain)``
    each, the body a slice of ``blob`` (a view of it, for a memoryview)."""
    runs = []
    start, begin, seq, count, size = 0, first_seq, first_seq, 0, 0
    chain = seed_chain
    pos = last_size = 0
    # Even runs: a batch of 1.3 caps is two rows of 0.65, not a full row and a
    # small one a repack could never merge (its neighbours full).
    total = sum(sizes)
    target = -(-total // -(-total // cap)) if total > cap else cap
    for frame in sizes:
        if count and size + frame > target:
            last = chain_of(blob, pos - last_size)
            runs.append((blob[start:pos], begin, count, chain, last))
            start, begin, count, size, chain = pos, seq, 0, 0, last
        pos += frame
        last_size = frame
        size += frame
        count += 1
        seq += 1
    if count:
        runs.append((blob[start:pos], begin, count, chain, chain_of(blob, pos - last_size)))
    return runs


def pack(key: int, body: Any, first_seq: int, n: int, seed_chain: int, last_chain: int,
         stored: bytes | None = None, *, kernel: Kernel | None = None) -> Chunk:
    """The row of one run: ``stored`` is the body as stored (its zstd frame),
    None to store the raw body as is."""
    codec, data = (RAW, body) if stored is None else (ZSTD, stored)
    # (the kernel directly: the key and the bytes are ours, nothing to validate)
    return Chunk(first_seq, n, len(body), codec,
                 _kernel(kernel).checksum(data, (key + first_seq) & MASK64), seed_chain,
                 last_chain, data)


class ChunkCompressor:
    """zstd at ``level`` (default :data:`LEVEL`) for chunk bodies, one context
    per thread; a body is stored compressed only when that saves more than
    1/16.  ``level=None`` stores every body raw (:meth:`compress` gives None
    for each), leaving compression to a later rewrite of the row."""

    def __init__(self, level: int | None = LEVEL) -> None:
        self._local = threading.local()
        self.level = level

    def _c(self) -> Any:
        c = getattr(self._local, "c", None)
        if c is None:
            c = self._local.c = zstandard.ZstdCompressor(level=self.level or LEVEL,
                                                         write_content_size=True)
        return c

    def _d(self) -> Any:
        d = getattr(self._local, "d", None)
        if d is None:
            d = self._local.d = zstandard.ZstdDecompressor()
        return d

    def compress(self, bodies: Sequence[bytes]) -> list[bytes | None]:
        """The stored form of each body: its zstd frame, or None (store it raw)."""
        if not bodies or self.level is None:
            return [None] * len(bodies)
        # One by one: zstd's multi-threaded batch call measured no faster on
        # this VM kind's 2 vCPUs (3.45 ms against 3.40 for 1 MiB at level 1).
        c = self._c()
        packed = [c.compress(body) for body in bodies]
        return [p if len(p) < len(b) - (len(b) >> 4) else None
                for p, b in zip(packed, bodies, strict=True)]

    def decompress_rows(self, key: int, rows: Sequence[Chunk],
                        kernel: Kernel | None = None) -> dict[int, bytes]:
        """The bodies of several compressed rows at once, on zstd's threads (the
        GIL released), keyed by first seq: only rows whose body check holds are
        decompressed (never an unchecked byte into zstd); any other row, or a
        failure, is left to :func:`open_chunk`, which names the defect."""
        return self.decompress_checked(self.checked(key, rows, kernel))

    def checked(self, key: int, rows: Sequence[Chunk],
                kernel: Kernel | None = None) -> list[Chunk]:
        """The compressed rows whose body check holds (what may go to zstd):
        several in one kernel call (check_bodies), not a call a row."""
        todo = [r for r in rows if r.codec == ZSTD]
        if len(todo) < 2:
            return [r for r in todo if checksum(r.body, body_seed(key, r.first_seq),
                                                kernel=kernel) == r.body_check]
        flags = _kernel(kernel).check_bodies(b"".join(map(_BODY, todo)), key,
                                             body_triples(todo))
        return [r for r, ok in zip(todo, flags, strict=True) if ok]

    def decompress_checked(self, todo: Sequence[Chunk]) -> dict[int, bytes]:
        """:meth:`decompress_rows` of rows :meth:`checked` passed: one C call,
        the GIL released throughout (so a worker thread can run it while
        another thread decodes)."""
        if len(todo) < 2:
            return {}
        sizes = struct.pack(f"={len(todo)}Q", *(r.raw_len for r in todo))
        try:
            # one call for the rows of a fetch: ~25 % less than one call a row
            # (measured); more threads were slower on 2 vCPUs
            result = self._d().multi_decompress_to_buffer([r.body for r in todo],
                                                          decompressed_sizes=sizes, threads=1)
        except zstandard.ZstdError:
            return {}
        out = {}
        for i, row in enumerate(todo):
            data = result[i].tobytes()
            if len(data) == row.raw_len:
                out[row.first_seq] = data
        return out

    def decompress(self, stored: Any, raw_len: int) -> bytes | None:
        """The body, exactly ``raw_len`` bytes, or None if the stored bytes are
        not one zstd frame of that content size (never more is produced)."""
        try:
            if zstandard.frame_content_size(stored) != raw_len:
                return None
            out = self._d().decompress(stored, max_output_size=raw_len)
        except zstandard.ZstdError:
            return None
        return out if len(out) == raw_len else None


def step_over_blank(raw: Any, at: Cursor, key: int, *,
                    kernel: Kernel | None = None) -> tuple[FrameHeader, Cursor] | None:
    """The frame at ``at`` whose payload check failed, if its payload was
    blanked by an erasure (FORMAT.md 2.2): every payload and pad byte zero,
    and its chain field the chain of its header continuing ``at.chain`` --
    so the header (checked by the scan before the payload) and the stored
    payload check stay the proof of what was there.  Returns its header and
    the cursor after it, or None when it is not such a frame."""
    k = _kernel(kernel)
    header = decode_header(raw, at.offset, kernel=kernel)
    end = at.offset + header.size
    if header.seq != at.next_seq or end > len(raw) or any(raw[at.offset + HEADER_SIZE:end]):
        return None
    head = bytes(raw[at.offset:at.offset + HEADER_SIZE])
    if k.checksum(head[0:12] + head[16:32], at.chain) != header.chain:
        return None
    return header, Cursor(end, at.next_seq + 1, header.chain)


def blank_payloads(raw: bytes, table: FrameTable, seqs: Sequence[int]) -> bytes:
    """``raw`` with the payloads (and pads) of the frames of ``seqs`` zeroed:
    each frame's 40 header bytes, and with them the chain, stay."""
    out = bytearray(raw)
    first = table.seq(0)
    for seq in seqs:
        i = seq - first
        start = table.offset(i) + HEADER_SIZE
        stored = table.stored_len(i)
        out[start:start + stored + (-stored & 7)] = bytes(stored + (-stored & 7))
    return bytes(out)


def _scan_erased(raw: Any, key: int, row: Chunk, erased: Erased, status: int,
                 table: FrameTable, end: Cursor, k: Kernel, checked: tuple[int, int] | None,
                 ) -> tuple[int, FrameTable, Cursor, str | None]:
    """Continue a row's scan over frames erased under a tombstone: each must
    be a blank frame (:func:`step_over_blank`) that ``erased`` names.  The
    last item says why a frame's tombstone was refused (None: none was)."""
    parts, count = [table.packed], len(table)
    found: dict[int, bytes] = {}
    refused: str | None = None
    while status == Status.BAD_PAYLOAD:
        try:
            replacement = erased(end.next_seq)
        except CorruptionError as exc:
            # a tombstone that does not verify names nothing: the frame's
            # failed payload check stands, at its own seq and offset
            refused = f"{MESSAGES[Status.BAD_PAYLOAD]}, and its tombstone is refused: {exc}"
            break
        stepped = None if replacement is None else step_over_blank(raw, end, key, kernel=k)
        if stepped is None or replacement is None:
            break
        header, end = stepped
        found[header.seq] = replacement
        parts.append(FRAME_STRUCT.pack(*header))
        count += 1
        if count == row.n:
            status = Status.END if end.offset == len(raw) else Status.MORE
            break
        status, more, end, _ = k.scan_table(raw, key, end, row.n - count, checked)
        parts.append(more.packed)
        count += len(more)
    table = FrameTable(b"".join(parts))
    table.erased = found or None
    return status, table, end, refused


def open_chunk(key: int, row: Chunk, compressor: ChunkCompressor, *,
               kernel: Kernel | None = None, raw: bytes | None = None,
               erased: Erased | None = None, checked: tuple[int, int] | None = None,
               ) -> tuple[bytes | memoryview, FrameTable] | ChunkDefect:
    """Verify one stored row (FORMAT.md 7.2) and return its raw body and the
    :class:`FrameTable` of its ``n`` frames, or the first defect.  A frame
    whose payload check fails is accepted only as an erased one: blank, and
    named by ``erased`` (which gives the payload readers see instead).

    ``checked = (lo, hi)``: the caller hands out only the payloads of seqs
    ``lo .. hi``, so only theirs are checked.  The body check (just verified,
    or verified by :meth:`ChunkCompressor.checked` for a ``raw`` passed in)
    covers every byte; the payload check of a frame handed out still ties its
    bytes to the chain, which a recomputed body check would not (the tamper
    matrix's "body_check recomputed" rows); headers, seqs, padding and
    chains of every frame are verified as ever (tl_scan.c, tl_scan_some).
    ``verify()`` checks every payload (``checked=None``)."""
    seq = row.first_seq
    k = _kernel(kernel)
    if row.n < 1 or row.raw_len < HEADER_SIZE or row.raw_len > row.n * MAX_BODY or (
            row.codec not in (RAW, ZSTD)):
        return ChunkDefect(Status.BAD_FIELD, "chunk row fields out of range", 0, seq)
    # (the kernel directly: the body is bytes as storage returned it, the seed ours)
    if raw is None and k.checksum(row.body, body_seed(key, seq)) != row.body_check:
        return ChunkDefect(Status.BAD_PAYLOAD, "chunk body check mismatch", 0, seq)
    # A raw body passed in was decompressed (its body check verified) by
    # ChunkCompressor.decompress_rows; only a row read without one is opened here.
    if raw is None and row.codec == ZSTD:
        raw = compressor.decompress(row.body, row.raw_len)
        if raw is None:
            return ChunkDefect(Status.BAD_FIELD, "chunk body does not decompress to its raw "
                               "length", 0, seq)
    elif raw is None:
        raw = row.body
        if len(row.body) != row.raw_len:
            return ChunkDefect(Status.BAD_FIELD, "chunk body length differs from raw_len", 0,
                               seq)
    status, table, end, _ = k.scan_table(raw, key, Cursor(0, seq, row.seed_chain), row.n,
                                         checked)
    refused = None
    if status == Status.BAD_PAYLOAD and erased is not None:
        status, table, end, refused = _scan_erased(raw, key, row, erased, status, table, end,
                                                   k, checked)
    if status not in (Status.END, Status.MORE):
        return ChunkDefect(Status(status), refused or k.strerror(status),
                           end.offset, end.next_seq)
    if len(table) != row.n or end.offset != row.raw_len:
        return ChunkDefect(Status.SEQ_MISMATCH, f"chunk holds {len(table)} verified "
                           f"frame(s) in {end.offset} bytes; its row says {row.n} in "
                           f"{row.raw_len}", end.offset, end.next_seq)
    if end.chain != row.last_chain:
        return ChunkDefect(Status.BAD_CHAIN, "the chain of the chunk's last frame differs from "
                           "its row's last_chain", table.offset(row.n - 1), row.last_seq)
    return raw, table


SMALL = CAP // 16  # raw bytes under which rows are opened as one run (open_run)


def body_triples(rows: Sequence[Chunk]) -> list[int]:
    """``first_seq, len(body), body_check`` of each row, as
    :meth:`~trajlog._format.Kernel.check_bodies` takes them."""
    out = [0] * (3 * len(rows))
    out[0::3] = map(_FIRST, rows)
    out[1::3] = map(len, map(_BODY, rows))
    out[2::3] = map(_CHECK, rows)
    return out


def open_run(key: int, rows: Sequence[Chunk], bodies: dict[int, bytes], *,
             kernel: Kernel | None = None, checked: tuple[int, int] | None = None,
             ) -> tuple[bytes, FrameTable] | None:
    """Several consecutive small rows (each continuing the one before, seq to
    seq and chain to chain) opened as one: the body checks of the rows stored
    raw in ONE kernel call (the others' bodies are in ``bodies``, decompressed
    by :meth:`ChunkCompressor.decompress_rows` once their checks held), then
    ONE scan of their raw bodies joined, from the first row's seed chain, and
    at every row boundary the checks :func:`open_chunk` makes of a row -- its
    fields, its ``n`` frames in its ``raw_len`` bytes, starting at its seq
    and seed chain, ending at its ``last_chain`` -- so what it accepts,
    opening row by row accepts too.  None on anything else (a defect, an
    erased frame): the caller opens those rows one by one, which names the
    defect where it is."""
    k = _kernel(kernel)
    plain = [r for r in rows if r.first_seq not in bodies] if bodies else rows
    if plain:
        # every row not decompressed is stored raw, and its body check holds
        # (no byte reaches the scan before its row's check held)
        if any(map(_CODEC, plain)):
            return None
        stored = b"".join(map(_BODY, plain))
        if 0 in k.check_bodies(stored, key, body_triples(plain)):
            return None
    joined = stored if not bodies else b"".join(
        [bodies.get(r.first_seq) or r.body for r in rows])
    first, end = rows[0], rows[-1]
    n = end.first_seq + end.n - first.first_seq
    status, table, at, _ = k.scan_table(joined, key, Cursor(0, first.first_seq,
                                                             first.seed_chain), n, checked)
    if status not in (Status.END, Status.MORE) or len(table) != n or (
            at.offset != len(joined) or at.chain != end.last_chain):
        return None
    q = table.arrays[0].tolist()
    seq, chain, offset = first.first_seq, first.seed_chain, 0
    top = first.first_seq + n
    for row_seq, count, raw_len, _c, _k, seed, last, body in rows:
        # each row starts where the one before ended, at the seq, offset and
        # chain the scan reached there, and spans its own raw_len bytes
        # (the frame index is seq - first seq: the scan checked every seq)
        i = 6 * (seq - first.first_seq)
        if (row_seq != seq or seed != chain or count < 1 or seq >= top or q[i] != offset
                or (i and q[i - 3] != chain) or raw_len < HEADER_SIZE
                or raw_len > count * MAX_BODY
                or (len(body) != raw_len and row_seq not in bodies)):
            return None
        seq += count
        chain = last
        offset += raw_len
    return joined, table


class ChunkCache:
    """The last rows opened (verified and decompressed), so that ``get`` and
    ``tail`` near each other do not open one row again.  Keyed by the row's
    session key and every field but the body; :meth:`open` also compares the
    stored body byte for byte (a memcmp, far cheaper than opening), so a row
    damaged since it was opened is opened again -- and refused.  :meth:`peek`
    (``get``'s look-up without the body) trusts a row this process verified.
    A row opened with only some payloads checked (``checked``, see
    :func:`open_chunk`) serves only reads of those seqs.  Bounded by the raw
    bytes it keeps."""

    def __init__(self, max_bytes: int = 8 * 1024 * 1024) -> None:
        self.max_bytes = self._max = max_bytes
        self._size = 0
        self._items: OrderedDict[tuple[int, ...], tuple[Any, FrameTable]] = OrderedDict()
        self._bodies: dict[tuple[int, ...], bytes] = {}
        self._checked: dict[tuple[int, ...], tuple[int, int] | None] = {}
        # key -> sorted first seqs of the rows held, and (key, first) -> (last
        # seq, how many rows held start there): :meth:`holds`
        self._firsts: dict[int, list[int]] = {}
        self._spans: dict[tuple[int, int], list[int]] = {}
        self._lock = threading.Lock()

    def has(self, key: int, row: Chunk) -> bool:
        return (key, row.first_seq, row.body_check, row.seed_chain, row.last_chain, row.n,
                row.raw_len, row.codec) in self._items

    def fresh(self, key: int, rows: Sequence[Chunk]) -> list[Chunk]:
        """The rows of ``rows`` not held, and the small rows held without
        every payload checked (a row a ``get`` opened has only its own
        payload's check: a read over it would open it again alone, and not
        keep it -- as fresh, it joins a run).  A big row held so (a ``tail``
        opened it) is not fresh: :meth:`open` takes it from here when its
        checks cover the read's, without its body checked again."""
        items, checked = self._items, self._checked
        return [r for r in rows if (name := (key, r.first_seq, r.body_check, r.seed_chain,
                                             r.last_chain, r.n, r.raw_len, r.codec))
                not in items or (r.raw_len < SMALL and checked.get(name) is not None)]

    def holds(self, key: int, seq: int) -> bool:
        """Whether a row of ``key`` holding ``seq`` is remembered (a hint:
        ``get`` then reads the row without its body, and :meth:`peek`s)."""
        with self._lock:
            firsts = self._firsts.get(key)
            if not firsts:
                return False
            i = bisect.bisect_right(firsts, seq) - 1
            return i >= 0 and self._spans[key, firsts[i]][0] >= seq

    def _covers(self, name: tuple[int, ...], need: tuple[int, int] | None) -> bool:
        have = self._checked.get(name)
        return have is None or (need is not None and have[0] <= need[0] and need[1] <= have[1])

    def peek(self, key: int, row: Chunk, need: tuple[int, int] | None = None,
             ) -> tuple[Any, FrameTable] | None:
        """The opened row if it is remembered with the payloads of seqs
        ``need`` checked (None: all of them); ``row.body`` is not looked at."""
        name = (key, row.first_seq, row.body_check, row.seed_chain, row.last_chain, row.n,
                row.raw_len, row.codec)
        with self._lock:
            hit = self._items.get(name)
            if hit is not None:
                if not self._covers(name, need):
                    return None
                self._items.move_to_end(name)
            return hit

    def open(self, key: int, row: Chunk, compressor: ChunkCompressor, *,
             kernel: Kernel | None = None, raw: bytes | None = None,
             erased: Erased | None = None, checked: tuple[int, int] | None = None,
             remember: bool = True) -> tuple[bytes | memoryview, FrameTable] | ChunkDefect:
        """:func:`open_chunk`, remembered (``remember=False``: a row found is
        used, a row opened is not kept).  A row remembered without the
        payloads asked for is opened again with every payload checked (a
        second read of a row pays for the whole row once)."""
        name = (key, row.first_seq, row.body_check, row.seed_chain, row.last_chain, row.n,
                row.raw_len, row.codec)
        with self._lock:
            hit = self._items.get(name)
            if hit is not None and self._bodies.get(name) == row.body:
                have = self._checked.get(name)
                if have is None or (checked is not None and have[0] <= checked[0]
                                    and checked[1] <= have[1]):
                    self._items.move_to_end(name)
                    return hit
                checked = None
        opened = open_chunk(key, row, compressor, kernel=kernel, raw=raw, erased=erased,
                            checked=checked)
        if remember and isinstance(opened, tuple) and row.raw_len <= self._max // 4:
            with self._lock:
                if name in self._items:
                    self._drop(name)
                self._items[name] = opened
                self._bodies[name] = bytes(row.body)
                self._checked[name] = checked
                span = (key, row.first_seq)
                held = self._spans.get(span)
                if held is None:
                    self._spans[span] = [row.last_seq, 1]
                    bisect.insort(self._firsts.setdefault(key, []), row.first_seq)
                else:
                    held[0] = max(held[0], row.last_seq)
                    held[1] += 1
                self._size += row.raw_len + len(row.body)
                while self._size > self._max:
                    self._drop(next(iter(self._items)))
        return opened

    def _drop(self, name: tuple[int, ...]) -> None:
        """Forget one row (the lock held)."""
        old, _table = self._items.pop(name)
        self._size -= len(old) + len(self._bodies.pop(name, b""))
        self._checked.pop(name, None)
        span = (name[0], name[1])
        held = self._spans[span]
        held[1] -= 1
        if not held[1]:
            del self._spans[span]
            firsts = self._firsts[name[0]]
            firsts.pop(bisect.bisect_left(firsts, name[1]))
            if not firsts:
                del self._firsts[name[0]]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bodies.clear()
            self._checked.clear()
            self._firsts.clear()
            self._spans.clear()
            self._size = 0


__all__ = [
    "CAP",
    "LEVEL",
    "RAW",
    "SMALL",
    "WRITE_LEVEL",
    "ZSTD",
    "Chunk",
    "ChunkCache",
    "ChunkCompressor",
    "ChunkDefect",
    "Erased",
    "blank_payloads",
    "body_seed",
    "body_triples",
    "chain_of",
    "cut",
    "frame_sizes",
    "open_chunk",
    "open_run",
    "pack",
    "step_over_blank",
]
