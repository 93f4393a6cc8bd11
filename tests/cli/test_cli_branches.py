"""``trajlog branches``, run in-process on a store recorded with the real API:
each branch's frozen start, rebases, merges (status, missing gate parts) and
state, as a table and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trajlog
from trajlog.cli.main import main

GATE = {"sample": ["case-7"], "check": {"name": "pytest", "result": "pass"},
        "code_version": "3f2a9c1d"}


def test_branches_lists_each_branch_its_start_rebases_and_merge_status(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "b.db")
    with trajlog.open(db) as store:
        s = store.create_session(cwd="/repo")
        s.append("user/message", {"content": "go"})
        s.start_branch("fast-path", from_seq=0, workspace_revision="git:aaaa111",
                       data_samples=["case-7"], tool_versions={"pytest": "8.3"})
        moved = s.append("user/message", {"content": "main moved"})
        s.rebase_branch("fast-path", onto_seq=moved.seq, reason="lexer changed")
        s.merge_branch("fast-path", **GATE)
        s.merge_branch("fast-path", **GATE, decision={"by": "human:ann", "verdict": "accept"})
        s.start_branch("dead-end", from_seq=0)
        s.abandon_branch("dead-end", reason="could not reproduce")
        sid = s.id
    assert main(["branches", sid[:8], "--db", db]) == 0
    out = capsys.readouterr().out
    assert "fast-path" in out and "merged" in out and "rev git:aaaa111" in out
    assert "seq 2 (lexer changed)" in out
    assert "seq 4 reference-only (missing decision), seq 5 fact" in out
    assert "abandoned: could not reproduce" in out
    assert main(["branches", sid[:8], "--db", db, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["name"], r["state"]) for r in rows] == [("fast-path", "merged"),
                                                       ("dead-end", "abandoned")]
    assert rows[0]["rebases"] == [{"seq": 3, "onto_seq": 2, "reason": "lexer changed"}]
    assert [m["missing"] for m in rows[0]["merges"]] == [["decision"], []]
    assert rows[0]["frozen"]["tool_versions"] == {"pytest": "8.3"}


def test_branches_says_when_a_session_has_none(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "b.db")
    with trajlog.open(db) as store:
        sid = store.create_session(cwd="/repo").id
    assert main(["branches", sid[:8], "--db", db]) == 0
    assert "records no branch" in capsys.readouterr().err
