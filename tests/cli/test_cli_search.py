"""``trajlog search``: ranked hits with the command that shows each, JSON
lines with the viewer's anchor, the filters, the derived index dropped and
rebuilt -- and stored text with escape sequences shown escaped, never obeyed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trajlog
from trajlog.cli.main import main

RAW = ("\x1b", "\x9b", "\x07")


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, str, str]:
    path = str(tmp_path / "trajlog.db")
    with trajlog.open(path) as st:
        a = st.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "bob"})
        a.append("user/message", {"content": "the quokka \x1b[2J test\x9b31m is flaky\x07"})
        a.append("assistant/message", {"content": "looking at the quokka"})
        b = st.create_session(cwd="/other")
        b.append("user/message", {"content": "quokka facts"})
    return path, a.id, b.id


def test_search_prints_hits_with_their_commands(db, capsys) -> None:
    path, a, _ = db
    assert main(["--db", path, "search", "quokka", "flaky"]) == 0
    out = capsys.readouterr().out
    assert f"trajlog show {a} --from 0 --to 0" in out and "[quokka]" in out
    assert "1 hit(s); events committed before" in out
    for c in RAW:
        assert c not in out
    assert "\\x1b[2J" in out


def test_search_json_and_filters(db, capsys) -> None:
    path, a, b = db
    assert main(["--db", path, "search", "quokka", "--json", "--identity", "acme/bob",
                 "--type", "assistant/"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["session"], x["seq"]) for x in lines] == [(a, 1)]
    assert lines[0]["viewer"] == f"#session={a}&view=events&seq=1"
    assert main(["--db", path, "search", "quokka", "--json", "--cwd", "/other",
                 "--session", b[:8]]) == 0
    assert [json.loads(x)["session"] for x in capsys.readouterr().out.splitlines()] == [b]


def test_search_drops_and_rebuilds_the_index(db, capsys) -> None:
    path, _, _ = db
    assert main(["--db", path, "search", "--rebuild-index"]) == 0
    assert "rebuilt: 3 event(s)" in capsys.readouterr().out
    assert main(["--db", path, "search", "--drop-index"]) == 0
    assert main(["--db", path, "search", "quokka", "--no-catch-up"]) == 0
    assert "0 hit(s) in the index" in capsys.readouterr().out
    assert main(["--db", path, "search"]) == 2
