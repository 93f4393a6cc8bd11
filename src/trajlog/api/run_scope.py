"""Run envelopes and model switches: what :meth:`Session.run` and
:meth:`Session.switch_model` append.

``with s.run(model=..., ...) as run:`` appends ``run/started`` and, on exit,
``run/finalized``; the envelope a reader gets is folded from those events and
the ones between them (:func:`trajlog.projections.runs`), never kept beside
the log.  The run object holds only what ``run/finalized`` will record: the
amounts given to :meth:`Run.add_cost` and its usage so far (the last few
events it saw are tallied in one pass, off the per-append path).  Its
integrity digest costs nothing per event: at finalize it binds the run id
and range to the log's own frame chain at the run's last event
(``frame-chain/1``, :mod:`trajlog.projections.envelopes`).

Event shapes (``data``)::

    run/started   {run_id, identity: {session, agent_preset, tenant?, user?,
                   identity?}, model, params, policy_version,
                   tool_contract_version, static_prefix_hash, privacy_mode,
                   parent_run, artifacts: {name: pinned id},
                   integrity: "frame-chain/1",
                   pinned_by?: {session, seq}}   (a child run: api/delegation.py)
    run/finalized {run_id, state: completed | failed | interrupted,
                   cost: {inference | retrieval | tools | persistence:
                          {amount, <usage counters>}},
                   integrity: {algorithm, first_seq, last_seq, events, chain,
                               digest},
                   error?}
    model/switch  {old, new, reason, context_version, run_id}

A switch to a model with a recorded ``model/policy`` is refused
(:class:`~trajlog.errors.ModelDataClassError`, nothing written) when the
context it re-injects -- ``context=``, else a build under the default policy
-- holds a data class that model may not receive
(:mod:`trajlog.projections.reader_views`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, cast

from ..errors import InvalidArgumentError, InvalidStateError, TrajlogError, ValidationError
from ..events import Event, SessionHeader
from ..projections.context import ContextBuild, build_context
from ..projections.envelopes import (
    CHAIN_DIGEST,
    COST_SURFACES,
    FINALIZED,
    PRIVACY_MODES,
    STARTED,
    SWITCH,
    USAGE_TYPES,
    add_costs,
    chain_digest,
    empty_cost,
    prefix_hash,
    usage_of,
)
from ..projections.reader_views import MODEL_POLICY, check_switch, recorded_policy
from . import delegation

_IDENTITY_KEYS = ("tenant", "user", "identity")   # the header metadata a child inherits
_FOLD_EVERY = 64   # seen events a run holds before folding them (bounds its memory)
_EDGES = frozenset((STARTED, FINALIZED))


class _Log(Protocol):
    """What a run needs of a session handle (:class:`trajlog.Session`)."""

    header: SessionHeader

    def parent(self) -> Any: ...

    def get(self, seq: int) -> Event: ...

    @property
    def id(self) -> str: ...

    @property
    def last_seq(self) -> int: ...

    def _head(self) -> tuple[int, int]: ...

    def append(self, type: str, data: Any = None) -> Event: ...

    def events(self, from_seq: int = 0, to_seq: int | None = None, *,
               lazy: bool = False) -> Iterator[Event]: ...


class Run:
    """An open run (what ``with session.run(...) as run`` gives).  ``id`` is
    its run id, ``started`` its ``run/started`` event, ``finalized`` its
    ``run/finalized`` once the block is left."""

    __slots__ = ("_added", "_cost", "_count", "_nested", "_next", "_observing", "_seen",
                 "finalized", "id", "session_id", "started")

    def __init__(self, session_id: str, started: Event) -> None:
        self.id: str = started.data["run_id"]
        self.session_id = session_id
        self.started = started
        self.finalized: Event | None = None
        self._added: dict[str, dict[str, float]] = {}
        # The usage over the events from run/started on.  The handle's own
        # appends are collected as they return (observe: one list extend on the
        # append path) and tallied in one tight pass at finalize, or every
        # _FOLD_EVERY events (bounded memory); finalize reads back only what it
        # did not see (another handle's, an async append's).
        self._count = 0
        self._cost = empty_cost()
        self._nested: list[str] = []   # runs started inside this one and still open
        self._seen: list[Event] = [started]   # seen, not yet folded
        self._next = started.seq + 1    # the next seq to see
        self._observing = True

    def _take(self, events: list[Event]) -> None:
        self._seen += events
        self._next = events[-1].seq + 1
        if len(self._seen) >= _FOLD_EVERY:
            self._fold()

    def _fold(self) -> None:
        """Fold the events seen since the last fold into the count and the
        usage (attributed as the fold attributes it: to the innermost open
        run, so not to this one while a nested run is open)."""
        seen, self._seen = self._seen, []
        nested, cost, own = self._nested, self._cost, self.started.seq
        counted = 0
        for ev in seen:
            t = ev.type
            if t in _EDGES:
                rid = ev.data.get("run_id") if isinstance(ev.data, dict) else None
                if t == STARTED and ev.seq != own and isinstance(rid, str):
                    nested.append(rid)
                elif t == FINALIZED and rid in nested:
                    nested.remove(rid)   # (its run/finalized is the parent's, as in the fold)
            if not nested:
                counted += 1
                if t in USAGE_TYPES:
                    usage_of(cost, ev)
        persistence = cost["persistence"]
        persistence["events"] = persistence.get("events", 0) + counted
        self._count += len(seen)

    def __repr__(self) -> str:
        return f"<trajlog.Run {self.id} session={self.session_id}>"

    def add_cost(self, surface: str, amount: float = 0.0, **usage: float) -> None:
        """Add ``amount`` (and usage counters such as ``queries=3``) to one of
        the four surfaces: inference, retrieval, tools, persistence.  Recorded
        in ``run/finalized``; the counters trajlog reads from the log itself
        (tokens, requests, tool calls, events) are added to these."""
        if surface not in COST_SURFACES:
            raise ValidationError(f"surface must be one of {', '.join(COST_SURFACES)}")
        if self.finalized is not None:
            raise InvalidStateError(f"run {self.id} is finalized")
        for name, value in (("amount", amount), *usage.items()):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                    not math.isfinite(value)) or value < 0:
                raise ValidationError(f"{surface}.{name} must be a finite number >= 0")
        add_costs(self._added, {surface: {"amount": float(amount), **usage}})


# The runs open in this context (thread or task), innermost last: a run
# opened inside another of the same session is its child by default.
_OPEN: contextvars.ContextVar[tuple[Run, ...]] = contextvars.ContextVar(
    "trajlog_open_runs", default=())


def observe(session_id: str, events: list[Event]) -> None:
    """Feed events a handle of ``session_id`` just appended to the runs of it
    open in this context; a run that missed events (a gap) stops taking them
    and :func:`finalize` reads the rest back from the log."""
    open_runs = _OPEN.get()
    if not open_runs or not events:   # the append path with no run: one lookup
        return
    for run in open_runs:
        if run.session_id != session_id or not run._observing:
            continue
        if events[0].seq != run._next:
            run._observing = False
            continue
        seen = run._seen   # (Run._take, inlined: this is on every append of a run)
        seen += events
        run._next = events[-1].seq + 1
        if len(seen) >= _FOLD_EVERY:
            run._fold()


def current_run(session_id: str) -> Run | None:
    """The innermost run of ``session_id`` open in this context."""
    for run in reversed(_OPEN.get()):
        if run.session_id == session_id:
            return run
    return None


def _identity(header: SessionHeader) -> dict[str, Any]:
    ident: dict[str, Any] = {"session": header.id, "agent_preset": header.agent_preset}
    ident.update({k: header.metadata[k] for k in _IDENTITY_KEYS if k in header.metadata})
    return ident


def started_data(session: _Log, *, model: str, params: Mapping[str, Any] | None,
                 policy_version: Any, tool_contract_version: Any, privacy_mode: str | None,
                 parent_run: str | None, static_prefix: Any,
                 run_id: str | None,
                 artifacts: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``run/started`` payload, checked.  ``artifacts``: the ids the run
    pinned (a file's ``sha256:...``, a dataset id, a tool-contract document),
    by name, so that a replay rebuilds its input from the same ones."""
    if not isinstance(model, str) or not model:
        raise TypeError("model must be a non-empty str")
    if privacy_mode is not None and privacy_mode not in PRIVACY_MODES:
        raise ValidationError(f"privacy_mode must be one of {', '.join(PRIVACY_MODES)}")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError("params must be a mapping")
    for name, value in (("parent_run", parent_run), ("run_id", run_id)):
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"{name} must be a non-empty str")
    pinned = _artifacts(artifacts)
    if parent_run is None:
        enclosing = current_run(session.id)
        parent_run = None if enclosing is None else enclosing.id
    data = {"run_id": run_id or str(uuid.uuid4()), "identity": _identity(session.header),
            "model": model, "params": dict(params or {}), "policy_version": policy_version,
            "tool_contract_version": tool_contract_version,
            "static_prefix_hash": prefix_hash(static_prefix),
            "privacy_mode": privacy_mode or "full", "parent_run": parent_run,
            "artifacts": pinned, "integrity": CHAIN_DIGEST}
    # a child run keeps its parent run's identity, policy version and privacy mode
    parent = delegation.parent_started(session, parent_run, iter(_OPEN.get()))
    if parent is not None:
        delegation.pin(data, parent, session.id, privacy_stated=privacy_mode is not None)
        spawned = delegation.spawn_run(session, parent)
        if spawned is not None:   # naming another run does not loosen the spawn's pins
            delegation.pin({**data, "identity": dict(data["identity"])}, spawned, session.id,
                           privacy_stated=True)
    return data


def _artifacts(artifacts: Mapping[str, str] | None) -> dict[str, str]:
    if artifacts is None:
        return {}
    if not isinstance(artifacts, Mapping):
        raise InvalidArgumentError("artifacts must be a mapping of str names to str ids")
    pinned = dict(artifacts)
    for name, ident in pinned.items():
        # plain, non-empty str both sides: what the envelope and a replay read back
        if type(name) is not str or type(ident) is not str or not name or not ident:
            raise InvalidArgumentError(f"artifact {name!r}: names and ids must be "
                                       "non-empty str")
    return pinned


@contextlib.contextmanager
def run(session: _Log, **options: Any) -> Iterator[Run]:
    """(See :meth:`trajlog.Session.run`.)"""
    started = session.append(STARTED, started_data(session, **options))
    current = Run(session.id, started)
    token = enter(current)
    try:
        yield current
    except Exception as exc:
        close_quietly(session, current, "failed", exc)
        raise
    except BaseException as exc:  # KeyboardInterrupt, a cancelled task, ...
        close_quietly(session, current, "interrupted", exc)
        raise
    else:
        finalize(session, current, "completed")
    finally:
        leave(token)


def enter(current: Run) -> contextvars.Token[tuple[Run, ...]]:
    """Open ``current`` in this context, innermost (what :func:`run` and the
    asyncio handle's ``run`` do on entry); :func:`leave` with the token."""
    return _OPEN.set((*_OPEN.get(), current))


def leave(token: contextvars.Token[tuple[Run, ...]]) -> None:
    """Close again the run :func:`enter` opened."""
    _OPEN.reset(token)


def close_quietly(session: _Log, current: Run, state: str, exc: BaseException) -> None:
    # The caller's exception is the one to see; a run left unfinalized is
    # reported as open by the fold.  Only the exception's type is recorded:
    # its message may quote a payload (a secret) that redaction never saw.
    with contextlib.suppress(TrajlogError):
        finalize(session, current, state, type(exc).__name__)


def finalize(session: _Log, current: Run, state: str, error: str | None = None) -> Event:
    """Append ``run/finalized``: the run's own usage (read back from the log,
    attributed as the fold attributes it), the added amounts, and the
    digest binding the run to the frame chain at its last event."""
    first = current.started.seq
    last, chain = session._head()   # one read: the last seq and its chain
    current._observing = False
    if current._next <= last:   # what the run did not see appended
        batch: list[Event] = []
        for ev in session.events(current._next, last):
            batch.append(ev)
            if len(batch) >= _FOLD_EVERY:
                current._take(batch)
                batch = []
        if batch:
            current._take(batch)
    current._fold()
    count, cost = current._count, current._cost
    add_costs(cost, current._added)
    data: dict[str, Any] = {
        "run_id": current.id, "state": state, "cost": cost,
        "integrity": {"algorithm": CHAIN_DIGEST, "first_seq": first, "last_seq": last,
                      "events": count, "chain": f"{chain:016x}",
                      "digest": chain_digest(current.id, first, last, chain)}}
    if error is not None:
        data["error"] = error
    current.finalized = session.append(FINALIZED, data)
    return current.finalized


def switch_model(session: _Log, *, old: str | None, new: str, reason: str,
                 context_version: Any = None, context: ContextBuild | None = None) -> Event:
    """(See :meth:`trajlog.Session.switch_model`.)"""
    if not isinstance(new, str) or not new:
        raise TypeError("new must be a non-empty str")
    if old is not None and not isinstance(old, str):
        raise TypeError("old must be a str or None")
    if not isinstance(reason, str) or not reason:
        raise TypeError("reason must be a non-empty str")
    if context is not None and not isinstance(context, ContextBuild):
        raise TypeError("context must be a ContextBuild (build_context's result) or None")
    # Before any context reaches the new model: what it may receive (its
    # recorded model/policy) against what the switch re-injects.  A lazy pass
    # first: a log with no model/policy decodes no payload here.
    if any(ev.type == MODEL_POLICY for ev in session.events(lazy=True)):
        events = list(session.events())
        if recorded_policy(events, new) is not None:
            check_switch(events, context if context is not None else build_context(
                cast(Any, session), record=False), new)
    enclosing = current_run(session.id)
    return session.append(SWITCH, {"old": old, "new": new, "reason": reason,
                                   "context_version": context_version,
                                   "run_id": None if enclosing is None else enclosing.id})


__all__ = ["STARTED", "Run", "close_quietly", "current_run", "enter", "finalize", "leave", "run",
           "started_data", "switch_model"]
