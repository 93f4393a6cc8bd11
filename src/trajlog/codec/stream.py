"""The one verified stream reader: a session's stored frames, batch by batch.

Everything that reads a log -- ``events()``, ``verify()``, recovery and the
projections -- reads it through :class:`LogStream`.  The caller supplies the
stored rows (``fetch(first, last)`` returns the frames of seqs ``first ..
last`` in order, missing rows simply absent); the stream verifies each batch
as a whole -- every check, the chain continuing from the previous batch --
before any of its frames is handed out, and stops at the first defect with a
:class:`~trajlog.codec.ScanReport` that says where (offsets count from the
start of the stream) and why.  Everything stored is durable, so a defect is
always corruption: a torn-looking frame inside committed rows is not a torn
write.

:meth:`LogStream.events` decodes the verified frames into events and raises
the defect's typed error; :meth:`LogStream.verify` only reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .._format import FLAG_ZSTD, Cursor, FrameHeader, Kernel, Status
from ..events import Event, peek_type
from .compression import Compressor
from .frames import ScanReport, Verdict, Watermark, _kernel, scan
from .records import decode_payload

READ_BATCH = 512  # rows per fetch: bounded memory whatever the log's length

Fetch = Callable[[int, int], list[bytes]]


class LogStream:
    """Verified reading of one session's own frames (see the module docstring).

    ``stored_max()`` returns the highest seq stored for the session; it is
    asked only when rows are missing, to tell a log that ends early (the
    session head is ahead of it) from a gap inside it.
    """

    def __init__(self, key: int, fetch: Fetch, stored_max: Callable[[], int],
                 compressor: Compressor, *, session: str | None = None,
                 kernel: Kernel | None = None) -> None:
        self._key = key
        self._fetch = fetch
        self._stored_max = stored_max
        self._compressor = compressor
        self._session = session
        self._kernel = _kernel(kernel)
        self.report: ScanReport | None = None  # set when a walk ends: clean, or the defect

    def batches(self, cursor: Cursor, last: int, watermark: Watermark,
                batch: int = READ_BATCH) -> Iterator[tuple[memoryview, list[FrameHeader]]]:
        """Verified batches ``(buffer, headers)`` of seqs ``cursor.next_seq .. last``.

        ``watermark`` names the session head; when it names a chain and
        ``last`` is its seq, frame ``last`` must carry that chain.  At the end,
        ``self.report`` says clean or names the defect (the defective batch
        is not yielded)."""
        k, key = self._kernel, self._key
        seq, chain, offset, frames = cursor.next_seq, cursor.chain, 0, 0
        while seq <= last:
            upto = min(last, seq + batch - 1)
            rows = self._fetch(seq, upto)
            buf = b"".join(rows)
            start = Cursor(0, seq, chain)
            status, headers, end, _ = k.scan(buf, key, start, len(rows), True)
            if status in (Status.END, Status.MORE) and len(headers) == upto - seq + 1:
                yield memoryview(buf), headers
                seq, chain = upto + 1, end.chain
                offset += len(buf)
                frames += len(headers)
                continue
            self.report = self._defect(buf, start, status, end, len(headers), len(rows), upto,
                                       watermark, offset, frames)
            return
        end_cursor = Cursor(offset, seq, chain)
        if watermark.chain is not None and last == watermark.seq and chain != watermark.chain:
            self.report = ScanReport(
                Verdict.CORRUPT, Status.BAD_CHAIN, offset, frames, last, end_cursor, 0, 0,
                f"the log's chain does not reach the chain recorded for seq {last} (the "
                "session head, or a fork's seed)", watermark, head_mismatch=True)
            # A chain mismatch is reported at the frame that should carry it.
            self.report = _at(self.report, Cursor(offset, last, chain))
            return
        self.report = ScanReport(Verdict.CLEAN, Status.END, offset, frames,
                                 seq - 1 if seq > 0 else None, end_cursor, 0, 0, "", watermark)

    def _defect(self, buf: bytes, start: Cursor, status: int, end: Cursor, verified: int,
                rows: int, upto: int, watermark: Watermark, offset: int,
                frames: int) -> ScanReport:
        """The report for a batch that did not verify as a whole."""
        where = Cursor(end.offset + offset, end.next_seq, end.chain)
        if status not in (Status.END, Status.MORE):
            found = scan(buf, self._key, start, watermark=upto, kernel=self._kernel)
            return ScanReport(Verdict.CORRUPT, Status(status), where.offset, frames + verified,
                              where.next_seq - 1, where, len(buf) - end.offset, found.hints,
                              found.reason or self._kernel.strerror(status), watermark)
        stored = self._stored_max()
        if stored < upto and verified == rows:
            return ScanReport(
                Verdict.CORRUPT, Status.TRUNCATED, where.offset, frames + verified,
                where.next_seq - 1, where, 0, 0, f"the log ends at seq {stored} but the "
                f"session head says {watermark.seq}", watermark, head_mismatch=True)
        return ScanReport(Verdict.CORRUPT, Status.SEQ_MISMATCH, where.offset, frames + verified,
                          where.next_seq - 1, where, len(buf) - end.offset, 0,
                          "seq gap: an event row is missing", watermark)

    def events(self, cursor: Cursor, last: int, watermark: Watermark,
               want: Callable[[str], bool] | None = None) -> Iterator[Event]:
        """Verified, decoded events; the first defect raises its typed error
        (after the events of the batches before it).  With ``want``, events
        whose type (read from the verified payload, not from any index) it
        rejects are skipped without being decoded."""
        decompress_many = self._compressor.decompress_many
        session = self._session
        for view, headers in self.batches(cursor, last, watermark):
            packed = [i for i, h in enumerate(headers) if h.flags & FLAG_ZSTD]
            unpacked: dict[int, Any] = dict(zip(packed, decompress_many(
                [view[headers[i].payload_offset:headers[i].payload_offset
                      + headers[i].stored_len] for i in packed],
                [headers[i].raw_len for i in packed]), strict=True)) if packed else {}
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
        report = self.report
        if report is not None and report.verdict is not Verdict.CLEAN:
            raise report.error(session)

    def verify(self, cursor: Cursor, last: int, watermark: Watermark) -> ScanReport:
        """Walk ``cursor.next_seq .. last`` and report (never raise) what it found."""
        for _ in self.batches(cursor, last, watermark, batch=4 * READ_BATCH):
            pass
        assert self.report is not None
        return self.report


def _at(report: ScanReport, cursor: Cursor) -> ScanReport:
    return ScanReport(report.verdict, report.status, report.valid_len, report.frames,
                      report.last_seq, cursor, report.torn_bytes, report.hints, report.reason,
                      report.watermark, report.head_mismatch)


def shifted(report: ScanReport, offset: int) -> ScanReport:
    """``report`` with its offsets counted from ``offset`` bytes earlier."""
    if not offset:
        return report
    cur = report.cursor
    return ScanReport(report.verdict, report.status, report.valid_len + offset, report.frames,
                      report.last_seq, Cursor(cur.offset + offset, cur.next_seq, cur.chain),
                      report.torn_bytes, report.hints, report.reason, report.watermark,
                      report.head_mismatch)


__all__ = ["READ_BATCH", "LogStream", "shifted"]
