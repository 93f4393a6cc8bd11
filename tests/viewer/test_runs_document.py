"""The viewer document's runs and checkpoint marks, without a browser (the
browser test is test_runs_browser.py).  Each test names the rule whose
removal makes it fail."""

from __future__ import annotations

from typing import Any

import pytest
import runs_sample

import trajlog
from trajlog import projections
from trajlog.viewer import build_document, render_html
from trajlog.viewer.page import read_document


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("runs") / "store.db"
    with trajlog.open(str(path)) as store:
        yield store, runs_sample.build(store)


def test_runs_are_the_projection_in_the_document(rec):
    """Rule: each session carries its run envelopes as projections.runs folds
    them (integrity verdict and cost included: they are in no single event)."""
    store, s = rec
    doc = build_document(store, s.root.id)
    root, sub = doc["sessions"][0], doc["sessions"][1]
    want = projections.runs(s.root)
    assert [r[0] for r in root["runs"]] == [e.run_id for e in want] == [s.lead]
    run = root["runs"][0]
    assert run[1:4] == ["gpt-x", "completed", "ok"]
    assert run[8] == want[0].cost and run[8]["inference"]["amount"] == pytest.approx(0.0042)
    assert [r[0] for r in sub["runs"]] == [s.child] and sub["runs"][0][7] == s.lead


def test_checkpoint_marks_in_the_document(rec):
    """Rules: checkpoints with validity and the invalidation's reason; recovery
    attempts with each check and the outcome, linked by recovery_check."""
    store, s = rec
    marks = build_document(store, s.root.id)["sessions"][0]["marks"]
    by_seq = {c["seq"]: c for c in marks["cp"]}
    assert by_seq[s.approved]["valid"] is False
    assert by_seq[s.approved]["reason"] == "workspace-changed"
    assert by_seq[s.patch]["valid"] is True
    assert [(r["seq"], r["outcome"]) for r in marks["rec"]] == [
        (s.paused_check, "paused"), (s.resumed_check, "resumed")]
    assert [c["name"] for c in marks["rec"][0]["checks"] if not c["ok"]] == [
        "workspace-revision"]


def test_supersedes_and_branch_id_are_in_the_row_envelope(rec):
    """Rule: the rows' envelope carries supersedes and branch_id (drop them
    from _ENV: fails)."""
    store, s = rec
    doc = read_document(render_html(store, s.root.id))
    row = next(r for r in doc["sessions"][0]["ev"] if r[0] == s.superseding)
    assert row[5] == {"supersedes": s.superseding - 1, "branch_id": "b-2"}


def test_a_session_without_runs_has_empty_lists(store):
    """Rule: every session model has runs and marks (the page reads them)."""
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "hi"})
    model = build_document(store, s.id)["sessions"][0]
    assert model["runs"] == [] and model["marks"] == {"cp": [], "rec": [], "fork": []}
