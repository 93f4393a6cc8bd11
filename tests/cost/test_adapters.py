"""The shape of the adapters' costs: statements and rows per operation,
counted on the store's connections (:mod:`kits.costkit`).

* LangGraph ``delete_thread`` deletes the thread's session: what it reads and
  writes is proportional to the thread -- one statement for the tombstones
  already there, one for the rows of a run of seqs, then per erased event its
  tombstone and per row its rewrite; then the repack of the blanked rows (which
  returns their pages) reads each erased frame's tombstone to verify it -- and
  the same whatever else the store holds (other threads).
* LangGraph ``get_tuple`` by checkpoint id reads the put with the head in one
  statement (the head says whether the thread's index is current), then one
  statement per writes event not held.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

import trajlog
from kits.costkit import Cost, metered
from trajlog.adapters.langgraph import TrajlogSaver

SQLITE_COST = "counts what SQLite runs (statements, VM steps, pages, compiles)"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_COST)

N = 40   # checkpoints of the measured thread (each with one writes event)


def cfg(thread: str, cid: str | None = None) -> Any:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def fill(saver: TrajlogSaver, thread: str, n: int) -> list[str]:
    """``n`` checkpoints, each the child of the one before, each with one
    ``put_writes``; their ids."""
    parent, ids = None, []
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"text": f"step {i} of {thread}", "step": i}
        cp["channel_versions"] = {"text": f"{i:032}.1", "step": f"{i:032}.2"}
        cp["id"] = f"1ef{i:05d}-0000-6000-8000-000000000000"
        saver.put(cfg(thread, parent), cp, {"source": "loop", "step": i, "parents": {}},  # type: ignore[arg-type]
                  cp["channel_versions"])
        saver.put_writes(cfg(thread, cp["id"]), [("text", f"w{i}")], f"task-{i}")
        parent = cp["id"]
        ids.append(cp["id"])
    return ids


def delete_cost(path: Path, others: int) -> Cost:
    with trajlog.open(str(path), durability="normal", repack=False) as store:
        saver = TrajlogSaver(store)
        for k in range(others):
            fill(saver, f"other-{k}", N)
        fill(saver, "t", N)
        with metered(store) as meter, meter.window() as cost:
            saver.delete_thread("t")
        assert saver.get_tuple(cfg("t")) is None
        assert all(saver.get_tuple(cfg(f"other-{k}")) is not None for k in range(others))
    return cost


def test_delete_thread_is_proportional_to_the_thread(tmp_path: Path) -> None:
    alone = delete_cost(tmp_path / "alone.db", 0)
    crowded = delete_cost(tmp_path / "crowded.db", 4)
    erased = 2 * N   # the puts and the writes, each in a row of its own (no repack)
    # per erased event: its tombstone (INSERT) and its row's rewrite (UPDATE),
    # and in the repack that merges the blanked rows its tombstone read twice
    # (by seq, and in the tombstones' chain) and half an index read; the rest is
    # fixed (the tombstones there, the rows of the run, the head, the deletion
    # record and its event, the projection states, the free pages, the checkpoint)
    assert alone.statements <= 5 * erased + 40, alone.counts()
    assert alone.by_sql.most_common(1)[0][1] <= erased, alone.by_sql.most_common(3)
    # other threads change nothing it does (a few VM steps: deeper b-trees)
    assert crowded.statements == alone.statements, (crowded.counts(), alone.counts())
    assert crowded.rows <= alone.rows + 4, (crowded.counts(), alone.counts())
    assert crowded.vm_steps <= alone.vm_steps * 1.25, (crowded.counts(), alone.counts())


@pytest.mark.parametrize("cached", [False, True])
def test_get_by_id_reads_the_put_with_the_head(tmp_path: Path, cached: bool) -> None:
    with trajlog.open(str(tmp_path / "s.db"), durability="normal", repack=False) as store:
        ids = fill(TrajlogSaver(store), "t", N)
        saver = TrajlogSaver(store)            # a fresh saver: nothing of the thread held
        assert saver.get_tuple(cfg("t", ids[0])) is not None   # (its index, once)
        wanted = ids[1:21]
        if cached:
            for cid in wanted:
                saver.get_tuple(cfg("t", cid))
        with metered(store) as meter, meter.window() as cost:
            for cid in wanted:
                tup = saver.get_tuple(cfg("t", cid))
                assert tup is not None and tup.checkpoint["id"] == cid
                assert [w[2] for w in tup.pending_writes] == [f"w{ids.index(cid)}"]
    # not held: one statement for the put and the head, one for its writes
    # event; held: the head alone (one statement)
    assert cost.statements == len(wanted) * (1 if cached else 2), cost.by_sql


def test_store_update_and_delete_read_each_row_once(tmp_path: Path) -> None:
    """The LangGraph store's update reads the item's latest version once (in
    its transaction), and its delete -- a revocation with its purge -- reads
    the versions and the tombstone once and asks for the full-text index once."""
    from trajlog.adapters.langgraph.base_store import TrajlogStore

    with trajlog.open(str(tmp_path / "s.db"), durability="normal", repack=False) as store:
        s = TrajlogStore(store)
        ns = ("users", "u1", "memories")
        s.put(ns, "warm", {"text": "a"})   # (every statement prepared once)
        s.put(ns, "warm", {"text": "b"})
        s.delete(ns, "warm")
        s.put(ns, "k", {"text": "hello"})
        costs = {}
        for name, op in (("update", lambda: s.put(ns, "k", {"text": "hello again"})),
                         ("delete", lambda: s.delete(ns, "k"))):
            with metered(store) as meter, meter.window() as cost:
                op()
            costs[name] = cost
    latest = "FROM memories WHERE item_id = ? ORDER BY version DESC LIMIT 1"
    versions = "FROM memories WHERE item_id = ? ORDER BY version"
    update, delete = costs["update"], costs["delete"]
    assert sum(n for sql, n in update.by_sql.items() if sql.endswith(latest)) == 1, update.by_sql
    assert update.statements <= 11, update.by_sql
    assert sum(n for sql, n in delete.by_sql.items() if sql.endswith(versions)) == 1, delete.by_sql
    assert sum(n for sql, n in delete.by_sql.items() if "target_item = ?" in sql) == 1, (
        delete.by_sql)
    assert delete.statements <= 26, delete.by_sql
