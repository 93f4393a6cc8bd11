"""Delegation inherits identity, not the working set (docs/delegation.md).

**A child run pins its parent run.**  A run whose parent run lives in another
session of the lineage -- ``parent_run=`` naming a run of an ancestor (or of a
forked child's inherited prefix), or, stating nothing, the parent's run that
was open when the subagent was spawned (its header's ``parent_run``) -- keeps
the parent run's tenant, user, policy version and privacy mode.  A child that
states nothing inherits them, recorded in its own ``run/started`` (with
``pinned_by: {session, seq}``, the parent's ``run/started``); another tenant,
user or policy version, or a weaker privacy mode (one that keeps more:
``full`` < ``metadata`` < ``none``), is refused with
:class:`~trajlog.errors.DelegationPinError` before anything is written.  A
run nested in a run of the *same* session pins what that run pinned
(nothing under a root run: the host's own structure).

**A subagent's result is typed.**  :func:`report` appends ``subagent/result``
to the parent: ``kind`` (fact / episode / suggestion / tool_result),
``content``, ``provenance`` (the agent session, the run it came from, that
run's model) and ``sensitivity`` (also its envelope's data class); an untyped
or unprovenanced result is refused (:class:`~trajlog.errors.SubagentResultError`).
:func:`remember_result` writes one to the parent's *session* scope as a
provisional item sourced from that event: facts and episodes as themselves,
suggestions and tool results as ``trajectory`` (which no promotion lifts).
From there only ``promote`` moves it, through the memory gates
(:mod:`trajlog.memory.gates`: a delegated result written straight to user,
tenant or global scope is refused).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ..errors import (
    DelegationPinError,
    InvalidArgumentError,
    SubagentResultError,
    TrajlogError,
)
from ..events import Event, SessionHeader
from ..memory import MemoryItem, MemoryView
from ..memory.model import SENSITIVITY
from ..projections.envelopes import PRIVACY_MODES, STARTED

#: what a subagent's result may be
RESULT_KINDS = ("fact", "episode", "suggestion", "tool_result")
RESULT = "subagent/result"
#: the memory type each kind is remembered as (a trajectory is never promoted)
MEMORY_TYPE = {"fact": "fact", "episode": "episode", "suggestion": "trajectory",
               "tool_result": "trajectory"}
#: how much a privacy mode keeps out: a child may keep less than its parent, never more
STRENGTH = {mode: i for i, mode in enumerate(PRIVACY_MODES)}


class _Log(Protocol):
    header: SessionHeader

    @property
    def id(self) -> str: ...

    def parent(self) -> Any: ...

    def events(self, from_seq: int = 0, to_seq: int | None = None, *,
               lazy: bool = False) -> Iterator[Any]: ...

    def get(self, seq: int) -> Event: ...


def _find_started(log: _Log, run_id: str, before: int | None = None) -> Event | None:
    """The ``run/started`` of ``run_id`` in ``log`` (below seq ``before``);
    only the types are decoded until it is found."""
    for ev in log.events(0, None if before is None else before - 1, lazy=True):
        if ev.type == STARTED and isinstance(ev.data, dict) and ev.data.get("run_id") == run_id:
            return ev.event() if hasattr(ev, "event") else ev   # type: ignore[no-any-return]
    return None


def _at_spawn(session: _Log, parent_run: str) -> Event | None:
    """The parent run's ``run/started`` where the child's header says it lies
    (``parent_run_seq``, recorded at the spawn with ``parent_run``): one
    event read, whatever the logs' length.  None: the header names no seq for
    this run (a child spawned before it was recorded), or the event there is
    not that run's start (then the logs are read, as for any other run)."""
    meta = session.header.metadata
    seq = meta.get("parent_run_seq")
    parent = session.parent()
    if meta.get("parent_run") != parent_run or type(seq) is not int or parent is None:
        return None
    try:
        ev: Event = parent.get(seq)
    except TrajlogError:
        return None
    if ev.type == STARTED and isinstance(ev.data, dict) and ev.data.get("run_id") == parent_run:
        return ev
    return None


def _delegated(started: Event) -> Event | None:
    """A run nested in a run of the same session pins what that run pinned
    (a delegated run's), else nothing: the host's own structure."""
    return started if "pinned_by" in started.data else None


def parent_started(session: _Log, parent_run: str | None, open_runs: Iterator[Any],
                   ) -> Event | None:
    """The ``run/started`` of the run a new run of ``session`` is delegated
    from, or None when it has none in another session (a root run, or one
    nested in a run of this same session).  ``open_runs``: the runs open in
    this context (their ``started`` events spare a read); else the run the
    child's header names is read where the header says it started; else the
    logs are read, the child's own first, then each ancestor's.  In a child
    session a ``parent_run`` naming no run of its lineage is refused
    (:class:`DelegationPinError`): a made-up id would pin nothing."""
    header = session.header
    spawned = header.metadata.get("parent_run")
    spawned = spawned if isinstance(spawned, str) else None
    if parent_run is None:
        parent_run = spawned
        if parent_run is None:
            return None
    ancestors: list[_Log] = []
    log: _Log | None = session.parent()
    while log is not None:
        ancestors.append(log)
        log = log.parent()
    if not ancestors:
        return None   # a root session's runs pin nothing (and read nothing to say so)
    found = _resolve(session, parent_run, ancestors, open_runs)
    if found is _MISSING:
        raise DelegationPinError(session.id, parent_run, "parent_run",
                                 "it names no run of this session or of its ancestors: a "
                                 "child run pins a run of its lineage")
    if found is None and spawned is not None and parent_run != spawned:
        # nested in an unpinned run of its own: the spawn's run still holds
        return parent_started(session, spawned, iter(()))
    return found


_MISSING: Any = object()


def _resolve(session: _Log, parent_run: str, ancestors: list[_Log], open_runs: Iterator[Any],
             ) -> Event | None:
    """``parent_run``'s pinning ``run/started`` (None: a run of ``session``
    that pins nothing), or ``_MISSING`` when no log of the lineage has it."""
    header = session.header
    for run in open_runs:
        if getattr(run, "id", None) == parent_run:
            if run.session_id == session.id:
                return _delegated(run.started)
            if any(a.id == run.session_id for a in ancestors):
                return run.started  # type: ignore[no-any-return]
    spawned = _at_spawn(session, parent_run)
    if spawned is not None:
        return spawned
    own = _find_started(session, parent_run)
    if own is not None:
        # a forked child's inherited prefix holds its parent's runs (seq < seed)
        return own if own.seq < header.seed_length else _delegated(own)
    for anc in ancestors:
        found = _find_started(anc, parent_run)
        if found is not None:
            return found
    return _MISSING  # type: ignore[no-any-return]


def spawn_run(session: _Log, named: Event) -> Event | None:
    """The ``run/started`` of the run ``session`` was spawned under (its
    header's ``parent_run``) when a run names another one (``named``): the
    spawn's pins hold as well, so that naming a looser run of the parent
    cannot loosen them.  None when they are the same run or there is none."""
    spawned = session.header.metadata.get("parent_run")
    if not isinstance(spawned, str) or named.data.get("run_id") == spawned:
        return None
    if named.data.get("pinned_by") is not None and named.data.get("parent_run") == spawned:
        return None   # a run of this session already pinned to the spawn's run
    return parent_started(session, spawned, iter(()))


def pin(data: dict[str, Any], parent: Event, session: str, *, privacy_stated: bool) -> None:
    """Make ``data`` (a child's ``run/started`` payload) keep what the parent
    run's ``run/started`` pinned, or raise :class:`DelegationPinError`."""
    pd = parent.data
    rid = pd.get("run_id")
    pident = pd.get("identity")
    if not isinstance(pident, dict):   # an erased run/started keeps its run id only
        raise DelegationPinError(session, rid, "identity", "the parent run's record is "
                                 "erased: there is nothing to pin the child to")
    ident = data["identity"]
    for key in ("tenant", "user"):
        want = pident.get(key)
        if key in ident and ident[key] != want:
            raise DelegationPinError(session, rid, key, f"its {key} {ident[key]!r} is not the "
                                     f"parent run's ({want!r}): a child keeps its parent's "
                                     "identity")
        if want is not None:
            ident[key] = want
    want = pd.get("policy_version")
    if data["policy_version"] is None:
        data["policy_version"] = want
    elif data["policy_version"] != want:
        raise DelegationPinError(session, rid, "policy_version",
                                 f"policy version {data['policy_version']!r} is not the parent "
                                 f"run's ({want!r})")
    want = pd.get("privacy_mode", "full")
    mode = data["privacy_mode"] if privacy_stated else want
    if STRENGTH.get(mode, -1) < STRENGTH.get(want, 0):
        raise DelegationPinError(session, rid, "privacy_mode",
                                 f"privacy mode {mode!r} is weaker than the parent run's "
                                 f"({want!r}): a child may keep less, never more")
    data["privacy_mode"] = mode
    data["parent_run"] = rid
    data["pinned_by"] = {"session": pident.get("session"), "seq": parent.seq}


# -- results flowing back ------------------------------------------------------------------


def result_data(child: _Log, kind: Any, content: Any, *, sensitivity: Any,
                run: Any, model: Any) -> dict[str, Any]:
    """The ``subagent/result`` payload, checked: typed, provenanced, classed.
    ``run``: the child's open run (or its ``run/started`` event, or run id)."""
    if child.header.origin != "subagent" or child.header.parent_session is None:
        raise SubagentResultError(f"session {child.id} is not a subagent: it has no parent "
                                  "to report to")
    if kind not in RESULT_KINDS:
        raise SubagentResultError(f"a result of subagent {child.id} is untyped: kind must "
                                  f"be one of {', '.join(RESULT_KINDS)}, not {kind!r}")
    if sensitivity not in SENSITIVITY:
        raise InvalidArgumentError(f"sensitivity must be one of {SENSITIVITY}, not "
                                   f"{sensitivity!r}")
    started = getattr(run, "started", run)
    if isinstance(started, str):
        started = _find_started(child, started)
    if not isinstance(started, Event) or started.type != STARTED or started.seq < (
            child.header.seed_length) or started.data["identity"].get("session") != child.id:
        raise SubagentResultError(f"a result of subagent {child.id} has no provenance: "
                                  "report it inside a run of the subagent (or name one "
                                  "of its runs)")
    used = model if model is not None else started.data.get("model")
    if not isinstance(used, str) or not used:
        raise SubagentResultError(f"a result of subagent {child.id} names no model")
    return {"kind": kind, "content": content, "sensitivity": sensitivity,
            "provenance": {"session": child.id, "run_id": started.data["run_id"],
                           "model": used}}


def checked_result(ev: Event, session: str) -> Mapping[str, Any]:
    """``ev``'s data if it is a typed, provenanced ``subagent/result``."""
    d = ev.data if isinstance(ev.data, dict) else {}
    prov = d.get("provenance")
    if ev.type != RESULT or d.get("kind") not in RESULT_KINDS:
        raise SubagentResultError(f"seq {ev.seq} of session {session} is not a typed "
                                  f"subagent result ({ev.type})")
    if not isinstance(prov, dict) or not all(isinstance(prov.get(k), str)
                                             for k in ("session", "run_id", "model")):
        raise SubagentResultError(f"the subagent result at seq {ev.seq} of session "
                                  f"{session} carries no provenance")
    return d


class _Parent(_Log, Protocol):
    def children(self) -> list[Any]: ...


def _check_reporter(session: _Parent, ev: Event, prov: Mapping[str, Any]) -> None:
    """A result was reported by the subagent its provenance names: the
    event's source is ``subagent:<that session>``, a subagent of ``session``
    holding the named run -- anyone else's ``subagent/result`` is forged."""
    child_id = prov["session"]
    where = f"the subagent result at seq {ev.seq} of session {session.id}"
    if ev.source != f"subagent:{child_id}":
        raise SubagentResultError(f"{where} has source {ev.source!r}, not its subagent's "
                                  f"(subagent:{child_id})")
    child = next((c for c in session.children() if c.id == child_id
                  and c.header.origin == "subagent"), None)
    if child is None:
        raise SubagentResultError(f"{where} names session {child_id}, which is no subagent "
                                  "of it")
    started = _find_started(child, prov["run_id"])
    if started is None or started.seq < child.header.seed_length:
        raise SubagentResultError(f"{where} names run {prov['run_id']!r}, which subagent "
                                  f"{child_id} never ran")


def remember_result(memory: MemoryView, session: _Parent, seq: int) -> MemoryItem | None:
    """Write the ``subagent/result`` at ``seq`` of ``session`` (the parent it
    was reported to) into that session's scope of ``memory``, provisional,
    sourced from the event; promotion is the only way further."""
    if memory.identity.session != session.id:
        raise InvalidArgumentError(f"a result reported to session {session.id} is remembered "
                                   "in that session's scope: the memory view's identity "
                                   f"names session {memory.identity.session!r}")
    if type(seq) is not int:
        raise InvalidArgumentError(f"seq must be an int, not {type(seq).__name__}")
    ev = session.get(seq)
    d = checked_result(ev, session.id)
    _check_reporter(session, ev, d["provenance"])
    stated = d.get("sensitivity")
    sensitivity = stated if isinstance(stated, str) and stated in SENSITIVITY else "restricted"
    return memory.remember("session", MEMORY_TYPE[d["kind"]], d.get("content"),
                           source=(session.id, seq), sensitivity=sensitivity,
                           state="provisional", actor=f"subagent:{d['provenance']['session']}")


__all__ = ["MEMORY_TYPE", "RESULT", "RESULT_KINDS", "STRENGTH", "checked_result", "parent_started",
           "pin", "remember_result", "result_data"]
