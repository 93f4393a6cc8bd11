"""``trajlog chat`` and ``trajlog trajectory`` on the shapes a log may take:
tool output and messages spanning lines, turns and steps whose start was
never recorded -- each a subprocess, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import trajlog


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    where = tmp_path_factory.mktemp("readings")
    db = where / "r.db"
    with trajlog.open(str(db)) as st:
        chat = st.create_session(cwd="/w")
        chat.append("user/message", {"content": "line one\nline two"})
        chat.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "c1", "name": "bash", "arguments": {"cmd": "pytest"}}]})
        chat.append("tool/call", {"call_id": "c1", "name": "bash", "arguments": {}})
        chat.append("tool/result", {"call_id": "c1", "output":
                                    "collected 2 items\nFAILED test_a\r\n2 failed\x1b[2J"})
        headless = st.create_session(cwd="/w")    # a turn without step/start
        headless.append("turn/start", {})
        headless.append("user/message", {"content": "hi"})
        headless.append("assistant/message", {"content": "hello"})
        headless.append("turn/end", {})
        headless.append("model/switch", {"old": "a", "new": "b"})   # no turn after it yet
        ids = {"chat": chat.id, "headless": headless.id}
    return {"dir": where, "db": str(db), **ids}


@pytest.mark.parametrize("full", [False, True])
def test_chat_prints_line_breaks_in_tool_output_and_messages(store, full):
    args = ["chat", str(store["chat"]), "--db", str(store["db"])] + (["--full"] if full else [])
    out = run(*args, cwd=store["dir"]).stdout
    assert "\\n" not in out, out
    lines = out.splitlines()
    assert "line one" in lines and "line two" in lines
    # the tool card's output keeps its lines, each indented under the card
    assert "    collected 2 items" in lines and "    FAILED test_a" in lines
    assert any(x.startswith("    2 failed") for x in lines)
    assert "\x1b" not in out and "\\x1b[2J" in out     # a control is still shown, not obeyed


def test_chat_cuts_a_long_output_to_a_few_lines_unless_full(store, tmp_path):
    db = tmp_path / "long.db"
    with trajlog.open(str(db)) as st:
        s = st.create_session(cwd="/w")
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "c1", "name": "bash", "arguments": {}}]})
        s.append("tool/call", {"call_id": "c1", "name": "bash", "arguments": {}})
        s.append("tool/result", {"call_id": "c1",
                                 "output": "\n".join(f"row {i}" for i in range(200))})
        sid = s.id
    short = run("chat", sid, "--db", str(db), cwd=tmp_path).stdout.splitlines()
    full = run("chat", sid, "--db", str(db), "--full", cwd=tmp_path).stdout.splitlines()
    assert "    row 0" in short and "    row 199" not in short and len(short) < 30
    assert any(x.endswith("...") for x in short)
    assert "    row 0" in full and "    row 199" in full


def test_trajectory_never_prints_none_for_a_seq_it_does_not_know(store):
    out = run("trajectory", str(store["headless"]), "--db", str(store["db"]),
              cwd=store["dir"]).stdout
    assert "None" not in out, out
    assert "turn 1  seq 0..3" in out and "step 1  seq ..3" in out   # the step's start unknown
    assert "turn 2  seq .." in out      # the switch no turn followed: no seqs


def test_a_seq_range_tells_an_unknown_start_from_seq_0():
    """``end_seq or ''`` printed an end at seq 0 as open; None printed as None."""
    from trajlog.cli.views import seq_range
    assert seq_range(0, 0) == "0..0" and seq_range(None, 0) == "..0"
    assert seq_range(3, None) == "3.." and seq_range(None, None) == ".."
