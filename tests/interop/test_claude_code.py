"""Claude Code session JSONL import: golden tests on the real files.

The expected numbers were counted from the files with jq (line ``type`` /
``system.subtype``, distinct ``message.id`` of the assistant lines,
``tool_use`` / ``tool_result`` blocks, user lines without a tool_result),
not from the importer; see tests/realdata/MANIFEST.md.  Per file, what one
import yields (each session: its events by type):

* ``cb2e607c`` (292 lines): 200 assistant lines carry 80 message ids -> 80
  ``assistant/message``; 76 tool_use / 76 tool_result (7 is_error); 6 user text
  lines (1 an interrupt); 10 queue-operation.  Its sibling ``agent-ea02459f``
  (33 lines): 18 assistant lines / 5 ids, 14 + 14 tools, 1 prompt.
* ``ef958aa1`` (180 lines): 62 assistant lines / 17 ids, 40 + 40 tools, 5 user
  text lines, 49 attachment, 8 permission-mode, 7 last-prompt, 3
  file-history-snapshot, 2 + 2 + 2 system (stop_hook_summary, turn_duration,
  away_summary); ``subagents/agent-a4ca7529859c158c2`` (56 lines): 31 / 20 ids,
  24 + 24 tools (1 is_error), 1 prompt, and its ``.meta.json``.
* ``7acd37a8`` (211): 120 / 36 ids, 71 + 71 (6 is_error), 8 user text (1 meta,
  1 interrupt), 12 queue-operation.  ``2c5941bd`` is empty; ``agent-650d3273``
  (1 assistant line) is its orphan subagent.
* ``fe869ecb`` (111, v1.0.24): 15 summary, 59 / 34 ids, 32 + 32, 5 user text.
* ``03eb5929`` (61): 22 / 9 ids, 2 + 2, 10 user text, 11 progress, 9
  file-history-snapshot, 7 system.stop_hook_summary.
* synthetic: ``dag_fork`` (s1 5 lines, s2 3, s3 3), ``dag_compact_after_rewind``
  (6 user, 5 assistant, 1 compact_boundary; the 7th user line is the summary),
  ``claude_small`` (89 lines of three sessionIds: 9 ``isSidechain`` lines from
  a root ``sys1``; 1 tool_use that is never answered).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog.errors import ImportFormatError
from trajlog.interop.mapping import MappedEvent, MappedSession, Notes
from trajlog.interop.sources import claude_code
from trajlog.projections import model_history, status

REAL = Path(__file__).resolve().parents[1] / "realdata"
CC = REAL / "claude-code"
PROJECTS = CC / "claude-code-log" / "projects"
SYN = CC / "synthetic-shapes"
CODERABBIT = PROJECTS / "-Users-dain-workspace-coderabbit-review-helper"
CB2 = CODERABBIT / "cb2e607c-c758-415a-8b45-c49e4631906a.jsonl"
WORKTREES = PROJECTS / "-experiments-worktrees"
EF9 = WORKTREES / "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
A4C = WORKTREES / "ef958aa1-0e93-49f0-bb71-150f63befcd1" / "subagents" / \
    "agent-a4ca7529859c158c2.jsonl"
JSS = PROJECTS / "-Users-dain-workspace-JSSoundRecorder"
SEVEN = JSS / "7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl"
EMPTY = JSS / "2c5941bd-b9de-41d6-9414-221d175776f7.jsonl"
ORPHAN = JSS / "agent-650d3273.jsonl"
SAMPLE = PROJECTS / "-Users-dain-workspace-claude-code-log-sample" / \
    "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"
IDEAS = PROJECTS / "-experiments-ideas" / "03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"
SMALL = SYN / "agent-sessions__claude_small.jsonl"
FORK = SYN / "claude-code-log__dag_fork.jsonl"
REWIND = SYN / "claude-code-log__dag_compact_after_rewind.jsonl"

K = "claude-code:"
FILES = {p.name: p for p in CC.rglob("*.jsonl")}
TOOLS = ("tool/call", "tool/result")


def _mapped(path: Path) -> tuple[list[tuple[MappedSession, list[MappedEvent]]], Notes]:
    notes = Notes()
    return [(s, list(s.events)) for s in claude_code.read(path, notes)], notes


def _counts(events: list[MappedEvent]) -> dict[str, int]:
    return dict(Counter(e.type for e in events))


def _raw(path: Path) -> list[dict[str, Any]]:
    """The file's records, by line number - 1 (stdlib json: independent of
    the importer's reader)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def _ms(stamp: Any) -> int | None:
    try:
        return round(dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
                     * 1000)
    except (AttributeError, ValueError):
        return None


def _tools(n: int) -> dict[str, int]:
    return {"tool/call": n, "tool/result": n}


GOLDEN: dict[Path, dict[str, dict[str, int]]] = {
    CB2: {
        K + "cb2e607c-c758-415a-8b45-c49e4631906a": {
            "assistant/message": 80, **_tools(76), "user/message": 6,
            "claude-code/queue-operation": 10},
        K + "cb2e607c-c758-415a-8b45-c49e4631906a/agent-ea02459f": {
            "assistant/message": 5, **_tools(14), "user/message": 1}},
    EF9: {
        K + "ef958aa1-0e93-49f0-bb71-150f63befcd1": {
            "assistant/message": 17, **_tools(40), "user/message": 5,
            "claude-code/attachment": 49, "claude-code/permission-mode": 8,
            "claude-code/last-prompt": 7, "claude-code/file-history-snapshot": 3,
            "claude-code/system.stop_hook_summary": 2, "claude-code/system.turn_duration": 2,
            "claude-code/system.away_summary": 2},
        K + "ef958aa1-0e93-49f0-bb71-150f63befcd1/agent-a4ca7529859c158c2": {
            "assistant/message": 20, **_tools(24), "user/message": 1}},
    SEVEN: {
        K + "7acd37a8-2745-4b58-a8a9-46164b22ad9e": {
            "assistant/message": 36, **_tools(71), "user/message": 8,
            "claude-code/queue-operation": 12}},
    ORPHAN: {K + "2c5941bd-b9de-41d6-9414-221d175776f7/agent-650d3273": {
        "assistant/message": 1}},
    SAMPLE: {K + "fe869ecb-c176-478f-9734-7e4b8ef12cff": {
        "claude-code/summary": 15, "assistant/message": 34, **_tools(32), "user/message": 5}},
    IDEAS: {K + "03eb5929-52b3-4b13-ada3-b93ae35806b8": {
        "assistant/message": 9, **_tools(2), "user/message": 10, "claude-code/progress": 11,
        "claude-code/file-history-snapshot": 9, "claude-code/system.stop_hook_summary": 7}},
    FORK: {K + "s1": {"user/message": 3, "assistant/message": 2},
           K + "s2": {"user/message": 2, "assistant/message": 1},
           K + "s3": {"user/message": 2, "assistant/message": 1}},
    REWIND: {K + "s1": {"user/message": 5, "assistant/message": 5,
                        "claude-code/compact_boundary": 1, "compaction/apply": 1}},
}


@pytest.mark.parametrize("path", list(GOLDEN), ids=lambda p: p.name[:24])
def test_golden_counts_and_every_line_mapped(path: Path) -> None:
    sessions, notes = _mapped(path)
    assert {s.key: _counts(evs) for s, evs in sessions} == GOLDEN[path]
    assert not notes.unmapped and not notes.torn
    # zero unexplained drops: every line of every file read is in an event (a
    # merged assistant message names the uuids of its other lines)
    files: dict[str, set[int]] = {}
    for session, events in sessions:
        name = session.metadata["import"]["file"]
        line_of = {r.get("uuid"): i for i, r in enumerate(_raw(FILES[name]), 1)}
        seen = files.setdefault(name, set())
        for e in events:
            seen.add(e.line)  # type: ignore[arg-type]
            seen.update(line_of[u] for u in e.data.get("claude", {}).get("uuids", []))
    for name, lines in files.items():
        assert lines == set(range(1, len(_raw(FILES[name])) + 1)), name
    assert len(files) == len({s.metadata["import"]["file"] for s, _ in sessions})


def test_small_composite_three_sessions_and_its_orphan_tool_use() -> None:
    sessions, notes = _mapped(SMALL)
    got = {s.key: _counts(evs) for s, evs in sessions}
    main, side, trimmed = K + "ses_stage0_small", K + "ses_stage0_small/sidechain-sys1", \
        K + "[trimmed for fixture]"
    assert list(got) == [main, side, trimmed]
    # lines 1-41 minus the 9 sidechain lines; the tool_result of line 30 gives 2 events
    assert sum(got[main].values()) == 41 - 9 + 1
    assert got[side] == {"claude-code/system.session_start": 1, "claude-code/attachment": 1,
                         "user/message": 1, "assistant/message": 3, **_tools(1),
                         "claude-code/tool_result": 1, "compaction/apply": 1}
    assert sum(got[trimmed].values()) == 89 - 41 - 1   # lines 77 and 78: one message id
    assert got[main]["claude-code/compact_boundary"] == 1
    assert got[trimmed]["claude-code/compact_boundary"] == 1
    for kind in ("mode", "agent-name", "custom-title", "ai-title", "frame-link", "pr-link",
                 "worktree-state", "bridge-session", "atis-latch", "last-prompt",
                 "system.api_refusal", "system.model_refusal_fallback"):
        assert f"claude-code/{kind}" in got[main] or f"claude-code/{kind}" in got[trimmed]
    assert got[main]["claude-code/worktree-state"] + got[trimmed]["claude-code/worktree-state"] \
        == 2
    assert got[main]["claude-code/system.api_refusal"] == 1
    assert got[trimmed]["claude-code/system.api_error"] == 4
    by_key = {s.key: (s, evs) for s, evs in sessions}
    s_side, ev_side = by_key[side]
    assert (s_side.parent, s_side.origin, s_side.delegation_depth) == (main, "subagent", 1)
    # the id-less tool_use of line 8 is answered by line 9; line 10 (a rewind to a1)
    # answers it again: carried, with a warning
    [call] = [e for e in ev_side if e.type == "tool/call"]
    assert call.data["call_id"] == "a1#2" and call.line == 9
    [again] = [e for e in ev_side if e.type == "claude-code/tool_result"]
    assert again.line == 10 and again.data["is_error"] is True
    assert any(":10:" in w and "already answered" in w for w in notes.warnings)
    # the one genuinely orphaned tool_use (line 55) stays requested
    requested = [c["id"] for _, evs in sessions for e in evs if e.type == "assistant/message"
                 for c in e.data.get("tool_calls", [])]
    answered = [e.data["call_id"] for _, evs in sessions for e in evs if e.type == "tool/result"]
    assert [c for c in requested if c not in answered] == ["[trimmed for fixture]"]


def test_small_through_the_store_keeps_the_orphan_requested(tmp_path: Path) -> None:
    store = trajlog.open(str(tmp_path / "t.db"), durability="normal")
    report = store.import_path(SMALL, format="claude-code")
    assert len(report.sessions) == 3 and not report.torn
    trimmed = store.session(report.sessions[2].session_id)
    assert status(trimmed).tools_requested == ["[trimmed for fixture]"]
    assert status(store.session(report.sessions[0].session_id)).tools_requested == []


def test_merge_by_message_id_keeps_every_line() -> None:
    for path, lines, ids in ((EF9, 62, 17), (CB2, 200, 80), (A4C, 31, 20)):
        raw = _raw(path)
        assistant = [r for r in raw if r["type"] == "assistant"]
        assert len(assistant) == lines and len({r["message"]["id"] for r in assistant}) == ids
        sessions, _ = _mapped(path)
        mine = [s for s in sessions if s[0].metadata["import"]["file"] == path.name]
        events = mine[0][1]
        messages = [e for e in events if e.type == "assistant/message"]
        assert len(messages) == ids
        uuids = [u for m in messages for u in m.data["claude"].get("uuids",
                                                                  [m.data["claude"]["uuid"]])]
        assert uuids == [r["uuid"] for r in assistant]
        assert [m.data["message_id"] for m in messages] == list(
            dict.fromkeys(r["message"]["id"] for r in assistant))
        calls = [c["id"] for m in messages for c in m.data.get("tool_calls", [])]
        assert calls == [b["id"] for r in assistant for b in r["message"]["content"]
                         if b["type"] == "tool_use"]
        thinking = [b["thinking"] for r in assistant for b in r["message"]["content"]
                    if b["type"] == "thinking"]
        with_thinking = {r["message"]["id"] for r in assistant
                         if any(b["type"] == "thinking" for b in r["message"]["content"])}
        assert [m.data["message_id"] for m in messages if "reasoning" in m.data] == [
            i for i in dict.fromkeys(r["message"]["id"] for r in assistant) if i in with_thinking]
        assert "".join(m.data.get("reasoning", "") for m in messages) == "".join(thinking)
        for m in messages:  # request ids and parent uuids of every line kept
            lines_ = [m.data["claude"], *m.data["claude"].get("lines", [])]
            assert all("parentUuid" in x and "requestId" in x for x in lines_)


def test_tool_pairing_errors_and_interrupts() -> None:
    expect = {CB2: (76, 7, 1), SEVEN: (71, 6, 1), A4C: (24, 1, 0), EF9: (40, 0, 0)}
    for path, (pairs, errors, interrupts) in expect.items():
        sessions, notes = _mapped(path)
        events = next(evs for s, evs in sessions if s.metadata["import"]["file"] == path.name)
        results = [e for e in events if e.type == "tool/result"]
        assert len(results) == pairs
        assert sum(e.data["is_error"] for e in results) == errors
        for r in results:
            call = events[r.cause]  # type: ignore[index]
            asked = events[call.cause]  # type: ignore[index]
            assert call.type == "tool/call" and call.data["call_id"] == r.data["call_id"]
            assert asked.type == "assistant/message"
            assert r.data["call_id"] in [c["id"] for c in asked.data["tool_calls"]]
            assert r.source == call.source == call.data["name"] == r.data["name"]
        assert sum("tool_use_result" in e.data for e in results) == sum(
            1 for r in _raw(path) if "toolUseResult" in r and r["type"] == "user"
            and isinstance(r["message"]["content"], list)
            and r["message"]["content"][0].get("type") == "tool_result")
        marks = [e for e in events if e.data.get("interrupted")]
        assert len(marks) == interrupts
        assert all(e.type == "user/message" and e.data["content"][0]["text"].startswith(
            "[Request interrupted by user") for e in marks)
        assert not any("tool_result" in w for w in notes.warnings)


def test_meta_lines_are_flagged() -> None:
    for path in (SEVEN, SAMPLE, IDEAS, EF9):
        sessions, _ = _mapped(path)
        events = sessions[0][1]
        meta = [e for e in events if e.data.get("meta")]
        assert len(meta) == 1 and meta[0].type == "user/message" and meta[0].source == "system"
        assert _raw(path)[meta[0].line - 1]["isMeta"] is True  # type: ignore[operator]


def test_timestamps_and_ids_kept() -> None:
    for path in (EF9, CB2, SAMPLE):
        raw = _raw(path)
        sessions, _ = _mapped(path)
        events = sessions[0][1]
        for e in events:
            rec = raw[e.line - 1]  # type: ignore[operator]
            if e.type == "tool/call":
                assert e.time == events[e.cause].time  # type: ignore[index]
            else:
                assert e.time == _ms(rec.get("timestamp")), (e.type, e.line)
            uuid = rec.get("uuid")
            if uuid is not None and e.type != "tool/call":
                claude = e.data.get("claude", e.data)
                assert uuid in claude.get("uuids", [claude.get("uuid")])


def test_lineage_of_a_project_folder(tmp_path: Path) -> None:
    store = trajlog.open(str(tmp_path / "t.db"), durability="normal")
    report = store.import_path(PROJECTS)
    by_key = {s.key: s for s in report.sessions}
    assert len(by_key) == 8 and not report.torn
    assert [(u.file, u.kind) for u in report.unmapped] == [(str(EMPTY), "empty-file")]
    assert sum(s.events for s in report.sessions) == sum(
        sum(v.values()) for g in GOLDEN.values() for k, v in g.items() if not k.endswith(
            ("s1", "s2", "s3")))
    # the sibling agent file: its spawning call is the result naming its agentId
    raw = _raw(CB2)
    spawn = next(b["tool_use_id"] for r in raw if isinstance(r.get("toolUseResult"), dict)
                 and r["toolUseResult"].get("agentId") == "ea02459f"
                 for b in r["message"]["content"])
    child = store.session(by_key[K + "cb2e607c-c758-415a-8b45-c49e4631906a/agent-ea02459f"]
                          .session_id).header
    assert child.parent_session == "cb2e607c-c758-415a-8b45-c49e4631906a"
    assert (child.origin, child.delegation_depth) == ("subagent", 1)
    assert child.metadata["import"]["tool_use_id"] == spawn == child.metadata["parent_call_id"]
    assert child.metadata["import"]["agent_id"] == "ea02459f"
    assert child.agent_preset == "Plan"  # the Task call's subagent_type
    # the subagents/ folder with its .meta.json
    raw = _raw(EF9)
    spawn = next(b["tool_use_id"] for r in raw if isinstance(r.get("toolUseResult"), dict)
                 and r["toolUseResult"].get("agentId") == "a4ca7529859c158c2"
                 for b in r["message"]["content"])
    child = store.session(by_key[K + "ef958aa1-0e93-49f0-bb71-150f63befcd1/agent-"
                                 "a4ca7529859c158c2"].session_id).header
    meta = json.loads(A4C.with_suffix(".meta.json").read_text())
    assert child.parent_session == "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    # the header keeps the ids and paths; the description is the Task call's, held by its event
    assert child.metadata["import"]["agent_meta"] == {k: v for k, v in meta.items()
                                                      if k != "description"}
    assert child.metadata["import"]["tool_use_id"] == spawn
    assert child.agent_preset == meta["agentType"] and child.cwd == _raw(A4C)[0]["cwd"]
    # the orphan: its session file is empty
    orphan = store.session(by_key[K + "2c5941bd-b9de-41d6-9414-221d175776f7/agent-650d3273"]
                           .session_id).header
    assert orphan.parent_session is None and orphan.origin is None
    assert orphan.metadata["import"]["orphan_subagent"] is True
    assert any("agent-650d3273" in w and "top-level" in w for w in report.warnings)
    # main sessions keep Claude's session id and header fields
    main = store.session("7acd37a8-2745-4b58-a8a9-46164b22ad9e").header
    first = next(r for r in _raw(SEVEN) if "uuid" in r)
    assert (main.cwd, main.created_at) == (first["cwd"], _ms(first["timestamp"]))
    assert main.metadata["import"]["version"] == "2.0.42"
    assert main.metadata["import"]["git_branch"] == first["gitBranch"]
    # importing again writes nothing
    again = store.import_path(PROJECTS)
    assert again.events == 0 and len(again.skipped) == 8


def test_one_session_file_brings_its_subagents_and_an_agent_file_alone_is_an_orphan() -> None:
    sessions, _ = _mapped(EF9)
    assert [s.key for s, _ in sessions] == list(GOLDEN[EF9])
    sessions, notes = _mapped(A4C)
    [(alone, _)] = sessions
    assert alone.parent is None and alone.metadata["import"]["orphan_subagent"] is True
    assert notes.warnings
    sessions, notes = _mapped(EMPTY)
    assert sessions == [] and [u.kind for u in notes.unmapped] == ["empty-file"]


def test_cross_session_forks(tmp_path: Path) -> None:
    sessions, _ = _mapped(FORK)
    heads = {s.key: s for s, _ in sessions}
    assert heads[K + "s1"].parent is None
    for key, point, kind in (("s2", "e", "resume"), ("s3", "c", "fork")):
        s = heads[K + key]
        meta = s.metadata["import"]
        assert (s.parent, s.origin, s.delegation_depth) == (K + "s1", None, 0)
        assert (meta["fork_point_uuid"], meta["fork_kind"], meta["lineage"]) == (
            point, kind, "fork")
    store = trajlog.open(str(tmp_path / "t.db"), durability="normal")
    report = store.import_path(FORK, format="claude-code")
    s1, s2, s3 = (store.session(r.session_id) for r in report.sessions)
    assert s2.header.parent_session == s3.header.parent_session == s1.id
    assert [(m.role, _text(m.content)) for m in model_history(s3)] == [
        ("user", "Fork from c"), ("assistant", "Forked reply"), ("user", "End of s3")]


def test_rewind_and_compaction(tmp_path: Path) -> None:
    sessions, notes = _mapped(REWIND)
    [(_, events)] = sessions
    # both branches under a1 stay, in line order, with their parent uuids
    users = [e for e in events if e.type == "user/message"]
    assert [e.data["claude"]["parentUuid"] for e in users[:3]] == [None, "a1", "a1"]
    boundary = next(i for i, e in enumerate(events) if e.type == "claude-code/compact_boundary")
    assert events[boundary].data["logicalParentUuid"] == "b2a2"
    assert events[boundary].data["compactMetadata"] == {"trigger": "auto", "preTokens": 150000}
    apply = events[boundary + 1]
    assert apply.type == "compaction/apply" and apply.line == 10
    assert (apply.data["op"], apply.data["from_seq"], apply.data["to_seq"]) == (
        "surface-replace", 0, boundary - 1)
    assert apply.data["summary"].startswith("This session is being continued")
    assert not notes.warnings
    store = trajlog.open(str(tmp_path / "t.db"), durability="normal")
    report = store.import_path(REWIND, format="claude-code")
    history = model_history(store.session(report.sessions[0].session_id))
    assert [(m.role, m.seq) for m in history] == [("summary", 0), ("user", 10),
                                                  ("assistant", 11)]
    assert history[0].until == boundary - 1


def test_compaction_that_would_split_a_call_is_carried(tmp_path: Path) -> None:
    lines = [line for line in REWIND.read_text().splitlines()]
    use = json.loads(lines[7])
    use["message"]["content"] = [{"type": "tool_use", "id": "toolu_x", "name": "Bash",
                                  "input": {"command": "ls"}}]
    lines[7] = json.dumps(use)
    path = tmp_path / "open-call.jsonl"
    path.write_text("\n".join(lines) + "\n")
    [(_, events)], notes = _mapped(path)
    kinds = [e.type for e in events]
    assert "compaction/apply" not in kinds and "claude-code/compact_summary" in kinds
    assert any("toolu_x" in w for w in notes.warnings)
    store = trajlog.open(str(tmp_path / "t.db"), durability="normal")
    store.import_path(path, format="claude-code")  # a valid log: nothing refused


def _line(kind: str, uuid: str, parent: str | None, content: Any, **extra: Any) -> str:
    rec: dict[str, Any] = {"type": kind, "uuid": uuid, "parentUuid": parent,
                           "sessionId": "11111111-2222-3333-4444-555555555555",
                           "timestamp": f"2025-01-01T00:00:{len(uuid):02d}.000Z",
                           "cwd": "/w", "version": "1.0.9", "isSidechain": False}
    rec["message"] = ({"role": "user", "content": content} if kind == "user" else
                      {"id": extra.pop("mid", "m-" + uuid), "role": "assistant",
                       "content": content})
    rec.update(extra)
    return json.dumps(rec)


def test_inline_sidechain_reused_ids_orphan_results_and_api_errors(tmp_path: Path) -> None:
    task = {"type": "tool_use", "id": "toolu_t", "name": "Task",
            "input": {"description": "look", "prompt": "Find X", "subagent_type": "Explore"}}
    path = tmp_path / "11111111-2222-3333-4444-555555555555.jsonl"
    path.write_text("\n".join([
        _line("user", "u", None, "go"),
        _line("assistant", "a", "u", [task]),
        _line("user", "s1", None, "Find X", isSidechain=True),
        _line("assistant", "s2", "s1", [{"type": "text", "text": "X is here"}],
              isSidechain=True),
        _line("user", "r", "a", [{"type": "tool_result", "tool_use_id": "toolu_t",
                                  "content": "X is here"}]),
        _line("assistant", "b", "r", [{"type": "tool_use", "id": "toolu_t", "name": "Bash",
                                       "input": {}}]),
        _line("user", "q", "b", [{"type": "tool_result", "tool_use_id": "toolu_nope",
                                  "content": "?"}]),
        _line("assistant", "e", "q", [{"type": "text", "text": "API Error: 500"}],
              isApiErrorMessage=True),
    ]) + "\n")
    (main, events), (child, side) = (x for x in _mapped(path)[0])
    notes = _mapped(path)[1]
    assert (child.parent, child.origin, child.delegation_depth) == (main.key, "subagent", 1)
    assert child.metadata["import"]["tool_use_id"] == "toolu_t"   # by its prompt
    assert child.agent_preset == "Explore" and child.metadata["parent_call_id"] == "toolu_t"
    assert [e.type for e in side] == ["user/message", "assistant/message"]
    assert [e.type for e in events] == [
        "user/message", "assistant/message", "tool/call", "tool/result", "assistant/message",
        "claude-code/tool_use", "claude-code/tool_result", "assistant/message"]
    assert "tool_calls" not in events[4].data and events[5].data["call"]["id"] == "toolu_t"
    assert events[6].data["reason"] == "no tool_use of this session requested it"
    assert events[7].data["api_error"] is True and events[7].data["content"] == "API Error: 500"
    assert len(notes.warnings) == 2
    store = trajlog.open(str(tmp_path / "t.db"), durability="normal")
    report = store.import_path(path)
    assert [s.status for s in report.sessions] == ["created", "created"]


def test_model_history_matches_the_raw_file(tmp_path: Path) -> None:
    store = trajlog.open(str(tmp_path / "t.db"), durability="normal")
    for path in (EF9, CB2):
        report = store.import_path(path, format="claude-code")
        history = model_history(store.session(report.sessions[0].session_id))
        assert [_view(m) for m in history] == _derive(_raw(path))


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


def _view(m: Any) -> tuple[Any, ...]:
    if m.role == "assistant":
        text = [] if m.content is None else [m.content] if isinstance(m.content, str) else [
            b["text"] for b in m.content]
        return ("assistant", text, [c["id"] for c in m.tool_calls or []])
    if m.role == "tool":
        return ("tool", m.tool_call_id, m.content, m.is_error)
    return (m.role, m.content)


def _derive(raw: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What the model saw, from the raw lines: one message per message.id
    (placed at its first line), the prompts, each tool_result."""
    placed: list[tuple[int, Any]] = []
    by_id: dict[str, tuple[list[str], list[str]]] = {}
    for i, rec in enumerate(raw):
        if rec.get("type") == "assistant":
            mid = rec["message"]["id"]
            if mid not in by_id:
                by_id[mid] = ([], [])
                placed.append((i, mid))
            for b in rec["message"]["content"]:
                if b["type"] == "text":
                    by_id[mid][0].append(b["text"])
                elif b["type"] == "tool_use":
                    by_id[mid][1].append(b["id"])
        elif rec.get("type") == "user":
            content = rec["message"]["content"]
            results = [b for b in content if b["type"] == "tool_result"] if isinstance(
                content, list) else []
            placed.extend((i, ("tool", b["tool_use_id"], b.get("content"),
                               b.get("is_error", False))) for b in results)
            if not results:
                placed.append((i, ("user", content)))
    placed.sort(key=lambda x: x[0])
    return [("assistant", *by_id[x]) if isinstance(x, str) else x for _, x in placed]


def test_sniff() -> None:
    for path in (CB2, EF9, A4C, ORPHAN, SAMPLE, IDEAS, SMALL, FORK, REWIND, PROJECTS,
                 CODERABBIT, WORKTREES):
        assert claude_code.sniff(path), path
    assert not claude_code.sniff(EMPTY)
    for other in (REAL / "codex" / "synthetic-shapes" / "agent-sessions__codex_small.jsonl",
                  REAL / "openhands" / "sdk-v1" / "goal_events.jsonl",
                  REAL / "openhands" / "legacy-v0" / "multi_swe_bench_output.jsonl",
                  REAL / "swe-agent", REAL / "aider" / "chat-history.md"):
        assert not claude_code.sniff(other), other


def test_bad_lines_raise_with_line_and_offset(tmp_path: Path) -> None:
    good = FORK.read_text().splitlines(keepends=True)
    offset = sum(len(x.encode()) for x in good[:3])
    for bad, reason in (('[1, 2]\n', "JSON object"), ('{"type": "user", "uuid": "z", '
                        '"sessionId": "s1", "message": "hi"}\n', "message object"),
                        ('{"type": "user", "uuid": "z"\n', "JSON")):
        path = tmp_path / "bad.jsonl"
        path.write_text("".join(good[:3]) + bad + "".join(good[3:]))
        with pytest.raises(ImportFormatError) as err:
            _mapped(path)
        assert (err.value.line, err.value.offset) == (4, offset), reason
        assert reason in str(err.value)


def test_events_left_unread_are_still_mapped() -> None:
    notes = Notes()
    sessions = list(claude_code.read(FORK, notes))   # never reading s1's events first
    assert [sum(1 for _ in s.events) for s in sessions] == [5, 3, 3]


def _cut_check(tmp_path: Path, path: Path, offsets: list[int]) -> None:
    data = path.read_bytes()
    starts = [0]
    for i, b in enumerate(data):
        if b == 0x0A:
            starts.append(i + 1)
    n = len(starts) - 1            # lines (the file ends with a newline)
    expect: dict[int, list[tuple[str, int | None]]] = {}
    for complete in (n - 2, n - 1, n):
        prefix = tmp_path / f"prefix{complete}" / path.name
        prefix.parent.mkdir(parents=True)
        prefix.write_bytes(data[:starts[complete]])
        sessions, _ = _mapped(prefix)
        expect[complete] = [(e.type, e.line) for _, evs in sessions for e in evs]
    cut = tmp_path / "cut" / path.name
    cut.parent.mkdir(parents=True)
    shutil.copy(path, cut)
    for offset in sorted(offsets, reverse=True):
        os.truncate(cut, offset)
        sessions, notes = _mapped(cut)
        got = [(e.type, e.line) for _, evs in sessions for e in evs]
        i = max(j for j in range(n + 1) if starts[j] <= offset)   # lines 0 .. i-1 whole
        if offset == starts[i]:
            assert got == expect[i] and not notes.torn, offset
        elif offset == starts[i + 1] - 1:   # all of line i but its newline
            assert got == expect[i + 1] and not notes.torn, offset
        else:
            assert got == expect[i], offset
            [torn] = notes.torn
            assert (torn.line, torn.offset, torn.size) == (i + 1, starts[i],
                                                           offset - starts[i]), offset


def _last_two(data: bytes) -> int:
    """The offset where the last two lines begin."""
    body = data.rstrip(b"\n")
    return body.rfind(b"\n", 0, body.rfind(b"\n")) + 1


def test_crash_cuts_of_the_biggest_file(tmp_path: Path) -> None:
    data = CB2.read_bytes()
    a = _last_two(data)
    # the whole file: each line boundary and its neighbours, and one offset in
    # every 61 bytes (each cut re-reads 1 MB) ...
    edges = {a, data.index(b"\n", a) + 1, len(data)}
    offsets = {o for e in edges for o in range(e - 2, e + 3) if a <= o <= len(data)}
    _cut_check(tmp_path / "whole", CB2, sorted(offsets | set(range(a, len(data), 61))))
    # ... and every offset of its last two lines, after the two lines before them
    # (the API response that line 292 continues begins on line 291)
    tail = tmp_path / "tail" / CB2.name
    tail.parent.mkdir(parents=True)
    tail.write_bytes(data[_last_two(data[:a]):])
    _cut_check(tmp_path / "tail", tail, list(range(_last_two(tail.read_bytes()),
                                                     len(tail.read_bytes()) + 1)))


@pytest.mark.parametrize("path", [IDEAS, FORK, REWIND], ids=lambda p: p.name[:24])
def test_crash_cuts_every_offset(tmp_path: Path, path: Path) -> None:
    data = path.read_bytes()
    _cut_check(tmp_path, path, list(range(_last_two(data), len(data) + 1)))


def test_a_torn_tail_through_the_store(tmp_path: Path) -> None:
    data = CB2.read_bytes()
    cut = tmp_path / "proj" / CB2.name
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) - 700])
    store = trajlog.open(str(tmp_path / "t.db"), durability="normal")
    report = store.import_path(cut, format="claude-code")
    [torn] = report.torn
    raw = _raw(CB2)
    assert (torn.line, torn.offset) == (292, len(data) - len(json.dumps(raw[-1],
                                        separators=(",", ":"), ensure_ascii=False).encode()) - 1)
    # the last line was the text block of the last response, whose thinking is on line 291
    assert report.sessions[0].events == 248
    last = list(store.session(report.sessions[0].session_id).events())[-1]
    assert last.type == "assistant/message" and last.data["content"] is None
    assert last.data["claude"]["uuid"] == raw[290]["uuid"] and "uuids" not in last.data["claude"]
