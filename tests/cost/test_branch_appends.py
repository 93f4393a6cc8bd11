"""What an append carrying a ``branch_id`` costs must not grow with the log:
the branch rules are checked against the branches the write state keeps
(folded once from the ``branch/*`` index rows), not against every index row
of the log on every append.

Counted on SQLite (statements, result rows, VM steps) over appends to one
branch of a session of 10 whole turns against one of 500, after one branch
append that folds the branches: the same at both sizes.  Reading the log's
index rows per append is ~50x the rows at the large size.
"""

from __future__ import annotations

from typing import Any

import pytest

import trajlog
from kits.costkit import Cost, metered, small_turn, timed

SQLITE_COST = "counts what SQLite runs (statements, result rows, VM steps)"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_COST)

APPENDS = 20
KEYS = ("statements", "rows", "vm_steps")


def branch_appends(tmp_path: Any, turns: int) -> Cost:
    """The cost of :data:`APPENDS` appends to a branch started after ``turns`` turns."""
    with trajlog.open(str(tmp_path / f"b{turns}.db"), repack=False) as store:
        s = store.create_session(cwd="/cost")
        for k in range(0, turns, 100):
            s.append_batch(timed([ev for i in range(k, min(turns, k + 100))
                                  for ev in small_turn(i)]))
        s.start_branch("try", from_seq=s.last_seq)
        s.append("note/text", {"text": "first"}, branch_id="try", time=0)  # (folds once)
        with metered(store) as meter:
            return meter.measure(lambda i: s.append("note/text", {"text": f"n{i}"},
                                                     branch_id="try", time=0), APPENDS)


def test_a_branch_append_costs_the_same_whatever_the_logs_length(tmp_path):
    small, large = branch_appends(tmp_path, 10), branch_appends(tmp_path, 500)
    lo, hi = small.counts(), large.counts()
    grown = {k: (hi[k], lo[k]) for k in KEYS if hi[k] > lo[k]}
    assert not grown, f"grows with the log (500 turns, 10 turns): {grown}"
    # and the same shape as a plain append: a statement or two, no index scan
    assert hi["statements"] <= 4 * APPENDS and hi["rows"] <= 2 * APPENDS, hi
