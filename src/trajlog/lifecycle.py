"""The one turn / step / tool-call state machine.

A session's log opens and closes three kinds of thing: turns (``turn/start`` ..
``turn/end``), steps (``step/start`` .. ``step/end``) and tool calls.  A tool
call goes through three phases:

* ``REQUESTED`` -- an ``assistant/message`` lists it in ``tool_calls`` (by id);
* ``STARTED`` -- a ``tool/call`` says the host really started it;
* ``FINISHED`` -- a ``tool/result`` answers it, or a ``tool/cancel`` gives it
  up (from either phase before); nothing answers it after that.

Which type plays which part is declared in :mod:`trajlog.event_types` (its
``lifecycle`` column); this module reads the sets derived from it.

Everything that needs to know where a log stands uses this module: the write
path (which refuses an event that cannot follow, e.g. a result for a call that
never started), recovery (which closes what is still open), and the status,
chat and trajectory views.  :func:`transitions` says what one event does;
:class:`Tracker` follows a whole log; :func:`outcome` names how a result ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

from .errors import ValidationError
from .event_types import (
    ANSWERS_CALL,
    CALL_EVENTS,
    CANCELS_CALL,
    CLOSES_STEP,
    CLOSES_TURN,
    LIFECYCLE,
    OPENS_STEP,
    OPENS_TURN,
    REQUESTS_CALLS,
    STARTS_CALL,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
)
from .events import Event


class Phase(IntEnum):
    """Where a tool call stands."""

    REQUESTED = 1
    STARTED = 2
    FINISHED = 3


# Bound once: an enum member looked up on its class costs ~100 ns each time.
_REQUESTED, _STARTED, _FINISHED = Phase.REQUESTED, Phase.STARTED, Phase.FINISHED

# Each lifecycle type's role as a small int, so that the per-event loop of
# Tracker.plan makes one dict lookup and int comparisons.
_START, _ANSWER, _CANCEL, _REQUEST, _OPEN_TURN, _CLOSE_TURN, _OPEN_STEP, _CLOSE_STEP = range(1, 9)
_ROLE = {**dict.fromkeys(STARTS_CALL, _START), **dict.fromkeys(ANSWERS_CALL, _ANSWER),
         **dict.fromkeys(CANCELS_CALL, _CANCEL), **dict.fromkeys(REQUESTS_CALLS, _REQUEST),
         **dict.fromkeys(OPENS_TURN, _OPEN_TURN), **dict.fromkeys(CLOSES_TURN, _CLOSE_TURN),
         **dict.fromkeys(OPENS_STEP, _OPEN_STEP), **dict.fromkeys(CLOSES_STEP, _CLOSE_STEP)}



def requested_calls(data: Any) -> list[dict[str, Any]]:
    """The tool calls an ``assistant/message``'s data requests: the entries of
    ``tool_calls`` that are dicts with a string ``id``."""
    if not isinstance(data, dict):
        return []
    return [c for c in data.get("tool_calls") or () if isinstance(c, dict)
            and isinstance(c.get("id"), str)]


def transitions(ev: Event) -> list[tuple[str, Phase, str]]:
    """The tool-call phase changes one event makes, as ``(call id, phase, tool
    name)``; empty for events that touch no tool call."""
    t = ev.type
    if t in REQUESTS_CALLS:
        return [(c["id"], _REQUESTED, str(c.get("name", ""))) for c in
                requested_calls(ev.data)]
    if t in CALL_EVENTS:
        d = ev.data
        call_id = d.get("call_id") if isinstance(d, dict) else None
        if not isinstance(call_id, str):
            return []
        phase = _STARTED if t in STARTS_CALL else _FINISHED
        return [(call_id, phase, str(d.get("name", "")))]
    return []


def outcome(result: Any, type_: str = "tool/result") -> str:
    """How a call's closer of ``type_`` ended: ``done``, ``error``,
    ``unknown`` (a recovery closer: the tool may have run), ``not_started``
    or ``cancelled`` (a ``tool/cancel``)."""
    if type_ in CANCELS_CALL:
        return "cancelled"
    d = result if isinstance(result, dict) else {}
    synthetic = d.get("status")
    if synthetic == TOOL_OUTCOME_UNKNOWN:
        return "unknown"
    if synthetic == TOOL_NOT_STARTED:
        return "not_started"
    return "error" if d.get("is_error") else "done"


class Plan(NamedTuple):
    """What a run of events would change in a :class:`Tracker`, computed
    without changing it (:meth:`Tracker.plan`, then :meth:`Tracker.apply`).
    (A named tuple made in C: one is made on every append.)"""

    calls: dict[str, tuple[Phase, str]]   # calls left requested or started
    done: set[str]                        # calls finished
    turn_start: int | None
    step_start: int | None


# What a log said of tool call ids before a tracker began following it:
# ``prior(requested, answered)`` gives, for each id of ``requested`` the log
# used (any phase: an id is requested once), and for each id of ``answered``
# the log mentioned, its phase at that point.
Prior = Callable[[Sequence[str], Sequence[str]], dict[str, Phase]]
_new = tuple.__new__   # (a Plan made in C, without the named tuple's own __new__)


@dataclass
class Tracker:
    """Where a log stands: the open turn and step (their start seqs) and the
    tool calls.  Open calls are kept in the order they were requested, with
    their tool names; finished calls only as ids (one short string per call,
    so that a reused id is still refused).

    A tracker may begin part-way through a log (the write path's, after a
    reopen or at a fork's cut): ``prior`` then answers for the calls of the
    log before that point, looked up by id when an event names one the
    tracker has not seen -- so that nothing of the log before has to be read."""

    turn_start: int | None = None
    step_start: int | None = None
    open_calls: dict[str, tuple[Phase, str]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    prior: Prior | None = None

    def phase(self, call_id: str) -> Phase | None:
        """The call's phase, None if the log never mentioned it."""
        entry = self.open_calls.get(call_id)
        if entry is not None:
            return entry[0]
        return Phase.FINISHED if call_id in self.finished else None

    @property
    def balanced(self) -> bool:
        """Nothing is open: no turn, no step, no call without a result."""
        return self.turn_start is None and self.step_start is None and not self.open_calls

    def feed(self, ev: Event) -> None:
        """Advance over one event of the log, tolerating anything (a log is
        what it is; the write path is where events are refused, and recovery
        refuses a log whose markers do not nest: :func:`boundary_defect`).  The same
        transitions as :meth:`plan` without ``check``, applied at once."""
        t = ev.type
        if t not in LIFECYCLE:
            return
        if t in OPENS_TURN:
            self.turn_start = ev.seq
        elif t in CLOSES_TURN:
            self.turn_start = self.step_start = None
        elif t in OPENS_STEP:
            self.step_start = ev.seq
        elif t in CLOSES_STEP:
            self.step_start = None
        else:
            open_calls = self.open_calls
            for call_id, phase, name in transitions(ev):
                if phase is _FINISHED:
                    open_calls.pop(call_id, None)
                    self.finished.add(call_id)
                    continue
                if phase is _STARTED:
                    known = open_calls.get(call_id)
                    if known is not None and known[1]:
                        name = known[1]
                open_calls[call_id] = (phase, name)

    def plan(self, events: Iterable[Event], first_seq: int, *, check: bool) -> Plan:
        """The changes ``events`` (at seqs ``first_seq``, ``first_seq + 1``, ...)
        would make.  With ``check``, an event that cannot follow raises
        :class:`ValidationError` and nothing is planned.

        The same transitions as :func:`transitions`, written out in one loop:
        this runs on every append (1000 events a batch), at ~0.6 us an event."""
        calls: dict[str, tuple[Phase, str]] = {}   # requested or started
        done: set[str] = set()                       # finished
        turn, step = self.turn_start, self.step_start
        open_calls, finished = self.open_calls, self.finished
        before_start = self._prior(events) if self.prior is not None else None
        role_of = _ROLE.get
        seq = first_seq - 1
        for ev in events:
            seq += 1
            t = ev.type
            role = role_of(t)
            if role is None:
                continue
            if role <= _CANCEL:   # a call's start, answer or cancel
                d = ev.data
                call_id = d.get("call_id") if type(d) is dict else None
                if type(call_id) is not str:
                    continue
                known = calls.get(call_id)
                if known is None and call_id not in done:
                    known = open_calls.get(call_id)
                    if known is None and before_start and call_id in before_start:
                        p = before_start[call_id]   # (an id of the log before the tracker)
                        known = (p, "") if p is not _FINISHED else None
                starts = role == _START
                if check:
                    before = known[0] if known is not None else (
                        _FINISHED if call_id in done or call_id in finished or (
                            before_start and before_start.get(call_id) is _FINISHED)
                        else None)
                    if not (before is _REQUESTED if starts else before is _STARTED
                            or (before is _REQUESTED and (role == _CANCEL
                                                          or d.get("synthetic")))):
                        _check(call_id, before, _STARTED if starts else _FINISHED, d, t)
                if not starts:
                    calls.pop(call_id, None)
                    done.add(call_id)
                else:
                    calls[call_id] = (_STARTED, known[1] if known is not None and known[1]
                                      else str(d.get("name", "")))
            elif role == _REQUEST:
                d = ev.data
                requested = d.get("tool_calls") if type(d) is dict else None
                if not requested:
                    continue
                for c in requested:
                    call_id = c.get("id") if type(c) is dict else None
                    if type(call_id) is not str:
                        continue
                    if check and (call_id in calls or call_id in done or call_id in open_calls
                                  or call_id in finished
                                  or (before_start and call_id in before_start)):
                        raise ValidationError(f"tool call id {call_id!r} was already used")
                    calls[call_id] = (_REQUESTED, str(c.get("name", "")))
                    done.discard(call_id)
            elif role == _OPEN_TURN:
                if check and turn is not None:
                    raise ValidationError(f"turn/start at seq {seq}: a turn is already open "
                                          f"(since seq {turn}); turns do not nest")
                turn = seq
            elif role == _CLOSE_TURN:
                if check and turn is None:
                    raise ValidationError(f"turn/end at seq {seq}: no turn is open")
                turn = step = None
            elif role == _OPEN_STEP:
                if check and (turn is None or step is not None):
                    raise ValidationError(
                        f"step/start at seq {seq}: " + ("a step belongs inside a turn"
                                                        if turn is None else
                                                        f"a step is already open (since seq "
                                                        f"{step})"))
                step = seq
            elif role == _CLOSE_STEP:
                if check and step is None:
                    raise ValidationError(f"step/end at seq {seq}: no step is open")
                step = None
        return _new(Plan, (calls, done, turn, step))

    def _prior(self, events: Iterable[Event]) -> dict[str, Phase]:
        """What ``prior`` says of the ids ``events`` name that this tracker
        has not seen (those requested before being answered in the events
        only need to be known as used)."""
        assert self.prior is not None
        known, open_calls, finished = set(), self.open_calls, self.finished
        requested: list[str] = []
        answered: list[str] = []
        for ev in events:
            for call_id, phase, _ in transitions(ev):
                if call_id in known or call_id in open_calls or call_id in finished:
                    continue
                known.add(call_id)
                (requested if phase is _REQUESTED else answered).append(call_id)
        return self.prior(requested, answered) if known else {}

    def apply(self, plan: Plan) -> None:
        """Make the planned changes."""
        open_calls = self.open_calls
        for call_id in plan.done:
            open_calls.pop(call_id, None)
        open_calls.update(plan.calls)
        self.finished |= plan.done
        self.turn_start, self.step_start = plan.turn_start, plan.step_start

    def copy(self) -> Tracker:
        return Tracker(self.turn_start, self.step_start, dict(self.open_calls),
                       set(self.finished), self.prior)


def boundary_defect(tracker: Tracker, ev: Event) -> str | None:
    """What is wrong with ``ev`` as the next turn / step marker after
    ``tracker``'s state (None: nothing) -- the write path's rule, for logs
    written without it (older versions, foreign writers)."""
    t = ev.type
    if t in OPENS_TURN and tracker.turn_start is not None:
        return f"a turn/start inside the turn open since seq {tracker.turn_start}"
    if t in CLOSES_TURN and tracker.turn_start is None:
        return "a turn/end with no open turn"
    if t in OPENS_STEP and (tracker.turn_start is None or tracker.step_start is not None):
        return ("a step/start outside any turn" if tracker.turn_start is None else
                f"a step/start inside the step open since seq {tracker.step_start}")
    if t in CLOSES_STEP and tracker.step_start is None:
        return "a step/end with no open step"
    return None


def _check(call_id: str, before: Phase | None, after: Phase, data: Any,
           type_: str = "tool/result") -> None:
    """Refuse a tool-call transition that cannot follow ``before`` (by an
    event of ``type_``)."""
    if after is Phase.REQUESTED:
        if before is not None:
            raise ValidationError(f"tool call id {call_id!r} was already used")
    elif after is Phase.STARTED:
        if before is not Phase.REQUESTED:
            why = "already started" if before else "never requested by an assistant/message"
            raise ValidationError(f"tool/call {call_id!r}: the call was {why}")
    elif before is not Phase.STARTED and not (
            before is Phase.REQUESTED and (type_ in CANCELS_CALL or (
                isinstance(data, dict) and data.get("synthetic")))):
        why = {Phase.FINISHED: "already finished",
               Phase.REQUESTED: "requested but never started"}.get(before, "unknown") \
            if before is not None else "unknown"
        raise ValidationError(f"{type_} {call_id!r}: the call is {why}")


__all__ = ["TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN", "Phase", "Plan", "Tracker",
           "boundary_defect", "outcome",
           "requested_calls", "transitions"]
