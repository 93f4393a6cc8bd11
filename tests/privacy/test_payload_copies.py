"""trajlog never copies payload text somewhere redaction and erasure do not
reach: a subagent's header points at the event holding its task instead of
holding the text, and whatever shows the task (the API, the CLI, the viewer)
reads it through that pointer -- proven on the raw bytes of the database
files and of every export."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

import trajlog
from kits.tamper import file_bytes
from trajlog import projections
from trajlog.cli.main import main
from trajlog.projections.context import build_context
from trajlog.redaction import RedactionPolicy
from trajlog.viewer.document import build_document

SQLITE_CONN = "runs SQL on the SQLite backend's own connections"
SQLITE_ERASED = "proves what is gone on the bytes of the SQLite file and its WAL"

AWS = "AKIA" + "Q4ZJ7W2XK9LM3NPR"          # a key the built-in scanner masks
MARK = "TASKWORDS-Q7"                       # a plain word no scanner touches


def _parent(store: Any) -> Any:
    """A session with one completed turn (something for fork_subagent to seed)."""
    s = store.create_session(cwd="/repo")
    with s.turn():
        s.append("user/message", {"content": "hello"})
        s.append("assistant/message", {"content": "hi"})
    return s


def _child(s: Any, how: str, task: str) -> Any:
    make = s.spawn_subagent if how == "spawn" else s.fork_subagent
    return make(task, call_id="c1")


def _exports(store: Any, root: str, child: str, where: Path) -> bytes:
    """The bytes of every export that holds the child: its .tlog and .jsonl,
    the tree's .zip (its members decompressed) and the viewer document."""
    out = b""
    for name in ("c.tlog", "c.jsonl"):
        store.export(child, where / name)
        out += (where / name).read_bytes()
    store.export(root, where / "t.zip")
    with zipfile.ZipFile(where / "t.zip") as z:
        for member in z.namelist():
            out += z.read(member)
    out += json.dumps(build_document(store, root)).encode()
    return out


def _states(store: Any) -> bytes:
    """Every saved projection state of the store, as stored."""
    rows = store._e.backend.connection().execute("SELECT state FROM projection_states")
    return b"".join(bytes(r[0]) for r in rows)


def _task_seq(sub: Any) -> int:
    seq = sub.header.metadata["task_seq"]
    assert sub.get(seq).type == "user/message"
    return int(seq)


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
@pytest.mark.parametrize("how", ["spawn", "fork"])
def test_a_redacted_task_is_masked_in_the_header_the_files_and_the_exports(tmp_path, how):
    path = str(tmp_path / "r.db")
    with trajlog.open(path, redaction=RedactionPolicy()) as store:
        s = _parent(store)
        sub = _child(s, how, f"deploy with {AWS} then report")
        assert AWS not in repr(dict(sub.header.metadata))
        assert "task" not in sub.header.metadata
        assert sub.get(_task_seq(sub)).data["content"] == (
            "deploy with [REDACTED:aws_access_key] then report")
        assert sub.task() == "deploy with [REDACTED:aws_access_key] then report"
        assert AWS.encode() not in file_bytes(path)
        assert AWS.encode() not in _exports(store, s.id, sub.id, tmp_path)
    assert AWS.encode() not in file_bytes(path)


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
@pytest.mark.parametrize("how", ["spawn", "fork"])
def test_an_erased_task_leaves_no_copy_in_the_header_the_files_or_the_exports(tmp_path, how):
    path = str(tmp_path / "e.db")
    with trajlog.open(path) as store:
        s = _parent(store)
        sub = _child(s, how, f"review {MARK} carefully")
        assert sub.task() == f"review {MARK} carefully"
        projections.checkpoint(sub)              # saved projection states hold it too
        assert MARK.encode() in _states(store)
        seq = _task_seq(sub)
        store.erase(sub.id, [seq], reason="user request", actor="human:alice")
        assert sub.task() is None
        again = store.session(sub.id)
        assert MARK not in repr(dict(again.header.metadata)) and again.task() is None
        assert MARK.encode() not in _states(store)
        assert MARK.encode() not in file_bytes(path)
        assert MARK.encode() not in _exports(store, s.id, sub.id, tmp_path)
        assert store.verify().ok
    assert MARK.encode() not in file_bytes(path)


def test_the_cli_and_the_viewer_show_the_task_through_the_pointer(tmp_path, capsys):
    path = str(tmp_path / "v.db")
    with trajlog.open(path) as store:
        s = _parent(store)
        sub = s.spawn_subagent(f"check {MARK} twice", call_id="c1")
        fork = s.fork_subagent("second opinion", call_id="c2")
        doc = build_document(store, s.id)
        tasks = {m["id"]: m.get("task") for m in doc["sessions"]}
        assert tasks == {s.id: None, sub.id: f"check {MARK} twice", fork.id: "second opinion"}
    assert main(["--db", path, "tree", s.id[:8]]) == 0
    out = capsys.readouterr().out
    assert MARK in out and "second opinion" in out
    with trajlog.open(path) as store:
        store.erase(sub.id, [_task_seq(store.session(sub.id))], reason="r", actor="human:a")
        doc = build_document(store, s.id)
        assert {m["id"]: m.get("task") for m in doc["sessions"]}[sub.id] is None
    assert main(["--db", path, "tree", s.id[:8]]) == 0
    out = capsys.readouterr().out
    assert MARK not in out and "second opinion" in out


def test_task_is_still_a_reserved_metadata_key(tmp_path):
    with trajlog.open(str(tmp_path / "k.db")) as store:
        s = _parent(store)
        for key in ("task", "task_seq"):
            with pytest.raises(trajlog.errors.InvalidArgumentError, match=key):
                s.spawn_subagent("x", metadata={key: 1})


# -- siblings: the importers' headers ------------------------------------------------

def _claude_line(kind: str, uuid: str, parent: str | None, content: Any, **extra: Any) -> str:
    rec: dict[str, Any] = {"type": kind, "uuid": uuid, "parentUuid": parent,
                           "sessionId": "11111111-2222-3333-4444-555555555555",
                           "timestamp": f"2025-01-01T00:00:{len(uuid):02d}.000Z",
                           "cwd": "/w", "version": "1.0.9", "isSidechain": False}
    rec["message"] = ({"role": "user", "content": content} if kind == "user" else
                      {"id": "m-" + uuid, "role": "assistant", "content": content})
    rec.update(extra)
    return json.dumps(rec)


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_an_imported_subagents_task_description_stays_in_its_event(tmp_path):
    """A Claude Code subagent's header names the Task call that spawned it;
    the call's description (model-written text) stays in that call's event,
    where redaction masks it and erasure reaches it."""
    task = {"type": "tool_use", "id": "toolu_t", "name": "Task",
            "input": {"description": f"look for {AWS}", "prompt": "Find X",
                      "subagent_type": "Explore"}}
    src = tmp_path / "11111111-2222-3333-4444-555555555555.jsonl"
    src.write_text("\n".join([
        _claude_line("user", "u", None, "go"),
        _claude_line("assistant", "a", "u", [task]),
        _claude_line("user", "s1", None, "Find X", isSidechain=True),
        _claude_line("assistant", "s2", "s1", [{"type": "text", "text": "X is here"}],
                     isSidechain=True),
        _claude_line("user", "r", "a", [{"type": "tool_result", "tool_use_id": "toolu_t",
                                         "content": "X is here"}]),
    ]) + "\n")
    path = str(tmp_path / "i.db")
    with trajlog.open(path, redaction=RedactionPolicy()) as store:
        report = store.import_path(src)
        heads = [store.session(x.session_id).header for x in report.sessions]
        child = next(h for h in heads if h.origin == "subagent")
        assert child.metadata["parent_call_id"] == "toolu_t"
        assert AWS not in repr([dict(h.metadata) for h in heads])
    assert AWS.encode() not in file_bytes(path)


# -- siblings: a subagent's answer handed to its parent ---------------------------------

def _spawning(store: Any, call_id: str) -> Any:
    p = store.create_session(cwd="/r")
    p.append("turn/start", {})
    p.append("assistant/message", {"content": "", "tool_calls": [
        {"id": call_id, "name": "task", "arguments": {}}]})
    p.append("tool/call", {"call_id": call_id, "name": "task", "arguments": {}})
    return p


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
@pytest.mark.parametrize("background", [False, True])
def test_an_erased_answer_takes_the_copy_finish_gave_the_parent_with_it(tmp_path, background):
    path = str(tmp_path / "f.db")
    with trajlog.open(path) as store:
        p = _spawning(store, "t1")
        sub = p.spawn_subagent("summarize", call_id="t1", background=background)
        with sub.turn():
            answer = sub.append("assistant/message", {"content": f"the answer is {MARK}"})
        copy = sub.finish()
        assert copy.data["output"] == f"the answer is {MARK}"
        projections.checkpoint(p)        # the parent's model history holds a tool result
        assert background or MARK.encode() in _states(store)
        report = store.erase(sub.id, [answer.seq], reason="user request", actor="human:a")
        gone = p.get(copy.seq).data
        assert gone["erased"]["reason"] == f"user request (a copy of seq {answer.seq} of " \
                                           f"session {sub.id})"
        assert background or gone["call_id"] == "t1"        # the pairing ids stay
        assert {p.id, sub.id} <= set(report.sessions_affected)
        assert f"erased the copy of seq {answer.seq} at seq {copy.seq} of session {p.id}" in (
            report.notes)
        assert MARK not in repr(list(p.events())) and MARK not in repr(list(sub.events()))
        assert MARK not in repr(projections.model_history(p))
        assert MARK.encode() not in _states(store)
        assert MARK.encode() not in file_bytes(path)
        assert MARK.encode() not in _exports(store, p.id, sub.id, tmp_path)
        assert store.verify().ok
        # idempotent: the copy is erased once
        again = store.erase(sub.id, [answer.seq], reason="user request", actor="human:a")
        assert again.already
    assert MARK.encode() not in file_bytes(path)


def test_an_answer_the_parent_got_from_elsewhere_is_not_erased(tmp_path):
    with trajlog.open(str(tmp_path / "g.db")) as store:
        p = _spawning(store, "t1")
        sub = p.spawn_subagent("summarize", call_id="t1")
        with sub.turn():
            first = sub.append("assistant/message", {"content": "draft"})
            sub.append("assistant/message", {"content": "final"})
        copy = sub.finish()
        store.erase(sub.id, [first.seq], reason="r", actor="human:a")
        assert p.get(copy.seq).data["output"] == "final"    # not the erased one's copy


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_retention_of_a_subagent_takes_its_answers_copy_with_it(tmp_path):
    path = str(tmp_path / "h.db")
    with trajlog.open(path) as store:
        p = _spawning(store, "t1")
        sub = p.spawn_subagent("summarize", call_id="t1")
        sub.append("retention/policy", {"ttl_ms": 1000})
        with sub.turn():
            sub.append("assistant/message", {"content": f"kept {MARK}"})
        copy = sub.finish()
        later = max(ev.time for ev in sub.events()) + 10_000
        store.apply_retention(now_ms=later)
        assert "erased" in p.get(copy.seq).data
    assert MARK.encode() not in file_bytes(path)


# -- siblings: a subagent's sandbox snapshot ---------------------------------------------

@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_an_erased_sandbox_setting_takes_every_snapshot_of_it_with_it(tmp_path):
    path = str(tmp_path / "s.db")
    with trajlog.open(path) as store:
        p = store.create_session(cwd="/r")
        mode = p.append("sandbox/mode", {"mode": "workspace-write",
                                         "writable_roots": [f"/home/{MARK}"]})
        sub = p.spawn_subagent("t")
        deeper = sub.fork_subagent("t2")                  # a snapshot of the snapshot
        other = p.spawn_subagent("t3", sandbox={"mode": "read-only"})   # explicit: no copy
        snaps = [next(e for e in x.events() if e.type == "sandbox/mode") for x in (sub, deeper)]
        assert all(f"/home/{MARK}" in repr(e.data) for e in snaps)
        report = store.erase(p.id, [mode.seq], reason="r", actor="human:a")
        assert {p.id, sub.id, deeper.id} <= set(report.sessions_affected)
        assert sum("erased the copy of seq" in n for n in report.notes) == 2
        for x, e in zip((sub, deeper), snaps, strict=True):
            assert "erased" in x.get(e.seq).data
        assert next(e for e in other.events() if e.type == "sandbox/mode").data == {
            "mode": "read-only", "snapshot_of": {"session": p.id, "explicit": True}}
        assert store.verify().ok
    assert MARK.encode() not in file_bytes(path)


# -- the audit, as one check: payload text lives in chunk rows only ------------------------

def _tables_but_the_log(store: Any) -> dict[str, str]:
    """Every table but the chunk rows (the log) and the saved projection
    states (derived, checked above), each as the repr of all its rows."""
    conn = store._e.backend.connection()
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    return {n: repr([tuple(bytes(v) if isinstance(v, (bytes, memoryview)) else v for v in row)
                      for row in conn.execute(f'SELECT * FROM "{n}"')])
            for n in names if n not in ("chunks", "projection_states")}


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_trajlog_copies_no_payload_text_outside_the_log(tmp_path):
    """A parent runs a turn under a run envelope, records a context build,
    spawns and forks subagents whose answers flow back, and is forked: the
    payload text of all of it is in the chunk rows and nowhere else (the
    headers, the event index, memory, tombstones, call index)."""
    with trajlog.open(str(tmp_path / "a.db")) as store:
        p = store.create_session(cwd="/r")
        p.append("sandbox/mode", {"mode": f"ws-{MARK}-0"})
        with p.run(model="m", static_prefix=f"prefix {MARK}-1"), p.turn():
            p.append("user/message", {"content": f"question {MARK}-2"})
            build_context(p)
            p.append("assistant/message", {"content": "", "tool_calls": [
                {"id": "t1", "name": "task", "arguments": {"q": f"{MARK}-3"}}]})
            p.append("tool/call", {"call_id": "t1", "name": "task",
                                   "arguments": {"q": f"{MARK}-3"}})
            sub = p.spawn_subagent(f"do {MARK}-4", call_id="t1")
            with sub.turn():
                sub.append("assistant/message", {"content": f"answer {MARK}-5"})
            sub.finish()
        forked = p.fork_subagent(f"again {MARK}-6", background=True)
        with forked.turn():
            forked.append("assistant/message", {"content": f"bg {MARK}-7"})
        forked.finish()
        p.fork(p.last_seq).append("user/message", {"content": f"fork {MARK}-8"})
        assert sub.task() == f"do {MARK}-4" and forked.task() == f"again {MARK}-6"
        found = {name: text for name, text in _tables_but_the_log(store).items()
                 if MARK in text}
        assert found == {}
