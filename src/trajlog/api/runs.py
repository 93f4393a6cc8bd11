"""Run envelopes and model switches: what :meth:`Session.run` and
:meth:`Session.switch_model` append.

``with s.run(model=..., ...) as run:`` appends ``run/started`` and, on exit,
``run/finalized``; the envelope a reader gets is folded from those events and
the ones between them (:func:`trajlog.projections.runs`), never kept beside
the log.  The run object holds only what ``run/finalized`` will record: the
amounts given to :meth:`Run.add_cost`.

Event shapes (``data``)::

    run/started   {run_id, identity: {session, agent_preset, tenant?, user?,
                   identity?}, model, params, policy_version,
                   tool_contract_version, static_prefix_hash, privacy_mode,
                   parent_run}
    run/finalized {run_id, state: completed | failed | interrupted,
                   cost: {inference | retrieval | tools | persistence:
                          {amount, <usage counters>}},
                   integrity: {algorithm, first_seq, last_seq, events, digest},
                   error?}
    model/switch  {old, new, reason, context_version, run_id}
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ..errors import InvalidStateError, TrajlogError, ValidationError
from ..events import Event, SessionHeader
from ..projections.runs import (
    COST_SURFACES,
    DIGEST,
    FINALIZED,
    PRIVACY_MODES,
    STARTED,
    SWITCH,
    add_costs,
    digest_add,
    digest_start,
    empty_cost,
    prefix_hash,
    tally,
)

_IDENTITY_KEYS = ("tenant", "user", "identity")   # the header metadata a child inherits


class _Log(Protocol):
    """What a run needs of a session handle (:class:`trajlog.Session`)."""

    header: SessionHeader

    @property
    def id(self) -> str: ...

    @property
    def last_seq(self) -> int: ...

    def append(self, type: str, data: Any = None) -> Event: ...

    def events(self, from_seq: int = 0, to_seq: int | None = None, *,
               lazy: bool = False) -> Iterator[Event]: ...


class Run:
    """An open run (what ``with session.run(...) as run`` gives).  ``id`` is
    its run id, ``started`` its ``run/started`` event, ``finalized`` its
    ``run/finalized`` once the block is left."""

    def __init__(self, session_id: str, started: Event) -> None:
        self.id: str = started.data["run_id"]
        self.session_id = session_id
        self.started = started
        self.finalized: Event | None = None
        self._added: dict[str, dict[str, float]] = {}
        # the hash chain and usage over the events seen so far, from run/started on:
        # the handle's own appends are fed as they return (observe), so finalize
        # reads back only what it did not see (another handle's, an async append's)
        self._digest = digest_start(self.id)
        self._count = 0
        self._cost = empty_cost()
        self._nested: list[str] = []   # runs started inside this one and still open
        self._next = started.seq        # the next seq to feed
        self._observing = True
        self._feed(started)

    def _feed(self, ev: Event) -> None:
        self._digest, self._count = digest_add(self._digest, ev), self._count + 1
        self._next = ev.seq + 1
        rid = ev.data.get("run_id") if isinstance(ev.data, dict) else None
        if ev.type == STARTED and ev.seq != self.started.seq and isinstance(rid, str):
            self._nested.append(rid)
        elif ev.type == FINALIZED and rid in self._nested:
            self._nested.remove(rid)
        if not self._nested:
            tally(self._cost, ev)

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
    for run in _OPEN.get():
        if run.session_id != session_id or not run._observing or not events:
            continue
        if events[0].seq != run._next:
            run._observing = False
            continue
        for ev in events:
            run._feed(ev)


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
                 policy_version: Any, tool_contract_version: Any, privacy_mode: str,
                 parent_run: str | None, static_prefix: Any,
                 run_id: str | None) -> dict[str, Any]:
    """The ``run/started`` payload, checked."""
    if not isinstance(model, str) or not model:
        raise TypeError("model must be a non-empty str")
    if privacy_mode not in PRIVACY_MODES:
        raise ValidationError(f"privacy_mode must be one of {', '.join(PRIVACY_MODES)}")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError("params must be a mapping")
    for name, value in (("parent_run", parent_run), ("run_id", run_id)):
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"{name} must be a non-empty str")
    if parent_run is None:
        enclosing = current_run(session.id)
        parent_run = None if enclosing is None else enclosing.id
    return {"run_id": run_id or str(uuid.uuid4()), "identity": _identity(session.header),
            "model": model, "params": dict(params or {}), "policy_version": policy_version,
            "tool_contract_version": tool_contract_version,
            "static_prefix_hash": prefix_hash(static_prefix), "privacy_mode": privacy_mode,
            "parent_run": parent_run}


@contextlib.contextmanager
def run(session: _Log, **options: Any) -> Iterator[Run]:
    """(See :meth:`trajlog.Session.run`.)"""
    started = session.append(STARTED, started_data(session, **options))
    current = Run(session.id, started)
    token = _OPEN.set((*_OPEN.get(), current))
    try:
        yield current
    except Exception as exc:
        _close_quietly(session, current, "failed", exc)
        raise
    except BaseException as exc:  # KeyboardInterrupt, a cancelled task, ...
        _close_quietly(session, current, "interrupted", exc)
        raise
    else:
        finalize(session, current, "completed")
    finally:
        _OPEN.reset(token)


def _close_quietly(session: _Log, current: Run, state: str, exc: BaseException) -> None:
    # The caller's exception is the one to see; a run left unfinalized is
    # reported as open by the fold.  Only the exception's type is recorded:
    # its message may quote a payload (a secret) that redaction never saw.
    with contextlib.suppress(TrajlogError):
        finalize(session, current, state, type(exc).__name__)


def finalize(session: _Log, current: Run, state: str, error: str | None = None) -> Event:
    """Append ``run/finalized``: the run's own usage (read back from the log,
    attributed as the fold attributes it), the added amounts, and the hash
    chain over its events."""
    first, last = current.started.seq, session.last_seq
    current._observing = False
    if current._next <= last:   # what the run did not see appended
        for ev in session.events(current._next, last):
            current._feed(ev)
    digest, count, cost = current._digest, current._count, current._cost
    add_costs(cost, current._added)
    data: dict[str, Any] = {
        "run_id": current.id, "state": state, "cost": cost,
        "integrity": {"algorithm": DIGEST, "first_seq": first, "last_seq": last,
                      "events": count, "digest": digest.hex()}}
    if error is not None:
        data["error"] = error
    current.finalized = session.append(FINALIZED, data)
    return current.finalized


def switch_model(session: _Log, *, old: str | None, new: str, reason: str,
                 context_version: Any = None) -> Event:
    """(See :meth:`trajlog.Session.switch_model`.)"""
    if not isinstance(new, str) or not new:
        raise TypeError("new must be a non-empty str")
    if old is not None and not isinstance(old, str):
        raise TypeError("old must be a str or None")
    if not isinstance(reason, str) or not reason:
        raise TypeError("reason must be a non-empty str")
    enclosing = current_run(session.id)
    return session.append(SWITCH, {"old": old, "new": new, "reason": reason,
                                   "context_version": context_version,
                                   "run_id": None if enclosing is None else enclosing.id})


__all__ = ["Run", "current_run", "finalize", "run", "started_data", "switch_model"]
