"""``trajlog export``, ``trajlog import`` and ``trajlog verify FILE``, run as
the user runs them: a subprocess on a real store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trajlog

REAL = Path(__file__).parent.parent / "realdata"
WORKTREES = REAL / "claude-code/claude-code-log/projects/-experiments-worktrees"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_import_export_verify_from_the_shell(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    first = run("import", str(WORKTREES), "--db", db, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "claude-code: 2 created, 0 extended, 0 unchanged" in first.stdout
    assert "ef958aa1-0e93-49f0-bb71-150f63befcd1  created" in first.stdout
    again = run("import", str(WORKTREES), "--db", db, cwd=tmp_path)
    assert "0 created, 0 extended, 2 unchanged; 0 events written" in again.stdout
    out = tmp_path / "tree.zip"
    exported = run("export", "ef958aa1", "-o", str(out), "--db", db, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    with trajlog.open(db) as st:
        total = sum(st.session(h.id).last_seq + 1 for h in st.sessions(include_subagents=True))
    assert f"zip     2         {total}" in exported.stdout
    ok = run("verify", str(out), cwd=tmp_path)
    assert ok.returncode == 0 and f"clean  2 session(s), {total} events" in ok.stdout
    cut = tmp_path / "cut.jsonl"
    run("export", "ef958aa1", "-o", str(tmp_path / "s.jsonl"), "--db", db, cwd=tmp_path)
    data = (tmp_path / "s.jsonl").read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    torn = run("verify", str(cut), cwd=tmp_path)
    assert torn.returncode == 1 and "  torn  1 session(s)" in torn.stdout
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0x10
    cut.write_bytes(bytes(flipped))
    bad = run("verify", str(cut), cwd=tmp_path)
    assert bad.returncode == 1 and "  corrupt  " in bad.stdout and " at line " in bad.stdout


def test_errors_are_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    missing = run("export", "nope", "-o", str(tmp_path / "x.tlog"), "--db", db, cwd=tmp_path)
    assert missing.returncode == 2 and "no store at" in missing.stderr
    run("import", str(WORKTREES), "--db", db, cwd=tmp_path)
    unknown = run("export", "zzzz", "-o", str(tmp_path / "x.tlog"), "--db", db, cwd=tmp_path)
    assert unknown.returncode == 2 and "no session id starts with 'zzzz'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"user","uuid":"u1","sessionId":"s","message":{"content":"x"}}\n'
                   "not json\n{}\n")
    failed = run("import", str(bad), "--db", db, cwd=tmp_path)
    assert failed.returncode == 3 and "ImportFormatError" in failed.stderr
    assert "line 2, byte 70" in failed.stderr and "Traceback" not in failed.stderr
    assert failed.stderr.count("\n") == 1 and "(hint: " in failed.stderr
