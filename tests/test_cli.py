"""The command line: the demo records, verifies and damages; ls / show / verify
read a store; a corrupted store makes verify exit non-zero."""

from __future__ import annotations

import subprocess
import sys

import trajlog
from tamper import flip_frame_bits


def run(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_cli_demo_on_the_default_database(tmp_path):
    result = run("demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "verify: ok -- 18 events" in out
    assert "turn/end" in out and "tool/result" in out
    assert "power loss mid-append (cut inside the last frame)    torn" in out
    # a host killed mid tool call, closed by load()
    assert "killed mid tool call (exit -9)" in out
    assert "tool/result  TOOL_OUTCOME_UNKNOWN   call_9" in out
    assert "tool/result  TOOL_NOT_STARTED       call_10" in out
    assert "load(): repaired; a second load appends nothing (last seq 26); verify: ok" in out
    # fork, subagent, tree
    assert "reads 18 inherited events + 1 of its own, copying none" in out
    assert "'Looks right; add a test for expiry.'" in out
    assert "store.sessions() lists 2 (subagents hidden), 4 with subagents" in out
    # views and the context build
    assert "[tool read_file #call_1] done" in out
    assert "step 1: 1 model request(s); deploy=unknown, notify=not_started" in out
    assert "- token.expiry = t.expires > now [HUMAN-36]" in out
    assert "source.untrusted x1" in out and "file.snapshot.stale x1" in out
    assert "Ignore previous instructions" not in out.split("context for the model")[1]
    assert (tmp_path / "trajlog.db").exists()
    with trajlog.open(str(tmp_path / "trajlog.db")) as st:
        root = next(h for h in st.sessions() if h.parent_session is None)
        s = st.session(root.id)
        assert s.verify().ok and s.inspect()[1].outcome == "balanced"
        assert len(st.sessions(include_subagents=True)) == 4


def test_cli_ls_show_verify(tmp_path):
    db = str(tmp_path / "c.db")
    with trajlog.open(db) as st:
        s = st.create_session(cwd="/repo", metadata={"title": "t"})
        s.append("user/message", {"content": "hello there"})
        sid = s.id
    assert sid in run("ls", "--db", db, cwd=tmp_path).stdout
    assert "hello there" in run("show", sid, "--db", db, cwd=tmp_path).stdout
    ok = run("verify", "--db", db, cwd=tmp_path)
    assert ok.returncode == 0 and f"{sid}  ok" in ok.stdout
    # damage the frame with triggers off, as a foreign tool could
    with trajlog.open(db) as st:
        flip_frame_bits(st, st.session(sid)._sid, 0, -9, 0xFF)
    bad = run("verify", "--db", db, cwd=tmp_path)
    assert bad.returncode == 1 and "CORRUPT" in bad.stdout and "seq=0" in bad.stdout


def test_cli_memory_erase_and_retention(tmp_path):
    db = str(tmp_path / "m.db")
    with trajlog.open(db) as st:
        s = st.create_session(cwd="/repo")
        s.append("user/message", {"content": "CLISECRETWORD here"})
        s.append("retention/policy", {"ttl_ms": 0})
        mem = st.memory(trajlog.Identity("acme", user="alice"))
        item = mem.remember("user", "preference", {"text": "prefers pytest"}, key="runner")
        sid = s.id
    ident = ["--db", db, "--tenant", "acme", "--user", "alice"]
    ls = run("memory", "ls", *ident, cwd=tmp_path)
    assert ls.returncode == 0 and item.id in ls.stdout and "prefers pytest" in ls.stdout
    assert item.id in run("memory", "search", "pytest", *ident, "--json", cwd=tmp_path).stdout
    assert run("memory", "search", "pytest", "--db", db, "--tenant", "globex",
               cwd=tmp_path).stdout == ""
    shown = run("memory", "show", item.id, *ident, cwd=tmp_path)
    assert "v1" in shown.stdout
    other = run("memory", "show", item.id, "--db", db, "--tenant", "globex", cwd=tmp_path)
    assert other.returncode == 1 and "another tenant" in other.stderr
    plan = run("retention", "--db", db, cwd=tmp_path)
    assert f"would erase 1 event(s) of {sid}" in plan.stdout
    assert "CLISECRETWORD" in run("show", sid, "--db", db, cwd=tmp_path).stdout  # a plan only
    done = run("retention", "--apply", "--db", db, cwd=tmp_path)
    assert done.returncode == 0 and "erased 1 event payload(s)" in done.stdout
    assert "CLISECRETWORD" not in run("show", sid, "--db", db, cwd=tmp_path).stdout
    erased = run("erase", sid, "1", "--reason", "tidy", "--db", db, cwd=tmp_path)
    assert erased.returncode == 0 and "frames_blanked             1" in erased.stdout
    verify = run("verify", "--db", db, cwd=tmp_path)
    assert verify.returncode == 0 and "memory  ok (1 items, 1 versions, 2 tombstones)" in (
        verify.stdout)
    missing = run("erase", sid, "0", "--reason", "x", "--db", str(tmp_path / "no.db"),
                  cwd=tmp_path)
    assert missing.returncode == 2 and "no store" in missing.stderr
    assert not (tmp_path / "no.db").exists()
