"""Checkpoints and recovery attempts as the log records them
(:func:`trajlog.projections.stages`; shown by ``trajlog checkpoints``
and the viewer's Runs view).

A pure, one-pass reading of the events :mod:`trajlog.api.checkpoints` writes:
``checkpoint/stage``, ``checkpoint/invalidated``, ``recovery/check`` and the
outcome that follows each check (``run/resume``, ``run/paused`` or
``run/restart``, linked by ``recovery_check``), and ``run/fork``.  Nothing is
decided here that the log does not say: a checkpoint is *valid* until a
``checkpoint/invalidated`` names it, and a recovery's verdicts are the ones
recorded.  Malformed payloads are skipped field by field, never fatal: the
log is untrusted input to a viewer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..events import Event

STAGE, INVALIDATED, CHECK, FORK = ("checkpoint/stage", "checkpoint/invalidated",
                                   "recovery/check", "run/fork")
OUTCOMES = {"run/resume": "resumed", "run/paused": "paused", "run/restart": "restarted"}
MARK_TYPES = frozenset({STAGE, INVALIDATED, CHECK, FORK, *OUTCOMES})


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(slots=True)
class Marks:
    """What :meth:`feed` has read: ``checkpoints``, ``recoveries`` and
    ``forks``, each a list of JSON-able dicts in log order (see
    :func:`read_marks` for their keys)."""

    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    recoveries: list[dict[str, Any]] = field(default_factory=list)
    forks: list[dict[str, Any]] = field(default_factory=list)
    _cp: dict[int, dict[str, Any]] = field(default_factory=dict)
    _rec: dict[int, dict[str, Any]] = field(default_factory=dict)

    def feed(self, ev: Event) -> None:
        """Read one event (any type; the ones not listed above are ignored)."""
        t = ev.type
        if t not in MARK_TYPES:
            return
        d = ev.data if isinstance(ev.data, dict) else {}
        if t == STAGE:
            self._stage(ev, d)
        elif t == INVALIDATED:
            key = _int(d.get("checkpoint"))
            target = self._cp.get(key) if key is not None else None
            if target is not None and target["valid"]:
                target.update(valid=False, invalidated_by=ev.seq,
                              reason=_str(d.get("reason")),
                              current_revision=_str(d.get("current_revision")))
        elif t == CHECK:
            self._check(ev, d)
        elif t == FORK:
            self.forks.append({
                "seq": ev.seq, "time": ev.time, "role": _str(d.get("role")),
                "checkpoint": _int(d.get("checkpoint")), "stage": _str(d.get("stage")),
                "reason": _str(d.get("reason")), "run_id": _str(d.get("run_id")),
                "other_session": _str(d.get("child_session") or d.get("parent_session"))})
        else:
            self._outcome(ev, d)

    def _stage(self, ev: Event, d: dict[str, Any]) -> None:
        pre = d.get("preconditions")
        entry = {"seq": ev.seq, "time": ev.time, "stage": _str(d.get("stage")),
                 "workspace_revision": _str(d.get("workspace_revision")),
                 "policy_version": _str(d.get("policy_version")),
                 "run_id": _str(d.get("run_id")),
                 "preconditions": [p for p in pre if isinstance(p, dict)]
                 if isinstance(pre, list) else [],
                 "valid": True, "invalidated_by": None, "reason": None,
                 "current_revision": None}
        self._cp[ev.seq] = entry
        self.checkpoints.append(entry)

    def _check(self, ev: Event, d: dict[str, Any]) -> None:
        checks = []
        found = d.get("checks")
        for c in found if isinstance(found, list) else []:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                checks.append({"name": c["name"], "ok": c.get("ok") is True,
                               "detail": _str(c.get("detail")) or ""})
        invalidated = d.get("invalidated")
        entry = {"seq": ev.seq, "time": ev.time, "action": _str(d.get("action")),
                 "requested": _int(d.get("requested")),
                 "checkpoint": _int(d.get("checkpoint")), "stage": _str(d.get("stage")),
                 "ok": d.get("ok") is True, "checks": checks,
                 "invalidated": [q for q in invalidated if type(q) is int]
                 if isinstance(invalidated, list) else [],
                 "run_id": _str(d.get("run_id")),
                 # filled by the outcome event that names this check
                 "outcome": None, "outcome_seq": None, "awaiting": None, "reasons": []}
        self._rec[ev.seq] = entry
        self.recoveries.append(entry)

    def _outcome(self, ev: Event, d: dict[str, Any]) -> None:
        key = _int(d.get("recovery_check"))
        rec = self._rec.get(key) if key is not None else None
        if rec is None or rec["outcome"] is not None:
            return   # an outcome without its check (or a second one) is not one
        reasons = d.get("reasons")
        rec.update(outcome=OUTCOMES[ev.type], outcome_seq=ev.seq,
                   awaiting=_str(d.get("awaiting")),
                   reasons=[{"check": _str(r.get("check")), "detail": _str(r.get("detail"))}
                            for r in reasons if isinstance(r, dict)]
                   if isinstance(reasons, list) else [])


def read_marks(events: Iterable[Event]) -> Marks:
    """The checkpoints, recovery attempts and forks of ``events``.

    * checkpoint: ``seq, time, stage, workspace_revision, policy_version,
      run_id, preconditions, valid, invalidated_by, reason, current_revision``;
    * recovery: ``seq, time, action, requested, checkpoint, stage, ok, checks
      [{name, ok, detail}], invalidated, run_id, outcome`` (resumed, paused,
      restarted; None when no outcome event follows: a crash between the two)
      ``, outcome_seq, awaiting, reasons``;
    * fork: ``seq, time, role, checkpoint, stage, reason, run_id, other_session``.
    """
    marks = Marks()
    for ev in events:
        marks.feed(ev)
    return marks


__all__ = ["MARK_TYPES", "OUTCOMES", "Marks", "read_marks"]
