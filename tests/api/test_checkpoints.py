"""Stage checkpoints and resume / restart / fork (docs/runs-and-replay.md).

Every recovery check has a test here that fails when the check is removed (or
always passes): ``test_check_<name>_*``.  Every stage precondition has one
that fails when the precondition is dropped: ``test_precondition_*``.
"""

from __future__ import annotations

import pytest

from trajlog import projections
from trajlog.api.checkpoints import CHECKS, STAGES, checkpoint, fork_from, restart, resume
from trajlog.errors import InvalidArgumentError, InvalidStateError

T0 = 1_800_000_000_000
REV_A, REV_B = "git:aaaa111", "git:bbbb222"
V = {"policy_version": "ctx-v3", "plugin_versions": {"lint": "1.2"}}


def _to_patch(s, rev=REV_A):
    """A log walked through context-ready, analysis-complete, patch-prepared."""
    s.append("goal/change", {"revision": 1, "goal": {"text": "fix login"}}, source="user")
    s.append("context/injection", {"policy": "p", "selected": []}, source="system")
    checkpoint(s, "context-ready", now=T0, **V)
    s.append("assistant/message", {"content": "the check is inverted"})
    checkpoint(s, "analysis-complete", now=T0, **V)
    return checkpoint(s, "patch-prepared", workspace_revision=rev, now=T0, **V)


def _approved(s, rev=REV_A):
    patch = _to_patch(s, rev)
    tests = checkpoint(s, "tests-running", workspace_revision=rev, now=T0, **V)
    s.append("human/decision", {"subject": "patch", "value": "approve"}, source="human:alice")
    return patch, tests, checkpoint(s, "human-approved", workspace_revision=rev, now=T0, **V)


def _types(result):
    return [e.type for e in result.events]


def _check(result, name):
    return next(c for c in result.checks if c.name == name)


def test_checkpoint_event_records_the_state_a_resume_compares(store):
    s = store.create_session(cwd="/r")
    s.append("approval/grant", {"tool": "bash", "expires_at": T0 + 1000}, source="human:alice")
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "c1", "name": "read", "arguments": {}}]})
    cp = _to_patch(s)
    d = cp.data
    assert cp.type == "checkpoint/stage" and d["stage"] == "patch-prepared"
    assert d["index"] == STAGES.index("patch-prepared")
    assert cp.workspace_revision == REV_A == d["workspace_revision"]
    assert d["policy_version"] == "ctx-v3" and d["plugin_versions"] == {"lint": "1.2"}
    assert d["open_tool_calls"] == ["c1"]
    assert [(p["key"], p["expires_at"]) for p in d["permissions"]] == [
        ("approval:bash", T0 + 1000)]
    assert d["goal"] == {"revision": 1, "seq": 2}   # the goal/change after grant and message
    assert all(p["ok"] for p in d["preconditions"])


def test_clean_resume_records_every_check_then_run_resume(store):
    s = store.create_session(cwd="/r")
    patch = _to_patch(s)
    r = resume(s, now=T0 + 5, workspace_revision=REV_A, **V)
    assert r.outcome == "resumed" and r.checkpoint == patch.seq
    assert _types(r) == ["recovery/check", "run/resume"]
    rec, run = r.events
    assert [c["name"] for c in rec.data["checks"]] == list(CHECKS)
    assert all(c["ok"] for c in rec.data["checks"]) and rec.data["ok"] is True
    assert run.causal_parent == rec.seq and run.data["recovery_check"] == rec.seq


# -- each recovery check -----------------------------------------------------------------

def test_check_workspace_revision_moved_pauses(store):
    s = store.create_session(cwd="/r")
    _to_patch(s)
    r = resume(s, now=T0, workspace_revision=REV_B, **V)
    assert r.outcome == "paused" and not _check(r, "workspace-revision").ok
    assert r.events[-1].type == "run/paused"
    assert r.events[-1].data["awaiting"] == "restart-or-fork"
    # an unknown current revision cannot confirm the recorded one either
    assert resume(s, now=T0, **V).outcome == "paused"


def test_check_side_effects_open_tool_call_must_be_resolved_first(store):
    s = store.create_session(cwd="/r")
    patch = _to_patch(s)
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "c1", "name": "bash", "arguments": {"cmd": "make"}}]})
    s.append("tool/call", {"call_id": "c1", "name": "bash", "arguments": {"cmd": "make"}})
    r = resume(s, patch.seq, now=T0, workspace_revision=REV_A, **V)
    assert r.outcome == "paused" and "c1" in _check(r, "side-effects").detail
    assert r.events[-1].data["awaiting"] == "reconciliation"
    s.append("tool/result", {"call_id": "c1", "output": "ok", "is_error": False})
    assert resume(s, patch.seq, now=T0, workspace_revision=REV_A, **V).outcome == "resumed"


def test_check_unconfirmed_outcomes_after_a_crash(store):
    s = store.create_session(cwd="/r")
    patch = _to_patch(s)
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "w1", "name": "write", "arguments": {"path": "a.ts"}}]})
    s.append("tool/call", {"call_id": "w1", "name": "write", "arguments": {"path": "a.ts"}})
    s = store.load(s.id)            # closes w1 with TOOL_OUTCOME_UNKNOWN: the write may have run
    r = resume(s, patch.seq, now=T0, workspace_revision=REV_A, **V)
    assert _check(r, "side-effects").ok           # nothing open any more ...
    assert r.outcome == "paused"                  # ... but the side effect is unconfirmed
    assert "w1" in _check(r, "unconfirmed-outcomes").detail
    s.append("tool/reconciled", {"call_id": "w1", "outcome": "done", "by": "file hash"},
             source="system")
    assert resume(s, patch.seq, now=T0, workspace_revision=REV_A, **V).outcome == "resumed"


def test_check_permissions_stale_grant_pauses_until_reauthorised(store):
    s = store.create_session(cwd="/r")
    s.append("approval/grant", {"tool": "bash", "expires_at": T0 + 1000}, source="human:alice")
    patch = _to_patch(s)
    assert resume(s, now=T0 + 999, workspace_revision=REV_A, **V).outcome == "resumed"
    r = resume(s, patch.seq, now=T0 + 1000, workspace_revision=REV_A, **V)
    assert r.outcome == "paused" and "approval:bash" in _check(r, "permissions").detail
    paused = r.events[-1]
    assert paused.type == "run/paused" and paused.data["awaiting"] == "reauthorization"
    assert paused.data["reasons"][0]["check"] == "permissions"
    s.append("approval/grant", {"tool": "bash", "ttl_ms": 10**6}, source="human:alice",
             time=T0 + 1500)                      # ttl counts from the grant's time
    assert resume(s, patch.seq, now=T0 + 2000, workspace_revision=REV_A,
                  **V).outcome == "resumed"


def test_check_permissions_lease_grant_and_status_mark(store):
    s = store.create_session(cwd="/r")
    lease = s.append("lease/grant", {"resource": "deploy-key"}, source="system")
    patch = _to_patch(s)
    assert patch.data["permissions"][0]["key"] == "lease:deploy-key"
    s.mark(lease.seq, "expired", "key rotated", source="system")
    r = resume(s, patch.seq, now=T0, workspace_revision=REV_A, **V)
    assert r.outcome == "paused" and not _check(r, "permissions").ok


def test_check_policy_and_plugin_versions(store):
    s = store.create_session(cwd="/r")
    patch = _to_patch(s)
    r = resume(s, patch.seq, now=T0, workspace_revision=REV_A, policy_version="ctx-v4",
               plugin_versions={"lint": "1.2"})
    assert r.outcome == "paused" and "ctx-v3 -> ctx-v4" in _check(r, "policy-versions").detail
    r = resume(s, patch.seq, now=T0, workspace_revision=REV_A, policy_version="ctx-v3",
               plugin_versions={"lint": "1.3"})
    assert r.outcome == "paused" and "lint" in _check(r, "policy-versions").detail
    r = resume(s, patch.seq, now=T0, workspace_revision=REV_A, policy_version="ctx-v3",
               plugin_versions={"lint": "1.2", "fmt": "0.1"})
    assert r.outcome == "paused"      # a plugin added since counts too


def test_check_goal_changed_since_the_checkpoint(store):
    s = store.create_session(cwd="/r")
    patch = _to_patch(s)
    s.append("goal/change", {"revision": 2, "goal": {"text": "fix login, keep the API"}},
             source="human:alice")
    r = resume(s, patch.seq, now=T0, workspace_revision=REV_A, **V)
    assert r.outcome == "paused" and "1 -> 2" in _check(r, "goal").detail
    assert r.events[-1].data["awaiting"] == "human"


# -- human-approved and the fall-back ---------------------------------------------------

def test_human_approved_is_invalidated_when_the_workspace_moved(store):
    s = store.create_session(cwd="/r")
    _, tests, approved = _approved(s, rev=REV_A)
    assert resume(s, approved.seq, now=T0, workspace_revision=REV_A, **V).outcome == "resumed"
    r = resume(s, approved.seq, now=T0, workspace_revision=REV_B, **V)
    assert r.invalidated == (approved.seq,)
    inv = r.events[0]
    assert inv.type == "checkpoint/invalidated" and inv.data["checkpoint"] == approved.seq
    assert inv.data["reason"] == "workspace-changed" and inv.causal_parent == approved.seq
    # falls back to the previous valid stage (tests-running), which the same revision
    # check then decides: the old plan is not applied to the new code
    assert r.stage == "tests-running" and r.checkpoint == tests.seq
    assert r.outcome == "paused" and r.events[1].data["checkpoint"] == r.checkpoint
    # the invalidation holds: the latest valid checkpoint is no longer the approval
    again = resume(s, now=T0, workspace_revision=REV_A, **V)
    assert again.outcome == "resumed" and again.stage == "tests-running"
    assert again.invalidated == ()
    # read back from the log alone (projections.stages): the same story
    marks = projections.stages(s)
    by_seq = {cp["seq"]: cp for cp in marks.checkpoints}
    assert not by_seq[approved.seq]["valid"] and by_seq[tests.seq]["valid"]
    assert by_seq[approved.seq]["invalidated_by"] == inv.seq
    assert [r["outcome"] for r in marks.recoveries] == ["resumed", "paused", "resumed"]


def test_fallback_from_an_approval_can_resume_an_earlier_revision_bound_stage(store):
    s = store.create_session(cwd="/r")
    _to_patch(s, rev=REV_B)
    s.append("human/decision", {"subject": "patch", "value": "approve"}, source="human:alice")
    approved = checkpoint(s, "human-approved", workspace_revision=REV_A, now=T0, **V)
    r = resume(s, approved.seq, now=T0, workspace_revision=REV_B, **V)
    assert r.invalidated == (approved.seq,) and r.stage == "patch-prepared"
    assert r.outcome == "resumed" and _types(r) == [
        "checkpoint/invalidated", "recovery/check", "run/resume"]


def test_approval_invalidated_and_no_stage_left_pauses(store):
    s = store.create_session(cwd="/r")
    _, _, approved = _approved(s)
    # invalidate every earlier stage by hand: nothing valid is left to fall back to
    for seq, ev in enumerate(list(s.events())):
        if ev.type == "checkpoint/stage" and seq != approved.seq:
            s.append("checkpoint/invalidated", {"checkpoint": seq, "reason": "test"})
    r = resume(s, approved.seq, now=T0, workspace_revision=REV_B, **V)
    assert r.outcome == "paused" and r.checkpoint is None
    assert r.events[-1].data["reasons"][0]["check"] == "checkpoint"


# -- preconditions ------------------------------------------------------------------------

def test_precondition_context_ready_needs_a_context_for_the_current_goal(store):
    s = store.create_session(cwd="/r")
    with pytest.raises(InvalidStateError, match="context-built"):
        checkpoint(s, "context-ready")
    s.append("context/injection", {"policy": "p"})
    s.append("goal/change", {"revision": 1, "goal": {"text": "x"}})
    with pytest.raises(InvalidStateError, match="context-built"):
        checkpoint(s, "context-ready")       # built before the goal changed
    s.append("context/injection", {"policy": "p"})
    assert checkpoint(s, "context-ready").data["stage"] == "context-ready"


def test_precondition_analysis_complete_needs_context_ready_then_an_analysis(store):
    s = store.create_session(cwd="/r")
    s.append("assistant/message", {"content": "analysis"})
    with pytest.raises(InvalidStateError, match="after-context-ready"):
        checkpoint(s, "analysis-complete")
    s.append("context/injection", {"policy": "p"})
    checkpoint(s, "context-ready")
    with pytest.raises(InvalidStateError, match="analysis-recorded"):
        checkpoint(s, "analysis-complete")   # the message came before the context
    s.append("assistant/message", {"content": "analysis"})
    checkpoint(s, "analysis-complete")


def test_precondition_patch_and_tests_need_the_previous_stage_and_a_revision(store):
    s = store.create_session(cwd="/r")
    with pytest.raises(InvalidStateError, match="after-analysis-complete"):
        checkpoint(s, "patch-prepared", workspace_revision=REV_A)
    with pytest.raises(InvalidStateError, match="after-patch-prepared"):
        checkpoint(s, "tests-running", workspace_revision=REV_A)
    s.append("context/injection", {"policy": "p"})
    checkpoint(s, "context-ready")
    s.append("assistant/message", {"content": "analysis"})
    checkpoint(s, "analysis-complete")
    with pytest.raises(InvalidStateError, match="workspace-revision-recorded"):
        checkpoint(s, "patch-prepared")
    checkpoint(s, "patch-prepared", workspace_revision=REV_A)
    with pytest.raises(InvalidStateError, match="workspace-revision-recorded"):
        checkpoint(s, "tests-running")
    checkpoint(s, "tests-running", workspace_revision=REV_A)


def test_precondition_human_approved_needs_a_human_approval_after_the_patch(store):
    s = store.create_session(cwd="/r")
    s.append("human/decision", {"subject": "patch", "value": "approve"}, source="human:alice")
    _to_patch(s)
    with pytest.raises(InvalidStateError, match="human-approval"):   # approval predates it
        checkpoint(s, "human-approved", workspace_revision=REV_A)
    s.append("assistant/message", {"content": "approved, I think"}, source="model")
    s.append("human/decision", {"subject": "patch", "approved": False}, source="human:bob")
    with pytest.raises(InvalidStateError, match="human-approval"):   # model / refusal
        checkpoint(s, "human-approved", workspace_revision=REV_A)
    s.append("approval/grant", {"tool": "git push"}, source="human:carol")
    assert checkpoint(s, "human-approved", workspace_revision=REV_A).data["stage"] == (
        "human-approved")


def test_precondition_an_invalidated_stage_does_not_count(store):
    s = store.create_session(cwd="/r")
    patch = _to_patch(s)
    s.append("checkpoint/invalidated", {"checkpoint": patch.seq, "reason": "test"})
    with pytest.raises(InvalidStateError, match="after-patch-prepared"):
        checkpoint(s, "tests-running", workspace_revision=REV_A)


def test_precondition_callers_own_and_nothing_written_on_refusal(store):
    s = store.create_session(cwd="/r")
    s.append("context/injection", {"policy": "p"})
    before = s.last_seq
    with pytest.raises(InvalidStateError, match="lint-clean"):
        checkpoint(s, "context-ready", preconditions={"lint-clean": False, "ok": True})
    assert s.last_seq == before
    cp = checkpoint(s, "context-ready", preconditions={"lint-clean": True})
    assert {"name": "lint-clean", "ok": True, "detail": "caller's precondition"} in (
        cp.data["preconditions"])
    with pytest.raises(InvalidArgumentError):
        checkpoint(s, "deployed")
    with pytest.raises(InvalidArgumentError):
        resume(s, 0)                          # seq 0 is no checkpoint


# -- resume, restart and fork are distinct ---------------------------------------------

def test_restart_proceeds_on_a_moved_workspace_but_not_on_a_stale_permission(store):
    s = store.create_session(cwd="/r")
    s.append("approval/grant", {"tool": "bash", "expires_at": T0 + 1000}, source="human:alice")
    patch = _to_patch(s)
    r = restart(s, patch.seq, reason="workspace moved: rebuild", now=T0,
                workspace_revision=REV_B, **V)
    assert r.outcome == "restarted" and _types(r) == ["recovery/check", "run/restart"]
    assert not _check(r, "workspace-revision").ok          # recorded, not blocking
    assert r.events[-1].data["reason"] == "workspace moved: rebuild"
    r = restart(s, patch.seq, reason="again", now=T0 + 5000, workspace_revision=REV_B, **V)
    assert r.outcome == "paused" and r.events[-1].data["awaiting"] == "reauthorization"
    assert [x["check"] for x in r.events[-1].data["reasons"]] == ["permissions"]


def test_fork_from_makes_a_trajlog_fork_and_records_run_fork_in_both_logs(store):
    s = store.create_session(cwd="/r")
    with s.turn():
        patch = _to_patch(s)
    r = fork_from(s, patch.seq, reason="try cookies instead", run_id="run-7")
    assert r.outcome == "forked" and r.child is not None
    child = store.session(r.child.id)
    assert child.header.parent_session == s.id
    assert child.header.seed_length == patch.seq + 2    # cut after the turn's turn/end
    in_parent, in_child = r.events
    assert in_parent.type == in_child.type == "run/fork"
    assert in_parent.data["child_session"] == child.id and in_parent.data["role"] == "parent"
    assert in_child.data["parent_session"] == s.id and in_child.data["checkpoint"] == patch.seq
    assert child.tail(1)[0].type == "run/fork"
    types = {e.type for e in s.events()}
    assert "run/resume" not in types and "run/restart" not in types


def test_resume_restart_fork_event_types_differ(store):
    s = store.create_session(cwd="/r")
    with s.turn():
        patch = _to_patch(s)
    a = resume(s, patch.seq, now=T0, workspace_revision=REV_A, **V).events[-1].type
    b = restart(s, patch.seq, reason="rerun", now=T0, workspace_revision=REV_A,
                **V).events[-1].type
    c = fork_from(s, patch.seq, reason="alt").events[0].type
    assert (a, b, c) == ("run/resume", "run/restart", "run/fork")


def test_check_workspace_revision_falls_back_to_the_log_s_revision_before_the_checkpoint(store):
    """A checkpoint taken without a revision is still bound to the workspace
    the log recorded (``workspace/revision``) before it: a moved workspace
    does not resume."""
    s = store.create_session(cwd="/r")
    s.append("workspace/revision", {"revision": "git:0000000"}, source="host")
    s.append("workspace/revision", {"revision": REV_A}, source="host")
    s.append("goal/change", {"revision": 1, "goal": {"text": "fix login"}}, source="user")
    s.append("context/injection", {"policy": "p", "selected": []}, source="system")
    cp = checkpoint(s, "context-ready", now=T0, **V)
    assert cp.data["workspace_revision"] is None
    moved = resume(s, cp.seq, now=T0, workspace_revision=REV_B, **V)
    assert moved.outcome == "paused", moved.checks
    check = _check(moved, "workspace-revision")
    assert not check.ok and REV_A in check.detail and REV_B in check.detail
    assert resume(s, cp.seq, now=T0, workspace_revision=REV_A, **V).outcome == "resumed"
    # no revision given: the log's latest is the current one; a later
    # workspace/revision event is a moved workspace
    assert resume(s, cp.seq, now=T0, **V).outcome == "resumed"
    s.append("workspace/revision", {"revision": REV_B}, source="host")
    late = resume(s, cp.seq, now=T0, **V)
    assert late.outcome == "paused" and not _check(late, "workspace-revision").ok
    # a restart records the same verdict (it is not blocked by it)
    again = restart(s, cp.seq, reason="new revision", now=T0, **V)
    assert again.outcome == "restarted" and not _check(again, "workspace-revision").ok


def test_a_session_with_no_revision_anywhere_still_resumes_without_one(store):
    s = store.create_session(cwd="/r")
    s.append("goal/change", {"revision": 1, "goal": {"text": "fix login"}}, source="user")
    s.append("context/injection", {"policy": "p", "selected": []}, source="system")
    cp = checkpoint(s, "context-ready", now=T0, **V)
    r = resume(s, cp.seq, now=T0, **V)
    assert r.outcome == "resumed" and _check(r, "workspace-revision").ok


@pytest.mark.parametrize("name", ["checkpoint", "resume", "restart", "fork_from"])
def test_session_methods_spell_out_their_keywords_and_refuse_a_wrong_one_at_the_call(
        store, name):
    """Session.checkpoint/resume/restart/fork_from take the functions'
    keywords explicitly (inspect.signature shows them; no **options), so a
    misspelt keyword is a TypeError raised by the call itself, before any of
    trajlog runs, and nothing is written."""
    import inspect

    from trajlog.api import checkpoints as cp_module
    from trajlog.api.session import Session

    method = inspect.signature(getattr(Session, name))
    function = inspect.signature(getattr(cp_module, name))
    assert all(p.kind is not p.VAR_KEYWORD for p in method.parameters.values())
    keywords = {p.name: p.default for p in method.parameters.values() if p.kind is p.KEYWORD_ONLY}
    assert keywords == {p.name: p.default for p in function.parameters.values()
                        if p.kind is p.KEYWORD_ONLY}
    s = store.create_session(cwd="/r")
    patch = _to_patch(s)
    head = s.last_seq
    args = () if name == "checkpoint" else (patch.seq,)
    first = ("patch-prepared",) if name == "checkpoint" else ()
    extra = {} if name in ("checkpoint", "resume") else {"reason": "again"}
    with pytest.raises(TypeError, match="workspace_revison") as err:
        getattr(s, name)(*first, *args, workspace_revison=REV_A, **extra)
    assert err.traceback[-1].frame.code.name == inspect.currentframe().f_code.co_name
    assert s.last_seq == head
