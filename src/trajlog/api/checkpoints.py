"""Stage checkpoints, and resuming, restarting or forking from one .

A task may stop anywhere -- a model timeout, a restart, a person going home, a
permission wait -- and continuing "from the last message" misses what changed
meanwhile.  So a run records **stage checkpoints**, and continuing from one
first runs the recovery checks and records them.

Stages, in order (:data:`STAGES`), each with preconditions checked against the
log when the checkpoint is taken (a failing one refuses it and writes nothing):

* ``context-ready`` -- a ``context/injection`` (a built context) recorded after
  the latest ``goal/change``: the context was built for the current goal.
* ``analysis-complete`` -- a valid ``context-ready`` checkpoint, then an
  ``assistant/message`` after it (the analysis).
* ``patch-prepared`` -- a valid ``analysis-complete`` checkpoint, and the
  workspace revision the patch applies to.
* ``tests-running`` -- a valid ``patch-prepared`` checkpoint, and the revision.
* ``human-approved`` -- a valid ``patch-prepared`` checkpoint, then a human
  approval after it (a ``human/decision`` not saying ``approved: false``, or an
  ``approval/grant`` from a human source), and the revision.

"Valid" means not named by a ``checkpoint/invalidated`` event.  Callers may
add conditions of their own (``preconditions={"lint-clean": True}``), recorded
with the built-in ones; a false one refuses the checkpoint too.

A ``checkpoint/stage`` event records the stage, its preconditions, the
workspace revision (also in the envelope), policy and plugin versions, the
open tool calls, the permissions in force with their expiry, and the goal
revision.  Permissions are ``approval/grant`` events in force
(:meth:`Session.approvals`) and ``lease/grant`` events, keyed by their
``tool`` / ``resource`` / ``name``, expiring at ``expires_at`` (epoch ms) or
``time + ttl_ms``, or earlier by an ``event/status`` mark (``expired``,
``rejected``, ``superseded``).

:func:`resume` runs the checks (:data:`CHECKS`) against the checkpoint and
records them as one ``recovery/check`` event, one entry per check:

1. ``workspace-revision`` -- the current revision is the recorded one.  A
   checkpoint taken without a revision is bound to the latest one the log
   recorded before it (``workspace/revision``); the current one is the
   caller's ``workspace_revision``, else the log's latest;
2. ``side-effects`` -- no tool call is still requested or running;
3. ``unconfirmed-outcomes`` -- no ``TOOL_OUTCOME_UNKNOWN`` result (a call a
   crash cut off: the tool may have run) without a later ``tool/reconciled``
   for its call;
4. ``permissions`` -- every permission recorded at the checkpoint is still in
   force now, itself or a newer grant for the same key;
5. ``policy-versions`` -- policy and plugin versions are the recorded ones;
6. ``goal`` -- the goal revision has not changed since the checkpoint.

All pass: ``run/resume``.  Any fails: ``run/paused`` with the failed checks as
reasons -- a stale permission waits for re-authorisation rather than reusing
the approval text of the history.  A ``human-approved`` checkpoint whose
workspace revision moved is invalidated (``checkpoint/invalidated``) and the
resume falls back to the previous valid checkpoint, whose checks then decide.

:func:`restart` (``run/restart``: keep the evidence, run the stage again) runs
the same checks and records them, but only outstanding side effects,
unconfirmed outcomes and stale permissions stop it -- a moved workspace, a new
policy or goal are what a restart is for.  :func:`fork_from` (``run/fork``)
starts a new attempt in a trajlog fork cut at the end of the checkpoint's turn.
Three distinct events, so that a replay can tell why a tool ran twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import InvalidArgumentError, InvalidStateError
from ..events import Event, now_ms
from ..lifecycle import TOOL_OUTCOME_UNKNOWN, Tracker
from ..projections import goal as goal_view
from ..projections.engine import FoldSource
from ..projections.evidence import collect, expires_at, source_class

STAGES = ("context-ready", "analysis-complete", "patch-prepared", "tests-running",
          "human-approved")
CHECKS = ("workspace-revision", "side-effects", "unconfirmed-outcomes", "permissions",
          "policy-versions", "goal")
# What a restart cannot get past: re-running a stage while a side effect is
# unsettled or without a live permission could do the work twice or unauthorised.
RESTART_BLOCKERS = frozenset({"side-effects", "unconfirmed-outcomes", "permissions"})
_NEEDS = {"analysis-complete": "context-ready", "patch-prepared": "analysis-complete",
          "tests-running": "patch-prepared", "human-approved": "patch-prepared"}
_NEEDS_REVISION = frozenset({"patch-prepared", "tests-running", "human-approved"})
_DEAD = frozenset({"expired", "rejected", "superseded"})


class CheckpointSession(Protocol):
    """What these functions need of a session (a :class:`trajlog.Session`)."""

    @property
    def id(self) -> str: ...

    def append(self, type: str, data: Any = None, *, time: int | None = None,
               source: str | None = None, causal_parent: int | None = None,
               workspace_revision: str | None = None, data_class: str | None = None,
               idempotency_key: str | None = None) -> Event: ...

    def events(self, from_seq: int = 0, to_seq: int | None = None, *,
               lazy: bool = False) -> Iterator[Event]: ...

    def approvals(self) -> list[Event]: ...

    def fold_source(self) -> FoldSource: ...

    def fork(self, at_seq: int, *, metadata: Mapping[str, Any] | None = None,
             session_id: str | None = None) -> CheckpointSession: ...


@dataclass(frozen=True, slots=True)
class Check:
    """One recovery check: its name, whether it passed, and why."""

    name: str
    ok: bool
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :func:`resume`, :func:`restart` or :func:`fork_from` did.

    ``outcome`` is ``resumed``, ``paused``, ``restarted`` or ``forked``;
    ``checkpoint`` / ``stage`` the checkpoint continued from (after any
    fall-back, None when none was left); ``events`` what was appended, in
    order; ``child`` the fork's session."""

    outcome: str
    checkpoint: int | None
    stage: str | None
    checks: tuple[Check, ...] = ()
    invalidated: tuple[int, ...] = ()
    events: tuple[Event, ...] = ()
    child: CheckpointSession | None = None

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)


@dataclass(slots=True)
class _Log:
    """One pass over the log: what checkpoints and checks look up."""

    checkpoints: dict[int, Event] = field(default_factory=dict)
    invalidated: set[int] = field(default_factory=set)
    approvals: list[int] = field(default_factory=list)     # human approvals, by seq
    injections: list[int] = field(default_factory=list)
    assistant: list[int] = field(default_factory=list)
    last_goal_change: int = -1
    unknown: dict[str, int] = field(default_factory=dict)  # call id -> unconfirmed result
    grants: list[Event] = field(default_factory=list)      # lease/grant events
    tracker: Tracker = field(default_factory=Tracker)
    status: dict[int, str] = field(default_factory=dict)
    revisions: list[tuple[int, str]] = field(default_factory=list)  # workspace/revision

    def revision(self, *, before: int | None = None) -> tuple[int, str] | None:
        """(seq, revision) of the latest ``workspace/revision`` (before ``before``)."""
        return next((r for r in reversed(self.revisions) if before is None or r[0] < before),
                    None)

    def valid(self, stage: str, *, before: int | None = None) -> int | None:
        """Seq of the latest valid checkpoint of ``stage`` (before ``before``)."""
        seqs = [s for s, ev in self.checkpoints.items() if ev.data.get("stage") == stage
                and s not in self.invalidated and (before is None or s < before)]
        return max(seqs, default=None)


def _scan(session: CheckpointSession) -> _Log:
    log = _Log()
    events = list(session.events())
    evidence = collect(events)
    log.status = {seq: entry[0] for seq, entry in evidence.status.items()}
    for ev in events:
        log.tracker.feed(ev)
        t, d = ev.type, ev.data if isinstance(ev.data, dict) else {}
        if t == "checkpoint/stage" and d.get("stage") in STAGES:
            log.checkpoints[ev.seq] = ev
        elif t == "checkpoint/invalidated" and isinstance(d.get("checkpoint"), int):
            log.invalidated.add(d["checkpoint"])
        elif t == "context/injection":
            log.injections.append(ev.seq)
        elif t == "assistant/message":
            log.assistant.append(ev.seq)
        elif t == "goal/change":
            log.last_goal_change = ev.seq
        elif t == "lease/grant":
            log.grants.append(ev)
        elif t == "workspace/revision":
            # as the context builder reads it: the payload's name, else the envelope's
            named = d.get("revision")
            rev = named if isinstance(named, str) and named else ev.workspace_revision
            if rev:
                log.revisions.append((ev.seq, rev))
        elif t == "tool/result" and d.get("status") == TOOL_OUTCOME_UNKNOWN:
            log.unknown[str(d.get("call_id"))] = ev.seq
        elif t == "tool/reconciled":
            log.unknown.pop(str(d.get("call_id")), None)
        if source_class(ev) == "human" and (
                (t == "human/decision" and d.get("approved") is not False)
                or t == "approval/grant"):
            log.approvals.append(ev.seq)
    return log


# -- permissions ---------------------------------------------------------------------

def _key(ev: Event) -> str:
    d = ev.data if isinstance(ev.data, dict) else {}
    for name in ("tool", "resource", "name"):
        if isinstance(d.get(name), str):
            return f"{ev.type.split('/')[0]}:{d[name]}"
    return f"{ev.type}@{ev.seq}"


def _in_force(session: CheckpointSession, log: _Log, now: int) -> list[dict[str, Any]]:
    """The permissions in force at ``now``: granted, unexpired, not marked dead."""
    out = []
    for ev in [*session.approvals(), *log.grants]:
        expires = expires_at(ev)
        if log.status.get(ev.seq) in _DEAD or (expires is not None and expires <= now):
            continue
        out.append({"seq": ev.seq, "type": ev.type, "key": _key(ev), "expires_at": expires})
    return out


# -- taking a checkpoint ---------------------------------------------------------------

def _preconditions(stage: str, log: _Log, revision: str | None) -> list[Check]:
    found: list[Check] = []
    if stage == "context-ready":
        after = [s for s in log.injections if s > log.last_goal_change]
        found.append(Check("context-built", bool(after),
                           f"context/injection at seq {after[-1]}" if after else
                           "no context/injection after the latest goal/change"))
    needed = _NEEDS.get(stage)
    prior = log.valid(needed) if needed else None
    if needed:
        found.append(Check(f"after-{needed}", prior is not None,
                           f"{needed} checkpoint at seq {prior}" if prior is not None else
                           f"no valid {needed} checkpoint"))
    if stage == "analysis-complete" and prior is not None:
        after = [s for s in log.assistant if s > prior]
        found.append(Check("analysis-recorded", bool(after),
                           f"assistant/message at seq {after[-1]}" if after else
                           "no assistant/message after the context-ready checkpoint"))
    if stage == "human-approved" and prior is not None:
        after = [s for s in log.approvals if s > prior]
        found.append(Check("human-approval", bool(after),
                           f"human approval at seq {after[-1]}" if after else
                           "no human approval after the patch-prepared checkpoint"))
    if stage in _NEEDS_REVISION:
        found.append(Check("workspace-revision-recorded", revision is not None,
                           revision or "a workspace revision is required at this stage"))
    return found


def checkpoint(session: CheckpointSession, stage: str, *,
               preconditions: Mapping[str, bool] | None = None,
               workspace_revision: str | None = None, policy_version: str | None = None,
               plugin_versions: Mapping[str, str] | None = None, run_id: str | None = None,
               now: int | None = None, source: str = "system") -> Event:
    """Append a ``checkpoint/stage`` event for ``stage`` once its preconditions
    hold (see the module docstring); :class:`InvalidStateError` naming the
    failed ones otherwise, and nothing is written.  ``preconditions`` are the
    caller's own, name -> held."""
    if stage not in STAGES:
        raise InvalidArgumentError(f"stage must be one of {', '.join(STAGES)}")
    extra = dict(preconditions or {})
    if not all(isinstance(k, str) and isinstance(v, bool) for k, v in extra.items()):
        raise TypeError("preconditions must map names (str) to bool")
    _check_versions(workspace_revision, policy_version, plugin_versions)
    log = _scan(session)
    found = [*_preconditions(stage, log, workspace_revision),
             *(Check(k, v, "caller's precondition") for k, v in extra.items())]
    failed = [c for c in found if not c.ok]
    if failed:
        raise InvalidStateError(f"session {session.id}: stage {stage} not reached: "
                                + "; ".join(f"{c.name}: {c.detail}" for c in failed))
    goal = goal_view(session)
    at = now_ms() if now is None else now
    data: dict[str, Any] = {
        "stage": stage, "index": STAGES.index(stage),
        "preconditions": [c.as_json() for c in found],
        "workspace_revision": workspace_revision, "policy_version": policy_version,
        "plugin_versions": dict(plugin_versions or {}),
        "open_tool_calls": list(log.tracker.open_calls),
        "permissions": _in_force(session, log, at), "taken_at": at,
        "goal": {"revision": goal.revision, "seq": goal.seq},
    }
    if run_id is not None:
        data["run_id"] = run_id
    return session.append("checkpoint/stage", data, source=source,
                          workspace_revision=workspace_revision)


def _check_versions(revision: str | None, policy: str | None,
                    plugins: Mapping[str, str] | None) -> None:
    if not isinstance(revision, (str, type(None))) or not isinstance(policy, (str, type(None))):
        raise TypeError("workspace_revision and policy_version must be str or None")
    if plugins is not None and not (isinstance(plugins, Mapping) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in plugins.items())):
        raise TypeError("plugin_versions must map plugin names (str) to versions (str)")


# -- the recovery checks ---------------------------------------------------------------

def _checks(session: CheckpointSession, log: _Log, cp: Event, now: int, revision: str | None,
            policy: str | None, plugins: Mapping[str, str] | None) -> list[Check]:
    d = cp.data
    out = []
    recorded, then_where = d.get("workspace_revision"), ""
    if recorded is None and (seen := log.revision(before=cp.seq)) is not None:
        # no revision given to the checkpoint: the log's word for the workspace it saw
        recorded, then_where = seen[1], f" (by workspace/revision at seq {seen[0]})"
    current, now_where = _current_revision(log, revision)
    if recorded is None:
        out.append(Check("workspace-revision", True, "none recorded at the checkpoint"))
    else:
        out.append(Check("workspace-revision", current == recorded,
                         f"recorded {recorded}{then_where}, now "
                         f"{current or 'unknown'}{now_where}"))
    open_calls = list(log.tracker.open_calls)
    out.append(Check("side-effects", not open_calls,
                     "open tool calls: " + ", ".join(open_calls) + " (resolve them first)"
                     if open_calls else "no open tool call"))
    unknown = sorted(log.unknown.items(), key=lambda kv: kv[1])
    out.append(Check("unconfirmed-outcomes", not unknown,
                     "outcome unknown (the tool may have run; reconcile before retrying): "
                     + ", ".join(f"{c} (seq {s})" for c, s in unknown)
                     if unknown else "every tool outcome is known"))
    live = {p["key"] for p in _in_force(session, log, now)}
    stale = sorted({p["key"] for p in d.get("permissions") or () if p.get("key") not in live})
    out.append(Check("permissions", not stale,
                     "expired or revoked: " + ", ".join(stale) + " (re-authorise)"
                     if stale else "every recorded permission is still in force"))
    then_plugins = d.get("plugin_versions") or {}
    now_plugins = dict(plugins or {})
    moved = sorted(k for k in {*then_plugins, *now_plugins}
                   if then_plugins.get(k) != now_plugins.get(k))
    same_policy = d.get("policy_version") == policy
    out.append(Check("policy-versions", same_policy and not moved,
                     "; ".join([*([] if same_policy else [
                         f"policy {d.get('policy_version')} -> {policy}"]),
                         *(f"plugin {k} {then_plugins.get(k)} -> {now_plugins.get(k)}"
                           for k in moved)]) or "unchanged"))
    goal = goal_view(session)
    then = d.get("goal") or {}
    changed = (goal.revision, goal.seq) != (then.get("revision"), then.get("seq"))
    out.append(Check("goal", not changed,
                     f"goal revision {then.get('revision')} -> {goal.revision} (seq {goal.seq})"
                     if changed else "unchanged"))
    return out


def _current_revision(log: _Log, given: str | None) -> tuple[str | None, str]:
    """The current workspace revision: the caller's, else the log's latest."""
    if given is not None:
        return given, ""
    latest = log.revision()
    if latest is None:
        return None, ""
    return latest[1], f" (workspace/revision at seq {latest[0]})"


def _target(log: _Log, checkpoint_seq: int | None) -> Event:
    if checkpoint_seq is None:
        valid = [s for s in log.checkpoints if s not in log.invalidated]
        if not valid:
            raise InvalidStateError("the session has no valid checkpoint to continue from")
        return log.checkpoints[max(valid)]
    if isinstance(checkpoint_seq, bool) or not isinstance(checkpoint_seq, int):
        raise TypeError("checkpoint_seq must be int or None")
    cp = log.checkpoints.get(checkpoint_seq)
    if cp is None:
        raise InvalidArgumentError(f"no checkpoint/stage event at seq {checkpoint_seq}")
    return cp


def _fallback(log: _Log, cp: Event) -> Event | None:
    """The previous valid checkpoint of an earlier stage."""
    rank = STAGES.index(cp.data["stage"])
    seqs = [s for s, ev in log.checkpoints.items() if s < cp.seq and s not in log.invalidated
            and STAGES.index(ev.data["stage"]) < rank]
    return log.checkpoints[max(seqs)] if seqs else None


def _recover(session: CheckpointSession, checkpoint_seq: int | None, action: str, *,
             now: int | None, workspace_revision: str | None, policy_version: str | None,
             plugin_versions: Mapping[str, str] | None, run_id: str | None, source: str,
             reason: str | None) -> Recovery:
    _check_versions(workspace_revision, policy_version, plugin_versions)
    at = now_ms() if now is None else now
    log = _scan(session)
    requested = _target(log, checkpoint_seq)
    cp: Event | None = requested
    appended: list[Event] = []
    invalidated: list[int] = []
    checks: list[Check] = []
    while cp is not None:
        if cp.seq in log.invalidated:
            cp = _fallback(log, cp)
            continue
        checks = _checks(session, log, cp, at, workspace_revision, policy_version,
                         plugin_versions)
        moved = not checks[0].ok
        if cp.data["stage"] != "human-approved" or not moved:
            break
        # An approval covers the workspace it saw: never the code that came after.
        appended.append(session.append("checkpoint/invalidated", {
            "checkpoint": cp.seq, "stage": cp.data["stage"], "reason": "workspace-changed",
            "recorded_revision": cp.data.get("workspace_revision"),
            "current_revision": _current_revision(log, workspace_revision)[0]},
            source=source, causal_parent=cp.seq, workspace_revision=workspace_revision))
        invalidated.append(cp.seq)
        log.invalidated.add(cp.seq)
        cp = _fallback(log, cp)
    record: dict[str, Any] = {
        "action": action, "requested": requested.seq, "now": at,
        "checkpoint": None if cp is None else cp.seq,
        "stage": None if cp is None else cp.data["stage"],
        "checks": [c.as_json() for c in checks] if cp is not None else [],
        "invalidated": invalidated}
    if run_id is not None:
        record["run_id"] = run_id
    blocking = [c for c in checks if not c.ok and (action != "restart"
                                                    or c.name in RESTART_BLOCKERS)]
    record["ok"] = cp is not None and not blocking
    check_ev = session.append("recovery/check", record, source=source,
                              causal_parent=requested.seq, workspace_revision=workspace_revision)
    appended.append(check_ev)
    base = {k: record[k] for k in ("checkpoint", "stage")}
    base["recovery_check"] = check_ev.seq
    if run_id is not None:
        base["run_id"] = run_id
    if record["ok"]:
        event_type = "run/resume" if action == "resume" else "run/restart"
        outcome = "resumed" if action == "resume" else "restarted"
        if reason is not None:
            base["reason"] = reason
    else:
        event_type, outcome = "run/paused", "paused"
        base["reasons"] = ([{"check": c.name, "detail": c.detail} for c in blocking]
                           if cp is not None else
                           [{"check": "checkpoint", "detail": "no valid checkpoint left"}])
        base["awaiting"] = _awaiting(blocking)
    appended.append(session.append(event_type, base, source=source,
                                   causal_parent=check_ev.seq,
                                   workspace_revision=workspace_revision))
    return Recovery(outcome, None if cp is None else cp.seq,
                    None if cp is None else cp.data["stage"], tuple(checks),
                    tuple(invalidated), tuple(appended))


def _awaiting(blocking: list[Check]) -> str:
    """What a paused run waits for, most specific first."""
    names = {c.name for c in blocking}
    if "permissions" in names:
        return "reauthorization"
    if names & {"side-effects", "unconfirmed-outcomes"}:
        return "reconciliation"
    if "workspace-revision" in names:
        return "restart-or-fork"
    return "human"


def resume(session: CheckpointSession, checkpoint_seq: int | None = None, *,
           now: int | None = None, workspace_revision: str | None = None,
           policy_version: str | None = None, plugin_versions: Mapping[str, str] | None = None,
           run_id: str | None = None, source: str = "system") -> Recovery:
    """Continue from a checkpoint (default: the latest valid one) in the same
    state: run the recovery checks against what is true ``now`` (the current
    workspace revision, policy and plugin versions), record them as a
    ``recovery/check`` event, then ``run/resume`` if all pass or ``run/paused``
    with the reasons.  A ``human-approved`` checkpoint whose revision moved is
    invalidated and the previous valid checkpoint decides."""
    return _recover(session, checkpoint_seq, "resume", now=now,
                    workspace_revision=workspace_revision, policy_version=policy_version,
                    plugin_versions=plugin_versions, run_id=run_id, source=source,
                    reason=None)


def restart(session: CheckpointSession, checkpoint_seq: int | None = None, *,
            reason: str, now: int | None = None, workspace_revision: str | None = None,
            policy_version: str | None = None, plugin_versions: Mapping[str, str] | None = None,
            run_id: str | None = None, source: str = "system") -> Recovery:
    """Run the checkpoint's stage again, keeping the evidence: the checks are
    run and recorded as for :func:`resume`, then ``run/restart`` -- unless a
    side effect is unsettled or a permission stale (``run/paused``)."""
    if not isinstance(reason, str) or not reason:
        raise TypeError("reason must be a non-empty str")
    return _recover(session, checkpoint_seq, "restart", now=now,
                    workspace_revision=workspace_revision, policy_version=policy_version,
                    plugin_versions=plugin_versions, run_id=run_id, source=source,
                    reason=reason)


def fork_from(session: CheckpointSession, checkpoint_seq: int | None = None, *, reason: str,
              workspace_revision: str | None = None, run_id: str | None = None,
              metadata: Mapping[str, Any] | None = None,
              source: str = "system") -> Recovery:
    """Try a new approach from a checkpoint: a trajlog fork cut at the end of
    the checkpoint's turn (:class:`ForkUnavailableError` while it is open),
    with ``run/fork`` recorded in both logs (the parent's names the child,
    the child's the parent and checkpoint)."""
    if not isinstance(reason, str) or not reason:
        raise TypeError("reason must be a non-empty str")
    log = _scan(session)
    cp = _target(log, checkpoint_seq)
    child = session.fork(cp.seq, metadata=metadata)
    common = {"checkpoint": cp.seq, "stage": cp.data["stage"], "reason": reason,
              **({"run_id": run_id} if run_id is not None else {})}
    in_child = child.append("run/fork", {**common, "role": "child",
                                         "parent_session": session.id},
                            source=source, causal_parent=cp.seq,
                            workspace_revision=workspace_revision)
    in_parent = session.append("run/fork", {**common, "role": "parent",
                                            "child_session": child.id},
                               source=source, causal_parent=cp.seq,
                               workspace_revision=workspace_revision)
    return Recovery("forked", cp.seq, cp.data["stage"], (), (), (in_parent, in_child), child)


__all__ = ["CHECKS", "RESTART_BLOCKERS", "STAGES", "Check", "CheckpointSession", "Recovery",
           "checkpoint", "fork_from", "restart", "resume"]
