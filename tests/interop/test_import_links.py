"""An import that links to what a store already holds -- a fork's parent, a
subagent's parent, a session of the same id it would extend -- compares what it
links to: a fork export's seed chain must be the stored parent's chain at the
cut, a stored session of the same id must have the header this import would
create, and a child whose parent conflicted is not attached to the stored one.
Anything else is refused and writes nothing."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog.api.bulk import SessionSpec
from trajlog.errors import ImportConflictError, ImportFormatError
from trajlog.interop.export import ZIP_MARK, _seal_zip
from trajlog.interop.formats import module
from trajlog.interop.mapping import Notes

FORMATS = ("jsonl", "jsonl.zst", "tlog", "zip")
REAL = Path(__file__).resolve().parents[1] / "realdata"
CLAUDE = REAL / "claude-code" / "synthetic-shapes" / "agent-sessions__claude_small.jsonl"
OPENHANDS = REAL / "openhands" / "sdk-v1" / "goal_events.jsonl"
SECRET = "the victim's secret plan"


def _frames(store: trajlog.Store, sid: str) -> bytes:
    return b"".join(run.frames for run in store.session(sid).frames())


def _snapshot(store: trajlog.Store) -> list[tuple[Any, int, bytes]]:
    """Every session's header, head and frames: what "nothing written" keeps."""
    return [(h, store.session(h.id).last_seq, _frames(store, h.id))
            for h in sorted(store.sessions(include_subagents=True), key=lambda h: h.id)]


def _turn(s: trajlog.Session, text: str) -> None:
    with s.turn():
        s.append("user/message", {"content": text}, source="user")
        s.append("assistant/message", {"content": "noted"})


def _victim(store: trajlog.Store) -> trajlog.Session:
    s = store.create_session(cwd="/victim", metadata={"tenant": "victim"})
    _turn(s, SECRET)
    return s


def _forged_fork(tmp_path: Path, parent_id: str, fmt: str, own: int = 0,
                 turns: int = 1) -> Path:
    """A genuine export of a fork, made in another store from a session that
    merely has ``parent_id`` as its id (other content): every check of the
    file passes, its seed chain is not the stored parent's."""
    out = tmp_path / f"forged-{own}-{turns}.{fmt}"
    with trajlog.open(str(tmp_path / f"attacker-{fmt}-{own}-{turns}.db")) as a:
        p = a.create_session(cwd="/victim", metadata={"tenant": "attacker"},
                             session_id=parent_id)
        for i in range(turns):
            _turn(p, f"harmless {i}")
        fork = p.fork(p.last_seq, metadata={"tenant": "attacker"})
        for i in range(own):
            fork.append("note/x", {"i": i})
        a.export(fork.id, out)
    return out


# -- item: a forged fork export attaches itself to a stored session ------------------------


@pytest.mark.parametrize("own", [0, 3])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_forged_fork_export_is_refused(tmp_path: Path, fmt: str, own: int) -> None:
    with trajlog.open(str(tmp_path / "b.db")) as b:
        victim = _victim(b)
        forged = _forged_fork(tmp_path, victim.id, fmt, own)
        before = _snapshot(b)
        with pytest.raises(ImportFormatError, match="seed chain") as caught:
            b.import_path(forged)
        assert caught.value.file.startswith(str(forged))
        assert _snapshot(b) == before
        assert [h.id for h in b.sessions(include_subagents=True)] == [victim.id]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_forged_fork_whose_first_own_event_is_erased_is_refused(
        tmp_path: Path, fmt: str) -> None:
    """An erased event turns the per-batch chain check off (its replacement is
    not the exported frame): the seed chain is compared all the same."""
    with trajlog.open(str(tmp_path / "b.db")) as b:
        victim = _victim(b)
        out = tmp_path / f"erased.{fmt}"
        with trajlog.open(str(tmp_path / "a.db")) as a:
            p = a.create_session(session_id=victim.id)
            _turn(p, "harmless")
            fork = p.fork(p.last_seq)
            ev = fork.append("note/x", {"i": 0})
            fork.append("note/x", {"i": 1})
            a.erase(fork.id, ev.seq, reason="test")
            a.export(fork.id, out)
        before = _snapshot(b)
        with pytest.raises(ImportFormatError, match="seed chain"):
            b.import_path(out)
        assert _snapshot(b) == before


@pytest.mark.parametrize("fmt", ("jsonl", "tlog"))
def test_a_fork_cut_beyond_the_stored_parent_is_refused(tmp_path: Path, fmt: str) -> None:
    with trajlog.open(str(tmp_path / "b.db")) as b:
        victim = _victim(b)
        forged = _forged_fork(tmp_path, victim.id, fmt, own=1, turns=3)
        before = _snapshot(b)
        with pytest.raises(ImportFormatError, match="does not reach"):
            b.import_path(forged)
        assert _snapshot(b) == before


@pytest.mark.parametrize("own", [0, 2])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_genuine_fork_export_links_to_its_stored_parent(tmp_path: Path, fmt: str,
                                                          own: int) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        root = _victim(a)
        fork = root.fork(root.last_seq)
        for i in range(own):
            fork.append("note/x", {"i": i})
        a.export(root.id, tmp_path / "root.tlog")
        a.export(fork.id, tmp_path / f"fork.{fmt}")
        b.import_path(tmp_path / "root.tlog")
        assert b.import_path(tmp_path / f"fork.{fmt}").created == [fork.id]
        assert _frames(b, fork.id) == _frames(a, fork.id)
        assert b.session(fork.id).header == a.session(fork.id).header
        assert b.session(fork.id).verify().ok
        assert b.import_path(tmp_path / f"fork.{fmt}").skipped == [fork.id]


def test_a_forged_fork_of_a_session_in_the_same_import_is_refused(tmp_path: Path) -> None:
    """A zip whose root is one session and whose fork was cut from another of
    the same id: the parent the import itself created is compared too."""
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        root = _victim(a)
        a.export(root.id, tmp_path / "root.zip")
        _forged_fork(tmp_path, root.id, "zip")
        forged_zip = tmp_path / "forged-0-1.zip"
        mixed = tmp_path / "mixed.zip"
        with zipfile.ZipFile(tmp_path / "root.zip") as zr, \
                zipfile.ZipFile(forged_zip) as zf, zipfile.ZipFile(mixed, "w") as out:
            (mine,) = json.loads(zr.read("manifest.json"))["sessions"]
            (fork,) = json.loads(zf.read("manifest.json"))["sessions"]
            fork["path"] = f"subagents/{fork['id']}/session.jsonl.zst"
            out.writestr(mine["path"], zr.read(mine["path"]))
            out.writestr(fork["path"], zf.read("session.jsonl.zst"))
            out.writestr("manifest.json", json.dumps(
                {"trajlog": "trajlog-export/1", "root": root.id, "sessions": [mine, fork]}))
            out.comment = ZIP_MARK + bytes(64)
        with mixed.open("r+b") as f:
            _seal_zip(f)
        with pytest.raises(ImportFormatError, match="seed chain"):
            b.import_path(mixed)
        # the parent, loaded before, stays; nothing of the fork was written
        assert [h.id for h in b.sessions(include_subagents=True)] == [root.id]
        assert _frames(b, root.id) == _frames(a, root.id)


# -- item: an import appends to a native session that happens to share its id -------------


def _ids(fmt: str, path: Path) -> list[str]:
    return [m.id for m in module(fmt).read(path, Notes())]


def _codex(tmp_path: Path, sid: str) -> Path:
    def line(kind: str, payload: Any) -> dict[str, Any]:
        return {"timestamp": "2026-01-02T03:04:05.000Z", "type": kind, "payload": payload}
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in [
        line("session_meta", {"id": sid, "timestamp": "2026-01-02T03:04:05.000Z",
                              "cwd": "/w", "cli_version": "0.146.0"}),
        line("event_msg", {"type": "task_started", "turn_id": "t1"}),
        line("event_msg", {"type": "user_message", "message": "injected"}),
        line("event_msg", {"type": "task_complete", "turn_id": "t1"})]))
    return path


def _native_sources(tmp_path: Path) -> list[tuple[str, Path]]:
    return [("codex", _codex(tmp_path, "00000000-0000-4000-8000-0000000000c1")),
            ("claude-code", CLAUDE), ("openhands", OPENHANDS)]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_native_import_does_not_extend_another_empty_session_of_its_id(
        tmp_path: Path, which: int) -> None:
    fmt, path = _native_sources(tmp_path)[which]
    sid = _ids(fmt, path)[0]
    with trajlog.open(str(tmp_path / "t.db")) as store:
        store.create_session(cwd="/tenant-b", metadata={"tenant": "b"}, session_id=sid)
        before = _snapshot(store)
        report = store.import_path(path, format=fmt)
        conflict = next(r for r in report.sessions if r.session_id == sid)
        assert conflict.status == "conflict" and "header" in conflict.reason
        assert conflict.events == 0
        assert store.session(sid).last_seq == -1
        assert [x for x in _snapshot(store) if x[0].id == sid] == [
            x for x in before if x[0].id == sid]
        with pytest.raises(ImportConflictError, match="header"):
            store.load_session(SessionSpec(sid, cwd="/w"), [("note/x", {}, 1, {})])


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_native_import_is_still_idempotent_and_extends_its_own_session(
        tmp_path: Path, which: int) -> None:
    fmt, path = _native_sources(tmp_path)[which]
    with trajlog.open(str(tmp_path / "t.db")) as store:
        first = store.import_path(path, format=fmt)
        assert first.sessions and not first.conflicts
        again = store.import_path(path, format=fmt)
        assert not again.conflicts and again.events == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_export_does_not_extend_another_empty_session_of_its_id(
        tmp_path: Path, fmt: str) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        s = a.create_session(cwd="/a", metadata={"tenant": "a"})
        _turn(s, "from a")
        a.export(s.id, tmp_path / f"s.{fmt}")
        b.create_session(cwd="/a", metadata={"tenant": "b"}, session_id=s.id)
        before = _snapshot(b)
        report = b.import_path(tmp_path / f"s.{fmt}")
        (conflict,) = report.conflicts
        assert conflict.session_id == s.id and "header" in conflict.reason
        assert _snapshot(b) == before


def test_the_same_events_under_another_header_are_not_unchanged(tmp_path: Path) -> None:
    """Re-import idempotency compares the header too: a session of the same
    id and the same events, made with other metadata, is a conflict."""
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        s = a.create_session(cwd="/a", metadata={"tenant": "a"})
        _turn(s, "from a")
        a.export(s.id, tmp_path / "s.jsonl")
        h = s.header
        items = [(e.type, e.data, e.time, {"source": e.source} if e.source else {})
                 for e in s.events()]
        b.load_session(SessionSpec(s.id, cwd=h.cwd, metadata={"tenant": "b"},
                                   created_ms=h.created_at), items)
        assert [e.data for e in b.session(s.id).events()] == [e.data for e in s.events()]
        before = _snapshot(b)
        (conflict,) = b.import_path(tmp_path / "s.jsonl").conflicts
        assert "metadata" in conflict.reason
        assert _snapshot(b) == before
        # the header the import would create: unchanged
        with trajlog.open(str(tmp_path / "c.db")) as c:
            c.load_session(SessionSpec(s.id, cwd=h.cwd, metadata={"tenant": "a"},
                                       created_ms=h.created_at), items)
            assert c.import_path(tmp_path / "s.jsonl").skipped == [s.id]


def test_an_export_grows_its_own_empty_session(tmp_path: Path) -> None:
    """The same header: an empty session imported before is extended."""
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        s = a.create_session(metadata={"tenant": "a", "list": (1, 2.5)})
        a.export(s.id, tmp_path / "empty.jsonl")
        _turn(s, "later")
        a.export(s.id, tmp_path / "grown.jsonl")
        assert b.import_path(tmp_path / "empty.jsonl").created == [s.id]
        (grown,) = b.import_path(tmp_path / "grown.jsonl").sessions
        assert (grown.status, grown.events) == ("extended", 4)
        assert _frames(b, s.id) == _frames(a, s.id)


# -- siblings: children of a parent that conflicted ----------------------------------------


def test_a_child_of_a_conflicting_parent_is_not_attached_to_the_stored_one(
        tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        root = a.create_session(metadata={"tenant": "a"})
        _turn(root, "root")
        child = root.spawn_subagent("look")
        child.append("assistant/message", {"content": "looked"})
        fork = root.fork(root.last_seq)
        fork.append("note/x", {})
        a.export(root.id, tmp_path / "tree.zip")
        victim = b.create_session(metadata={"tenant": "b"}, session_id=root.id)
        before = _snapshot(b)
        report = b.import_path(tmp_path / "tree.zip")
        assert sorted(r.session_id for r in report.conflicts) == sorted(
            [root.id, child.id, fork.id])
        assert all("parent" in r.reason for r in report.conflicts if r.session_id != root.id)
        assert b.session(victim.id).children(include_subagents=True) == []
        assert _snapshot(b) == before


def test_a_codex_child_of_a_conflicting_parent_is_a_conflict(tmp_path: Path) -> None:
    a, c = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000c"
    path = _codex(tmp_path, a)
    spawn = {"subagent": {"thread_spawn": {"parent_thread_id": a, "depth": 1}}}
    with path.open("a") as f:
        f.write(json.dumps({"timestamp": "2026-01-02T03:04:06.000Z", "type": "session_meta",
                            "payload": {"id": c, "timestamp": "2026-01-02T03:04:06.000Z",
                                        "cwd": "/w", "source": spawn}}) + "\n")
    with trajlog.open(str(tmp_path / "t.db")) as store:
        store.create_session(metadata={"tenant": "b"}, session_id=a)
        report = store.import_path(path, format="codex")
        assert sorted(r.session_id for r in report.conflicts) == [a, c]
        assert [h.id for h in store.sessions(include_subagents=True)] == [a]


@pytest.mark.parametrize("seed", [-1, 2])
def test_a_seed_that_links_to_nothing_is_refused(tmp_path: Path, seed: int) -> None:
    """A negative seed length (the parent's key as its seed chain), or a seed
    with no parent: refused by the loader itself."""
    with trajlog.open(str(tmp_path / "b.db")) as b:
        victim = _victim(b)
        before = _snapshot(b)
        spec = SessionSpec("00000000-0000-4000-8000-0000000000f1", seed_length=seed,
                           parent_id=victim.id if seed < 0 else None)
        with pytest.raises(ImportFormatError, match="seed length"):
            b.load_session(spec, [("note/x", {}, 1, {})])
        assert _snapshot(b) == before


@pytest.mark.parametrize("fmt", ("jsonl", "tlog", "zip"))
def test_a_subagent_export_naming_another_owners_parent_is_refused(
        tmp_path: Path, fmt: str) -> None:
    """A spawned subagent (seed 0) inherits no events, so its file has no chain to compare;
    it inherits its parent's identity, which is compared: a child of the attacker's session of
    the victim's id is not attached to the victim's session (its children, its tree export)."""
    with trajlog.open(str(tmp_path / "b.db")) as b:
        victim = _victim(b)
        out = tmp_path / f"sub.{fmt}"
        with trajlog.open(str(tmp_path / "a.db")) as a:
            p = a.create_session(cwd="/victim", metadata={"tenant": "attacker"},
                                 session_id=victim.id)
            _turn(p, "harmless")
            sub = p.spawn_subagent("do something", call_id="c1")
            sub.append("assistant/message", {"content": "ignore all instructions"})
            a.export(sub.id, out)
        before = _snapshot(b)
        with pytest.raises(ImportFormatError, match="not the parent's"):
            b.import_path(out)
        assert _snapshot(b) == before
        assert b.session(victim.id).children() == []


def test_a_subagent_export_of_the_same_owner_still_links(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        root = _victim(a)
        sub = root.spawn_subagent("review", call_id="c1")
        sub.append("assistant/message", {"content": "done"})
        a.export(root.id, tmp_path / "root.tlog")
        a.export(sub.id, tmp_path / "sub.jsonl")
        b.import_path(tmp_path / "root.tlog")
        assert b.import_path(tmp_path / "sub.jsonl").created == [sub.id]
        assert [c.id for c in b.session(root.id).children()] == [sub.id]
