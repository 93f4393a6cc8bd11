"""SWE-agent ``.traj`` import: golden tests on the two real trajectories.

The expected numbers were counted from the files with jq (``history`` roles,
``trajectory`` length, tool call ids), not from the importer:

* ``swe-agent__test-repo-i1.traj`` (0.x): history 12 = system 1, user 6 (one a
  demonstration, the task, 4 observations), assistant 5; trajectory 5 steps;
  no ``tool_calls`` (actions parsed from text); exit_status ``submitted``.
* ``marshmallow-...function_calling_replace.traj`` (1.x): history 24 = system
  1, user 1, assistant 11 (one tool call each), tool 11; trajectory 11 steps;
  the 11 tool call ids hold only 6 distinct values (the replayed
  demonstration reuses them), so 5 calls are renamed.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog.errors import ImportFormatError
from trajlog.interop.mapping import MappedEvent, MappedSession, Notes
from trajlog.interop.sources import swe_agent
from trajlog.projections import model_history, trajectory

REAL = Path(__file__).resolve().parents[1] / "realdata"
OLD = REAL / "swe-agent" / "swe-agent__test-repo-i1.traj"
NEW = REAL / "swe-agent" / "marshmallow-code__marshmallow-1867__function_calling_replace.traj"


def _mapped(path: Path) -> tuple[list[tuple[MappedSession, list[MappedEvent]]], Notes]:
    notes = Notes()
    out = []
    for session in swe_agent.read(path, notes):
        out.append((session, list(session.events)))
    return out, notes


def _source(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _import(tmp_path: Path, path: Path) -> tuple[Any, Any]:
    store = trajlog.open(str(tmp_path / "t.db"))
    report = store.import_path(path, format="swe-agent")
    return store, report


def test_sniff_takes_traj_files_only() -> None:
    assert swe_agent.sniff(OLD) and swe_agent.sniff(NEW)
    assert swe_agent.sniff(OLD.parent)
    for other in (REAL / "openhands" / "legacy-v0" / "basic_gui_mode.json",
                  REAL / "codex" / "synthetic-shapes" / "agent-sessions__codex_small.jsonl",
                  REAL / "inspect-ai" / "2025-05-12T20-28-13-04-00_popularity.json"):
        assert not swe_agent.sniff(other)


def test_old_format_events() -> None:
    [(session, events)], notes = _mapped(OLD)
    assert session.key == "swe-agent:swe-agent__test-repo-i1"
    assert session.agent_preset == "primary"
    assert session.cwd == "/klieret__swe-agent-test-repo"
    assert session.metadata["import"]["exit_status"] == "submitted"
    assert Counter(e.type for e in events) == {
        "swe-agent/config": 1, "turn/start": 1, "swe-agent/system": 1, "user/message": 2,
        "step/start": 5, "assistant/message": 5, "tool/call": 5, "tool/result": 5,
        "step/end": 5, "turn/end": 1, "swe-agent/info": 1}
    assert notes.unmapped == [] and notes.torn == [] and notes.warnings == []
    # no ids in 0.x: one synthetic id per step, named by the action's command
    asked = [c for e in events if e.type == "assistant/message" for c in e.data["tool_calls"]]
    assert [c["id"] for c in asked] == ["swe-0", "swe-1", "swe-2", "swe-3", "swe-4"]
    assert [c["name"] for c in asked] == ["find_file", "open", "edit", "python", "submit"]
    # the demonstration is flagged, the task is not
    users = [e.data for e in events if e.type == "user/message"]
    assert users[0]["meta"] is True and users[0]["demonstration"] is True
    assert "meta" not in users[1] and users[1]["content"].startswith("We're currently solving")
    # each result follows its call, which names it as its cause
    for i, e in enumerate(events):
        if e.type == "tool/result":
            assert events[i - 1].type == "tool/call" and e.cause == i - 1
            assert events[i - 1].data["call_id"] == e.data["call_id"]
    # the last action's answer is not in the history: it comes from its step
    doc = _source(OLD)
    last = [e for e in events if e.type == "tool/result"][-1]
    assert last.data["from_trajectory"] is True
    assert last.data["output"] == doc["trajectory"][4]["observation"]
    assert events[-1].data["swe-agent"] == doc["info"]


def test_new_format_events_and_renamed_ids() -> None:
    [(session, events)], notes = _mapped(NEW)
    assert session.agent_preset == "main" and session.cwd == "/testbed"
    assert session.metadata["import"]["model"] == "gpt-4o"
    assert Counter(e.type for e in events) == {
        "swe-agent/config": 1, "turn/start": 1, "swe-agent/system": 1, "user/message": 1,
        "step/start": 11, "assistant/message": 11, "tool/call": 11, "tool/result": 11,
        "step/end": 11, "turn/end": 1, "swe-agent/info": 1}
    assert notes.unmapped == [] and notes.torn == []
    # 11 calls, 6 distinct source ids: 5 renamed, each noted
    assert len(notes.warnings) == 5 and all("again" in w for w in notes.warnings)
    asked = [c for e in events if e.type == "assistant/message" for c in e.data["tool_calls"]]
    ids = [c["id"] for c in asked]
    assert len(set(ids)) == 11
    doc = _source(NEW)
    source_ids = [c["id"] for m in doc["history"] for c in m.get("tool_calls") or []]
    assert [c.get("source_id", c["id"]) for c in asked] == source_ids
    assert ids[3] == "call_5iDdbOYybq7L19vqXmR0DPaU#2"
    assert ids[8] == "call_5iDdbOYybq7L19vqXmR0DPaU#3"
    # arguments are the parsed JSON the model wrote
    assert asked[4]["arguments"] == {"file_name": "fields.py", "dir": "src"}
    # replay config kept at the start, info at the end
    assert events[0].data["swe-agent"]["replay_config"] == doc["replay_config"]
    assert events[-1].data["swe-agent"]["edited_files30"] == doc["info"]["edited_files30"]
    # the step's own fields (not in the history) ride on step/start
    starts = [e.data for e in events if e.type == "step/start"]
    assert [s["index"] for s in starts] == list(range(11))
    assert starts[0]["swe-agent"]["execution_time"] == doc["trajectory"][0]["execution_time"]
    assert starts[0]["swe-agent"]["state"] == doc["trajectory"][0]["state"]


@pytest.mark.parametrize("path", [OLD, NEW], ids=["0.x", "1.x"])
def test_model_history_is_the_source_history(tmp_path: Path, path: Path) -> None:
    store, report = _import(tmp_path, path)
    [result] = report.sessions
    assert result.status == "created" and report.unmapped == []
    history = model_history(store.session(result.session_id))
    doc = _source(path)
    want: list[tuple[str, Any]] = []
    renamed = iter(c["id"] for m in history if m.role == "assistant"
                   for c in m.tool_calls or [])
    for msg in doc["history"]:
        if msg["role"] == "system":
            continue  # the system prompt is swe-agent/system, not a message
        role = "tool" if msg["role"] == "user" and want and want[-1][0] == "assistant" \
            else msg["role"]
        want.append((role, msg["content"]))
    if path is OLD:  # the submit's answer, from its trajectory step
        want.append(("tool", doc["trajectory"][-1]["observation"]))
    assert [(m.role, m.content) for m in history] == want
    # tool results answer the calls in order
    calls = [c["id"] for m in history if m.role == "assistant" for c in m.tool_calls or []]
    assert [m.tool_call_id for m in history if m.role == "tool"] == calls == list(renamed)
    store.close()


@pytest.mark.parametrize(("path", "steps"), [(OLD, 5), (NEW, 11)], ids=["0.x", "1.x"])
def test_trajectory_view_has_one_turn_of_steps(tmp_path: Path, path: Path,
                                               steps: int) -> None:
    store, report = _import(tmp_path, path)
    session = store.session(report.sessions[0].session_id)
    [turn] = trajectory(session)
    assert turn.interrupted is False
    assert len(turn.steps) == steps
    assert all(len(s.tools) == 1 and s.tools[0].status == "done" for s in turn.steps)
    # nothing is left open: loading writes no closer
    before = session.last_seq
    assert store.load(session.id).last_seq == before
    # a second import finds the same session, writes nothing
    again = store.import_path(path)
    assert again.format == "swe-agent" and again.events == 0
    assert again.skipped == [session.id]
    store.close()


def test_misaligned_steps_are_carried(tmp_path: Path) -> None:
    doc = _source(OLD)
    del doc["trajectory"][2]
    path = tmp_path / "cut.traj"
    path.write_text(json.dumps(doc))
    [(_session, events)], notes = _mapped(path)
    types = Counter(e.type for e in events)
    assert types["swe-agent/step"] == 4 and "step/start" not in types
    assert "turn/start" not in types
    assert any("do not line up" in w for w in notes.warnings)
    # the 0.x ids then count history actions (no step to name them)
    assert [e.data["call_id"] for e in events if e.type == "tool/call"] == [
        "swe-3", "swe-5", "swe-7", "swe-9"]
    assert sum(1 for e in events if e.type == "assistant/message") == 5


def test_bad_shapes_are_format_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.traj"
    path.write_text(json.dumps({"history": [{"role": "user", "content": "x"}, 3],
                                "trajectory": []}))
    with pytest.raises(ImportFormatError, match=r"history\[1\]"):
        _mapped(path)
    path.write_text(json.dumps([1, 2]))
    with pytest.raises(ImportFormatError, match="JSON object"):
        _mapped(path)


@pytest.mark.parametrize("path", [OLD, NEW], ids=["0.x", "1.x"])
def test_crash_cut_is_a_format_error_with_its_place(tmp_path: Path, path: Path) -> None:
    data = path.read_bytes()
    end = len(data.rstrip())
    rng = random.Random(14)
    cuts = sorted({1, 2, end - 1, end // 2, *rng.sample(range(1, end), 30)})
    for cut in cuts:
        bad = tmp_path / f"cut-{cut}.traj"
        bad.write_bytes(data[:cut])
        with pytest.raises(ImportFormatError) as caught:
            _mapped(bad)
        err = caught.value
        assert err.offset is not None and 0 <= err.offset <= cut, cut
        assert err.line == data.count(b"\n", 0, err.offset) + 1
        bad.unlink()


def test_a_run_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "inst-a").mkdir(parents=True)
    (run / "inst-a" / "inst-a.traj").write_bytes(OLD.read_bytes())
    (run / "inst-b.traj").write_bytes(NEW.read_bytes())
    assert swe_agent.sniff(run) and not swe_agent.sniff(tmp_path)
    sessions, _ = _mapped(run)
    assert [s.key for s, _ in sessions] == ["swe-agent:inst-a", "swe-agent:inst-b"]
    assert [len(ev) for _, ev in sessions] == [32, 61]
