"""``trajlog memory ls|show|search`` and ``retention`` print what memory
holds as the other read commands do: a key, content or retention reason
carrying escape sequences (ESC, C1 CSI, BEL) is shown escaped, never obeyed --
as text and as JSON lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import trajlog
from trajlog import Identity

KEY = "k\x1b]0;pwned\x07\x1b[2J\x9b31m"
RAW = ("\x1b", "\x9b", "\x07")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajlog", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("climem")
    with trajlog.open(str(where / "trajlog.db")) as st:
        mem = st.memory(Identity("acme", user="alice"))
        mem.remember("user", "preference", {"value": "pytest \x1b[31mred\x9b0m"}, key=KEY,
                     retention={"until_event": "closed\x1b[2J"})
    return where


@pytest.mark.parametrize("args", [
    ["memory", "ls", "--tenant", "acme", "--user", "alice"],
    ["memory", "ls", "--tenant", "acme", "--user", "alice", "--json"],
    ["memory", "search", "pytest", "--tenant", "acme", "--user", "alice"],
    ["memory", "search", "pytest", "--tenant", "acme", "--user", "alice", "--json"],
])
def test_a_memory_key_with_escape_sequences_is_shown_escaped(where: Path,
                                                             args: list[str]) -> None:
    out = run(*args, cwd=where)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip(), "the item is listed"
    for c in RAW:
        assert c not in out.stdout, (args, out.stdout)
    if "--json" in args:   # still the same key, once decoded
        assert json.loads(out.stdout.splitlines()[0])["key"] == KEY
    else:
        assert "\\x1b]0;pwned" in out.stdout


def test_memory_show_escapes_every_version(where: Path) -> None:
    with trajlog.open(str(where / "trajlog.db")) as st:
        item = st.memory(Identity("acme", user="alice")).find("user", KEY)
        assert item is not None
    for extra in ([], ["--json"]):
        out = run("memory", "show", item.id, "--tenant", "acme", "--user", "alice", *extra,
                  cwd=where)
        assert out.returncode == 0, out.stderr
        for c in RAW:
            assert c not in out.stdout, out.stdout
