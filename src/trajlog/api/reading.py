"""The read path: sessions by id, and a session's log -- verified -- across
its lineage (a fork reads its parent's frames ``0 .. seed_length - 1``, then
its own; the chain passes from one into the other).

Every read goes through the one stream reader of :mod:`trajlog.codec.stream`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from itertools import zip_longest
from types import MappingProxyType
from typing import Any

from .._format import Cursor, FrameTable, Status
from ..codec import ScanReport, Verdict, Watermark
from ..codec.chunks import ChunkCache, ChunkCompressor
from ..codec.compression import Compressor
from ..codec.records import decode_metadata, header_check, open_state, seal_state
from ..codec.stream import FrameRun, LogStream, decode_events, decode_one
from ..codec.tlog import frame_bytes
from ..errors import (
    CorruptionError,
    HeadMismatchError,
    InvalidArgumentError,
    SessionNotFoundError,
    StoreDamagedError,
    head_mismatch,
    header_mismatch,
    index_mismatch,
)
from ..events import Event, SessionHeader
from ..memory.versions import erased_lookup
from ..projections.engine import StateCache
from ..storage import Backend, Head, Reader, SessionRow, Writer
from ..storage.event_index import REQUESTED, index_rows, marks_of
from .deleted import missing
from .handles import LogRef
from .range_rows import RangeRows


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :meth:`Session.verify` found: every frame and the chain checked against the head."""

    session: str
    events: int
    last_seq: int
    chain_head: int
    scan: ScanReport

    @property
    def ok(self) -> bool:
        return self.scan.verdict is Verdict.CLEAN


class LogReader:
    """Reads sessions and their logs from a backend."""

    def __init__(self, backend: Backend, compressor: Compressor) -> None:
        self._backend = backend
        self._compressor = compressor
        self._chunks = ChunkCompressor()
        self.cache = ChunkCache()
        # One worker decompresses the next rows of a long read while the
        # caller decodes these (one zstd call a fetch: the GIL is handed over
        # twice a fetch, not once a row -- opening whole rows on the worker
        # measured slower than none, 0.53x against 0.63x raw).
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="trajlog-read")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.cache.clear()

    # -- sessions -------------------------------------------------------------

    def ref_from_row(self, row: SessionRow, parent: LogRef | None = None,
                     reader: Reader | None = None) -> LogRef:
        if parent is None and row.parent_sid is not None:
            parent = self.ref_by_sid(row.parent_sid, reader)
        damage: str | None = row.damage
        try:
            metadata = decode_metadata(row.metadata)
        except CorruptionError as exc:
            metadata = {}
            damage = damage or exc.reason.replace("session metadata", "metadata")
        header = SessionHeader(row.id, row.cwd, parent.id if parent else None, row.seed_length,
                               row.origin, row.delegation_depth, row.agent_preset,
                               row.created_ms, MappingProxyType(metadata))
        if damage is None and header_check(header, row.key) != row.header_check:
            damage = "check mismatch"
        if damage is not None:
            header = dataclasses.replace(header, damage=damage)
        return LogRef(row.sid, row.key, header, parent, row.seed_chain)

    def ref_by_id(self, session_id: str, reader: Reader | None = None) -> LogRef:
        row = (reader or self._backend.reader()).session_by_id(session_id)
        if row is None:
            raise missing(reader or self._backend.reader(), session_id, self._backend.path)
        return self.ref_from_row(row, reader=reader)

    def ref_by_sid(self, sid: int, reader: Reader | None = None) -> LogRef:
        row = (reader or self._backend.reader()).session_by_sid(sid)
        if row is None:
            raise SessionNotFoundError(f"no session with internal id {sid}")
        return self.ref_from_row(row, reader=reader)

    def sessions(self, include_subagents: bool) -> list[SessionHeader]:
        reader = self._backend.reader()
        out = []
        for r in reader.sessions(include_subagents):
            try:
                out.append(self.ref_from_row(r, reader=reader).header)
            except (StoreDamagedError, CorruptionError, SessionNotFoundError) as exc:
                # its parent's header cannot be read: listed, flagged -- one
                # damaged header never stops the listing of the others
                header = self.ref_from_row(r._replace(parent_sid=None), reader=reader).header
                out.append(dataclasses.replace(
                    header, damage=f"its parent's header cannot be read ({exc})"))
        return out

    def children(self, ref: LogRef) -> list[LogRef]:
        """Sessions forked or spawned from ``ref``, oldest first."""
        return [self.ref_from_row(r, parent=ref) for r in self._backend.reader().children(ref.sid)]

    # -- the log --------------------------------------------------------------

    def head(self, ref: LogRef, reader: Reader | None = None) -> Head:
        """The session head, checked against what is stored (:meth:`_read_head`): every
        caller -- ``last_seq``, views, forks, recovery -- reads up to a head hiding nothing."""
        return self._read_head(ref, reader or self._backend.reader())

    def _read_head(self, ref: LogRef, reader: Reader) -> Head:
        """The head a read of ``ref``'s own log goes up to, checked against
        what is stored, at one instant: rows stored beyond it (a head moved
        back) or a head before the session's seed would hide acknowledged
        events, so they are corruption (:class:`HeadMismatchError`)."""
        try:
            head, stored = reader.head_stored(ref.sid)
        except HeadMismatchError as exc:
            raise _named(exc, ref) from None
        if stored > head.last_seq:
            raise head_mismatch(Status.SEQ_MISMATCH, f"rows up to seq {stored} are stored "
                                f"beyond the session head at seq {head.last_seq} (a head "
                                "moved back)",
                                seq=head.last_seq + 1, session=ref.id)
        if head.last_seq < ref.seed - 1:
            raise head_mismatch(Status.SEQ_MISMATCH, f"the session head (seq {head.last_seq}) "
                                f"is before the session's seed (seq {ref.seed - 1})",
                                seq=head.last_seq + 1, session=ref.id)
        return head

    def _stream(self, ref: LogRef, reader: Reader, *, cached: bool = True,
                rows: RangeRows | None = None) -> LogStream:
        """The stream reader of ``ref``'s rows (through ``rows``, keeping their index rows and
        marks); ``cached=False`` (verify) opens every row afresh, whatever was opened before."""
        sid = ref.sid
        return LogStream(ref.key, rows.fetch if rows is not None else
                         lambda a, b, n, size: reader.chunks(sid, a, b, n, size),
                         lambda: reader.max_seq(sid), self._compressor, self._chunks,
                         cache=self.cache if cached else None, pool=self._pool, session=ref.id,
                         erased=erased_lookup(reader, sid), lean=cached)

    def chain_at(self, ref: LogRef, seq: int, reader: Reader | None = None) -> int:
        """The chain value stored in frame ``seq`` (this log or an ancestor's),
        verified with the row that holds it."""
        if ref.header.damage is not None:
            raise header_mismatch(ref.id, ref.header.damage)
        if seq < 0:
            return ref.key
        if seq == ref.seed - 1:
            return ref.seed_chain
        if seq < ref.seed:
            assert ref.parent is not None
            return self.chain_at(ref.parent, seq, reader)
        stream = self._stream(ref, reader or self._backend.reader())
        for _raw, table, _lo, hi in stream.batches(seq, seq, None, Watermark(-1)):
            return table.chain(hi - 1)
        raise InvalidArgumentError(f"session {ref.id} has no event {seq}")

    def event_at(self, ref: LogRef, seq: int, *, prefix: bool = False,
                 heads: list[int] | None = None) -> Event | None:
        """The event at ``seq`` (None if the log has none), from its verified row: one
        statement (the head and the row -- with its body unless this process holds the row
        opened), then the row opened once or taken from the cache, and one payload decoded.
        ``prefix``: ``seq`` is in a child's inherited prefix, so it must be there whatever
        this log's head says.  ``heads`` gets the last seq of the head that statement read."""
        if ref.header.damage is not None:
            raise header_mismatch(ref.id, ref.header.damage)
        if seq < ref.seed:
            assert ref.parent is not None
            return self.event_at(ref.parent, seq, prefix=True)
        reader = self._backend.reader()
        cache, key = self.cache, ref.key
        warm = cache.holds(key, seq)
        while True:
            try:
                last, chain, row = reader.locate(ref.sid, seq, body=not warm)
            except HeadMismatchError as exc:
                raise _named(exc, ref) from None
            (heads if heads is not None else []).append(last)
            held = row is not None and row.first_seq <= seq <= row.last_seq
            if not prefix and seq > last:
                if held:
                    raise head_mismatch(Status.SEQ_MISMATCH, f"seq {seq} is stored beyond the "
                                        f"session head at seq {last}", seq=last + 1,
                                        session=ref.id)
                self._read_head(ref, reader)  # nothing else stored beyond it either
                return None
            if not held or row is None:
                break
            # Only this payload is handed out, so only its check is needed
            # (open_chunk's ``checked``: the body check covers the others).
            opened = (cache.peek(key, row, (seq, seq)) if warm else
                      cache.open(key, row, self._chunks, erased=erased_lookup(reader, ref.sid),
                                 checked=(seq, seq)))
            if opened is None:   # remembered, but not that row (repacked since) or not seq
                warm = False
                continue
            if not isinstance(opened, tuple):
                break
            raw, table = opened
            i = seq - row.first_seq
            # what the stream reader checks of a row read alone: it starts the
            # log (or the fork's own frames) with their seed chain, and the
            # head's frame carries the head's chain
            if ((row.first_seq == ref.seed and row.seed_chain != ref.seed_chain)
                    or (not prefix and seq == last and table.chain(i) != chain)):
                break
            return decode_one(raw, table, i, self._compressor, ref.id)
        # a row missing or damaged, or a chain that does not hold: the stream
        # reader reads it again and names the defect
        for found in self._events(ref, seq, seq, None, None, reader, False, prefix=prefix):
            return found  # type: ignore[no-any-return]
        return None

    def indexed(self, ref: LogRef, seq: int, type_: str | None = None,
                key: str | None = None) -> Event:
        """The event at ``seq`` that an index look-up found, checked against
        what the index said of it (its type, its idempotency key): a decision
        -- a fork's cut, a retry's de-duplication -- never rests on a copy
        alone.  A disagreement is corruption (:class:`CorruptionError`)."""
        event = self.event_at(ref, seq)
        if event is None:
            raise index_mismatch(ref.id, seq, "the log holds no such event")
        if type_ is not None and event.type != type_:
            raise index_mismatch(ref.id, seq, f"indexed as {type_!r}, the frame is "
                                 f"{event.type!r}")
        if key is not None and event.idempotency_key != key:
            raise index_mismatch(ref.id, seq, f"indexed with idempotency key {key!r}, the "
                                 f"frame has {event.idempotency_key!r}")
        return event

    def events(self, ref: LogRef, from_seq: int, to_seq: int | None,
               end_chain: tuple[int, int] | None = None,
               want: Callable[[str], bool] | None = None,
               reader: Reader | None = None, lazy: bool = False) -> Iterator[Any]:
        """Verified events ``from_seq .. to_seq`` (default: the last durable
        one).  ``end_chain = (seq, chain)`` also requires frame ``seq`` to
        carry ``chain`` (a child checking the parent frame it continues);
        ``want`` selects event types (every frame is still verified).  Nothing
        is read until the first event is asked for."""
        return _Deferred(lambda: self._events(ref, from_seq, to_seq, end_chain, want, reader,
                                              lazy))

    def tail(self, ref: LogRef, n: int) -> list[Event]:
        """The last ``n`` events, up to one head read once (events appended
        meanwhile are not the last n)."""
        if ref.header.damage is not None:
            raise header_mismatch(ref.id, ref.header.damage)
        reader = self._backend.reader()
        head = self._read_head(ref, reader)
        return list(self._events(ref, max(0, head.last_seq - n + 1), head.last_seq, None, None,
                                 reader, False, head=head))

    def _events(self, ref: LogRef, from_seq: int, to_seq: int | None,
                end_chain: tuple[int, int] | None, want: Callable[[str], bool] | None,
                reader: Reader | None, lazy: bool, *, prefix: bool = False,
                head: Head | None = None) -> Iterator[Any]:
        """(See :meth:`events`.)  ``prefix``: these are a child's inherited
        seqs, read exactly up to ``to_seq`` whatever this log's own head says
        (a parent's head moved back must not shorten its children)."""
        if ref.header.damage is not None:
            raise header_mismatch(ref.id, ref.header.damage)
        reader = reader or self._backend.reader()
        if prefix:
            assert to_seq is not None
            last_seq, chain_head = to_seq, None
        else:
            last_seq, chain_head, _ = head or self._read_head(ref, reader)
        to_seq = last_seq if to_seq is None else min(to_seq, last_seq)
        if from_seq > to_seq:
            return iter(())
        seed = ref.seed
        parts: list[Iterator[Any]] = []
        if from_seq < seed:
            assert ref.parent is not None
            stop = min(to_seq, seed - 1)
            parts.append(self._events(
                ref.parent, from_seq, stop,
                (seed - 1, ref.seed_chain) if stop == seed - 1 else end_chain, want, reader,
                lazy, prefix=True))
            from_seq = seed
            if to_seq < seed:
                return parts[0]
        mark: tuple[int, int | None] = (
            end_chain if end_chain is not None and end_chain[0] == to_seq
            else (last_seq, chain_head))
        own = self._stream(ref, reader).events(
            from_seq, to_seq, ref.seed_chain if from_seq == seed else None, Watermark(*mark),
            want, lazy)
        return itertools.chain(parts[0], own) if parts else own

    def own_runs(self, ref: LogRef) -> Iterator[FrameRun]:
        """``ref``'s own frames (seed .. head), verified against the head, run
        by run as stored (erased payloads blank), with their events decoded
        (an erased one as its tombstone's replacement) -- what an export
        writes.  A defect raises its typed error after the runs before it."""
        if ref.header.damage is not None:
            raise header_mismatch(ref.id, ref.header.damage)
        reader = self._backend.reader()
        head = self._read_head(ref, reader)
        stream = self._stream(ref, reader, cached=False)
        for raw, table, lo, hi in stream.batches(ref.seed, head.last_seq, ref.seed_chain,
                                                 Watermark(head.last_seq, head.chain)):
            events = decode_events(raw, table, lo, hi, self._compressor, ref.id)
            erased = {s: p for s, p in (table.erased or {}).items()
                      if table.seq(lo) <= s <= table.seq(hi - 1)}
            yield FrameRun(bytes(frame_bytes(raw, table, lo, hi)), table.seq(lo), events,
                           [table[i] for i in range(lo, hi)], erased)
        report = stream.report
        if report is not None and report.verdict is not Verdict.CLEAN:
            raise report.error(ref.id)

    def verify(self, ref: LogRef, feed: Feed | None = None,
               reader: Reader | None = None) -> VerifyReport:
        """Every row and frame, the whole chain (ancestors' prefixes included)
        against the session head, the rows stored beyond it, and every index
        row and mark against its frame -- in one snapshot; reports, never
        raises for a defect in the log.  ``feed(events)`` is given the
        verified events, batch by batch, oldest first (recovery analyses the
        log in the same pass, so ``load`` refuses exactly what ``verify``
        reports)."""
        if reader is None:
            with self._backend.snapshot() as snap:
                return self.verify(ref, feed, snap)
        try:
            last_seq, chain_head, _ = reader.head(ref.sid)
        except HeadMismatchError as exc:
            return VerifyReport(ref.id, 0, -1, 0, defect_report(
                Status.TRUNCATED, exc.reason, ref.seed, head_mismatch=True))
        except CorruptionError as exc:  # (a head row that cannot be read)
            return VerifyReport(ref.id, 0, -1, 0, defect_report(exc.status, exc.reason,
                                                                ref.seed, head_mismatch=True))
        if last_seq < ref.seed - 1:
            return VerifyReport(ref.id, 0, last_seq, chain_head, defect_report(
                Status.SEQ_MISMATCH, f"the session head (seq {last_seq}) is before the "
                f"session's seed (seq {ref.seed - 1})", last_seq + 1, head_mismatch=True))
        try:
            where, report = self._verify_upto(ref, last_seq, chain_head, reader, feed,
                                              at_head=True)
        except CorruptionError as exc:
            # rows storage could not even read (damaged types or text): reported
            where, report = exc.session or ref.id, defect_report(
                exc.status, exc.reason, ref.seed if exc.seq is None else exc.seq,
                exc.offset or 0)
        return VerifyReport(where, report.cursor.next_seq, last_seq, chain_head, report)

    def _verify_upto(self, ref: LogRef, upto: int, expect_chain: int | None,
                     reader: Reader, feed: Feed | None, *,
                     at_head: bool = False) -> tuple[str, ScanReport]:
        """Verify frames 0..upto of ``ref`` (ancestors' included) and, when
        given, that frame ``upto`` carries ``expect_chain``; ``at_head``: upto
        is the session head, so nothing may be stored beyond it."""
        row = reader.session_by_sid(ref.sid)
        damage = ref.header.damage
        if row is None:
            damage = "the session header row is gone"
        elif damage is None:
            stored = self.ref_from_row(row, parent=ref.parent, reader=reader)
            damage = stored.header.damage
            if damage is None and (stored.header != ref.header or stored.key != ref.key):
                damage = "the session header changed since this handle was made"
        if damage is not None:
            return ref.id, defect_report(Status.BAD_HEADER, f"session header: {damage}",
                                         ref.seed)
        assert row is not None
        seed = ref.seed
        if seed and ref.parent is not None:
            parent_upto = min(upto, seed - 1)
            where, report = self._verify_upto(
                ref.parent, parent_upto,
                row.seed_chain if parent_upto == seed - 1 else expect_chain, reader, feed)
            if (report.verdict is not Verdict.CLEAN and report.head_mismatch
                    and parent_upto == seed - 1 and where == ref.parent.id):
                # The parent's frame seed-1 does not carry this fork's seed
                # chain: the parent's own log, or this fork's record of it?
                _, alone = self._verify_upto(ref.parent, parent_upto, None, reader, None)
                if alone.verdict is Verdict.CLEAN:
                    return ref.id, defect_report(
                        Status.BAD_CHAIN, "the fork's recorded seed chain is not the chain "
                        f"of its parent's frame {seed - 1}", seed)
            if report.verdict is not Verdict.CLEAN or upto < seed:
                return where if report.verdict is not Verdict.CLEAN else ref.id, report
        rows = RangeRows(reader, ref.sid)
        stream = self._stream(ref, reader, cached=False, rows=rows)
        watermark = Watermark(upto, expect_chain)
        found: ScanReport | None = None
        last, base, frames = seed - 1, 0, 0
        calls = [0]   # first requests of call ids seen: the session's call rows
        for raw, table, lo, hi in stream.batches(seed, upto, row.seed_chain, watermark):
            events = decode_events(raw, table, lo, hi, self._compressor, ref.id)
            def offset_of(seq: int, t: FrameTable = table, lo: int = lo, at: int = base) -> int:
                return at + t.offset(seq - t.seq(lo) + lo) - t.offset(lo)

            found = self._check_index(ref, reader, rows, events, table, lo, hi, last, offset_of,
                                      frames, calls)
            if found is not None:
                break
            if feed is not None:
                feed(events)
            last = table.seq(hi - 1)
            base += len(raw) - table.offset(lo)
            frames += hi - lo
        final = found or stream.report
        assert final is not None
        report = final
        if report.verdict is Verdict.CLEAN and at_head:
            beyond = reader.max_seq(ref.sid)
            if beyond > upto:
                report = defect_report(Status.SEQ_MISMATCH, f"rows up to seq {beyond} are "
                                       f"stored beyond the session head at seq {upto}",
                                       upto + 1, report.valid_len, report.frames,
                                       head_mismatch=True)
            elif extra := reader.index_rows(ref.sid, upto, self._backend.max_session_seq):
                report = defect_report(Status.BAD_FIELD, f"an index row names seq "
                                       f"{extra[0].seq}, beyond the log", extra[0].seq,
                                       report.valid_len, report.frames)
            elif (stored_calls := reader.call_count(ref.sid)) != calls[0]:
                report = defect_report(Status.BAD_FIELD, f"the session has {stored_calls} "
                                       f"call rows; its log requests {calls[0]} call ids",
                                       upto, report.valid_len, report.frames)
        return ref.id, report

    def _check_index(self, ref: LogRef, reader: Reader, kept: RangeRows, events: list[Event],
                     table: FrameTable, lo: int, hi: int, after: int, offset_of: Callable[[int],
                     int], frames: int, calls: list[int]) -> ScanReport | None:
        """Every index row, mark and call row of these frames' seqs against the frames
        themselves; a defect names the seq and the offset of its frame.  ``calls[0]``
        counts the first requests of call ids seen."""
        first, last = table.seq(lo), table.seq(hi - 1)

        def defect(seq: int, reason: str) -> ScanReport:
            # (a damaged index b-tree can hand out a key outside the range
            # asked for: its defect is then placed at these frames' first)
            at = seq if first <= seq <= last else first
            return defect_report(Status.BAD_FIELD, reason, seq, offset_of(at),
                                 frames + at - first)

        expected = index_rows(events, first)
        marks = marks_of(events, first)
        try:
            stored, stored_marks = kept.index_rows(after, last), kept.marks(first, last)
        except CorruptionError as exc:  # (rows that cannot be read: reported, not raised)
            return defect(first, f"the index rows or marks of seqs {first}..{last} cannot be "
                          f"read: {exc.reason}")
        if marks != stored_marks:
            differ = [min(a.seq, b.seq) for a, b in zip(marks, stored_marks, strict=False)
                      if a != b]   # (the lower: a mark added before a true one, or missing)
            seq = differ[0] if differ else (marks or stored_marks)[
                min(len(marks), len(stored_marks))].seq
            return defect(seq, f"the marks of seq {seq} differ from its frame")
        try:
            asked = [m for m in marks if m.code == REQUESTED and m.call_id is not None]
            rows = kept.calls_requested([m.call_id for m in asked if m.call_id is not None])
            for m in asked:
                if m.call_id is not None:
                    at = rows.get(m.call_id)
                    if at == m.seq:
                        calls[0] += 1
                    elif at is None or at > m.seq:   # (an earlier request of the id: its row)
                        return defect(m.seq, f"the call row of {m.call_id!r} requested at "
                                      f"seq {m.seq} is {'missing' if at is None else at}")
        except CorruptionError as exc:
            return defect(first, f"the call rows of seqs {first}..{last} cannot be read: "
                          f"{exc.reason}")
        if expected == stored:
            return None
        for want, got in zip_longest(expected, stored):
            if want != got:
                seq = min(x.seq for x in (want, got) if x is not None)
                what = ("missing" if got is None or (want is not None and want.seq < got.seq)
                        else "without an indexed event" if want is None or got.seq < want.seq
                        else "different from its frame")
                return defect(seq, f"the index row of seq {seq} is {what}")
        return None  # pragma: no cover - the lists differ, so some pair does


# verify()'s feed: the verified events of one batch, oldest first
Feed = Callable[[list[Event]], None]


def defect_report(status: int, reason: str, seq: int, offset: int = 0, frames: int = 0, *,
                  head_mismatch: bool = False) -> ScanReport:
    """A corrupt verdict at ``seq``, whose frame is at ``offset`` (after
    ``frames`` good ones)."""
    return ScanReport(Verdict.CORRUPT, Status(status), offset, frames, seq - 1,
                      Cursor(offset, seq, 0), 0, 0, reason, None, head_mismatch)


def _named(exc: HeadMismatchError, ref: LogRef) -> HeadMismatchError:
    """A head error from storage, naming the session."""
    return head_mismatch(exc.status, exc.reason, seq=exc.seq, session=ref.id,
                         offset=exc.offset)


class _Deferred:
    """An iterator that starts its source on the first ``next()`` -- a read
    begins when the caller starts iterating, in the caller's thread, as a
    generator would -- and then hands out the source's items directly."""

    __slots__ = ("_it", "_make")

    def __init__(self, make: Callable[[], Iterator[Any]]) -> None:
        self._make: Callable[[], Iterator[Any]] | None = make
        self._it: Iterator[Any] | None = None

    def __iter__(self) -> Iterator[Any]:
        if self._it is None:
            assert self._make is not None
            self._it, self._make = self._make(), None
        return self._it

    def __next__(self) -> Any:
        return next(iter(self) if self._it is None else self._it)


class SessionFolds:
    """The projection engine's view of one session (a
    :class:`~trajlog.projections.engine.FoldSource`)."""

    def __init__(self, reader: LogReader, backend: Backend,
                 transaction: Callable[[], AbstractContextManager[Writer]], ref: LogRef,
                 cache: StateCache) -> None:
        self._reader = reader
        self._backend = backend
        self._transaction = transaction
        self._ref = ref
        self._cache = cache

    @property
    def cache_key(self) -> Any:
        # With the store's tombstone count: a state folded before an erasure
        # (by this store or any other connection) holds the erased payload,
        # and its chain position cannot tell -- the chain covers the payload
        # check, which an erasure keeps.
        return self._ref.sid, self._backend.reader().max_tid()

    @property
    def cache(self) -> StateCache:
        return self._cache

    def position(self) -> tuple[int, int]:
        head = self._reader.head(self._ref)
        return head.last_seq, head.chain

    def chain_at(self, seq: int) -> int:
        return self._reader.chain_at(self._ref, seq)

    def events(self, first: int, last: int,
               want: Callable[[str], bool] | None) -> Iterator[Event]:
        return self._reader.events(self._ref, first, last, None, want)

    def saved_state(self, name: str, version: int) -> tuple[int, int, bytes] | None:
        """The saved state, if its check holds (a damaged one is rebuilt)."""
        row = self._backend.reader().projection_state(self._ref.sid, name, version)
        if row is None:
            return None
        seq, chain, blob = row
        state = open_state(self._ref.key, name, version, seq, chain, blob)
        return None if state is None else (seq, chain, state)

    def save_state(self, name: str, version: int, seq: int, chain: int, state: bytes) -> None:
        sealed = seal_state(self._ref.key, name, version, seq, chain, state)
        with self._transaction() as tx:
            tx.save_projection_state(self._ref.sid, name, version, seq, chain, sealed)

    def drop_states(self) -> None:
        with self._transaction() as tx:
            tx.drop_projection_states(self._ref.sid)


__all__ = ["FrameRun", "LogReader", "SessionFolds", "VerifyReport"]
