"""Replay: the fixed replay set and the causes of drift.

The set is recorded data (tests/data/replay/*.jsonl, written once by
make_set.py): each case is imported into a fresh store and replayed.  The
same model gives no diff; a changed model gives an output diff, cause
``model``; the changed policy of the manifest gives the context diff and the
answer it names, cause ``policy``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import trajlog
from kits.replaykit import CASES, scripted, scripted_v2, session_id
from trajlog.errors import ReplayError
from trajlog.projections import context as context_module
from trajlog.projections.context import ContextPolicy, build_context
from trajlog.projections.replay import ModelInput

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
MANIFEST: dict[str, dict[str, Any]] = json.loads((DATA / "manifest.json").read_text())


@pytest.fixture
def store(tmp_path):
    with trajlog.open(str(tmp_path / "replay.db")) as st:
        yield st


def _recorded(store: trajlog.Store, name: str) -> tuple[trajlog.Session, str]:
    case = MANIFEST[name]
    store.import_path(DATA / case["file"])
    return store.session(case["session"]), case["run"]


def _changed_policy(s: trajlog.Session, case: dict[str, Any]) -> ContextPolicy:
    injection = next(e for e in s.events() if e.type == "context/injection")
    config = dict(injection.data["policy_config"])
    if "drop" in case:
        config["exclude"] = [x for x in config["exclude"] if x != case["drop"]]
    if "add" in case:
        config["exclude"] = [*config["exclude"], case["add"]]
    config["version"] += 1
    config.update(case.get("set", {}))
    return ContextPolicy.from_config(config)


def test_the_set_is_the_issue_s_six_cases():
    assert set(MANIFEST) == set(CASES) == {
        "normal-completion", "branch-conflict", "tool-timeout", "workspace-change",
        "expired-permission", "injected-content"}
    for case in MANIFEST.values():
        assert (DATA / case["file"]).is_file()


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_replay_with_the_same_model_gives_no_diff(store, name):
    s, run_id = _recorded(store, name)
    head = s.last_seq
    result = trajlog.replay(s, run_id, scripted)
    assert result.same, result.report()
    assert result.calls and all(c.input_exact for c in result.calls)
    answered = [c for c in result.calls if c.recorded is not None]
    assert answered and all(c.replayed == c.recorded for c in answered)
    assert s.last_seq == head            # a replay reads; it appends nothing
    assert trajlog.replay(s, run_id, scripted) == result


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_replay_with_a_changed_model_shows_output_drift_caused_by_the_model(store, name):
    s, run_id = _recorded(store, name)
    result = trajlog.replay(s, run_id, scripted_v2, model_name="scripted-2")
    assert result.causes == ["model"], result.report()
    answered = [c for c in result.calls if c.recorded is not None]
    assert all(c.output_diff for c in answered)
    assert all(c.input_exact and not c.context.added and not c.context.removed
               for c in result.calls)
    kinds = {(d.kind, d.cause) for d in result.drift}
    assert kinds == {("output", "model")}
    assert any("scripted-1 -> scripted-2" in d.detail for d in result.drift)
    assert any(line.startswith("+") and "Looking at" in line
               for c in answered for line in c.output_diff)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_replay_with_a_changed_policy_shows_context_drift_and_its_cause(store, name):
    case = MANIFEST[name]
    s, run_id = _recorded(store, name)
    policy = _changed_policy(s, case)
    result = trajlog.replay(s, run_id, scripted, policy=policy)
    assert "policy" in result.causes and "model" not in result.causes, result.report()
    context = [d for d in result.drift if d.kind == "context"]
    assert context and all(d.cause == "policy" for d in context)
    added = {r for c in result.calls for r in c.context.added.values()}
    removed = {r for c in result.calls for r in c.context.removed.values()}
    assert added == set(case["added"]) and removed == set(case["removed"])
    assert all(c.context.policy_changes for c in result.calls)
    now = [c.replayed_now for c in result.calls if c.output_now_diff]
    if case["output_now"] is None:
        assert not now
    else:
        assert any(case["output_now"] in str(r["content"]) + json.dumps(r["tool_calls"])
                   for r in now if r is not None), result.report()
        assert any(d.kind == "output_now" and d.cause == "policy" for d in result.drift)
    # the recorded input is still reproduced exactly under the recorded policy
    assert all(c.input_exact and not c.output_diff for c in result.calls)


def test_the_input_given_is_the_host_s_input(store):
    """The model is handed what the host handed it: messages (digest
    checked), request header, logical model, run params, pinned artifacts."""
    s, run_id = _recorded(store, "normal-completion")
    seen: list[ModelInput] = []

    def model(inp: ModelInput) -> dict[str, Any]:
        seen.append(inp)
        return scripted(inp)

    trajlog.replay(s, run_id, model)
    first = seen[0]
    header = next(e for e in s.events() if e.type == "request/header").data
    assert first.system_prompt == header["system_prompt"] and first.tools == header["tools"]
    assert first.parameters == header["parameters"] and first.params == {"temperature": 0}
    assert first.model == "scripted-1"
    assert first.artifacts == {"repo": "git:1111aaa", "index": "code-index/7"}
    injection = s.get(first.injection_seq)
    assert context_module.messages_digest(first.messages) == injection.data["messages_sha256"]
    assert [c.call for c in seen] == list(range(len(seen))) and len(seen) == 2


def test_an_erased_event_under_the_run_is_input_drift_caused_by_the_log(store):
    CASES["normal-completion"](store)
    s = store.session(session_id("normal-completion"))
    result = trajlog.replay(s, "run-normal-completion", scripted)
    assert result.same
    user = next(e for e in s.events() if e.type == "user/message")
    store.erase(s.id, user.seq, reason="user asked")
    result = trajlog.replay(s, "run-normal-completion", scripted)
    inputs = [d for d in result.drift if d.kind == "input"]
    assert inputs and all(d.cause == "log" and f"[{user.seq}] erased" in d.detail
                          for d in inputs), result.report()
    assert not any(c.input_exact for c in result.calls)


def test_a_changed_builder_is_named_as_the_cause(store, monkeypatch):
    CASES["normal-completion"](store)
    s = store.session(session_id("normal-completion"))
    original = context_module._render

    def render(ev: Any, policy: ContextPolicy) -> tuple[str, str]:
        role, text = original(ev, policy)
        return role, text + " (rendered by a newer builder)"

    monkeypatch.setattr(context_module, "_render", render)
    result = trajlog.replay(s, "run-normal-completion", scripted)
    assert {(d.kind, d.cause) for d in result.drift} >= {("input", "builder")}
    assert "log" not in result.causes and "policy" not in result.causes


def test_a_moved_artifact_is_drift_caused_by_the_artifact(store):
    s, run_id = _recorded(store, "normal-completion")
    seen: list[dict[str, str]] = []

    def model(inp: ModelInput) -> dict[str, Any]:
        seen.append(inp.artifacts)
        return scripted(inp)

    result = trajlog.replay(s, run_id, model, artifacts={"index": "code-index/8"})
    assert "artifact" in result.causes
    assert any("index: code-index/7 -> code-index/8" in d.detail for d in result.drift)
    assert {"repo": "git:1111aaa", "index": "code-index/8"} in seen   # the input built now
    assert {"repo": "git:1111aaa", "index": "code-index/7"} in seen   # the recorded input


def test_a_model_switch_inside_the_run_is_the_model_of_the_later_calls(store):
    s = store.create_session(cwd="/r")
    with s.run(model="m-1", run_id="r1") as run:
        s.append("user/message", {"content": "hello"})
        build_context(s)
        s.append("assistant/message", {"content": "hi"})
        s.switch_model(old="m-1", new="m-2", reason="cheaper")
        build_context(s)
        s.append("assistant/message", {"content": "hi again"})
    models: list[str | None] = []

    def model(inp: ModelInput) -> str:
        models.append(inp.model)
        return "hi" if inp.call == 0 else "hi again"

    assert trajlog.replay(s, run.id, model).same
    assert models == ["m-1", "m-2"]


def test_an_unknown_run_or_a_run_without_a_built_context_is_a_replay_error(store):
    s = store.create_session(cwd="/r")
    with s.run(model="m-1", run_id="bare") as run:
        s.append("user/message", {"content": "hello"})
        s.append("assistant/message", {"content": "hi"})
    with pytest.raises(ReplayError) as err:
        trajlog.replay(s, "nope", scripted)
    assert err.value.run_id == "nope" and "no such run" in str(err.value)
    with pytest.raises(ReplayError) as err:
        trajlog.replay(s, run.id, scripted)
    assert err.value.seq == run.started.seq and "context/injection" in str(err.value)
    with pytest.raises(TypeError):
        trajlog.replay(s, run.id, "not callable")  # type: ignore[arg-type]


def test_build_context_record_false_appends_nothing_and_upto_cuts(store):
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "one"})
    s.append("user/message", {"content": "two"})
    head = s.last_seq
    b = build_context(s, record=False)
    assert b.injection is None and s.last_seq == head
    cut = build_context(s, upto=1, record=False)
    assert [it.seq for it in cut.selected] == [0]
    assert build_context(s, upto=0, record=False).selected == []
    recorded = build_context(s)
    assert recorded.injection is not None
    assert recorded.injection.data["messages_sha256"] == context_module.messages_digest(
        b.messages)
    assert ContextPolicy.from_config(recorded.injection.data["policy_config"]) == ContextPolicy()


def test_a_call_whose_answer_was_never_recorded_is_unverifiable_not_the_same(store):
    """A run cut off after its context was built (or two builds in a row)
    has calls with no recorded answer: whatever the model answers now cannot
    be compared, so the replay says so instead of reporting no drift."""
    s = store.create_session(cwd="/r")
    with s.run(model="m-1", run_id="cut") as run:
        s.append("user/message", {"content": "hello"})
        build_context(s)                        # answer lost: built again
        build_context(s)
        s.append("assistant/message", {"content": "hi"})
        s.append("user/message", {"content": "and?"})
        build_context(s)                        # the run ends before an answer
    for answer in ("hi", "something else entirely"):
        result = trajlog.replay(s, run.id, lambda inp, a=answer: a)
        assert not result.same, result.report()
        assert [u.call for u in result.unverifiable] == [0, 2]
        assert all("no recorded answer" in u.detail for u in result.unverifiable)
        assert [c.recorded is None for c in result.calls] == [True, False, True]
        assert "unverifiable" in result.report()
    fully = trajlog.replay(s, run.id, lambda inp: "hi")
    assert fully.drift == []                            # call 1 matched; 0 and 2 unknown


def test_an_erased_answer_is_unverifiable_not_model_drift(store):
    """The recorded answer was erased since: there is nothing left to compare
    the model's answer with (it is not the model that changed)."""
    CASES["normal-completion"](store)
    s = store.session(session_id("normal-completion"))
    answer = next(e for e in s.events() if e.type == "assistant/message")
    store.erase(s.id, answer.seq, reason="user asked")
    result = trajlog.replay(s, "run-normal-completion", scripted)
    assert not result.same
    assert "model" not in result.causes, result.report()
    assert [u.call for u in result.unverifiable] == [0]
    assert "erased" in result.unverifiable[0].detail
    assert result.calls[0].recorded is None and result.calls[0].output_seq == answer.seq
