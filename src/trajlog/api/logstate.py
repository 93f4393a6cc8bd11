"""Where a log stands at a seq, for the write path, from the indexes.

The write engine keeps a :class:`LogState` per session in step with its log.
A state begins where the log stands when it is first needed -- after the
store is reopened, or at a fork's cut -- and :class:`StateIndex` makes it
without reading the log before that point, so that the first write costs
the same whatever the log's length (a fork, which has just confirmed its
cut, hands its child the state there: :meth:`StateIndex.at_cut`):

* the open turn from the turn markers' index, and its step from the events
  of that one turn (a step lives inside a turn: the write path refuses one
  outside);
* the redaction pause from the pause markers' index (a log's own events
  decide: a child made paused holds its own copy);
* the tool calls the log made before, looked up by id when an append names
  one (:attr:`~trajlog.lifecycle.Tracker.prior`): whether an id was used,
  from the call index, and -- for an id the append answers -- its phase from
  its marks since its request;
* earlier compactions, from the index, only when a compaction is appended
  and only those logged after the lowest seq it covers.

Every index hit a decision rests on is checked against its frame (or, for a
call row, against the marks, which ``verify`` checks against the frames): a
copy that disagrees is corruption, never a decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import header_mismatch, index_mismatch
from ..event_types import CLOSES_STEP, CLOSES_TURN, DELETED, ENDS_LOG, OPENS_STEP, OPENS_TURN
from ..events import Event
from ..lifecycle import Phase, Tracker
from ..redaction import PAUSED, RESUMED
from ..storage import Lease, Writer
from ..storage.event_index import CALL, REQUESTED, RESULT
from . import checks
from .handles import LogRef
from .reading import LogReader

if TYPE_CHECKING:
    from .branch_checks import Branches

_TURN_MARKERS = OPENS_TURN | CLOSES_TURN
_STEP_MARKERS = OPENS_STEP | CLOSES_STEP | _TURN_MARKERS
# a call's phase after each of its marks
_MARK_PHASE = {REQUESTED: Phase.REQUESTED, CALL: Phase.STARTED, RESULT: Phase.FINISHED}


@dataclass(slots=True)
class LogState:
    """What the write path knows of a session's log, kept in step with it.
    ``stale``: another connection committed since; the head must be re-read
    (and the log followed up to it) before the state is used."""

    synced_seq: int
    chain: int
    lease: Lease = field(default_factory=Lease)
    tracker: Tracker = field(default_factory=Tracker)
    compactions: list[tuple[int, int]] = field(default_factory=list)
    stale: bool = False
    small_rows: int = 0   # rows appended since the last repack request that a repack would merge
    small_bytes: int = 0  # their raw bytes (a run at full size asks for a repack)
    turn_ended: bool = False
    paused: bool = False  # a redaction/paused with no redaction/resumed after it
    closed: int | None = None  # the seq of the log's session/closed or /deleted (no more)
    deleted: bool = False  # ``closed`` is a session/deleted (a refusal says deleted)
    # the compactions of seqs up to ``base`` are not in ``compactions`` (the
    # state began there: they are looked up when a compaction needs them)
    base: int = -1
    # the log's branches, folded from its branch/* events once a batch needed
    # them (None: not yet; dropped when another writer moves the head)
    branches: Branches | None = None



class StateIndex:
    """Begins :class:`LogState` part-way through a log; ``current()`` is the
    transaction the append runs in (where a tracker's prior looks ids up)."""

    def __init__(self, reading: LogReader, current: Callable[[], Writer | None]) -> None:
        self._reading = reading
        self._current = current

    def begin(self, tx: Writer, ref: LogRef, upto: int, chain: int, lease: Lease) -> LogState:
        """The state of ``ref``'s log (its inherited prefix included) at seq
        ``upto``, from the indexes: O(log n) look-ups and the events of the
        turn open there, whatever the log's length."""
        _check_headers(ref)
        if upto < 0:
            return LogState(upto, chain, lease)   # an empty log: nothing before
        turn, step = self._turn_at(tx, ref, upto)
        tracker = Tracker(turn, step, prior=self._prior(ref, upto))
        paused = self._pause_at(tx, ref, upto) is not None
        end = self.closed_at(tx, ref, upto)
        return LogState(upto, chain, lease, tracker, paused=paused, base=upto,
                        closed=None if end is None else upto, deleted=end == DELETED)

    def at_cut(self, child: LogRef) -> LogState:
        """The state of a child just made with no events of its own, whose
        cut its maker has confirmed against the frames in the creating
        transaction: no turn and no step open there (a fork cuts at a turn
        end, or outside any turn), no redaction pause (a child made paused
        starts with its own copy: its state is begun as any log's).  The
        calls of the prefix are looked up as at any state's beginning."""
        _check_headers(child)
        cut = child.seed - 1
        tracker = Tracker(None, None, prior=self._prior(child, cut)) if cut >= 0 else Tracker()
        return LogState(cut, child.seed_chain, Lease(), tracker, base=cut)

    def _indexed(self, tx: Writer, ref: LogRef, seq: int, type_: str) -> None:
        """An index hit that a decision rests on, checked against its frame."""
        found = next(iter(self._reading.events(ref, seq, seq, reader=tx)), None)
        if found is None or found.type != type_:
            raise index_mismatch(ref.id, seq, f"indexed as {type_!r}, the frame is "
                                 f"{None if found is None else found.type!r}")

    def _marker_le(self, tx: Writer, ref: LogRef, type_: str, upto: int) -> int | None:
        """The last ``type_`` marker at or before ``upto`` in ``ref``'s log or
        the prefix it inherits, as the index has it (the caller checks the
        frame its answer rests on)."""
        for level, hi in ref.levels(upto):
            found = tx.marker_at_or_before(level.sid, type_, hi)
            if found is not None and found >= level.seed:
                return found
        return None

    def _turn_at(self, tx: Writer, ref: LogRef, upto: int) -> tuple[int | None, int | None]:
        """The turn and the step open at ``upto`` (their start seqs).  A step
        lives inside a turn (the write path refuses one outside), so only an
        open turn's own events are read, for its step.  Only the frames the
        answer rests on are read: the turn/end that closed the last turn, or
        the open turn from its turn/start on."""
        start = self._marker_le(tx, ref, "turn/start", upto)
        if start is None:
            return None, None
        end = self._marker_le(tx, ref, "turn/end", upto)
        if end is not None and end > start:
            self._indexed(tx, ref, end, "turn/end")
            return None, None
        step, opened = None, False
        for ev in self._reading.events(ref, start, upto, want=_STEP_MARKERS.__contains__,
                                       reader=tx):
            t = ev.type
            if ev.seq == start:
                if t != "turn/start":
                    break   # (named below)
                opened = True
            elif t in _TURN_MARKERS:
                # a turn marker the index lost: the frames, not the copy, decide
                raise index_mismatch(ref.id, ev.seq, f"the log holds {t!r} there, the "
                                     "index no turn marker")
            step = ev.seq if t == "step/start" else None if t != "turn/start" else step
        if not opened:   # (raises, naming the frame's type)
            self._indexed(tx, ref, start, "turn/start")
        return start, step

    def _pause_at(self, tx: Writer, ref: LogRef, upto: int) -> int | None:
        """The seq of the ``redaction/paused`` in force at ``upto`` in ``ref``'s
        own log (None: none is).  A log's own events decide: a child made
        paused holds its own copy of its parent's pause."""
        if upto < ref.seed:
            return None
        paused = tx.marker_at_or_before(ref.sid, PAUSED, upto)
        resumed = tx.marker_at_or_before(ref.sid, RESUMED, upto)
        if paused is None or (resumed is not None and resumed > paused):
            if resumed is not None:
                self._indexed(tx, ref, resumed, RESUMED)
            return None
        self._indexed(tx, ref, paused, PAUSED)
        return paused

    def closed_at(self, tx: Writer, ref: LogRef, upto: int) -> str | None:
        """The type of the event at ``upto``, the last of ``ref``'s own log,
        if it ends the log (``session/closed`` or ``session/deleted``; None:
        open) -- one index row read: nothing follows either.  Its own log
        decides: a fork of a closed session is open."""
        if upto < ref.seed:
            return None
        rows = tx.index_rows(ref.sid, upto - 1, upto)
        if rows and rows[-1].seq == upto and rows[-1].type in ENDS_LOG:
            end = rows[-1].type
            self._indexed(tx, ref, upto, end)
            return end
        return None

    def pause_in_force(self, tx: Writer, parent: LogRef, upto: int) -> tuple[LogRef, int] | None:
        """The ``redaction/paused`` in force at seq ``upto`` of ``parent`` --
        the log that holds that seq, and the pause's seq -- or None."""
        while parent.parent is not None and upto < parent.seed:
            parent = parent.parent  # the cut lies in an inherited prefix
        found = self._pause_at(tx, parent, upto)
        return None if found is None else (parent, found)

    def _prior(self, ref: LogRef, upto: int) -> Callable[[Sequence[str], Sequence[str]],
                                                          dict[str, Phase]]:
        """What ``ref``'s log up to ``upto`` said of tool call ids (see
        :attr:`Tracker.prior`), looked up in the transaction the append runs
        in: where each id was requested (the call index), then -- for an id
        the append answers -- its marks from there up to ``upto``."""
        levels = ref.levels(upto)

        def prior(asked: Sequence[str], answered: Sequence[str]) -> dict[str, Phase]:
            tx = self._current()
            assert tx is not None
            out: dict[str, Phase] = {}
            found = self._requested_at(tx, levels, [*asked, *answered])
            for call_id in asked:
                at = found.get(call_id)
                if at is not None:   # used: that is all a request needs (it is refused)
                    self._confirm(tx, levels, at, call_id)
                    out[call_id] = Phase.REQUESTED
            for call_id in answered:
                at = found.get(call_id)
                if at is not None:
                    out[call_id] = self._phase_from(tx, levels, at, call_id)
            return out
        return prior

    @staticmethod
    def _requested_at(tx: Writer, levels: list[tuple[LogRef, int]],
                      call_ids: list[str]) -> dict[str, tuple[int, int]]:
        """``(level, seq)`` where each of ``call_ids`` that was requested was
        (one look-up per log, for all the ids still unknown)."""
        out: dict[str, tuple[int, int]] = {}
        left = call_ids
        for i, (level, hi) in enumerate(levels):
            if not left:
                break
            for call_id, seq in tx.calls_requested(level.sid, left).items():
                if level.seed <= seq <= hi:
                    out[call_id] = (i, seq)
            left = [c for c in left if c not in out]
        return out

    @staticmethod
    def _confirm(tx: Writer, levels: list[tuple[LogRef, int]], at: tuple[int, int],
                 call_id: str) -> None:
        """A call row a refusal rests on, checked against the marks (which
        ``verify`` checks against the frames)."""
        level, seq = levels[at[0]][0], at[1]
        if not any(m.code == REQUESTED and m.call_id == call_id
                   for m in tx.marks(level.sid, seq, seq)):
            raise index_mismatch(level.id, seq, f"the call row of {call_id!r} names no "
                                 "request of it in the marks")

    def _phase_from(self, tx: Writer, levels: list[tuple[LogRef, int]], at: tuple[int, int],
                    call_id: str) -> Phase:
        """The phase of ``call_id`` at the end of ``levels``, from its marks
        since its request at ``at`` (the request itself checked first)."""
        i, seq = at
        phase: Phase | None = None
        for level, hi in reversed(levels[:i + 1]):
            lo = seq if phase is None else level.seed
            for mark in tx.marks(level.sid, lo, hi):
                if mark.call_id != call_id:
                    continue
                if phase is None and (mark.seq != seq or mark.code != REQUESTED):
                    break
                phase = _MARK_PHASE.get(mark.code, phase)
            if phase is None:
                raise index_mismatch(level.id, seq, f"the call row of {call_id!r} names no "
                                     "request of it in the marks")
        assert phase is not None
        return phase

    def compactions(self, tx: Writer, ref: LogRef, state: LogState,
                     events: Sequence[Event]) -> list[tuple[int, int]]:
        """The compactions the batch's must nest with: the state's, and those
        from before it began that could overlap them (a compaction logged at
        seq s covers seqs below s: only those logged after the lowest
        ``from_seq`` of the batch can)."""
        if state.base < 0:
            return state.compactions
        lows = [applied[0] for ev in events
                if (applied := checks.applied_range(ev.type, ev.data)) is not None]
        if not lows or min(lows) >= state.base:
            return state.compactions
        after, found = min(lows), list[tuple[int, int]]()
        for level, hi in ref.levels(state.base):
            if hi <= after:
                break
            for row in tx.index_rows(level.sid, max(after, level.seed - 1), hi):
                if row.type.startswith("compaction/"):
                    ev = next(iter(self._reading.events(ref, row.seq, row.seq, reader=tx)))
                    if ev.type != row.type:
                        raise index_mismatch(ref.id, row.seq, f"indexed as {row.type!r}, "
                                             f"the frame is {ev.type!r}")
                    earlier = checks.applied_range(ev.type, ev.data)
                    if earlier is not None:
                        found.append(earlier)
        return found + state.compactions


def _check_headers(ref: LogRef) -> None:
    """A damaged header of the log or of any log whose events it takes on is
    corruption, before any state is begun from them."""
    level: LogRef | None = ref
    while level is not None:
        if level.header.damage is not None:
            raise header_mismatch(level.id, level.header.damage)
        level = level.parent if level.seed else None


__all__ = ["LogState", "StateIndex"]
