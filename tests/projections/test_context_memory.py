"""The working set reads memory: build_context(memory=...) layers the
constitution, the tenant policy, the user's preferences and retrieved
facts/episodes, each with its budget, scoped before ranking, and records the
item versions it used in the context/injection."""

from __future__ import annotations

import pytest

from trajlog import Identity, errors
from trajlog.projections.context import ContextPolicy, build_context

APPROVED = {"kind": "human_approval", "by": "human:lead"}


def _session(store, *, tenant="acme", user="alice", question="how do we deploy the api?"):
    s = store.create_session(cwd="/repo", metadata={"tenant": tenant, "user": user})
    s.append("user/message", {"content": question}, source="user")
    return s


def _memory(store):
    """A constitution, a tenant policy, a user preference and a user fact."""
    gid = store.deploy_global("policy", {"text": "never push to main"}, actor="deploy:ci")
    mem = store.memory(Identity("acme", user="alice"))
    tenant = mem.remember("tenant", "policy", {"text": "deploys need a ticket"},
                          evidence=APPROVED)
    pref = mem.remember("user", "preference", {"text": "answer in short bullets"})
    fact = mem.remember("user", "fact", {"text": "the api deploy uses blue green"})
    return mem, gid, tenant, pref, fact


def test_the_layers_come_in_order_with_references_and_are_recorded(store):
    mem, gid, tenant, pref, fact = _memory(store)
    s = _session(store)
    build = build_context(s, memory=mem)
    layers = [m for m in build.messages if m.get("layer")]
    assert [m["layer"] for m in layers] == ["constitution", "tenant_policy", "preferences",
                                            "retrieved"]
    assert build.messages[0]["role"] == "system" and "layer" not in build.messages[0]
    assert f"[MEM-{gid}@v1] never push to main" in layers[0]["content"]
    assert f"[MEM-{tenant.id}@v1] deploys need a ticket" in layers[1]["content"]
    assert f"[MEM-{pref.id}@v1]" in layers[2]["content"]
    assert f"[MEM-{fact.id}@v1] the api deploy uses blue green" in layers[3]["content"]
    d = build.injection.data
    assert d["memory"] == [
        {"id": gid, "version": 1, "layer": "constitution", "scope": "global",
         "sensitivity": "internal"},
        {"id": tenant.id, "version": 1, "layer": "tenant_policy", "scope": "tenant",
         "sensitivity": "internal"},
        {"id": pref.id, "version": 1, "layer": "preferences", "scope": "user",
         "sensitivity": "internal"},
        {"id": fact.id, "version": 1, "layer": "retrieved", "scope": "user",
         "sensitivity": "internal"}]
    # the query came from the user message: recorded by seq, not by its text
    assert d["memory_query"] is None and d["memory_query_seq"] == 0
    assert d["memory_identity"] == {"tenant": "acme", "user": "alice", "session": None}
    assert build.chars == sum(len(m["content"]) for m in build.messages)
    # a corrected item is read at its new version
    mem.correct(fact.id, {"text": "the api deploy uses canary"}, reason="changed")
    again = build_context(s, memory=mem, record=False)
    assert f"[MEM-{fact.id}@v2] the api deploy uses canary" in again.messages[4]["content"]


def test_scope_and_state_filters_apply_before_ranking(store):
    """Another tenant's and another user's items, however well they match, are
    never candidates; quarantined, provisional, revoked and expired ones are
    never shown."""
    mine = store.memory(Identity("acme", user="alice"))
    store.memory(Identity("globex", user="bob")).remember(
        "user", "fact", {"text": "deploy deploy deploy deploy other tenant"})
    store.memory(Identity("acme", user="carol")).remember(
        "user", "fact", {"text": "deploy deploy deploy deploy other user"})
    good = mine.remember("user", "fact", {"text": "deploy on tuesdays"})
    held = mine.remember("user", "fact", {"text": "deploy deploy held back"}, state="provisional")
    bad = mine.remember("user", "fact", {"text": "deploy deploy deploy poisoned"})
    mine.quarantine(bad.id, reason="suspected poisoning")
    gone = mine.remember("user", "fact", {"text": "deploy deploy deploy revoked"})
    mine.revoke(gone.id, reason="wrong")
    late = mine.remember("user", "episode", {"text": "deploy deploy deploy lapsed"},
                         retention={"ttl_ms": 1000})
    s = _session(store, question="deploy")
    build = build_context(s, memory=mine, now=late.expires_ms,
                          policy=ContextPolicy(memory_retrieve=1))
    assert [u.id for u in build.memory.used] == [good.id]
    assert {x.id: x.reason for x in build.memory.excluded} == {late.id: "memory.expired"}
    assert held.id not in str(build.messages) and bad.id not in str(build.messages)
    assert "other" not in str(build.messages)
    assert build.injection.data["memory_excluded"] == {"memory.expired": 1}
    # listed layers record their non-active items with the state as the reason
    pref = mine.remember("user", "preference", {"text": "tabs"}, state="provisional")
    b2 = build_context(s, memory=mine, record=False, now=late.expires_ms - 1)
    assert {x.id: x.reason for x in b2.memory.excluded} == {
        pref.id: "memory.state.provisional"}
    assert late.id in [u.id for u in b2.memory.used]   # not yet expired then


def test_policy_layers_keep_their_reserved_share_against_session_noise(store):
    mem, gid, tenant, _, _ = _memory(store)
    s = _session(store)
    for i in range(40):   # session noise: far more conversation than the budget
        s.append("assistant/message", {"content": f"thinking {i} " + "x" * 300})
    policy = ContextPolicy(budget_chars=6_000, reserved_chars=1_000, recent_messages=40,
                           layer_shares=(("conversation", 1.0),))
    build = build_context(s, policy, memory=mem)
    assert [u.id for u in build.memory.used][:2] == [gid, tenant.id]
    assert build.excluded_counts.get("budget.conversation", 0) > 0
    assert build.chars <= policy.budget_chars
    # noise never takes the policy layers' reserved share, used or not
    held = int(6_000 * 0.16)
    assert build.chars - build.memory.chars <= 6_000 - held
    # a constitution that does not fit its share refuses, writing nothing
    store.deploy_global("policy", {"text": "rule " * 200}, actor="deploy:ci")
    head = s.last_seq
    with pytest.raises(errors.ContextBudgetError, match="constitution"):
        build_context(s, policy, memory=mem)
    assert s.last_seq == head
    roomy = ContextPolicy(budget_chars=6_000, reserved_chars=1_000,
                          memory_shares=(("constitution", 0.3), ("tenant_policy", 0.1)))
    assert len(build_context(s, roomy, memory=mem).memory.used) == 3   # no user layers


def test_preferences_and_retrieved_items_are_cut_to_their_share(store):
    mem = store.memory(Identity("acme", user="alice"))
    small = mem.remember("user", "preference", {"text": "short"})
    big = mem.remember("user", "preference", {"text": "long " * 400})
    s = _session(store)
    build = build_context(s, ContextPolicy(budget_chars=10_000), memory=mem)
    assert [u.id for u in build.memory.used] == [small.id]
    assert build.injection.data["memory_excluded_items"] == [
        {"id": big.id, "version": 1, "layer": "preferences", "reason": "memory.budget.preferences"}]


def test_an_explicit_query_is_recorded_and_a_build_without_memory_is_unchanged(store):
    mem, *_, fact = _memory(store)
    s = _session(store, question="hello")
    build = build_context(s, memory=mem, memory_query="blue green")
    assert build.injection.data["memory_query"] == "blue green"
    assert fact.id in [u.id for u in build.memory.used]
    plain = build_context(s)
    assert plain.memory is None and "memory" not in plain.injection.data
    assert not [m for m in plain.messages if m.get("layer")]


def test_bad_memory_arguments_are_refused_with_typed_errors(store):
    s = _session(store)
    head = s.last_seq
    with pytest.raises(errors.ArgumentTypeError, match="MemoryView"):
        build_context(s, memory=object())
    mem = store.memory(Identity("acme", user="alice"))
    with pytest.raises(errors.ArgumentTypeError, match="memory_query"):
        build_context(s, memory=mem, memory_query=5)
    with pytest.raises(errors.InvalidArgumentError, match="memory_query"):
        build_context(s, memory=mem, memory_query="lone \ud800 surrogate")
    with pytest.raises(errors.MemoryAccessError, match="tenant 'globex'"):
        build_context(s, memory=store.memory(Identity("globex")))
    with pytest.raises(errors.MemoryAccessError, match="user 'bob'"):
        build_context(s, memory=store.memory(Identity("acme", user="bob")))
    assert s.last_seq == head
    with pytest.raises(errors.InvalidArgumentError, match="memory layers"):
        ContextPolicy(memory_shares=(("noise", 0.5),))
    with pytest.raises(errors.InvalidArgumentError, match="add up"):
        ContextPolicy(memory_shares=(("constitution", 0.6), ("retrieved", 0.6)))
    with pytest.raises(errors.InvalidArgumentError, match="memory_retrieve"):
        ContextPolicy(memory_retrieve=-1)
    roundtrip = ContextPolicy(memory_shares=(("retrieved", 0.5),))
    assert ContextPolicy.from_config(roundtrip.config()) == roundtrip
