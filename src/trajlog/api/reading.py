"""The read path: sessions by id, and a session's log -- verified -- across
its lineage (a fork reads its parent's frames ``0 .. seed_length - 1``, then
its own; the chain passes from one into the other).

Every read goes through the one stream reader of :mod:`trajlog.codec.stream`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .._format import Cursor
from ..codec import ScanReport, Verdict, Watermark
from ..codec.compression import Compressor
from ..codec.records import decode_frame, decode_metadata, frame_chain, header_check
from ..codec.stream import LogStream
from ..errors import InvalidArgumentError, SessionNotFoundError, header_mismatch
from ..events import Event, SessionHeader
from ..projections.engine import StateCache
from ..storage import Backend, Head, Reader, SessionRow, Writer
from .handles import LogRef


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :meth:`Session.verify` found: every frame and the chain checked
    against the session head (the durable watermark)."""

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

    # -- sessions -------------------------------------------------------------

    def ref_from_row(self, row: SessionRow, parent: LogRef | None = None,
                     reader: Reader | None = None) -> LogRef:
        if parent is None and row.parent_sid is not None:
            parent = self.ref_by_sid(row.parent_sid, reader)
        header = SessionHeader(row.id, row.cwd, parent.id if parent else None, row.seed_length,
                               row.origin, row.delegation_depth, row.agent_preset,
                               row.created_ms, MappingProxyType(decode_metadata(row.metadata)))
        return LogRef(row.sid, row.key, header, parent, row.seed_chain)

    def ref_by_id(self, session_id: str, reader: Reader | None = None) -> LogRef:
        row = (reader or self._backend.reader()).session_by_id(session_id)
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r} in {self._backend.path}")
        return self.ref_from_row(row, reader=reader)

    def ref_by_sid(self, sid: int, reader: Reader | None = None) -> LogRef:
        row = (reader or self._backend.reader()).session_by_sid(sid)
        if row is None:
            raise SessionNotFoundError(f"no session with internal id {sid}")
        return self.ref_from_row(row, reader=reader)

    def sessions(self, include_subagents: bool) -> list[SessionHeader]:
        reader = self._backend.reader()
        return [self.ref_from_row(r, reader=reader).header
                for r in reader.sessions(include_subagents)]

    def children(self, ref: LogRef) -> list[LogRef]:
        """Sessions forked or spawned from ``ref``, oldest first."""
        return [self.ref_from_row(r, parent=ref) for r in self._backend.reader().children(ref.sid)]

    # -- the log --------------------------------------------------------------

    def head(self, ref: LogRef, reader: Reader | None = None) -> Head:
        return (reader or self._backend.reader()).head(ref.sid)

    def chain_at(self, ref: LogRef, seq: int, reader: Reader | None = None) -> int:
        """The chain value stored in frame ``seq`` (this log or an ancestor's)."""
        if seq < 0:
            return ref.key
        if seq == ref.seed - 1:
            return ref.seed_chain
        if seq < ref.seed:
            assert ref.parent is not None
            return self.chain_at(ref.parent, seq, reader)
        rows = (reader or self._backend.reader()).frames(ref.sid, seq, seq)
        if not rows:
            raise InvalidArgumentError(f"session {ref.id} has no event {seq}")
        return frame_chain(rows[0])

    def decode(self, ref: LogRef, frame: bytes, seq: int) -> Event:
        """One stored frame as an Event (verification done elsewhere, or not needed)."""
        return decode_frame(frame, seq, self._compressor, session=ref.id)

    def _stream(self, ref: LogRef, reader: Reader) -> LogStream:
        sid = ref.sid
        return LogStream(ref.key, lambda a, b: reader.frames(sid, a, b),
                         lambda: reader.max_seq(sid), self._compressor, session=ref.id)

    def events(self, ref: LogRef, from_seq: int, to_seq: int | None,
               end_chain: tuple[int, int] | None = None,
               want: Callable[[str], bool] | None = None,
               reader: Reader | None = None) -> Iterator[Event]:
        """Verified events ``from_seq .. to_seq`` (default: the last durable
        one).  ``end_chain = (seq, chain)`` also requires frame ``seq`` to
        carry ``chain`` (a child checking the parent frame it continues);
        ``want`` selects event types (every frame is still verified)."""
        reader = reader or self._backend.reader()
        last_seq, chain_head, _ = reader.head(ref.sid)
        to_seq = last_seq if to_seq is None else min(to_seq, last_seq)
        if from_seq > to_seq:
            return
        seed = ref.seed
        if from_seq < seed:
            assert ref.parent is not None
            stop = min(to_seq, seed - 1)
            yield from self.events(ref.parent, from_seq, stop,
                                   (seed - 1, ref.seed_chain) if stop == seed - 1 else end_chain,
                                   want, reader)
            from_seq = seed
            if to_seq < seed:
                return
        chain = self.chain_at(ref, from_seq - 1, reader)
        mark = end_chain if end_chain is not None and end_chain[0] == to_seq else (
            last_seq, chain_head)
        yield from self._stream(ref, reader).events(Cursor(0, from_seq, chain), to_seq,
                                                    Watermark(*mark), want)

    def verify(self, ref: LogRef) -> VerifyReport:
        """Every frame and the whole chain (ancestors' prefixes included),
        against the session head, in one snapshot; reports, never raises for
        a defect in the log."""
        with self._backend.snapshot() as reader:
            last_seq, chain_head, _ = reader.head(ref.sid)
            where, report = self._verify_upto(ref, last_seq, chain_head, reader)
        return VerifyReport(where, report.cursor.next_seq, last_seq, chain_head, report)

    def _verify_upto(self, ref: LogRef, upto: int, expect_chain: int | None,
                     reader: Reader) -> tuple[str, ScanReport]:
        """Verify frames 0..upto of ``ref`` (ancestors' included) and, when
        given, that frame ``upto`` carries ``expect_chain``."""
        row = reader.session_by_sid(ref.sid)
        if row is None or header_check(ref.header, ref.key) != row.header_check:
            raise header_mismatch(ref.id)
        seed = ref.seed
        if seed and ref.parent is not None:
            parent_upto = min(upto, seed - 1)
            where, report = self._verify_upto(
                ref.parent, parent_upto,
                row.seed_chain if parent_upto == seed - 1 else expect_chain, reader)
            if report.verdict is not Verdict.CLEAN or upto < seed:
                return where if report.verdict is not Verdict.CLEAN else ref.id, report
        report = self._stream(ref, reader).verify(Cursor(0, seed, row.seed_chain), upto,
                                                  Watermark(upto, expect_chain))
        return ref.id, report


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
        return self._ref.sid

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
        return self._backend.reader().projection_state(self._ref.sid, name, version)

    def save_state(self, name: str, version: int, seq: int, chain: int, state: bytes) -> None:
        with self._transaction() as tx:
            tx.save_projection_state(self._ref.sid, name, version, seq, chain, state)

    def drop_states(self) -> None:
        with self._transaction() as tx:
            tx.drop_projection_states(self._ref.sid)


__all__ = ["LogReader", "SessionFolds", "VerifyReport"]
