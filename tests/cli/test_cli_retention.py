"""``trajlog tail -f`` ends when the session closes, and ``trajlog
retention`` plans and applies the store rules given with ``--rule``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import trajlog

DAY = 86_400_000


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


def _recorded(db: str) -> tuple[str, int]:
    with trajlog.open(db) as store:
        s = store.create_session()
        with s.turn():
            s.append("user/message", {"content": "list it"})
            s.append("assistant/message", {"content": "", "tool_calls": [
                {"id": "c1", "name": "ls", "arguments": {}}]})
            s.append("tool/call", {"call_id": "c1", "name": "ls", "arguments": {}})
            s.append("tool/result", {"call_id": "c1", "output": "TOOLOUTPUT"})
        return s.id, max(e.time for e in s.events())


def _follow_until(tmp_path: Path, end: Any) -> tuple[str, str, str]:
    """``trajlog tail -f`` on a recorded session, then ``end(store, sid)`` from
    another store object: the follower must end by itself (exit 0, no
    traceback); its id, output and the database path."""
    db = str(tmp_path / "t.db")
    sid, _ = _recorded(db)
    follower = subprocess.Popen(
        [sys.executable, "-m", "trajlog", "tail", "-f", "-n", "1", "--interval", "0.05",
         sid, "--db", db], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert follower.stdout is not None
        assert "turn/end" in follower.stdout.readline()   # it has read the head
        with trajlog.open(db) as store:
            end(store, sid)
        out, err = follower.communicate(timeout=60)   # it ends by itself
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0 and "Traceback" not in err
    return sid, out, db


def test_tail_follow_ends_when_the_session_closes(tmp_path):
    sid, out, db = _follow_until(tmp_path, lambda store, sid: store.session(sid).close("done"))
    assert "session/closed" in out
    # a closed session: -f prints the last events and ends at once
    again = subprocess.run([sys.executable, "-m", "trajlog", "tail", "-f", "-n", "1", sid,
                            "--db", db], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0 and "session/closed" in again.stdout


def test_tail_follow_ends_when_the_session_is_deleted(tmp_path):
    _, out, _ = _follow_until(tmp_path, lambda store, sid: store.delete_session(sid,
                                                                              reason="asked"))
    assert "session/deleted" in out


def test_retention_plans_then_applies_the_rules_given(tmp_path):
    db = str(tmp_path / "r.db")
    sid, last = _recorded(db)
    later = str(last + 8 * DAY)
    plan = run("retention", "--rule", "tool_outputs=7d", "--rule", "messages=90d",
               "--now-ms", later, "--json", "--db", db, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    rows = [json.loads(x) for x in plan.stdout.splitlines()]
    assert rows == [{"erase": sid, "seqs": [4], "reason": "retention rule tool_outputs: "
                     "ttl 604800000 ms"}]
    text = run("retention", "--plan", "--rule", "tool_outputs=7d", "--now-ms", later,
               "--db", db, cwd=tmp_path).stdout
    assert f"would erase 1 event(s) of {sid}" in text and "tool_outputs" in text
    with trajlog.open(db) as store:   # the plan wrote nothing
        assert store.session(sid).get(4).data["output"] == "TOOLOUTPUT"
    done = run("retention", "--apply", "--rule", "tool_outputs=7d", "--now-ms", later,
               "--json", "--db", db, cwd=tmp_path)
    assert [json.loads(x) for x in done.stdout.splitlines()] == [{"erased": sid, "seq": 4}]
    with trajlog.open(db) as store:
        erased = store.session(sid).get(4).data["erased"]
        assert erased["reason"].startswith("retention rule tool_outputs")
        assert store.session(sid).get(1).data["content"] == "list it"   # messages: 90 days
    assert "nothing is due" in run("retention", "--rule", "tool_outputs=7d", "--now-ms",
                                   later, "--db", db, cwd=tmp_path).stdout


@pytest.mark.parametrize("bad", [["--rule", "tool_outputs"], ["--rule", "nope=7d"],
                                 ["--rule", "messages=7 days"], ["--plan", "--apply"]])
def test_retention_refuses_bad_rules_in_one_line(tmp_path, bad):
    db = str(tmp_path / "b.db")
    _recorded(db)
    result = run("retention", *bad, "--db", db, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("trajlog: error: ")
