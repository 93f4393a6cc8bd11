"""Reader views (developer, auditor, external-model) and the model data-class
policy a context build and a model switch honour."""

from __future__ import annotations

import pytest

from trajlog import errors
from trajlog.projections.context import ContextPolicy, build_context
from trajlog.projections.evidence import ref
from trajlog.projections.reader_views import (
    NOT_ALLOWED,
    VIEWS,
    ReaderView,
    view_events,
    view_fold,
)

SECRET = "AKIAIOSFODNN7EXAMPLE"


def governed(store):
    """A log with every data class, a secret, a grant that lapsed, a denial,
    a model policy and a recorded build."""
    s = store.create_session(cwd="/repo")
    s.append("user/message", {"content": "fix the login"}, data_class="public")       # 0
    s.append("file/snapshot", {"path": "conf.py", "content": f"KEY = '{SECRET}'"},
             data_class="internal")                                                   # 1
    s.append("user/message", {"content": "customer ssn 078-05-1120"},
             data_class="restricted")                                                 # 2
    s.append("approval/grant", {"action": "push", "expires_at": 1000})               # 3
    s.append("approval/deny", {"action": "force-push"})                              # 4
    s.append("assistant/message", {"content": "reading conf.py"})                    # 5
    s.append("model/policy", {"model": "ext-llm", "allowed_data_classes": ["public"]})  # 6
    build_context(s, target_model="in-house", now=2000)                              # 7
    return s


@pytest.mark.parametrize("role", VIEWS)
def test_every_view_cites_every_seq_and_says_what_it_withholds(store, role):
    s = governed(store)
    raw = list(s.events())
    seen = list(view_events(s, ReaderView(role, "ext-llm" if role == "external-model"
                                          else None, now=2000)))
    assert [e.seq for e in seen] == [e.seq for e in raw]
    assert [e.type for e in seen] == [e.type for e in raw]
    assert [ref(e) for e in seen] == [ref(e) for e in raw]   # the builder's refs too
    # the envelope stays; only masking a secret raises a class (to internal-redacted)
    assert all(a.data_class in (b.data_class, "internal-redacted") and a.source == b.source
               for a, b in zip(seen, raw, strict=True))
    withheld = [e for e in seen if isinstance(e.data, dict) and "withheld" in e.data]
    assert withheld, role
    for e in withheld:
        assert e.data["withheld"]["view"] == role and e.data["withheld"]["reason"]
    # a view never shows the secret, nor the restricted payload
    text = repr([e.data for e in seen])
    assert SECRET not in text and "078-05-1120" not in text


def test_developer_masks_secrets_and_withholds_restricted(store):
    s = governed(store)
    seen = {e.seq: e for e in view_events(s, "developer")}
    assert seen[1].data["content"] == "KEY = '[REDACTED:aws_access_key]'"
    assert seen[1].data_class == "internal-redacted"
    assert seen[2].data["withheld"] == {"view": "developer", "reason": "data_class.restricted"}
    assert "withheld from the developer view" in seen[2].data["content"]
    assert seen[0].data == {"content": "fix the login"}
    assert s.get(1).data["content"] == f"KEY = '{SECRET}'"   # the log is untouched


def test_auditor_sees_decisions_classes_and_what_left_for_models(store):
    s = governed(store)
    seen = {e.seq: e for e in view_events(s, ReaderView("auditor", now=2000))}
    assert seen[3].data["audit"] == {"expires_at": 1000, "expired": True}
    assert seen[4].data == {"action": "force-push"}
    assert seen[6].data["allowed_data_classes"] == ["public"]
    for q in (0, 1, 2, 5):
        assert seen[q].data["withheld"]["reason"] == "auditor.content"
    assert [seen[q].data_class for q in (0, 1, 2)] == ["public", "internal", "restricted"]
    audit = seen[7].data["audit"]
    assert audit["target_model"] == "in-house"
    assert audit["data_classes"] == {"internal": [1], "public": [0], "unclassified": [5]}
    later = {e.seq: e for e in view_events(s, ReaderView("auditor", now=500))}
    assert later[3].data["audit"]["expired"] is False


def test_external_model_view_admits_only_its_allowed_classes(store):
    s = governed(store)
    seen = {e.seq: e for e in view_events(s, ReaderView("external-model", "ext-llm"))}
    assert seen[0].data == {"content": "fix the login"}
    for q in (1, 2, 3, 5):
        assert seen[q].data["withheld"]["reason"] == NOT_ALLOWED, q
    # a model with no recorded policy: every class but restricted
    other = {e.seq: e for e in view_events(s, ReaderView("external-model", "other"))}
    assert "withheld" not in other[5].data and "withheld" in other[2].data
    assert SECRET not in repr(other[1].data)
    # without --model: the session's current model; none named -> refused
    with pytest.raises(errors.InvalidArgumentError, match="names no model"):
        list(view_events(s, "external-model"))
    s.switch_model(old="in-house", new="ext-llm", reason="cheaper",
                   context=build_context(s, target_model="ext-llm", record=False))
    assert list(view_events(s, "external-model"))[1].data["withheld"]["reason"] == NOT_ALLOWED


def test_chat_through_a_view_shows_the_gap_in_place(store):
    s = governed(store)
    nodes = view_fold(s, "chat", "developer")
    assert [n.seq for n in nodes if n.kind == "message"] == [0, 2, 5]
    assert "withheld from the developer view" in next(n.text for n in nodes if n.seq == 2)
    with pytest.raises(errors.InvalidArgumentError):
        view_fold(s, "nonesuch", "developer")


def test_a_view_is_named_by_its_role(store):
    with pytest.raises(errors.InvalidArgumentError, match="developer"):
        ReaderView("admin")
    with pytest.raises(errors.InvalidArgumentError):
        ReaderView("external-model", "")
    with pytest.raises(errors.InvalidArgumentError):
        list(view_events(store.create_session(), 7))   # type: ignore[arg-type]


def test_a_build_for_a_model_leaves_out_what_its_policy_refuses(store):
    s = governed(store)
    build = build_context(s, target_model="ext-llm", record=False, now=2000)
    reasons = {x.seq: x.reason for x in build.excluded}
    assert reasons[1] == NOT_ALLOWED and reasons[5] == NOT_ALLOWED
    assert [it.seq for it in build.selected] == [0]
    assert SECRET not in "\n".join(m["content"] for m in build.messages)
    # a model without a recorded policy builds as before
    plain = build_context(s, record=False, now=2000)
    other = build_context(s, target_model="other", record=False, now=2000)
    assert [it.seq for it in other.selected] == [it.seq for it in plain.selected] == [0, 1, 5]
    # the policy is in the log: a build from before it (what replay does) did not apply it
    before = build_context(s, target_model="ext-llm", record=False, now=2000, upto=6)
    assert [it.seq for it in before.selected] == [0, 1, 5]
    # a later policy for the same model wins
    s.append("model/policy", {"model": "ext-llm", "allowed_data_classes":
                              ["public", "internal"]})
    wider = build_context(s, target_model="ext-llm", record=False, now=2000)
    assert [it.seq for it in wider.selected] == [0, 1, 5]


def test_unclassified_events_count_as_the_policy_says(store):
    s = store.create_session()
    s.append("user/message", {"content": "no class stated"})
    s.append("model/policy", {"model": "m", "allowed_data_classes": ["public"],
                              "unclassified": "public"})
    assert [it.seq for it in build_context(s, target_model="m", record=False).selected] == [0]


def test_a_switch_checks_the_target_models_classes_before_sending(store):
    s = governed(store)
    head = s.last_seq
    with pytest.raises(errors.ModelDataClassError) as caught:
        s.switch_model(old="in-house", new="ext-llm", reason="cheaper")
    assert caught.value.model == "ext-llm"
    # the denial (#4) is sent through the summary ("forbidden actions"), not selected
    assert caught.value.refused == [(1, "internal"), (4, "unclassified"), (5, "unclassified")]
    assert caught.value.allowed == ["public"]
    assert s.last_seq == head   # nothing written
    # a context built for the target passes, and so does a model with no policy
    ok = s.switch_model(old="in-house", new="ext-llm", reason="cheaper",
                        context=build_context(s, target_model="ext-llm", record=False))
    assert ok.type == "model/switch" and ok.data["new"] == "ext-llm"
    assert s.switch_model(old="ext-llm", new="other", reason="back").data["new"] == "other"
    # a build under another policy is checked too
    tight = ContextPolicy(recent_messages=1)
    with pytest.raises(errors.ModelDataClassError):
        s.switch_model(old="other", new="ext-llm", reason="again",
                       context=build_context(s, tight, record=False))
    with pytest.raises(TypeError):
        s.switch_model(old="other", new="ext-llm", reason="again", context="latest")


def test_a_model_policy_has_a_shape(store):
    s = store.create_session()
    with pytest.raises(errors.ValidationError):
        s.append("model/policy", {"model": "m"})
    with pytest.raises(errors.ValidationError):
        s.append("model/policy", {"model": "m", "allowed_data_classes": "public"})


def test_a_policy_naming_no_known_class_admits_nothing(store):
    s = store.create_session()
    s.append("user/message", {"content": "hello"}, data_class="public")
    s.append("model/policy", {"model": "m", "allowed_data_classes": ["publc"]})   # a typo
    build = build_context(s, target_model="m", record=False)
    assert build.selected == [] and build.excluded[0].reason == NOT_ALLOWED
    s.append("model/policy", {"model": "m", "allowed_data_classes": ["public"],
                              "unclassified": "secretish"})   # malformed: denies
    assert build_context(s, target_model="m", record=False).selected == []
    s.append("model/policy", {"model": "m", "allowed_data_classes": ["public"]})
    assert [it.seq for it in build_context(s, target_model="m", record=False).selected] == [0]


def test_a_gated_build_scans_for_secrets_only_what_it_can_still_select(store, monkeypatch):
    """The masking a model's policy turns on runs on the candidates that fit
    their budget -- not on every tool result of a long log (a build for a
    gated model of a 5k-event log scanned each one: 9x a plain build)."""
    from trajlog.projections import context

    scanned = []
    monkeypatch.setattr(context, "mask_text", lambda text: scanned.append(text) or text)
    s = store.create_session(cwd="/repo")
    s.append("model/policy", {"model": "vendor", "allowed_data_classes": ["public", "internal"]})
    with s.turn():
        s.append("user/message", {"content": "run the tests"})
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": f"c{i}", "name": "pytest"} for i in range(300)]})
        for i in range(300):
            s.append("tool/call", {"call_id": f"c{i}", "name": "pytest", "arguments": {}},
                     source="host")
            s.append("tool/result", {"call_id": f"c{i}", "output": "x" * 2_000})
    build = build_context(s, target_model="vendor", record=False)
    assert 0 < len(build.selected) < 300
    # each selected item once, plus the summary
    assert len(scanned) <= len(build.selected) + 1, len(scanned)
