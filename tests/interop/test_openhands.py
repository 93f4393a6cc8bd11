"""OpenHands import: golden tests on the real V0 and V1 files.

Expected numbers were counted from the files (jq / plain json), not from the
importer:

* ``basic_gui_mode.json``: 18 events -- user message 1; agent run 2 + edit 2,
  each with ``tool_call_metadata`` of its own model response, answered by 4
  observations (``cause`` = the action id); agent message 1;
  ``change_agent_state`` 1; ``agent_state_changed`` 4; ``null`` observations 3.
* ``wrong_initial_state.json``: 8 events -- user message, read/obs, run/obs,
  read/obs, ``finish`` (a tool call with no observation).
* ``multi_swe_bench_output.jsonl``: 3 records, histories of 49 / 70 / 103
  events.  Tool actions (all one call per response): 23 / 33 / 49; tool
  observations 22 / 32 / 49; ``observation: error`` with no cause 0 / 1 / 1;
  one ``system``, user ``message``, user ``recall`` and ``recall`` observation
  each.  Records 1 and 2 end on ``finish`` (open); record 3 has no finish and
  a record-level ``error`` (iteration limit).  Ids ``toolu_01..`` repeat across
  records (each record is its own session).
* ``goal_events.jsonl`` (V1): 10 events -- ConversationStateUpdateEvent 5,
  ActionEvent 2 (two responses), ObservationEvent 3, one of which answers
  ``chatcmpl-tool-9051d3...`` whose action ``70274abb...`` is not in the file.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog.errors import ImportFormatError
from trajlog.interop.mapping import MappedEvent, MappedSession, Notes
from trajlog.interop.sources import openhands
from trajlog.projections import model_history

REAL = Path(__file__).resolve().parents[1] / "realdata" / "openhands"
GUI = REAL / "legacy-v0" / "basic_gui_mode.json"
WRONG = REAL / "legacy-v0" / "wrong_initial_state.json"
BENCH = REAL / "legacy-v0" / "multi_swe_bench_output.jsonl"
GOAL = REAL / "sdk-v1" / "goal_events.jsonl"
ORPHAN_CALL = "chatcmpl-tool-9051d3d10f914188"


def _mapped(path: Path) -> tuple[list[tuple[MappedSession, list[MappedEvent]]], Notes]:
    notes = Notes()
    out = []
    for session in openhands.read(path, notes):
        out.append((session, list(session.events)))
    return out, notes


def _types(events: list[MappedEvent]) -> Counter[str]:
    return Counter(e.type for e in events)


def _store(tmp_path: Path) -> Any:
    return trajlog.open(str(tmp_path / "t.db"))


def _pairing_ok(events: list[MappedEvent]) -> None:
    """Each result follows its call and names it as its cause; each call
    follows the message that requested it."""
    requested: dict[str, int] = {}
    started: dict[str, int] = {}
    for i, e in enumerate(events):
        if e.type == "assistant/message":
            for c in e.data.get("tool_calls", []):
                assert c["id"] not in requested
                requested[c["id"]] = i
        elif e.type == "tool/call":
            assert requested[e.data["call_id"]] < i
            started[e.data["call_id"]] = i
        elif e.type == "tool/result":
            assert e.cause == started[e.data["call_id"]]


def _v0_expected(history: list[dict[str, Any]]) -> list[tuple[str, Any, list[str] | None]]:
    """What the model saw, from the source's own action/observation order:
    user messages, one assistant message per model response (text + its
    calls), tool observations, agent messages."""
    out: list[tuple[str, Any, list[str] | None]] = []
    seen: set[str] = set()
    for e in history:
        tcm = e.get("tool_call_metadata")
        if "action" in e:
            if tcm:
                resp = tcm["model_response"]
                if resp["id"] in seen:
                    continue
                seen.add(resp["id"])
                msg = resp["choices"][0]["message"]
                out.append(("assistant", msg["content"],
                            [c["id"] for c in msg["tool_calls"]]))
            elif e["action"] == "message" and e["source"] in ("user", "agent"):
                out.append(("user" if e["source"] == "user" else "assistant",
                            e["args"]["content"], None))
        elif tcm:
            out.append(("tool", e["content"], [tcm["tool_call_id"]]))
    return out


def _history_of(messages: list[Any]) -> list[tuple[str, Any, list[str] | None]]:
    return [(m.role, m.content, [c["id"] for c in m.tool_calls] if m.tool_calls else
             [m.tool_call_id] if m.role == "tool" else None) for m in messages]


def test_sniff() -> None:
    for path in (GUI, WRONG, BENCH, GOAL):
        assert openhands.sniff(path), path
    for other in (REAL.parent / "codex" / "synthetic-shapes" / "agent-sessions__codex_small.jsonl",
                  REAL.parent / "swe-agent" / "swe-agent__test-repo-i1.traj",
                  REAL.parent / "inspect-ai" / "2025-05-12T20-27-36-04-00_browser.json",
                  REAL.parent / "claude-code" / "synthetic-shapes" /
                  "claude-code-log__dag_fork.jsonl"):
        assert not openhands.sniff(other), other


def test_basic_gui_mode_golden(tmp_path: Path) -> None:
    [(session, events)], notes = _mapped(GUI)
    assert session.key == "openhands:basic_gui_mode"
    assert _types(events) == {
        "user/message": 1, "assistant/message": 5, "tool/call": 4, "tool/result": 4,
        "openhands/change_agent_state": 1, "openhands/observation.agent_state_changed": 4,
        "openhands/observation.null": 3}
    assert notes.warnings == [] and notes.unmapped == [] and notes.torn == []
    _pairing_ok(events)
    source = json.loads(GUI.read_text())
    # timestamps kept (naive ISO = UTC), source ids kept
    assert events[0].time == 1737404953520  # 2025-01-20T20:29:13.519638
    assert events[0].data["openhands"]["id"] == 0
    store = _store(tmp_path)
    report = store.import_path(GUI)
    assert report.format == "openhands" and report.events == 22
    history = model_history(store.session(report.sessions[0].session_id))
    assert _history_of(history) == _v0_expected(source)
    # the run observation with exit code -1 (success false) is an error
    assert [m.is_error for m in history if m.role == "tool"] == [False, False, False, True]
    store.close()


def test_wrong_initial_state_leaves_finish_open(tmp_path: Path) -> None:
    [(_session, events)], notes = _mapped(WRONG)
    assert _types(events) == {"user/message": 1, "assistant/message": 4, "tool/call": 4,
                              "tool/result": 3}
    assert events[-1].type == "tool/call" and events[-1].data["name"] == "finish"
    assert notes.warnings == ["wrong_initial_state.json: session openhands:wrong_initial_state "
                              "ends with 1 tool call(s) without a result: "
                              "toolu_01G98EmHEC8HgktRjJBYXqEa"]
    _pairing_ok(events)
    store = _store(tmp_path)
    report = store.import_path(WRONG)
    session = store.session(report.sessions[0].session_id)
    assert _history_of(model_history(session)) == _v0_expected(json.loads(WRONG.read_text()))
    # the store's recovery closes the started finish call later
    loaded = store.load(session.id)
    assert loaded.last_seq == 12 and loaded.get(12).type == "tool/result"
    store.close()


def test_eval_output_one_session_per_record(tmp_path: Path) -> None:
    sessions, notes = _mapped(BENCH)
    assert [s.key for s, _ in sessions] == [
        "openhands:ponylang__ponyc-4595@2025-04-30 16:31:22",
        "openhands:ponylang__ponyc-4593@2025-04-30 16:40:51",
        "openhands:ponylang__ponyc-4588@2025-04-30 17:07:20"]
    records = [json.loads(line) for line in BENCH.read_text().splitlines()]
    tools = [(23, 22, 0), (33, 32, 1), (49, 49, 1)]
    for (session, events), rec, (calls, results, errors) in zip(sessions, records, tools,
                                                                strict=True):
        assert _types(events) == {
            "openhands/system": 1, "user/message": 1, "openhands/recall": 1,
            "openhands/observation.recall": 1, "assistant/message": calls,
            "tool/call": calls, "tool/result": results, "openhands/eval_record": 1,
            **({"openhands/observation.error": errors} if errors else {})}
        _pairing_ok(events)
        assert session.agent_preset == "CodeActAgent"
        assert session.metadata["import"]["model"] == rec["metadata"]["llm_config"]["model"]
        tail = events[-1].data["openhands"]
        assert tail["instance_id"] == rec["instance_id"] and tail["metrics"] == rec["metrics"]
        assert tail["test_result"] == rec["test_result"]
    # record 3: no finish, the record's error noted; 1 and 2: finish left open
    assert sessions[2][1][-2].type == "tool/result"
    # the error's text is in the record's closing event; the header only says there was one
    assert sessions[2][0].metadata["import"]["ended_with_error"] is True
    assert "error" not in sessions[2][0].metadata["import"]
    assert sessions[2][1][-1].data["openhands"]["error"].startswith("RuntimeError: Agent reached")
    assert [w.split(": ", 1)[1][:35] for w in notes.warnings] == [
        "session openhands:ponylang__ponyc-4", "session openhands:ponylang__ponyc-4",
        "record 'ponylang__ponyc-4588' ended"]
    assert "ends with 1 tool call(s) without a result: toolu_23" in notes.warnings[0]
    assert "ends with 1 tool call(s) without a result: toolu_33" in notes.warnings[1]
    assert notes.unmapped == [] and notes.torn == []
    # the same call ids in three sessions: fine, each session is its own
    firsts = [next(e.data["call_id"] for e in ev if e.type == "tool/call") for _, ev in sessions]
    assert firsts == ["toolu_01"] * 3
    store = _store(tmp_path)
    report = store.import_path(BENCH)
    assert [s.status for s in report.sessions] == ["created"] * 3
    assert report.events == 73 + 104 + 153
    for result, rec in zip(report.sessions, records, strict=True):
        history = model_history(store.session(result.session_id))
        assert _history_of(history) == _v0_expected(rec["history"])
    again = store.import_path(BENCH)
    assert again.events == 0 and len(again.skipped) == 3
    store.close()


def test_v1_orphan_observation(tmp_path: Path) -> None:
    [(session, events)], notes = _mapped(GOAL)
    assert session.key == "openhands:goal_events"
    assert _types(events) == {"openhands/conversation_state_update": 5,
                              "assistant/message": 2, "tool/call": 2, "tool/result": 2,
                              "openhands/observation": 1}
    _pairing_ok(events)
    [orphan] = [e for e in events if e.type == "openhands/observation"]
    assert orphan.data["openhands"]["tool_call_id"] == ORPHAN_CALL
    assert orphan.data["openhands"]["action_id"] == "70274abb-c9e1-4914-b778-29464d7bf293"
    [warning] = notes.warnings
    assert ORPHAN_CALL in warning and "70274abb" in warning
    results = [e.data for e in events if e.type == "tool/result"]
    assert [r["is_error"] for r in results] == [True, False]
    lines = [json.loads(x) for x in GOAL.read_text().splitlines()]
    actions = [x for x in lines if x["kind"] == "ActionEvent"]
    asked = [e.data for e in events if e.type == "assistant/message"]
    assert [c["id"] for a in asked for c in a["tool_calls"]] == [
        a["tool_call_id"] for a in actions]
    assert [a["reasoning"] for a in asked] == [a["reasoning_content"] for a in actions]
    store = _store(tmp_path)
    report = store.import_path(GOAL)
    history = model_history(store.session(report.sessions[0].session_id))
    observed = [x for x in lines if x["kind"] == "ObservationEvent"
                and x["tool_call_id"] != ORPHAN_CALL]
    assert [(m.role, m.tool_call_id) for m in history] == [
        ("assistant", None), ("tool", actions[0]["tool_call_id"]),
        ("assistant", None), ("tool", actions[1]["tool_call_id"])]
    assert [m.content for m in history if m.role == "tool"] == [
        x["observation"]["content"][0]["text"] for x in observed]
    store.close()


def test_v1_parallel_actions_are_one_message() -> None:
    lines = [json.loads(x) for x in GOAL.read_text().splitlines()]
    action = next(x for x in lines if x["kind"] == "ActionEvent")
    second = {**action, "id": "a2", "tool_call_id": "call-b", "thought": [],
              "reasoning_content": None, "tool_call": {**action["tool_call"], "id": "call-b"}}
    obs = next(x for x in lines if x["kind"] == "ObservationEvent")
    stream = [action, second, {**obs, "tool_call_id": "call-b", "action_id": "a2"},
              {**obs, "id": "o1"}]
    notes = Notes()
    mapper = openhands._Mapper("k", "f", "f", notes)
    events = list(mapper.run(iter((i, 0, x) for i, x in enumerate(stream)), None))
    assert [e.type for e in events] == ["assistant/message", "tool/call", "tool/call",
                                        "tool/result", "tool/result"]
    assert [c["id"] for c in events[0].data["tool_calls"]] == [action["tool_call_id"],
                                                               "call-b"]
    assert events[3].cause == 2 and events[4].cause == 1 and notes.warnings == []


def test_v0_condensation_becomes_a_compaction(tmp_path: Path) -> None:
    events = json.loads(WRONG.read_text())[:7]   # up to the second read's observation
    ids = [e["id"] for e in events]
    cond = {"id": 100, "timestamp": events[-1]["timestamp"], "source": "agent",
            "action": "condensation", "message": "",
            "args": {"forgotten_events_start_id": ids[1], "forgotten_events_end_id": ids[4],
                     "summary": "read two files", "summary_offset": 1}}
    bad = {**cond, "id": 101, "args": {"forgotten_event_ids": [ids[1]], "summary": "x"}}
    path = tmp_path / "condensed.json"
    path.write_text(json.dumps([*events, cond, bad]))
    [(_session, mapped)], notes = _mapped(path)
    [apply] = [e for e in mapped if e.type == "compaction/apply"]
    assert (apply.data["from_seq"], apply.data["to_seq"]) == (1, 6)
    assert mapped[-1].type == "openhands/condensation"
    assert any("split tool calls" in w for w in notes.warnings)
    store = _store(tmp_path)
    report = store.import_path(path)
    history = model_history(store.session(report.sessions[0].session_id))
    assert [(m.role, m.seq) for m in history] == [
        ("user", 0), ("summary", 1), ("assistant", 7), ("tool", 9)]
    assert history[1].content == "read two files" and history[1].until == 6
    store.close()


def test_v0_reused_and_repeated_calls(tmp_path: Path) -> None:
    events = json.loads(WRONG.read_text())[:3]
    again = json.loads(json.dumps(events[1:3]))
    again[0]["id"], again[1]["id"], again[1]["cause"] = 50, 51, 50
    again[0]["tool_call_metadata"]["model_response"]["id"] = "other-response"
    dup = json.loads(json.dumps(events[1]))
    dup["id"] = 60
    path = tmp_path / "reused.json"
    path.write_text(json.dumps([*events, *again, dup]))
    [(_session, mapped)], notes = _mapped(path)
    calls = [e.data["call_id"] for e in mapped if e.type == "tool/call"]
    first = events[1]["tool_call_metadata"]["tool_call_id"]
    assert calls == [first, f"{first}#2"]
    assert mapped[-1].type == "openhands/read"   # the same action of the same response again
    assert len(notes.warnings) == 2
    _pairing_ok(mapped)


def test_bad_records_are_format_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"id": 0, "source": "user", "action": "message"}, 7]))
    with pytest.raises(ImportFormatError, match="JSON object"):
        _mapped(path)
    path.write_text(json.dumps({"not": "events"}))
    with pytest.raises(ImportFormatError):
        _mapped(path)


@pytest.mark.parametrize("path", [GUI, WRONG], ids=["gui", "wrong"])
def test_crash_cut_json(tmp_path: Path, path: Path) -> None:
    data = path.read_bytes()
    end = len(data.rstrip())
    cuts = sorted({1, end - 1, *random.Random(5).sample(range(1, end), 30)})
    for cut in cuts:
        bad = tmp_path / f"{cut}.json"
        bad.write_bytes(data[:cut])
        with pytest.raises(ImportFormatError) as caught:
            _mapped(bad)
        assert caught.value.offset is not None and caught.value.offset <= cut
        assert caught.value.line == data.count(b"\n", 0, caught.value.offset) + 1
        bad.unlink()


def _summary(sessions: list[tuple[MappedSession, list[MappedEvent]]]) -> list[Any]:
    return [(s.key, [(e.type, e.line, e.cause, e.data.get("call_id")) for e in ev])
            for s, ev in sessions]


@pytest.mark.parametrize(("path", "every"), [(GOAL, True), (BENCH, False)],
                         ids=["v1", "bench"])
def test_crash_cut_jsonl(tmp_path: Path, path: Path, every: bool) -> None:
    data = path.read_bytes()
    starts = [0, *(i + 1 for i, b in enumerate(data) if b == 0x0A)][:-1]
    lo = starts[-2]
    # what the complete lines give, by how many lines are complete
    expect = {}
    for keep in (len(starts) - 2, len(starts) - 1, len(starts)):
        (tmp_path / str(keep)).mkdir()
        whole = tmp_path / str(keep) / path.name
        whole.write_bytes(data[:starts[keep]] if keep < len(starts) else data)
        expect[keep] = _summary(_mapped(whole)[0])
    cuts = range(lo, len(data)) if every else sorted(
        {*random.Random(3).sample(range(lo, len(data)), 40),
         *(s + d for s in starts[-2:] for d in (-1, 0, 1, 2))} - {len(data)})
    bad = tmp_path / path.name
    bad.write_bytes(data)
    for cut in sorted(cuts, reverse=True):
        os.truncate(bad, cut)
        sessions, notes = _mapped(bad)
        complete = sum(1 for s in starts if s < cut and (data.find(b"\n", s) < cut
                                                         or data.find(b"\n", s) == cut))
        if cut in starts or data[cut - 1:cut] == b"\n" or data[cut:cut + 1] == b"\n":
            assert notes.torn == [], cut
        else:
            [torn] = notes.torn
            assert torn.offset == max(s for s in starts if s < cut) and torn.size == cut - \
                torn.offset
        assert _summary(sessions) == expect[complete], cut


def test_v1_conversation_folder(tmp_path: Path) -> None:
    lines = [json.loads(x) for x in GOAL.read_text().splitlines()]
    cid = "e18b827d-3440-425a-9ff7-353c4a6d6a3a"
    folder = tmp_path / cid
    (folder / "events").mkdir(parents=True)
    (folder / "base_state.json").write_text(json.dumps({"id": cid, "agent": {"x": 1}}))
    user = {"id": "u1", "timestamp": lines[0]["timestamp"], "source": "user",
            "kind": "MessageEvent", "llm_message": {"role": "user", "content": [
                {"type": "text", "text": "review the PR"}]}}
    stream = [user, *[x for x in lines if x["kind"] != "ConversationStateUpdateEvent"]]
    for n, event in enumerate(stream):
        (folder / "events" / f"event-{n:05d}-{event['id']}.json").write_text(json.dumps(event))
    assert openhands.sniff(folder)
    [(session, events)], notes = _mapped(folder)
    assert session.key == f"openhands:{cid}" and session.id == cid
    assert [e.type for e in events] == ["user/message", "assistant/message", "tool/call",
                                        "tool/result", "openhands/observation",
                                        "assistant/message", "tool/call", "tool/result"]
    assert events[0].data["content"] == "review the PR"
    assert len(notes.warnings) == 1


def test_v0_event_stream_jsonl_with_a_blank_line(tmp_path: Path) -> None:
    events = json.loads(WRONG.read_text())[:3]
    path = tmp_path / "stream.jsonl"
    path.write_text(json.dumps(events[0]) + "\n\n" + "\n".join(map(json.dumps, events[1:]))
                    + "\n")
    assert openhands.sniff(path)
    [(session, mapped)], notes = _mapped(path)
    assert session.key == "openhands:stream"
    assert [e.type for e in mapped] == ["user/message", "assistant/message", "tool/call",
                                        "tool/result"]
    assert [(u.line, u.kind) for u in notes.unmapped] == [(2, "blank")]
    assert [e.line for e in mapped] == [1, 3, 3, 4]


def test_v0_parallel_calls_of_one_response() -> None:
    events = json.loads(WRONG.read_text())
    act, obs = json.loads(json.dumps(events[1])), json.loads(json.dumps(events[2]))
    tcm = act["tool_call_metadata"]
    msg = tcm["model_response"]["choices"][0]["message"]
    extra = {**msg["tool_calls"][0], "id": "toolu_second"}
    msg["tool_calls"].append(extra)
    tcm["total_calls_in_response"] = 2
    act2 = json.loads(json.dumps(act))
    act2["id"], act2["tool_call_metadata"]["tool_call_id"] = 90, "toolu_second"
    obs2 = json.loads(json.dumps(obs))
    obs2["id"], obs2["cause"] = 91, 90
    obs2["tool_call_metadata"] = act2["tool_call_metadata"]
    obs["tool_call_metadata"] = tcm
    notes = Notes()
    mapper = openhands._Mapper("k", "f", "f", notes)
    mapped = list(mapper.run(iter((None, None, x) for x in [act, act2, obs2, obs]), None))
    assert [e.type for e in mapped] == ["assistant/message", "tool/call", "tool/call",
                                        "tool/result", "tool/result"]
    assert [c["id"] for c in mapped[0].data["tool_calls"]] == [
        tcm["tool_call_id"], "toolu_second"]
    assert [e.data["call_id"] for e in mapped[3:]] == ["toolu_second", tcm["tool_call_id"]]
    assert mapped[3].cause == 2 and mapped[4].cause == 1 and notes.warnings == []
