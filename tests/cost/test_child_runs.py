"""What a subagent's run costs to start must not grow with the logs: the
parent run it is delegated from (the child's header names it, and where its
``run/started`` lies) is read at that one seq, not found by reading the
child's log and then the parent's.

Counted on SQLite (statements, result rows, bytes returned) for a run of a
subagent started on a store just reopened -- the parent run is open in no
context there, as in another process -- with the parent's run started after
10 whole turns against 500, and the child's log as long: the same at both.
Finding it by reading the logs is ~50x the rows at the large size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trajlog
from kits.costkit import Cost, metered, small_turn, timed

SQLITE_COST = "counts what SQLite runs (statements, result rows, bytes returned)"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_COST)

KEYS = ("statements", "rows", "bytes")


def filled(s: Any, turns: int) -> None:
    for k in range(0, turns, 100):
        s.append_batch(timed([ev for i in range(k, min(turns, k + 100))
                              for ev in small_turn(i)]))


def child_run(tmp_path: Path, turns: int) -> tuple[Cost, Any]:
    """The cost of starting (and finalizing) a run of a subagent whose parent
    run began after ``turns`` turns, and the run's ``run/started`` data."""
    path = str(tmp_path / f"d{turns}.db")
    with trajlog.open(path, repack=False) as store:
        parent = store.create_session(cwd="/cost", metadata={"tenant": "acme"})
        filled(parent, turns)
        with parent.run(model="big", policy_version="p7", privacy_mode="metadata"):
            child = parent.spawn_subagent("look it up")
        filled(child, turns)
        child.append_batch(timed(small_turn(turns)))   # (the turn its next append follows)
        child_id = child.id
    with trajlog.open(path, repack=False) as store, metered(store) as meter:
        child = store.session(child_id)
        with meter.window() as cost, child.run(model="small") as run:
            pass
        return cost, run.started.data


def test_a_subagents_run_starts_at_the_same_cost_whatever_the_logs_length(tmp_path):
    (small, d_small), (large, d_large) = child_run(tmp_path, 10), child_run(tmp_path, 500)
    for d in (d_small, d_large):   # pinned to the parent run, as before
        assert (d["policy_version"], d["privacy_mode"], d["identity"]["tenant"]) == (
            "p7", "metadata", "acme")
    lo, hi = small.counts(), large.counts()
    grown = {k: (hi[k], lo[k]) for k in KEYS if hi[k] > lo[k] * (1.1 if k == "bytes" else 1)}
    assert not grown, f"grows with the logs (500 turns, 10 turns): {grown}"
