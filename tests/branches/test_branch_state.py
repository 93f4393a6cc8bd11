"""The branches the write path keeps between appends (both backends): a
refused batch leaves no branch event in them, and another writer's appends
(the head moved) make them folded again -- so a kept fold never decides
against the log."""

from __future__ import annotations

from typing import Any

import pytest

import trajlog
from trajlog.errors import BranchStateError
from trajlog.projections.branches import GATE_PARTS

from .test_branch_rules import GATE, started

GATE_ARGS: dict[str, Any] = {k: GATE[k] for k in GATE_PARTS}


def test_a_refused_batch_leaves_the_kept_branches_as_they_were(store):
    s = store.create_session(cwd="/repo")
    started(s)
    s.append("note/text", {"text": "on the branch"}, branch_id="try-a")   # (the fold is kept)
    before = s.last_seq
    with pytest.raises(BranchStateError):   # the abandon is fed, then the merge refused
        s.append_batch([("branch/abandoned", {"name": "try-a", "reason": "dead end"}),
                        ("branch/merged", {"name": "try-a", "status": "fact", **GATE_ARGS})])
    assert s.last_seq == before
    # the branch is still open: the refused abandon was not kept
    assert s.append("note/text", {"text": "still open"}, branch_id="try-a").seq == before + 1
    assert s.branches()["try-a"].state == "open"


def test_another_writers_branch_events_are_seen_by_a_writer_that_kept_the_fold(tmp_path):
    path = str(tmp_path / "two.db")
    with trajlog.open(path) as a, trajlog.open(path) as b:
        s = a.create_session(cwd="/repo")
        started(s)
        s.append("note/text", {"text": "a keeps the fold"}, branch_id="try-a")
        other = b.session(s.id)
        other.append("note/text", {"text": "b too"}, branch_id="try-a")
        other.abandon_branch("try-a", reason="b gave up")
        before = s.last_seq
        with pytest.raises(BranchStateError, match="abandoned"):
            s.append("note/text", {"text": "a again"}, branch_id="try-a")
        assert s.last_seq == before
        # and b, which kept the fold with its own abandon in it, refuses too
        with pytest.raises(BranchStateError, match="abandoned"):
            other.append("note/text", {"text": "b again"}, branch_id="try-a")


def test_a_branch_started_by_another_writer_is_known_to_a_writer_that_kept_the_fold(tmp_path):
    path = str(tmp_path / "two.db")
    with trajlog.open(path) as a, trajlog.open(path) as b:
        s = a.create_session(cwd="/repo")
        start = started(s)
        s.append("note/text", {"text": "a keeps the fold"}, branch_id="try-a")
        b.session(s.id).start_branch("try-b", from_seq=start.seq)
        ev = s.append("note/text", {"text": "on b's branch"}, branch_id="try-b")
        with pytest.raises(BranchStateError, match="already started"):
            s.start_branch("try-b", from_seq=start.seq)
        assert s.branches()["try-b"].events == 1 and ev.branch_id == "try-b"
