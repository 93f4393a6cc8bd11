"""The command line at its edges (found in review): reads that must not write,
untrusted content on a terminal, broken pipes, damaged stores and sessions,
odd payloads, bad option values -- each a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import trajlog
from kits.tamper import flip_frame_bits
from trajlog.api import Session
from trajlog.cli.main import main

SQLITE_COPY = "clones a store by copying its file"
SQLITE_APSW = "tampers with the store through an apsw connection of its own"
SQLITE_BYTES = "reads or damages the SQLite file's bytes"

DATA = Path(__file__).resolve().parents[1] / "data"
QUICK = os.environ.get("TRAJLOG_CLI") == "quick"
whole_suite_only = pytest.mark.skipif(QUICK, reason="TRAJLOG_CLI=quick: runs in the C-kernel "
                                      "run")


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=120)


def error_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr and "(hint: " in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A store with the awkward cases: markup and escape sequences in headers
    and payloads, non-dict data, a data dict with an 'erased' key that is no
    tombstone, a malformed context/injection, a long session."""
    where = tmp_path_factory.mktemp("edges")
    db = where / "e.db"
    with trajlog.open(str(db)) as st:
        odd = st.create_session(cwd="/w/\x1b[2Jcwd", agent_preset="p[/]",
                                metadata={"title": "bad [/x] markup \x1b]0;pwned\x07"})
        odd.append("user/message", {"content": "hi \x1b[31mred\x1b[0m \x9b31m c1"})
        odd.append("note", ["a", "list", "payload"])
        odd.append("note", "a string payload \x1b[2J")
        odd.append("note", {"erased": False, "text": "not a tombstone"})
        odd.append("context/injection", [1, 2])
        odd.append("context/injection", "str")
        long = st.create_session(cwd="/long")
        long.append_batch([("note", {"i": i, "pad": "x" * 200}) for i in range(4000)])
        plain = st.create_session(cwd="/plain")
        plain.append("user/message", {"content": "fine"})
        ids = {"odd": odd.id, "long": long.id, "plain": plain.id}
    return {"dir": where, "db": db, **ids}


def _copy(src: Path, dst: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copy(f"{src}{suffix}", f"{dst}{suffix}")
    return dst


@pytest.mark.sqlite_only(reason=SQLITE_BYTES)
@whole_suite_only
def test_read_commands_write_nothing_and_refuse_what_opening_would_change(store, tmp_path):
    db = _copy(store["db"], tmp_path / "r.db")
    with trajlog.open(str(db)):   # checkpointed by close: the file is the whole store
        pass
    before = db.read_bytes()
    sid = store["plain"]
    for args in (["ls", "--all"], ["show", sid], ["chat", sid], ["trajectory", sid],
                 ["tree", sid], ["stats"], ["inspect", sid], ["verify"], ["tail", sid],
                 ["memory", "ls", "--tenant", "t"], ["retention"]):
        result = run(*args, "--db", str(db), cwd=tmp_path)
        assert result.returncode in (0, 1), (args, result.stderr)
        assert db.read_bytes() == before, args      # not even the change counter moved
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert "is not a trajlog store" in error_line(run("ls", "--db", str(empty), cwd=tmp_path), 2)
    assert empty.read_bytes() == b""
    old = _copy(DATA / "store_v01.db", tmp_path / "old.db")
    old_bytes = old.read_bytes()
    line = error_line(run("show", "0000", "--db", str(old), cwd=tmp_path), 2)
    assert "written by an older trajlog (schema 3" in line and "trajlog migrate" in line
    assert old.read_bytes() == old_bytes
    assert "is a directory" in error_line(run("ls", "--db", str(tmp_path), cwd=tmp_path), 2)


@whole_suite_only
def test_untrusted_markup_and_escape_sequences_are_shown_not_obeyed(store):
    where, db, odd = store["dir"], str(store["db"]), store["odd"]
    listed = run("ls", "--db", db, cwd=where)
    assert listed.returncode == 0 and "p[/]" in listed.stdout
    assert "bad [/x] markup" in listed.stdout and "\\x1b" in listed.stdout
    for args in (["ls"], ["tree", odd], ["chat", odd], ["show", odd], ["trajectory", odd],
                 ["show", odd, "--json"], ["ls", "--json"]):
        out = run(*args, "--db", db, cwd=where)
        assert out.returncode == 0, (args, out.stderr)
        assert "\x1b" not in out.stdout and "\x9b" not in out.stdout and "\x07" not in (
            out.stdout), args
    assert "p[/]" in run("tree", odd, "--db", db, cwd=where).stdout
    assert "\\x1b[31mred" in run("chat", odd, "--db", db, cwd=where).stdout
    rows = [json.loads(x) for x in run("show", odd, "--json", "--db", db,
                                       cwd=where).stdout.splitlines()]
    assert rows[0]["data"]["content"] == "hi \x1b[31mred\x1b[0m \x9b31m c1"   # JSON keeps it


@whole_suite_only
def test_odd_payloads_read_plainly(store):
    where, db, odd = store["dir"], str(store["db"]), store["odd"]
    shown = run("show", odd, "--db", db, cwd=where).stdout.splitlines()
    assert '["a","list","payload"]' in shown[1]
    assert "a string payload \\x1b[2J" in shown[2]
    assert "not a tombstone" in shown[3] and "[erased" not in shown[3]
    ctx = run("context", odd, "--db", db, cwd=where)
    assert "records no context build" in error_line(ctx, 3)
    trajectory = run("trajectory", odd, "--json", "--db", db, cwd=where)
    assert trajectory.returncode == 0 and trajectory.stdout == ""      # no turns: no lines
    turns = run("trajectory", store["plain"], "--json", "--db", db, cwd=where)
    assert all(isinstance(json.loads(x), dict) for x in turns.stdout.splitlines())


@whole_suite_only
def test_a_closed_pipe_is_a_normal_end(store):
    for args in (["show", store["long"]], ["verify"], ["ls", "--all", "--json"]):
        proc = subprocess.Popen([sys.executable, "-m", "trajlog", *args, "--db",
                                 str(store["db"])], cwd=store["dir"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()            # `| head -1`
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert proc.wait(timeout=120) == 0, (args, err)
        assert first and "Traceback" not in err and "BrokenPipe" not in err, args


@pytest.mark.sqlite_only(reason=SQLITE_COPY)
def test_tail_follow_prints_an_event_appended_while_it_starts_once(store, tmp_path,
                                                                   monkeypatch, capsys):
    """The first page and the follow loop must share one end: an event
    appended between reading the head and reading the page was printed by
    both (a race found in review, made certain here by appending inside the
    first read of the head)."""
    db = _copy(store["db"], tmp_path / "t.db")
    sid = store["plain"]
    real = Session.last_seq
    calls = {"n": 0}

    def head_then_append(self: Session) -> int:
        seq = real.fget(self)   # type: ignore[attr-defined]
        calls["n"] += 1
        if calls["n"] == 1:     # another writer appends right after the head was read
            with trajlog.open(str(db)) as other:
                other.session(sid).append("user/message", {"content": "raced"})
        return seq

    monkeypatch.setattr(Session, "last_seq", property(head_then_append))
    assert main(["tail", sid, "-f", "--idle-exit", "0.3", "--interval", "0.05",
                 "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.count("raced") == 1, out


@whole_suite_only
def test_no_arguments_prints_the_help(store):
    for args in ([], ["memory"]):
        result = run(*args, cwd=store["dir"])
        assert result.returncode == 0 and result.stdout.startswith("Usage: trajlog")
        assert result.stderr == ""


@whole_suite_only
def test_bad_option_values_are_usage_errors(store):
    where, db = store["dir"], str(store["db"])
    for args in (["memory", "ls", "--tenant", "t", "--type", "bogus"],
                 ["memory", "ls", "--tenant", "t", "--state", "bogus"],
                 ["fork", store["plain"], "--at", "9999"],
                 ["retention", "--now-ms", "99999999999999999999"],
                 ["show", store["plain"], "--from", "-1"]):
        error_line(run(*args, "--db", db, cwd=where), 2)
    listed = run("memory", "--db", db, "ls", "--tenant", "t", cwd=Path("/"))
    assert listed.returncode == 0, listed.stderr


@whole_suite_only
def test_erase_without_yes_and_without_a_terminal_is_refused(store, tmp_path):
    db = _copy(store["db"], tmp_path / "x.db")
    sid = store["plain"]
    refused = run("erase", sid, "0", "--reason", "r", "--db", str(db), cwd=tmp_path, stdin="")
    assert "pass --yes" in error_line(refused, 2)
    assert "fine" in run("show", sid, "--db", str(db), cwd=tmp_path).stdout
    asked = run("erase", sid, "0", "--reason", "r", "--yes", "--db", str(db), cwd=tmp_path)
    assert asked.returncode == 0
    assert "fine" not in run("show", sid, "--db", str(db), cwd=tmp_path).stdout


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_damage_is_reported_per_session_by_verify_stats_and_repack(store, tmp_path):
    db = _copy(store["db"], tmp_path / "d.db")
    with trajlog.open(str(db)) as st:
        flip_frame_bits(st, st.session(store["plain"])._sid, 0, -9, 0xFF)
    stats = run("stats", "--json", "--db", str(db), cwd=tmp_path)
    assert stats.returncode == 1, stats.stderr
    figures = json.loads(stats.stdout)
    assert figures["sessions"] == 2 and list(figures["damaged"]) == [store["plain"]]
    assert figures["events"] == 4000 + 6
    small = tmp_path / "s.db"
    with trajlog.open(str(small), repack=False) as st:
        sessions = [st.create_session(cwd=f"/{n}") for n in range(3)]
        for s in sessions:
            for i in range(40):                 # 40 one-event rows each: repack merges them
                s.append("note", {"i": i})
        flip_frame_bits(st, sessions[0]._sid, 5, -9, 0xFF)
    repack = run("repack", "--db", str(small), cwd=tmp_path)
    assert repack.returncode == 3 and "repacked 2 session(s)" in repack.stdout, repack.stderr
    assert f"not repacked: {sessions[0].id}" in repack.stderr
    assert "could not be repacked" in repack.stderr.splitlines()[-1]
    with trajlog.open(str(small), repack=False) as st:
        assert st.repack(sessions[1].id) == 0 and st.session(sessions[2].id).verify().ok
    # a database file damaged under SQLite: verify reports it (exit 1), not a refusal
    half = tmp_path / "half.db"
    half.write_bytes(store["db"].read_bytes()[:20_000])
    verify = run("verify", "--db", str(half), cwd=tmp_path)
    assert verify.returncode == 1 and "CORRUPT" in verify.stdout, verify.stderr


@whole_suite_only
def test_small_refusals(store, tmp_path):
    where, db = store["dir"], str(store["db"])
    assert "no file missing.zip" in error_line(run("verify", "missing.zip", "--db", db,
                                                   cwd=where), 2)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json at all\n")
    new = tmp_path / "new.db"
    error_line(run("import", str(bad), "--db", str(new), cwd=tmp_path), 3)
    assert not list(tmp_path.glob("new.db*"))        # the store it made is gone again
    assert "needs a store file" in error_line(run("demo", "--db", ":memory:", cwd=tmp_path), 2)
    view = run("view", store["plain"], "-o", str(tmp_path / "p w.html"), "--db", db, cwd=where)
    assert view.returncode == 0 and "file://" in view.stdout and "p%20w.html" in view.stdout
