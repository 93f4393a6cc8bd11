"""Recovery glue: ``Session.inspect()`` and ``Store.load()`` over the pure
rules of :mod:`trajlog.recovery`.

One verified pass over the log (in one snapshot) finds what is open; a log
that cannot be trusted, or whose writer is still live with the log open, is
refused with a typed error; otherwise the closers are computed and -- for
``load`` -- appended in one transaction, only if the log still ends where the
analysis ended (a writer that slipped in means analysing again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..errors import (
    CorruptionError,
    InvalidStateError,
    LiveWriterError,
    LogMovedError,
    UnbalancedLogError,
    UnsupportedFormatError,
    header_mismatch,
)
from ..events import Event, now_ms, with_seq
from ..recovery import RECOVERY_SOURCE, OpenState, RecoveryReport, closers
from ..storage import Backend
from . import checks
from .handles import LogRef
from .reading import LogReader
from .writer import WriteEngine

_ATTEMPTS = 3      # analyses of a log that keeps moving before load gives up


class BalancedView:
    """A session's log followed by the closers recovery would append: what a
    reader may treat as the session after a crash, computed without writing.
    Iterating streams the log (verified) and then the closers."""

    def __init__(self, log: Callable[[int, int], Iterator[Event]], last_seq: int,
                 closers: tuple[Event, ...]) -> None:
        self._log = log
        self.last_seq = last_seq
        self.closers = closers

    def events(self) -> Iterator[Event]:
        yield from self._log(0, self.last_seq)
        yield from self.closers

    def __iter__(self) -> Iterator[Event]:
        return self.events()


class Recovery:
    """inspect / load for one store."""

    def __init__(self, backend: Backend, reading: LogReader, writer: WriteEngine) -> None:
        self._backend = backend
        self._reading = reading
        self._writer = writer

    def _analyze(self, ref: LogRef) -> tuple[OpenState, list[tuple[int, int]], int,
                                             BaseException | None]:
        """One verified pass over the log, in one snapshot -- exactly
        :meth:`Session.verify`'s, so that load refuses what verify reports --
        giving its open state, its compactions, the head's last seq, and the
        refusal if the log cannot be trusted (nothing raised)."""
        state = OpenState()
        compactions: list[tuple[int, int]] = []

        def feed(events: list[Event]) -> None:
            for ev in events:
                state.feed(ev)
                found = checks.applied_range(ev.type, ev.data)
                if found is not None:
                    compactions.append(found)

        if ref.header.damage is not None:
            return state, compactions, -1, header_mismatch(ref.id, ref.header.damage)
        try:
            report = self._reading.verify(ref, feed)
        except (CorruptionError, UnsupportedFormatError) as exc:
            return state, compactions, -1, exc
        if not report.ok:
            return state, compactions, report.last_seq, report.scan.error(report.session)
        if state.defect is not None:
            seq, reason = state.defect
            return state, compactions, report.last_seq, UnbalancedLogError(
                f"{reason}: the log's turn and step markers do not nest, so recovery cannot "
                "tell what is open", session=ref.id, seq=seq)
        return state, compactions, report.last_seq, None

    def _live_refusal(self, ref: LogRef, state: OpenState,
                      last_seq: int) -> LiveWriterError | bool:
        """The refusal if a live writer holds the open log; False if none
        does; True if the log moved since it was analysed (the lease and the
        head are read together: a writer that closed its turn and let go of
        the lease after the analysis must not make its turn look abandoned)."""
        leases = self._writer.leases
        head = self._reading.head(ref)
        if head.last_seq != last_seq:
            return True
        lease = head.lease
        # This store's own lease is live too while one of its lease blocks is
        # open: a turn it is still writing must not be closed under it.  (A
        # lease taken for a raw turn/start keeps other stores and processes
        # out; this store's own load() is its caller's decision.)
        mine = lease.owner == leases.writer_id and leases.in_block(ref.sid)
        if not mine and not leases.foreign_live(lease):
            return False
        open_at = state.turn_start if state.turn_start is not None else last_seq
        return LiveWriterError(f"writer {lease.owner} (pid {lease.pid} on {lease.host}) is "
                               "live and the log is open: recovery would race it",
                               session=ref.id, seq=open_at)

    def recover(self, ref: LogRef, repair: bool) -> tuple[BalancedView, RecoveryReport]:
        """The balanced view and the report; with ``repair``, the closers written."""
        log = lambda a, b: self._reading.events(ref, a, b)  # noqa: E731
        for attempt in range(_ATTEMPTS):
            state, compactions, last_seq, refusal = self._analyze(ref)
            if refusal is None and not state.balanced:
                live = self._live_refusal(ref, state, last_seq)
                if live is True and attempt < _ATTEMPTS - 1:
                    continue
                if live is True:  # open each time, and moving: its writer is live
                    live = LiveWriterError("the log kept moving while it was analysed: its "
                                           "writer is live, and recovery would race it",
                                           session=ref.id, seq=state.turn_start)
                refusal = live or None
            if refusal is not None:
                report = RecoveryReport(ref.id, "refused", state.events, last_seq, (),
                                        state.turn_start, state.step_start, refusal)
                return BalancedView(log, state.last_seq, ()), report
            when = state.last_time if state.last_time is not None else now_ms()
            closing = tuple(with_seq(Event(t, when, d, RECOVERY_SOURCE), state.last_seq + 1 + i)
                            for i, (t, d) in enumerate(closers(state)))
            outcome = "balanced" if not closing else ("repaired" if repair else "repair")
            if closing and repair:
                self._writer.seed(ref, state, compactions, last_seq)
                rows = self._writer.prepare_items(ref.header, [
                    (ev.type, ev.data, {"time": ev.time, "source": RECOVERY_SOURCE})
                    for ev in closing])
                try:
                    closing = tuple(self._writer.submit(ref, rows, expect_last=last_seq))
                except LogMovedError:
                    continue
            report = RecoveryReport(ref.id, outcome, state.events, last_seq, closing,
                                    state.turn_start, state.step_start)
            return BalancedView(log, last_seq, () if repair else closing), report
        raise InvalidStateError(f"session {ref.id} kept changing during recovery "
                                f"({_ATTEMPTS} attempts); nothing was written")


__all__ = ["BalancedView", "Recovery"]
