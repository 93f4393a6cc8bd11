"""Codex rollout import: golden tests on the sanitised composite
``agent-sessions__codex_small.jsonl`` and small rollouts written here.

The composite (118 lines) was read line by line by hand; its 7
``session_meta`` lines (1, 29, 36, 37, 42, 94, 96) start 7 threads.  Only the
first has a real id; the other six share the placeholder id
``[trimmed for fixture]`` (so do their parent references), which makes them
``codex:[trimmed for fixture]`` and ``...@<file>:<line>``, and a parent
reference resolves to the latest thread read before with that id.

Thread 1 (lines 1-28): ``task_started`` (l.5) opens a turn that
``turn_aborted`` (l.20) ends, interrupted; ``task_complete`` (l.25) comes after
it and is carried.  The assistant side: reasoning + ``custom_tool_call``
call-1 + ``function_call`` call-2 (one message), ``tool_search_call`` call-3,
``web_search_call`` ws-1 (hosted, completed), the final text: 4 messages.
Outputs: call-2 (l.11), call-3 (l.13), call-1 (l.21, after the turn ended);
the ``custom_tool_call_output`` of l.28 names a call no thread has: the
orphan.  ``compacted`` (l.26) has a replacement history and no call is open:
a compaction of everything before it.

Thread 5 (lines 42-93): a ``tool_search_call`` (l.43) and an
``image_generation_call`` (l.49, not completed) reuse one placeholder id
(renamed ``#2``) and are never answered, so its 4 ``compacted`` lines stay
``codex/compacted``.  Thread 7 (lines 96-118): a developer message (meta), a
call answered, a compaction, a second call reusing the first one's id
(renamed) answered; its turn (l.97) never ends.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog.errors import ImportFormatError
from trajlog.interop.mapping import MappedEvent, MappedSession, Notes
from trajlog.interop.sources import codex
from trajlog.projections import model_history, trajectory

REAL = Path(__file__).resolve().parents[1] / "realdata"
SMALL = REAL / "codex" / "synthetic-shapes" / "agent-sessions__codex_small.jsonl"
T = "[trimmed for fixture]"
FILE = SMALL.name


def _mapped(path: Path) -> tuple[list[tuple[MappedSession, list[MappedEvent]]], Notes]:
    notes = Notes()
    out = []
    for session in codex.read(path, notes):
        out.append((session, list(session.events)))
    return out, notes


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _line(kind: str, payload: Any, ts: str = "2026-01-02T03:04:05.000Z") -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload}


def _meta(sid: str, **more: Any) -> dict[str, Any]:
    return _line("session_meta", {"id": sid, "timestamp": "2026-01-02T03:04:05.000Z",
                                  "cwd": "/w", "cli_version": "0.146.0", **more})


def _store(tmp_path: Path) -> Any:
    return trajlog.open(str(tmp_path / "t.db"))


OWN = "codex/"


def test_sniff() -> None:
    assert codex.sniff(SMALL)
    for other in (REAL / "openhands" / "sdk-v1" / "goal_events.jsonl",
                  REAL / "openhands" / "legacy-v0" / "multi_swe_bench_output.jsonl",
                  REAL / "claude-code" / "synthetic-shapes" / "agent-sessions__claude_small.jsonl",
                  REAL / "swe-agent" / "swe-agent__test-repo-i1.traj"):
        assert not codex.sniff(other), other


def test_threads_and_event_counts() -> None:
    sessions, notes = _mapped(SMALL)
    keys = [s.key for s, _ in sessions]
    assert keys == ["codex:019fc8be-3658-7ca3-9e29-000000000000", f"codex:{T}",
                    *(f"codex:{T}@{FILE}:{n}" for n in (36, 37, 42, 94, 96))]
    assert sessions[0][0].id == "019fc8be-3658-7ca3-9e29-000000000000"
    assert len({s.id for s, _ in sessions}) == 7
    assert [len(ev) for _, ev in sessions] == [31, 7, 1, 5, 52, 2, 25]
    one = Counter(e.type for e in sessions[0][1])
    assert one == {
        "codex/session_meta": 1, "codex/turn_context": 2, "codex/world_state": 1,
        "codex/user_message": 1, "turn/start": 1, "user/message": 1,
        "codex/agent_reasoning": 1, "assistant/message": 4, "tool/call": 4,
        "tool/result": 4, "codex/web_search_end": 1, "codex/mcp_tool_call_end": 1,
        "codex/patch_apply_end": 1, "codex/thread_settings_applied": 1,
        "codex/context_compacted": 1, "turn/end": 1, "codex/token_count": 1,
        "codex/agent_message": 1, "codex/task_complete": 1, "compaction/apply": 1,
        "codex/custom_tool_call_output": 1}
    five = Counter(e.type for e in sessions[4][1])
    assert five["assistant/message"] == 2 and five["codex/compacted"] == 4
    assert "tool/result" not in five and five["codex/entered_review_mode"] == 6
    seven = Counter(e.type for e in sessions[6][1])
    assert seven == {"codex/session_meta": 1, "turn/start": 1, "user/message": 1,
                     "codex/world_state": 1, "codex/turn_context": 1,
                     "codex/item_completed": 12, "assistant/message": 2, "tool/call": 2,
                     "tool/result": 2, "compaction/apply": 1, "codex/inter_agent_message": 1}
    # every one of the 118 lines gave an event (event_msg mirrors carried, none dropped)
    assert notes.unmapped == [] and notes.torn == []
    covered = {e.line for _, ev in sessions for e in ev} | {
        n for _, ev in sessions for e in ev if e.type == "assistant/message"
        for n in e.data["codex"]["lines"]}
    assert covered == set(range(1, 119))
    carried = [e.line for _, ev in sessions for e in ev if e.type.startswith(OWN)]
    assert len(carried) == len(set(carried)) == 123 - 27  # each carried line once
    # no event_msg became a second copy of a message
    assert sum(1 for _, ev in sessions for e in ev if e.type == "user/message") == 2


def test_thread_one_mapping() -> None:
    [(_s, events), *_], notes = _mapped(SMALL)
    asked = [e for e in events if e.type == "assistant/message"]
    assert [[c["id"] for c in m.data["tool_calls"]] for m in asked] == [
        ["call-1", "call-2"], ["call-3"], ["ws-1"], []]
    assert asked[0].data["reasoning"] == T          # the reasoning summary, line 7
    assert asked[0].data["tool_calls"][1]["arguments"] == {"command": ["ls"]}
    assert asked[0].data["tool_calls"][0]["arguments"] == '{"command":["ls"]}'  # freeform
    assert asked[3].data["content"][0]["text"] == "Found 2 files."
    results = {e.data["call_id"]: e for e in events if e.type == "tool/result"}
    assert results["call-2"].data["output"]["text"] == "a.txt\n"
    assert results["call-1"].line == 21 and results["ws-1"].data["hosted"] is True
    for i, e in enumerate(events):
        if e.type == "tool/result":
            assert events[i - 1].type == "tool/call" and e.cause == i - 1
    end = next(e for e in events if e.type == "turn/end")
    assert end.data["interrupted"] is True and end.data["reason"] == "interrupted"
    [apply] = [e for e in events if e.type == "compaction/apply"]
    seq = events.index(apply)
    assert (apply.data["from_seq"], apply.data["to_seq"]) == (0, seq - 1) and seq == 28
    assert apply.data["summary"] == T and len(apply.data["replacement_history"]) == 1
    assert events[0].time == 1785754136000   # 2026-08-03T10:48:56Z
    [orphan] = [w for w in notes.warnings if "line 28" in w]
    assert "custom_tool_call_output" in orphan and events[-1].type == OWN + \
        "custom_tool_call_output"


def test_lineage_and_warnings() -> None:
    sessions, notes = _mapped(SMALL)
    by_line = {s.metadata["import"]["line"]: s for s, _ in sessions}
    # line 36: thread_spawn parent = the thread of line 29 (the latest with that id)
    assert by_line[36].parent == f"codex:{T}" and by_line[36].origin == "subagent"
    assert by_line[36].delegation_depth == 1
    assert by_line[42].parent == f"codex:{T}@{FILE}:37" and by_line[42].delegation_depth == 1
    assert by_line[29].parent is None          # its parent is not read before it
    assert by_line[1].parent is None and by_line[96].parent is None
    assert by_line[1].cwd == "/tmp/repo" and by_line[1].created_ms == 1785754136000
    text = "\n".join(notes.warnings)
    assert f"thread codex:{T} names subagent parent" in text
    assert sum("appears again" in w for w in notes.warnings) == 5
    assert sum("kept as codex/compacted" in w for w in notes.warnings) == 4
    assert sum("used again" in w for w in notes.warnings) == 2
    assert f"codex:{T}@{FILE}:96 ends mid-turn" in text


def test_store_import(tmp_path: Path) -> None:
    store = _store(tmp_path)
    report = store.import_path(SMALL)
    assert report.format == "codex" and report.events == 123
    assert [s.status for s in report.sessions] == ["created"] * 7
    ids = [s.session_id for s in report.sessions]
    child = store.session(ids[2]).header
    assert child.parent_session == ids[1] and child.origin == "subagent"
    assert child.delegation_depth == 1
    # thread 1 is one summary after its compaction; thread 7 a summary then a call
    one = model_history(store.session(ids[0]))
    assert [(m.role, m.seq, m.until) for m in one] == [("summary", 0, 27)]
    seven = model_history(store.session(ids[6]))
    assert [(m.role, m.tool_call_id) for m in seven] == [
        ("summary", None), ("assistant", None), ("tool", f"{T}#2")]
    assert seven[1].tool_calls[0]["source_id"] == T
    [turn] = trajectory(store.session(ids[6]))
    assert turn.end_seq is None
    again = store.import_path(SMALL)
    assert again.events == 0 and again.skipped == ids
    store.close()


def test_history_before_compaction_matches_the_rollout(tmp_path: Path) -> None:
    lines = SMALL.read_text().splitlines(keepends=True)[:25]
    path = tmp_path / "first.jsonl"
    path.write_text("".join(lines))
    store = _store(tmp_path)
    report = store.import_path(path, format="codex")
    history = model_history(store.session(report.sessions[0].session_id))
    # the response items of lines 6-23, as the model saw them
    assert [(m.role, [c["id"] for c in m.tool_calls] if m.tool_calls else m.tool_call_id)
            for m in history] == [
        ("user", None), ("assistant", ["call-1", "call-2"]), ("tool", "call-2"),
        ("assistant", ["call-3"]), ("tool", "call-3"), ("assistant", ["ws-1"]),
        ("tool", "ws-1"), ("tool", "call-1"), ("assistant", None)]
    raw = [json.loads(x)["payload"] for x in lines]
    assert history[0].content == raw[5]["content"]
    assert history[2].content == raw[10]["output"] and history[7].content == raw[20]["output"]
    assert history[8].content == raw[22]["content"]
    turns = trajectory(store.session(report.sessions[0].session_id))
    # the aborted turn, then what came after its end (the trajectory view's own turn)
    assert [(t.interrupted, t.start_seq is None) for t in turns] == [(True, False),
                                                                     (None, True)]
    store.close()


def test_legacy_rollout_and_open_end(tmp_path: Path) -> None:
    sid = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    path = _write(tmp_path / f"rollout-2025-05-07T17-24-21-{sid}.jsonl", [
        {"id": sid, "timestamp": "2025-05-07T17:24:21.123Z", "instructions": "be brief"},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>cwd=/x</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"record_type": "state"},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"false\"]}",
         "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1",
         "output": "{\"output\":\"\",\"metadata\":{\"exit_code\":1}}"},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"}])
    assert codex.sniff(path)
    [(session, events)], notes = _mapped(path)
    assert session.key == f"codex:{sid}" and session.id == sid
    assert [e.type for e in events] == [
        "codex/session_meta", "user/message", "user/message", "codex/state",
        "assistant/message", "tool/call", "tool/result", "assistant/message"]
    assert events[1].data["meta"] is True and events[1].data["meta_kind"] == \
        "environment_context"
    assert "meta" not in events[2].data
    assert events[6].data["is_error"] is True           # exit code 1 in the JSON string
    assert notes.warnings == [f"{path.name}: thread codex:{sid} ends with 1 tool call(s) "
                              "without a result: c2"]


def test_real_lineage_by_uuid(tmp_path: Path) -> None:
    a, b, c = ("00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b",
               "00000000-0000-4000-8000-00000000000c")
    spawn = {"subagent": {"thread_spawn": {"parent_thread_id": b, "depth": 2}}}
    path = _write(tmp_path / "threads.jsonl", [
        _meta(a), _line("event_msg", {"type": "task_started", "turn_id": "t1"}),
        _line("event_msg", {"type": "task_complete", "turn_id": "t1"}),
        _meta(b, forked_from_id=a), _meta(c, source=spawn),
        _meta("00000000-0000-4000-8000-00000000000d", forked_from_id="not-here")])
    sessions, notes = _mapped(path)
    heads = [(s.key[6:], s.parent and s.parent[6:], s.origin, s.delegation_depth)
             for s, _ in sessions]
    assert heads == [(a, None, None, 0), (b, a, None, 0), (c, b, "subagent", 1),
                     ("00000000-0000-4000-8000-00000000000d", None, None, 0)]
    assert [e.type for e in sessions[0][1]] == ["codex/session_meta", "turn/start", "turn/end"]
    assert [s.metadata["import"].get("lineage") for s, _ in sessions] == [
        None, "fork", "subagent", None]
    assert any("not-here" in w for w in notes.warnings)
    store = _store(tmp_path)
    report = store.import_path(path)
    headers = [store.session(r.session_id).header for r in report.sessions]
    assert headers[2].parent_session == headers[1].id == b
    assert headers[2].origin == "subagent" and headers[1].origin is None
    assert headers[1].parent_session == a and headers[1].seed_length == 0
    store.close()


def test_a_rollout_cut_after_a_tool_output_ends_mid_turn(tmp_path: Path) -> None:
    path = _write(tmp_path / "cut.jsonl", [
        _meta("00000000-0000-4000-8000-0000000000cc"),
        _line("turn_context", {"cwd": "/w", "model": "gpt-5"}),
        _line("response_item", {"type": "function_call", "name": "shell", "call_id": "k",
                                "arguments": "{}"}),
        _line("response_item", {"type": "function_call_output", "call_id": "k",
                                "output": "{\"output\":\"x\",\"metadata\":{\"exit_code\":0}}"}),
        _line("turn_context", {"cwd": "/w", "model": "gpt-5"}),
        _line("event_msg", {"type": "token_count", "info": None})])
    [(_s, events)], notes = _mapped(path)
    assert [e.type for e in events][-4:] == ["tool/call", "tool/result", "codex/turn_context",
                                             "codex/token_count"]
    assert events[-3].data["is_error"] is False
    assert notes.warnings == ["cut.jsonl: thread codex:00000000-0000-4000-8000-0000000000cc "
                              "ends mid-turn (its last item is a tool result the model never "
                              "answered); imported as it is"]


def test_compaction_with_an_open_call_is_carried(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.jsonl", [
        _meta("00000000-0000-4000-8000-0000000000aa"),
        _line("response_item", {"type": "message", "role": "user", "content": "go"}),
        _line("response_item", {"type": "local_shell_call", "call_id": "s1",
                                "status": "completed", "action": {"command": ["ls"]}}),
        _line("compacted", {"message": "sum", "replacement_history": []}),
        _line("response_item", {"type": "function_call_output", "call_id": "s1",
                                "output": "ok"}),
        _line("compacted", {"message": "later", "replacement_history": []})])
    [(_s, events)], notes = _mapped(path)
    assert [e.type for e in events] == [
        "codex/session_meta", "user/message", "assistant/message", "codex/compacted",
        "tool/call", "tool/result", "compaction/apply"]
    assert events[2].data["tool_calls"] == [{"id": "s1", "name": "local_shell",
                                            "arguments": {"command": ["ls"]},
                                            "type": "local_shell_call"}]
    assert "s1 are open" in notes.warnings[0]
    assert events[-1].data["to_seq"] == 5
    store = _store(tmp_path)
    report = store.import_path(path)
    history = model_history(store.session(report.sessions[0].session_id))
    assert [(m.role, m.content) for m in history] == [("summary", "later")]
    store.close()


def test_bad_lines_are_format_errors(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [_meta("x"), [1, 2]])
    with pytest.raises(ImportFormatError) as caught:
        _mapped(path)
    assert caught.value.line == 2 and caught.value.offset == len(json.dumps(_meta("x"))) + 1
    _write(path, [_meta("x"), _line("response_item", "not an object")])
    with pytest.raises(ImportFormatError, match="payload"):
        _mapped(path)
    _write(path, [_meta("x"), _line("response_item", {"type": "message", "role": "user",
                                                      "content": 5})])
    with pytest.raises(ImportFormatError, match="content"):
        _mapped(path)


def test_crash_cut_in_the_last_two_lines(tmp_path: Path) -> None:
    data = SMALL.read_bytes()
    starts = [0, *(i + 1 for i, b in enumerate(data) if b == 0x0A)][:-1]
    summary: dict[int, list[Any]] = {}
    for keep in (len(starts) - 2, len(starts) - 1, len(starts)):
        (tmp_path / str(keep)).mkdir()
        whole = tmp_path / str(keep) / SMALL.name
        whole.write_bytes(data[:starts[keep]] if keep < len(starts) else data)
        sessions, _ = _mapped(whole)
        summary[keep] = [(s.key, [(e.type, e.line) for e in ev]) for s, ev in sessions]
    cut_file = tmp_path / SMALL.name
    cut_file.write_bytes(data)
    for cut in range(len(data) - 1, starts[-2] - 1, -1):
        os.truncate(cut_file, cut)
        sessions, notes = _mapped(cut_file)
        line_start = max(s for s in starts if s <= cut)
        complete = sum(1 for s in starts if data.find(b"\n", s) <= cut and s < cut)
        if cut == line_start or data[cut:cut + 1] == b"\n":
            assert notes.torn == [], cut
        else:
            [torn] = notes.torn
            assert (torn.line, torn.offset, torn.size) == (
                starts.index(line_start) + 1, line_start, cut - line_start), cut
        assert [(s.key, [(e.type, e.line) for e in ev]) for s, ev in sessions] == \
            summary[complete], cut


def test_blank_lines_are_noted(tmp_path: Path) -> None:
    path = tmp_path / "blank.jsonl"
    body = [json.dumps(_meta("00000000-0000-4000-8000-0000000000bb")), "",
            json.dumps(_line("event_msg", {"type": "token_count", "info": None})), "  "]
    path.write_text("\n".join(body) + "\n" + json.dumps(_line("world_state", {})) + "\n")
    [(_s, events)], notes = _mapped(path)
    assert [e.type for e in events] == ["codex/session_meta", "codex/token_count",
                                        "codex/world_state"]
    assert [(u.line, u.kind) for u in notes.unmapped] == [(2, "blank"), (4, "blank")]


def test_a_sessions_folder(tmp_path: Path) -> None:
    parent, child = ("00000000-0000-4000-8000-000000000001",
                     "00000000-0000-4000-8000-000000000002")
    day = tmp_path / "sessions" / "2026" / "01" / "02"
    day.mkdir(parents=True)
    _write(day / f"rollout-2026-01-02T03-04-05-{parent}.jsonl", [_meta(parent)])
    _write(day / f"rollout-2026-01-02T03-05-00-{child}.jsonl", [_meta(child, source={
        "subagent": {"thread_spawn": {"parent_thread_id": parent}}})])
    (tmp_path / "sessions" / "notes.txt").write_text("not a rollout")
    assert codex.sniff(tmp_path / "sessions") and not codex.sniff(tmp_path / "sessions" / "x")
    sessions, _ = _mapped(tmp_path / "sessions")
    assert [(s.id, s.parent) for s, _ in sessions] == [(parent, None),
                                                      (child, f"codex:{parent}")]


def test_a_rollout_that_ends_mid_turn_is_closed_by_trajlogs_own_closers(
        tmp_path: Path) -> None:
    """Codex died in the middle of a turn, a shell call requested and never
    answered: with close=True the import appends trajlog's recovery closers
    (as store.load() does after a crash); without it the log stays as found."""
    path = _write(tmp_path / "died.jsonl", [
        _meta("00000000-0000-4000-8000-0000000000dd"),
        _line("event_msg", {"type": "task_started", "turn_id": "t1"}),
        _line("response_item", {"type": "message", "role": "user",
                                "content": [{"type": "input_text", "text": "list files"}]}),
        _line("response_item", {"type": "function_call", "name": "shell", "call_id": "k9",
                                "arguments": "{\"command\": [\"ls\"]}"})])
    with trajlog.open(str(tmp_path / "open.db")) as store:
        report = store.import_path(path)
        (sid,) = report.created
        assert report.closed == [] and store.session(sid).inspect()[0].closers
    with trajlog.open(str(tmp_path / "closed.db")) as store:
        report = store.import_path(path, close=True)
        (sid,) = report.created
        assert report.closed == [sid]
        s = store.session(sid)
        tail = [(e.type, e.data.get("status"), e.data.get("call_id")) for e in s.events()][-2:]
        assert tail == [("tool/result", "TOOL_NOT_STARTED", "k9"), ("turn/end", None, None)]
        assert s.inspect()[0].closers == ()
        again = store.import_path(path, close=True)
        assert again.skipped == [sid] and again.closed == [] and again.events == 0
