"""The gates of the memory layers: a target model's data-class policy applies
to memory items (by their sensitivity) as to log events -- in the build and
in a model switch -- and a memory view serves only its own tenant's, user's
and session's builds."""

from __future__ import annotations

import pytest

from trajlog import Identity, errors
from trajlog.projections.context import build_context


def _setup(store):
    mem = store.memory(Identity("acme", user="alice"))
    public = mem.remember("user", "fact", {"text": "PUBLIC-FACT deploy is blue green"},
                          sensitivity="public")
    internal = mem.remember("user", "fact", {"text": "INTERNAL-FACT deploy key rotation"},
                            sensitivity="internal")
    s = store.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "alice"})
    s.append("model/policy", {"model": "ext", "allowed_data_classes": ["public"]})
    s.append("user/message", {"content": "how does the deploy work?"}, data_class="public")
    return mem, s, public, internal


def test_the_target_models_policy_excludes_memory_it_may_not_receive(store):
    mem, s, public, internal = _setup(store)
    build = build_context(s, target_model="ext", memory=mem)
    text = str(build.messages)
    assert "PUBLIC-FACT" in text and "INTERNAL-FACT" not in text
    d = build.injection.data
    assert [(m["id"], m["sensitivity"]) for m in d["memory"]] == [(public.id, "public")]
    assert d["memory_excluded"] == {"memory.data_class.not_allowed_for_model": 1}
    assert d["memory_excluded_items"] == [{"id": internal.id, "version": 1,
                                           "layer": "retrieved",
                                           "reason": "memory.data_class.not_allowed_for_model"}]
    # without a target model (or for one with no recorded policy) the item is sent
    assert "INTERNAL-FACT" in str(build_context(s, memory=mem, record=False).messages)


def test_a_switch_refuses_a_build_holding_memory_the_new_model_may_not_receive(store):
    mem, s, _, internal = _setup(store)
    held = build_context(s, memory=mem, record=False)
    before = len(list(s.events()))
    with pytest.raises(errors.ModelDataClassError) as exc:
        s.switch_model(old="big", new="ext", reason="cost", context=held)
    assert exc.value.refused == [(f"MEM-{internal.id}@v1", "internal")]
    assert len(list(s.events())) == before   # nothing written
    gated = build_context(s, target_model="ext", memory=mem, record=False)
    assert s.switch_model(old="big", new="ext", reason="cost", context=gated).type == \
        "model/switch"


def test_a_view_for_one_session_does_not_feed_another(store):
    a = store.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "alice"})
    b = store.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "alice"})
    for s in (a, b):
        s.append("user/message", {"content": "deploy note?"})
    mem_a = store.memory(Identity("acme", user="alice", session=a.id))
    mem_a.remember("session", "fact", {"text": "SESSION-A-ONLY deploy note"})
    before = len(list(b.events()))
    with pytest.raises(errors.MemoryAccessError, match="session"):
        build_context(b, memory=mem_a)
    assert len(list(b.events())) == before
    assert "SESSION-A-ONLY" in str(build_context(a, memory=mem_a).messages)


def test_a_session_without_a_tenant_takes_no_tenants_memory(store):
    c = store.create_session(cwd="/repo")
    c.append("user/message", {"content": "deploy note?"})
    globex = store.memory(Identity("globex", user="bob"))
    globex.remember("user", "fact", {"text": "GLOBEX deploy note"})
    before = len(list(c.events()))
    with pytest.raises(errors.MemoryAccessError, match="names no tenant"):
        build_context(c, memory=globex)
    assert len(list(c.events())) == before
    # a view bound to this very session is the caller naming its owner
    bound = store.memory(Identity("globex", user="bob", session=c.id))
    assert "GLOBEX" in str(build_context(c, memory=bound).messages)


def test_the_auditor_view_reports_summary_claims_and_memory_sent(store):
    from trajlog.projections.reader_views import view_events
    mem = store.memory(Identity("acme", user="alice"))
    fact = mem.remember("user", "fact", {"text": "MEMFACT api deploys"}, sensitivity="internal")
    s = store.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "alice"})
    s.append("user/message", {"content": "api deploys?"}, data_class="public")
    check = s.append("check/result", {"subject": "db", "value": "INTERNAL-VALUE"},
                     source="pytest", data_class="internal")
    build = build_context(s, target_model="ext", memory=mem)
    assert "INTERNAL-VALUE" in str(build.summary) and check.seq not in build.injection.data[
        "selected"]   # sent through the summary, not as a selected event
    inj = next(e for e in view_events(s, "auditor") if e.type == "context/injection")
    audit = inj.data["audit"]
    assert audit["data_classes"] == {"public": [0]}
    assert audit["read_data_classes"] == {"internal": 1, "public": 1}
    assert audit["memory_data_classes"] == {"internal": [f"MEM-{fact.id}@v1"]}


def test_a_build_for_a_model_with_a_policy_masks_secrets_as_its_view_does(store):
    from trajlog.projections.reader_views import ReaderView, view_events
    s = store.create_session(cwd="/repo")
    s.append("model/policy", {"model": "vendor", "allowed_data_classes": ["public", "internal"]})
    s.append("user/message", {"content": "key is AKIAIOSFODNN7EXAMPLE ok?"},
             data_class="internal")
    shown = list(view_events(s, ReaderView("external-model", "vendor")))[1].data["content"]
    build = build_context(s, target_model="vendor")
    assert "AKIAIOSFODNN7EXAMPLE" not in str(build.messages)
    assert shown.replace("key is ", "") in str(build.messages)   # the same masked text
    # no recorded policy for the model: sent as written (as before)
    assert "AKIAIOSFODNN7EXAMPLE" in str(build_context(s, target_model="other",
                                                       record=False).messages)


def test_a_switch_refuses_a_build_whose_summary_holds_a_class_the_model_may_not_receive(store):
    s = store.create_session(cwd="/repo")
    s.append("model/policy", {"model": "ext", "allowed_data_classes": ["public"]})
    s.append("user/message", {"content": "is the db up?"}, data_class="public")
    check = s.append("check/result", {"subject": "db", "value": "INTERNAL-VALUE"},
                     source="pytest", data_class="internal")
    build = build_context(s, record=False)
    assert "INTERNAL-VALUE" in str(build.messages)   # through the summary only
    with pytest.raises(errors.ModelDataClassError) as exc:
        s.switch_model(old="big", new="ext", reason="cost", context=build)
    assert exc.value.refused == [(check.seq, "internal")]


def test_a_build_for_a_model_with_a_policy_masks_secrets_in_its_memory_too(store):
    """The masking a model's recorded policy turns on covers the memory
    layers as well as the events: a key held in a fact the model may receive
    is sent masked; without a target model the item is sent as it is."""
    key = "AKIAIOSFODNN7EXAMPLE"
    mem = store.memory(Identity("acme", user="alice"))
    mem.remember("user", "fact", {"text": f"the deploy uses access key {key}"},
                 sensitivity="public")
    s = store.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "alice"})
    s.append("model/policy", {"model": "ext", "allowed_data_classes": ["public"]})
    s.append("user/message", {"content": "which access key does the deploy use?"},
             data_class="public")
    gated = build_context(s, target_model="ext", memory=mem, record=False)
    assert key not in str(gated.messages) and "deploy uses access key" in str(gated.messages)
    assert key in str(build_context(s, memory=mem, record=False).messages)
