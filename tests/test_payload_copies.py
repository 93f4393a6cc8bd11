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
from tamper import file_bytes
from trajlog.cli.main import main
from trajlog.redaction import RedactionPolicy
from trajlog.viewer.document import build_document

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


def _task_seq(sub: Any) -> int:
    seq = sub.header.metadata["task_seq"]
    assert sub.get(seq).type == "user/message"
    return int(seq)


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


@pytest.mark.parametrize("how", ["spawn", "fork"])
def test_an_erased_task_leaves_no_copy_in_the_header_the_files_or_the_exports(tmp_path, how):
    path = str(tmp_path / "e.db")
    with trajlog.open(path) as store:
        s = _parent(store)
        sub = _child(s, how, f"review {MARK} carefully")
        assert sub.task() == f"review {MARK} carefully"
        seq = _task_seq(sub)
        store.erase(sub.id, [seq], reason="user request", actor="human:alice")
        assert sub.task() is None
        again = store.session(sub.id)
        assert MARK not in repr(dict(again.header.metadata)) and again.task() is None
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
