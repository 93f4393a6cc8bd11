"""A session with run envelopes, stage checkpoints and recovery attempts, for
the viewer's Runs view (recorded with the real API)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

T0 = 1_800_000_000_000
REV_A, REV_B = "git:aaaa111", "git:bbbb222"


@dataclass(frozen=True)
class RunsSample:
    root: Any
    sub: Any
    lead: str
    child: str
    patch: int
    approved: int
    paused_check: int
    resumed_check: int
    superseding: int


def build(store: Any) -> RunsSample:
    s = store.create_session(cwd="/repo", metadata={"title": "runs and checkpoints"})
    with s.run(model="gpt-x", policy_version="ctx-3") as lead:
        with s.turn():
            s.append("user/message", {"content": "fix login"})
            s.append("assistant/message", {"content": "ok", "usage": {
                "input_tokens": 900, "output_tokens": 40}})
        lead.add_cost("inference", 0.0042)
        sub = s.spawn_subagent("review", call_id="t1")
        with sub.run(model="small", parent_run=lead.id) as child, sub.turn():
            sub.append("user/message", {"content": "review"})
    s.append("goal/change", {"revision": 1, "goal": {"text": "fix"}}, source="user")
    s.append("context/injection", {"policy": "p", "selected": []}, source="system")
    s.checkpoint("context-ready", now=T0)
    s.append("assistant/message", {"content": "the check is inverted"})
    s.checkpoint("analysis-complete", now=T0)
    patch = s.checkpoint("patch-prepared", workspace_revision=REV_A, now=T0)
    s.append("human/decision", {"subject": "patch", "value": "approve"}, source="human:alice")
    approved = s.checkpoint("human-approved", workspace_revision=REV_A, now=T0)
    paused = s.resume(now=T0, workspace_revision=REV_B)
    resumed = s.resume(patch.seq, now=T0, workspace_revision=REV_A)
    note = s.append("note/fact", {"text": "v1"})
    newer = s.append("note/fact", {"text": "v2"}, supersedes=note.seq, branch_id="b-2")
    return RunsSample(s, sub, lead.id, child.id, patch.seq, approved.seq,
                      paused.events[-2].seq, resumed.events[-2].seq, newer.seq)
