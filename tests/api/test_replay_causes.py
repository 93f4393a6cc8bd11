"""Replay names the drift causes memory, static_prefix and lifecycle -- each
for exactly the change it stands for, and never for another."""

from __future__ import annotations

import hashlib

import pytest

import trajlog
from trajlog import Identity, errors
from trajlog.memory import RetentionRules
from trajlog.projections.context import build_context
from trajlog.projections.replay import CAUSES

PREFIX = "You are a careful engineer."
T0 = 1_900_000_000_000


def answer(messages):
    """A deterministic model: its answer changes whenever its input does."""
    text = "\n".join(str(m["content"]) for m in messages)
    return {"content": hashlib.sha256(text.encode()).hexdigest()[:12], "tool_calls": []}


def model(inp):
    return answer(inp.messages)


def recorded_run(store, *, memory=True, ttl=None, before=None, grant=None):
    """A run whose one model call read memory (a user fact about deploys)."""
    mem = store.memory(Identity("acme", user="alice"))
    fact = mem.remember("user", "fact", {"text": "deploys go out on tuesdays"},
                        **({} if ttl is None else {"retention": {"ttl_ms": ttl}}))
    s = store.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "alice"})
    if before is not None:
        before(s)
    if grant is not None:
        s.append("approval/grant", {"tool": "bash", "expires_at": grant}, source="human:al")
    with s.run(model="m-1", static_prefix=PREFIX) as run:
        s.append("user/message", {"content": "when do deploys go out?"}, source="user")
        build = build_context(s, memory=mem if memory else None, now=fact.created_ms)
        s.append("assistant/message", answer(build.messages))
    return s, run.id, mem, fact


def test_an_unchanged_run_replays_the_same_with_its_memory_and_prefix(store):
    s, run, mem, _fact = recorded_run(store)
    out = trajlog.replay(s, run, model, memory=mem, static_prefix=PREFIX)
    assert out.same and out.calls[0].input_exact, out.report()
    assert set(CAUSES) >= {"memory", "static_prefix", "lifecycle"}


@pytest.mark.parametrize("change", ["correct", "quarantine", "revoke"])
def test_a_memory_item_changed_since_is_cause_memory(store, change):
    s, run, mem, fact = recorded_run(store)
    if change == "correct":
        mem.correct(fact.id, {"text": "deploys go out on thursdays"}, reason="moved")
    elif change == "quarantine":
        mem.quarantine(fact.id, reason="suspected poisoning")
    else:
        mem.revoke(fact.id, reason="wrong")
    out = trajlog.replay(s, run, model, memory=mem, static_prefix=PREFIX)
    assert out.causes == ["memory"], out.report()
    mine = [d for d in out.drift if d.kind == "memory"]
    assert len(mine) == 1 and f"MEM-{fact.id}@v1 (retrieved)" in mine[0].detail
    assert {"correct": "now v2, active (moved)", "quarantine": "now v2, quarantined",
            "revoke": "revoked (wrong)"}[change] in mine[0].detail
    # a correction or quarantine leaves the recorded version readable: the
    # input is still rebuilt exactly; a revocation erased its content
    assert out.calls[0].input_exact is (change != "revoke")
    # the model is asked again on the memory as it is now (a revoked item is
    # gone from both: the rebuilt input already lacks it)
    assert (out.calls[0].replayed_now is None) is (change == "revoke")


def test_an_item_promoted_since_is_named_as_now_read(store):
    s, run, mem, _fact = recorded_run(store)
    mine = store.memory(Identity("acme", user="alice", session=s.id))
    noted = mine.remember("session", "fact", {"text": "deploys also go out on fridays"})
    promoted = mine.promote(noted.id, "user")
    out = trajlog.replay(s, run, model, memory=mem)
    assert out.causes == ["memory"], out.report()
    detail = next(d.detail for d in out.drift if d.kind == "memory")
    assert f"now read: MEM-{promoted.id}@v1 (retrieved, promoted from {noted.id}@1)" == detail


def test_a_call_that_read_memory_needs_the_view_to_rebuild(store):
    s, run, _, fact = recorded_run(store)
    out = trajlog.replay(s, run, model)
    assert out.causes == ["memory"] and not out.calls[0].input_exact
    assert "pass memory=" in out.drift[0].detail and fact.id in out.drift[0].detail
    other = store.memory(Identity("globex"))
    with pytest.raises(errors.MemoryAccessError):
        trajlog.replay(s, run, model, memory=other)


def test_a_moved_static_prefix_is_cause_static_prefix(store):
    s, run, mem, _ = recorded_run(store)
    out = trajlog.replay(s, run, model, memory=mem, static_prefix="You are a fast engineer.")
    assert out.causes == ["static_prefix"], out.report()
    assert [d.kind for d in out.drift] == ["static_prefix"]
    assert trajlog.replay(s, run, model, static_prefix={"v": 1}, memory=mem).causes == [
        "static_prefix"]


def test_an_item_expired_by_the_replays_now_is_cause_lifecycle(store):
    s, run, mem, fact = recorded_run(store, ttl=60_000)
    assert trajlog.replay(s, run, model, memory=mem).same    # the recorded time: visible
    out = trajlog.replay(s, run, model, memory=mem, now=fact.expires_ms)
    assert out.causes == ["lifecycle"], out.report()
    assert f"MEM-{fact.id}@v1 (retrieved): expired at {fact.expires_ms}" in out.report()
    assert out.calls[0].context.messages_changed and out.calls[0].input_exact


def test_an_item_retention_revoked_is_cause_lifecycle_and_by_hand_memory(store):
    s, run, mem, fact = recorded_run(store, ttl=1)
    store.apply_retention(now_ms=fact.expires_ms + 1)
    out = trajlog.replay(s, run, model, memory=mem)
    assert out.causes == ["lifecycle"], out.report()
    assert "revoked by retention" in out.report() and not out.calls[0].input_exact


def test_a_lapsed_approval_is_cause_lifecycle(store):
    s, run, _mem, _fact = recorded_run(store, memory=False, grant=T0)
    build = s.get(next(e.seq for e in s.events() if e.type == "context/injection"))
    assert build.data["selected"] and build.data["now"] < T0
    assert trajlog.replay(s, run, model).same
    out = trajlog.replay(s, run, model, now=T0)
    assert out.causes == ["lifecycle"], out.report()
    assert "permission.expired" in out.report()


def _tool_output(s):
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "c1", "name": "pytest", "arguments": {}}]})
    s.append("tool/call", {"call_id": "c1", "name": "pytest", "arguments": {}})
    s.append("tool/result", {"call_id": "c1", "output": "42 passed"})


def test_a_retention_erasure_is_cause_lifecycle_and_a_manual_one_log(store):
    s, run, *_ = recorded_run(store, memory=False, before=_tool_output)
    result = next(e for e in s.events() if e.type == "tool/result")
    store.set_retention(RetentionRules.of(tool_outputs="1d"), actor="ops")
    store.apply_retention(now_ms=result.time + 2 * 86_400_000)
    assert s.get(result.seq).data["erased"]["actor"] == "trajlog:retention"
    out = trajlog.replay(s, run, model)
    assert out.causes == ["lifecycle"], out.report()
    t, run2, *_ = recorded_run(store, memory=False, before=_tool_output)
    store.set_retention(RetentionRules.of(), actor="ops")
    seq = next(e.seq for e in t.events() if e.type == "tool/result")
    store.erase(t.id, [seq], reason="a secret", actor="human:me")
    assert trajlog.replay(t, run2, model).causes == ["log"]


def test_bad_replay_arguments_are_typed(store):
    s, run, mem, _ = recorded_run(store)
    with pytest.raises(errors.InvalidArgumentError, match="now"):
        trajlog.replay(s, run, model, memory=mem, now=-1)
    with pytest.raises(errors.ArgumentTypeError, match="MemoryView"):
        trajlog.replay(s, run, model, memory=object())
