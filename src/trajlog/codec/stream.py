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
from typing import Any

from .._format import FLAG_ZSTD, Cursor, FrameHeader, Kernel, Status
from ..events import Event, peek_type
from .chunks import Chunk, ChunkCache, ChunkCompressor, open_chunk
from .compression import Compressor
from .frames import ScanReport, Verdict, Watermark, _kernel
from .records import decode_payload

READ_ROWS = 16  # chunk rows per fetch (~1 MiB raw at the cap): bounded memory

# fetch(first, last): at most READ_ROWS rows holding first..last, from the one holding first
Fetch = Callable[[int, int], list[Chunk]]


class LogStream:
    """Verified reading of one session's own rows (see the module docstring).

    ``stored_max()`` returns the highest seq stored for the session; it is
    asked only when rows are missing at the end, to tell a log that ends early
    (the session head is ahead of it) from a gap inside it.
    """

    def __init__(self, key: int, fetch: Fetch, stored_max: Callable[[], int],
                 compressor: Compressor, chunks: ChunkCompressor, *,
                 cache: ChunkCache | None = None, session: str | None = None,
                 kernel: Kernel | None = None) -> None:
        self._key = key
        self._fetch = fetch
        self._stored_max = stored_max
        self._compressor = compressor
        self._chunks = chunks
        self._cache = cache
        self._session = session
        self._kernel = _kernel(kernel)
        self.report: ScanReport | None = None  # set when a walk ends: clean, or the defect

    def batches(self, first: int, last: int, start_chain: int | None,
                watermark: Watermark) -> Iterator[tuple[Any, list[FrameHeader]]]:
        """Verified ``(raw body, headers)`` per row, the headers cut to seqs
        ``first .. last``.

        ``start_chain`` is the chain before ``first`` when the caller knows it
        (the start of a log or of a fork's own frames): the row holding
        ``first`` must then start there with that chain.  Else the first row
        is trusted to begin where its own row says (a read from the middle).
        When ``watermark`` names a chain and ``last`` is its seq, frame
        ``last`` must carry it.  At the end ``self.report`` says clean or names
        the defect (the defective row is not yielded)."""
        key, opener = self._key, self._chunks
        want, chain, offset, frames = first, start_chain, 0, 0
        end_chain: int | None = None
        while want <= last:
            rows = self._fetch(want, last)
            if not rows:
                self.report = self._missing(want, last, chain, offset, frames, watermark)
                return
            rows = [row for row in rows if row.last_seq >= want]  # a row already read
            if not rows:
                self.report = self._missing(want, last, chain, offset, frames, watermark)
                return
            for row in rows:
                if row.first_seq > want:
                    self.report = self._missing(want, last, chain, offset, frames, watermark,
                                                gap=True)
                    return
                if frames and row.first_seq != want:
                    self.report = _defect(Status.SEQ_MISMATCH, "chunk rows overlap", offset,
                                          frames, Cursor(offset, want, chain or 0), watermark)
                    return
                if chain is not None and (row.first_seq != want or row.seed_chain != chain):
                    reason = ("a chunk row does not start where the log continues"
                              if row.first_seq != want else
                              "a chunk row's seed chain does not continue the previous row")
                    self.report = _defect(Status.BAD_CHAIN if row.first_seq == want
                                          else Status.SEQ_MISMATCH, reason, offset, frames,
                                          Cursor(offset, want, chain), watermark)
                    return
                opened = (self._cache.open(key, row, opener, kernel=self._kernel)
                          if self._cache is not None else
                          open_chunk(key, row, opener, kernel=self._kernel))
                if not isinstance(opened, tuple):
                    self.report = _defect(opened.status, opened.reason, offset + opened.offset,
                                          frames, Cursor(offset + opened.offset, opened.seq,
                                                         chain or 0), watermark)
                    return
                raw, headers = opened
                lo = want - row.first_seq
                hi = min(last, row.last_seq) - row.first_seq + 1
                part = headers[lo:hi] if lo or hi != len(headers) else headers
                end_chain = part[-1].chain if part else end_chain
                yield raw, part
                frames += len(part)
                offset += row.raw_len
                chain = row.last_chain
                want = row.last_seq + 1
                if want > last:
                    break
        if watermark.chain is not None and last == watermark.seq and first <= last and (
                end_chain != watermark.chain):
            self.report = _defect(Status.BAD_CHAIN, "the log's chain does not reach the chain "
                                  f"recorded for seq {last} (the session head, or a fork's "
                                  "seed)", offset, frames, Cursor(offset, last, end_chain or 0),
                                  watermark, head_mismatch=True)
            return
        self.report = ScanReport(Verdict.CLEAN, Status.END, offset, frames,
                                 last if last >= first else None,
                                 Cursor(offset, max(want, first), chain or 0), 0, 0, "",
                                 watermark)

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
               want: Callable[[str], bool] | None = None) -> Iterator[Event]:
        """Verified, decoded events; the first defect raises its typed error
        (after the events of the rows before it).  With ``want``, events whose
        type (read from the verified payload, not from any index) it rejects
        are skipped without being decoded."""
        session = self._session
        for raw, headers in self.batches(first, last, start_chain, watermark):
            yield from decode_events(raw, headers, self._compressor, session, want)
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


def decode_events(raw: Any, headers: list[FrameHeader], compressor: Compressor,
                  session: str | None,
                  want: Callable[[str], bool] | None = None) -> Iterator[Event]:
    """The events of verified frames in ``raw`` (payloads compressed one by one,
    as trajlog 0.1 stored large ones, are decompressed together)."""
    view = memoryview(raw)
    packed = [i for i, h in enumerate(headers) if h.flags & FLAG_ZSTD]
    unpacked: dict[int, Any] = dict(zip(packed, compressor.decompress_many(
        [view[headers[i].payload_offset:headers[i].payload_offset + headers[i].stored_len]
         for i in packed], [headers[i].raw_len for i in packed]), strict=True)) if packed else {}
    for i, h in enumerate(headers):
        if h.flags & FLAG_ZSTD:
            payload: Any = unpacked[i]
        else:
            p = h.payload_offset
            payload = view[p:p + h.stored_len]
        if want is not None:
            kind = peek_type(payload)
            if kind is not None and not want(kind):
                continue
        yield decode_payload(payload, h.seq, session)


def _defect(status: int, reason: str, offset: int, frames: int, cursor: Cursor,
            watermark: Watermark, *, head_mismatch: bool = False) -> ScanReport:
    return ScanReport(Verdict.CORRUPT, Status(status), offset, frames, cursor.next_seq - 1,
                      cursor, 0, 0, reason, watermark, head_mismatch)


__all__ = ["READ_ROWS", "LogStream", "decode_events"]
