"""``trajlog rm``: a session deleted from the shell -- refused without a
terminal or ``--yes``, refused while a fork depends on it, then gone from
``ls`` and refused by id with who deleted it -- each a subprocess, as a user
runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trajlog


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=120)


def error_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trajlog: error: "), result.stderr
    return lines[0]


def test_rm_deletes_a_session_and_its_id_says_so(tmp_path: Path) -> None:
    db = str(tmp_path / "rm.db")
    with trajlog.open(db) as store:
        parent = store.create_session(cwd="/p")
        with parent.turn():
            parent.append("user/message", {"content": "a secret to delete"})
        fork = parent.fork(parent.last_seq)
        fork.append("note/x", {"n": 1})
        pid, fid = parent.id, fork.id
    refused = run("rm", pid[:8], "--reason", "r", "--db", db, cwd=tmp_path, stdin="")
    assert "pass --yes" in error_line(refused, 2)
    held = run("rm", pid[:8], "--reason", "r", "--yes", "--db", db, cwd=tmp_path)
    line = error_line(held, 3)
    assert "DependentSessionsError" in line and fid in line and "delete its forks" in line
    done = run("rm", fid[:8], "--reason", "the copy", "--yes", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run("rm", pid[:8], "--reason", "user asked", "--actor", "alice", "--yes",
               "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "events_erased    3" in done.stdout and "actor            alice" in done.stdout
    assert run("ls", "--all", "--db", db, cwd=tmp_path).stdout.count(pid[:8]) == 0
    shown = run("show", pid, "--db", db, cwd=tmp_path)
    line = error_line(shown, 3)
    assert "SessionDeletedError" in line and "deleted by alice" in line and "user asked" in line
    assert run("verify", "--db", db, cwd=tmp_path).returncode == 0
