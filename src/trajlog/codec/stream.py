"""The one verified stream reader: a session's chunk rows, in seq order.

Everything that reads a log -- ``events()``, ``get``/``tail``, ``verify()``,
recovery and the projections -- reads it through :class:`LogStream`.  The
caller supplies the stored rows (``fetch(first, last)`` returns the chunk rows
holding seqs ``first .. last``, from the row that contains ``first``; a
missing row is simply absent).  Each row is verified as a whole before any of
its frames is handed out (FORMAT.md 7.2: fields, body check, bounded
decompression, exactly ``n`` frames continuing the previous row's chain, the
last chain); consecutive rows must meet seq to seq and chain to chain.  The
first defect ends the walk with a :class:`~trajlog.codec.ScanReport` that says
where (offsets count raw bytes from the start of the first row read) and why.
Everything stored is committed, so a defect is always corruption.

:meth:`LogStream.events` decodes the verified frames into events and raises
the defect's typed error; :meth:`LogStream.verify` only reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import msgspec

from .._format import FLAG_ZSTD, HEADER_SIZE, Cursor, FrameHeader, FrameTable, Kernel, Status
from ..errors import error_for
from ..events import Event, LazyEvent, peek_type
from .chunks import (
    CAP,
    RAW,
    SMALL,
    Chunk,
    ChunkCache,
    ChunkCompressor,
    ChunkDefect,
    Erased,
    open_chunk,
    open_run,
)
from .compression import Compressor
from .frames import ScanReport, Verdict, Watermark, _kernel

READ_ROWS = 16  # chunk rows per fetch at the cap (~1 MiB raw): bounded memory
# ... and of smaller rows, as many as make that many raw bytes (a run of
# single-append rows in a few statements, not one per 16 rows), at most:
READ_MAX_ROWS = 512
READ_BYTES = READ_ROWS * CAP
_EAGER = msgspec.msgpack.Decoder(Event)
_LAZY = msgspec.msgpack.Decoder(LazyEvent)
_set = msgspec.structs.force_setattr

# fetch(first, last, limit, budget): the rows holding first..last, from the one holding
# first: at most ``limit``, and none past the row whose raw bytes reach ``budget``
Fetch = Callable[[int, int, int, int], list[Chunk]]


@dataclass(frozen=True, slots=True)
class FrameRun:
    """A run of a session's own frames as stored (:meth:`trajlog.Session.frames`):
    ``frames`` the bytes, ``headers`` one per frame (seq, payload check,
    chain, ...), ``events`` decoded, ``erased`` the replacement payload of
    each erased seq among them."""

    frames: bytes
    first_seq: int
    events: list[Event]
    headers: list[FrameHeader]
    erased: dict[int, bytes]


class LogStream:
    """Verified reading of one session's own rows (see the module docstring).

    ``stored_max()`` returns the highest seq stored for the session; it is
    asked only when rows are missing at the end, to tell a log that ends early
    (the session head is ahead of it) from a gap inside it.
    """

    def __init__(self, key: int, fetch: Fetch, stored_max: Callable[[], int],
                 compressor: Compressor, chunks: ChunkCompressor, *,
                 cache: ChunkCache | None = None, pool: Executor | None = None,
                 session: str | None = None, kernel: Kernel | None = None,
                 erased: Erased | None = None, lean: bool = False) -> None:
        self._key = key
        # lean: check the payloads only of the frames handed out (the row's
        # body check covers the rest; open_chunk's ``checked``) -- not verify's
        self._lean = lean
        self._erased = erased  # the tombstones of erased payloads (chunks.open_chunk)
        self._fetch = fetch
        self._stored_max = stored_max
        self._compressor = compressor
        self._chunks = chunks
        self._cache = cache
        self._pool = pool   # a worker that opens the next rows while these are decoded
        self._session = session
        self._kernel = _kernel(kernel)
        self.report: ScanReport | None = None  # set when a walk ends: clean, or the defect

    def batches(self, first: int, last: int, start_chain: int | None,
                watermark: Watermark) -> Iterator[Batch]:
        """Verified ``(raw body, frame table, lo, hi)`` per row: frames
        ``lo .. hi - 1`` of the table are those of seqs ``first .. last``.

        ``start_chain`` is the chain before ``first`` when the caller knows it
        (the start of a log or of a fork's own frames): the row holding
        ``first`` must then start there with that chain.  Else the first row
        is trusted to begin where its own row says (a read from the middle).
        When ``watermark`` names a chain and ``last`` is its seq, frame
        ``last`` must carry it.  At the end ``self.report`` says clean or names
        the defect (the defective row is not yielded)."""
        want, chain, offset, frames = first, start_chain, 0, 0
        end_chain: int | None = None
        end_offset = 0  # of the last frame handed out
        ahead: tuple[list[Chunk], list[Chunk], Future[dict[int, bytes]] | list[Chunk]] | None = None
        # The cache remembers the rows of a read's first fetch (a get, a tail,
        # the start of a long read); the rest of a long read passes through
        # it: keeping every row would cost fresh memory a row (measured: ~12 %
        # of a whole-log read) and push out the rows near reads come back to.
        remember = True
        while want <= last:
            if ahead is not None:
                rows, fresh, pending = ahead
                ahead = None
            else:
                # (the rows the cache is to remember: as many as ever; after
                # them, many small rows a statement)
                rows = self._fetch(want, last, READ_ROWS if remember and
                                   self._cache is not None else READ_MAX_ROWS, READ_BYTES)
                # (only the first row can end before ``want``: the last row
                # starting at or before it; every later one starts after it)
                if rows and rows[0].last_seq < want:
                    del rows[0]
                # (the rows not in the cache: those to decompress at once or join)
                fresh, pending = (self._uncached(rows) if len(rows) > 1 else rows), None
            if not rows:  # (a row already read comes back when the next one is missing)
                self.report = self._missing(want, last, chain, offset, frames, watermark)
                return
            if self._pool is not None and len(rows) >= READ_ROWS and rows[-1].last_seq < last:
                # Read ahead: fetch the next rows here (the connection is this
                # thread's), check their bodies, and decompress them on the
                # pool -- one C call that releases the GIL -- while these rows
                # are scanned and decoded.
                nxt = rows[-1].last_seq + 1
                more = self._fetch(nxt, last, READ_MAX_ROWS, READ_BYTES)
                if more and more[0].last_seq < nxt:
                    del more[0]
                if more:
                    unheld = self._uncached(more)
                    todo = self._chunks.checked(self._key, unheld, self._kernel)
                    # (small rows are decompressed here when their turn comes:
                    # handing them to a thread costs more -- measured: ~5 us an
                    # event of a read over single-append rows)
                    ahead = (more, unheld, self._pool.submit(
                        self._chunks.decompress_checked, todo)
                        if sum(r.raw_len for r in todo) >= CAP else todo)
            if isinstance(pending, Future):
                bodies = pending.result()
            elif pending is not None:
                bodies = self._chunks.decompress_checked(pending)
            else:
                bodies = (self._chunks.decompress_rows(self._key, fresh, self._kernel)
                          if len(rows) > 1 else {})
            # (rows the cache is to remember are opened alone, and kept)
            joinable = [] if remember and self._cache is not None else fresh
            for row, joined in (self._units(rows, joinable, bodies, want, last)
                                if len(joinable) > 1 else zip(rows, repeat(None))):
                if row.first_seq > want:
                    self.report = self._missing(want, last, chain, offset, frames, watermark,
                                                gap=True)
                    return
                opened = joined or self._open(row, bodies.get(row.first_seq), self._checked(
                    row.first_seq, row.last_seq, want, last), remember)
                if not isinstance(opened, tuple):
                    self.report = _defect(opened.status, opened.reason, offset + opened.offset,
                                          frames, Cursor(offset + opened.offset, opened.seq,
                                                         chain or 0), watermark)
                    return
                # The row must continue the log: start at ``want`` with the chain
                # reached so far -- or, a row that begins earlier (a read from the
                # middle; rows a repack merged since the last fetch), hold at
                # ``want - 1`` a frame that carries that chain.
                if chain is not None and (
                        row.seed_chain != chain if row.first_seq == want
                        else opened[1].chain(want - 1 - row.first_seq) != chain):
                    self.report = _defect(Status.BAD_CHAIN, "a chunk row does not continue the "
                                          "chain of the rows before it", offset, frames,
                                          Cursor(offset, want, chain), watermark)
                    return
                raw, table = opened
                lo = want - row.first_seq
                hi = min(last, row.last_seq) - row.first_seq + 1
                end_chain = table.chain(hi - 1)
                end_offset = offset + table.offset(hi - 1) - table.offset(lo)
                yield raw, table, lo, hi
                frames += hi - lo
                offset += row.raw_len - table.offset(lo)
                chain = row.last_chain
                want = row.last_seq + 1
                if want > last:
                    break
            remember = False
            if ahead is not None and ahead[0][0].first_seq != want:
                ahead = None  # not the rows that follow (a defect or a gap): fetch again
        if watermark.chain is not None and last == watermark.seq and first <= last and (
                end_chain != watermark.chain):
            self.report = _defect(Status.BAD_CHAIN, "the log's chain does not reach the chain "
                                  f"recorded for seq {last} (the session head, or a fork's "
                                  "seed)", end_offset, frames - 1,
                                  Cursor(end_offset, last, end_chain or 0), watermark,
                                  head_mismatch=True)
            return
        self.report = ScanReport(Verdict.CLEAN, Status.END, offset, frames,
                                 last if last >= first else None,
                                 Cursor(offset, max(want, first), chain or 0), 0, 0, "",
                                 watermark)

    def _checked(self, lo: int, top: int, want: int, last: int) -> tuple[int, int] | None:
        """The seqs whose payloads a lean read of ``want .. last`` checks in
        the frames of seqs ``lo .. top`` (None: all of them)."""
        return ((max(want, lo), min(last, top))
                if self._lean and (want > lo or last < top) else None)

    def _units(self, rows: list[Chunk], fresh: list[Chunk], bodies: dict[int, bytes],
               want: int, last: int) -> Iterator[tuple[Chunk, tuple[Any, FrameTable] | None]]:
        """The rows of a fetch to open one by one (``(row, None)``), with each
        run of small ``fresh`` rows (not in the cache, nor to be kept in it)
        opened as one (:func:`open_run`) and given as a row spanning them with
        its opened body and table: a run after a burst of single appends costs
        about one row's opening, not one per append.  A run that does not
        open as one is opened row by row (which names the defect)."""
        small = {row.first_seq for row in fresh if row.raw_len < SMALL}
        run: list[Chunk] = []
        for row in [*rows, None]:
            if row is not None and row.first_seq in small:
                run.append(row)
                continue
            if len(run) > 1:
                first, end = run[0], run[-1]
                lo, top = first.first_seq, end.first_seq + end.n - 1
                joined = open_run(self._key, run, bodies, kernel=self._kernel,
                                  checked=self._checked(lo, top, max(want, lo), last))
                if joined is not None:
                    run = []
                    yield Chunk(lo, top - lo + 1, len(joined[0]), RAW, 0, first.seed_chain,
                                end.last_chain, b""), joined
            for alone in run:
                yield alone, None
            run = []
            if row is not None:
                yield row, None

    def _uncached(self, rows: list[Chunk]) -> list[Chunk]:
        cache = self._cache
        return rows if cache is None else cache.fresh(self._key, rows)

    def _open(self, row: Chunk, raw: bytes | None = None,
              checked: tuple[int, int] | None = None,
              remember: bool = True) -> tuple[Any, FrameTable] | ChunkDefect:
        if self._cache is not None:
            return self._cache.open(self._key, row, self._chunks, kernel=self._kernel, raw=raw,
                                    erased=self._erased, checked=checked, remember=remember)
        return open_chunk(self._key, row, self._chunks, kernel=self._kernel, raw=raw,
                          erased=self._erased, checked=checked)

    def _missing(self, want: int, last: int, chain: int | None, offset: int, frames: int,
                 watermark: Watermark, gap: bool = False) -> ScanReport:
        """The report for rows that are not there from ``want`` on."""
        where = Cursor(offset, want, chain or 0)
        stored = self._stored_max()
        if not gap and stored < want:
            return _defect(Status.TRUNCATED, f"the log ends at seq {stored} but the session "
                           f"head says {watermark.seq}", offset, frames, where, watermark,
                           head_mismatch=True)
        return _defect(Status.SEQ_MISMATCH, "seq gap: a chunk row is missing", offset, frames,
                       where, watermark)

    def events(self, first: int, last: int, start_chain: int | None, watermark: Watermark,
               want: Callable[[str], bool] | None = None, lazy: bool = False) -> Iterator[Any]:
        """Verified, decoded events; the first defect raises its typed error
        (after the events of the rows before it).  With ``want``, events whose
        type (read from the verified payload, not from any index) it rejects
        are skipped without being decoded."""
        session = self._session
        for raw, table, lo, hi in self.batches(first, last, start_chain, watermark):
            yield from decode_events(raw, table, lo, hi, self._compressor, session, want, lazy)
        report = self.report
        if report is not None and report.verdict is not Verdict.CLEAN:
            raise report.error(session)

    def verify(self, first: int, last: int, start_chain: int | None,
               watermark: Watermark) -> ScanReport:
        """Walk ``first .. last`` and report (never raise) what it found."""
        for _ in self.batches(first, last, start_chain, watermark):
            pass
        assert self.report is not None
        return self.report


def decode_events(raw: Any, table: FrameTable, lo: int, hi: int, compressor: Compressor,
                  session: str | None, want: Callable[[str], bool] | None = None,
                  lazy: bool = False) -> list[Any]:
    """The events of verified frames ``lo .. hi - 1`` of ``table`` in ``raw``,
    in one tight loop (the read path's hot spot).  Payloads compressed one by
    one, as trajlog 0.1 stored large ones, are decompressed as they come."""
    view = memoryview(raw)
    q, i32, b = table.arrays
    decode = (_LAZY if lazy else _EAGER).decode
    out: list[Any] = []
    append = out.append
    seq = q[6 * lo + 1] if lo < hi else 0
    try:
        offsets = q[6 * lo:6 * hi:6].tolist()          # one C call per row, not per frame
        sizes = i32[12 * lo + 8:12 * hi:12].tolist()
        flag_bytes = b[48 * lo + 41:48 * hi:48].tolist()
        erased = table.erased
        if want is None and erased is None and not any(flag_bytes):  # the common case
            try:
                out = [decode(view[off + HEADER_SIZE:off + HEADER_SIZE + size])
                       for off, size in zip(offsets, sizes, strict=True)]
            except msgspec.DecodeError:
                out = []   # the loop below finds which payload, and says so
            else:
                for event in out:
                    _set(event, "seq", seq)
                    seq += 1
                return out
        for off, size, flags in zip(offsets, sizes, flag_bytes, strict=True):
            p = off + HEADER_SIZE
            payload: Any = view[p:p + size]
            if erased is not None and seq in erased:
                payload = erased[seq]    # the tombstone's view of an erased event
            elif flags & FLAG_ZSTD:
                payload = compressor.decompress(payload, table.raw_len(seq - q[1]))
            if want is not None:
                kind = peek_type(payload)
                if kind is not None and not want(kind):
                    seq += 1
                    continue
            event = decode(payload)
            _set(event, "seq", seq)
            append(event)
            seq += 1
    except msgspec.DecodeError as exc:
        raise error_for(Status.BAD_FIELD, reason=f"undecodable event payload: {exc}",
                        seq=seq, session=session, corrupt=True) from exc
    return out


def decode_one(raw: Any, table: FrameTable, i: int, compressor: Compressor,
               session: str | None) -> Event:
    """The event of verified frame ``i`` (``get``'s :func:`decode_events`)."""
    if table.erased is None and not table.flags(i):
        at = table.offset(i) + HEADER_SIZE
        try:
            event: Event = _EAGER.decode(memoryview(raw)[at:at + table.stored_len(i)])
        except msgspec.DecodeError:
            pass   # decode_events says which payload, and why
        else:
            _set(event, "seq", table.seq(i))
            return event
    found: Event = decode_events(raw, table, i, i + 1, compressor, session)[0]
    return found


Batch = tuple[Any, FrameTable, int, int]


def _defect(status: int, reason: str, offset: int, frames: int, cursor: Cursor,
            watermark: Watermark, *, head_mismatch: bool = False) -> ScanReport:
    return ScanReport(Verdict.CORRUPT, Status(status), offset, frames, cursor.next_seq - 1,
                      cursor, 0, 0, reason, watermark, head_mismatch)


__all__ = ["READ_BYTES", "READ_MAX_ROWS", "READ_ROWS", "Batch", "FrameRun", "LogStream",
           "decode_events", "decode_one"]
