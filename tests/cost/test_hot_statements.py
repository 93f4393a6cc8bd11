"""The hot statements of the read and memory paths: authorizer callbacks per
execute (SQLite runs the authorizer while it compiles a statement, so a
statement compiled anew at every execute shows here), statement compiles,
and the query plan of each statement -- it names its index, no stored table
is scanned (``sqlite_schema`` aside: the memory index's existence check).
The append statements' own counts are in ``test_writes.py``; a scan inside a
trigger shows as ``fullscan_steps``.

Each operation runs 20 times after a warm-up of 20, on a store of 5000
events and 60 memory items of two versions each in 10 namespaces.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import trajlog
from kits.costkit import Cost, Meter, access, batch, fails, metered, plan, scans, tightest, timed
from trajlog import Identity

SQLITE_COST = "counts what SQLite runs (statements, VM steps, pages, compiles)"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_COST)

# op -> over 20 operations: the most authorizer callbacks per execute of any of
# its statements, all its authorizer callbacks, statement-cache misses, VM steps
# and full-scan steps.  Every statement is prepared once (no callback after the
# warm-up; the reader connections have no authorizer of their own: the meter
# counts with one).  A search's callbacks are FTS5's: it compiles a statement of
# its own at every MATCH ... ORDER BY rank (5 callbacks each).  memory_get and
# find read 20 items never read before (each verified in full: its latest row,
# its versions, its tombstone); memory_get_again and find_again read items
# verified before: the latest row alone.
LIMITS: dict[str, dict[str, float]] = {
    "get": {"auth_per_execute": 0, "authorizer": 0, "prepares": 0, "vm_steps": 880,
            "fullscan_steps": 0},
    "tail": {"auth_per_execute": 0, "authorizer": 0, "prepares": 0, "vm_steps": 2560,
             "fullscan_steps": 0},
    "remember": {"auth_per_execute": 0, "authorizer": 0, "prepares": 0,
                 "vm_steps": 174304, "fullscan_steps": 1240},
    "memory_get": {"auth_per_execute": 0, "authorizer": 0, "prepares": 0, "vm_steps": 1900,
                   "fullscan_steps": 0, "statements": 60},
    "memory_get_again": {"auth_per_execute": 0, "authorizer": 0, "prepares": 0,
                         "vm_steps": 640, "fullscan_steps": 0, "statements": 20},
    "find": {"auth_per_execute": 0, "authorizer": 0, "prepares": 0, "vm_steps": 2399,
             "fullscan_steps": 0, "statements": 60},
    "find_again": {"auth_per_execute": 0, "authorizer": 0, "prepares": 0,
                   "vm_steps": 1140, "fullscan_steps": 0, "statements": 20},
    "search": {"auth_per_execute": 5, "authorizer": 100, "prepares": 0,
               "vm_steps": 22344890, "fullscan_steps": 1240, "statements": 40},
}
# fullscan_steps: the memory index's existence check scans sqlite_schema, one
# step per schema object, 20 times: it grows with the schema, not with the
# store (1120 -> 1240: the deleted_sessions table, its id index, its 4 guards)
# A memory item's id is random, and where it falls in the item-id index moves a
# b-tree seek by a step or two: the VM steps of memory operations vary by a few
# hundredths of a percent from run to run (a scan or a re-verification is many
# times more).
VM_SLACK = 1.01
# op -> how its statements reach their tables (EXPLAIN QUERY PLAN), today
ACCESS: dict[str, set[str]] = {
    "get": {"chunks USING INTEGER PRIMARY KEY", "session_heads USING INTEGER PRIMARY KEY"},
    "tail": {"chunks USING INTEGER PRIMARY KEY", "event_index USING INTEGER PRIMARY KEY",
             "session_heads USING INTEGER PRIMARY KEY"},
    "remember": {"SCAN sqlite_schema", "memories", "memories USING INDEX memories_merge",
                 "m USING INDEX memories_key",
                 "v USING COVERING INDEX sqlite_autoindex_memories_1"},
    "memory_get": {"memories USING INDEX sqlite_autoindex_memories_1",
                   "tombstones USING INDEX tombstones_memory"},
    "memory_get_again": {"memories USING INDEX sqlite_autoindex_memories_1"},
    "find": {"m USING INDEX memories_key", "memories USING INDEX sqlite_autoindex_memories_1",
             "v USING COVERING INDEX sqlite_autoindex_memories_1",
             "tombstones USING INDEX tombstones_memory"},
    "find_again": {"m USING INDEX memories_key",
                   "v USING COVERING INDEX sqlite_autoindex_memories_1"},
    "search": {"SCAN sqlite_schema", "SCAN f VIRTUAL TABLE INDEX 32:M5",
               "m USING INTEGER PRIMARY KEY",
               "v USING COVERING INDEX sqlite_autoindex_memories_1"},
}
IDENTITY = Identity("acme", user="u")
SCANNABLE = {"SCAN sqlite_schema"}   # a few dozen rows: the schema itself


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """The store file (closed), its session id and the memory items' ids."""
    path = tmp_path_factory.mktemp("hot") / "h.db"
    with trajlog.open(str(path), "normal", repack=False) as store:
        s = store.create_session(cwd="/cost")
        for i in range(5):
            s.append_batch(timed(batch(1000, 20 + i, f"r{i}_")))
        memory = store.memory(IDENTITY)
        for version in range(2):
            for i in range(60):
                memory.put("user", "fact", f"ns{i % 10}/k{i}",
                           {"text": f"alpha beta {i} v{version}"})
        ids = [memory.find("user", f"ns{i % 10}/k{i}").id for i in range(60)]  # type: ignore
        return path, s.id, ids


@contextmanager
def world(built: tuple[Path, str, list[str]], tmp_path: Path,
          name: str) -> Iterator[dict[str, Any]]:
    """A copy of the built store, opened afresh: every run measures the same
    state, whichever ran before it."""
    path, sid, ids = built
    copy = tmp_path / f"{name}.db"
    shutil.copyfile(path, copy)
    with trajlog.open(str(copy), "normal", repack=False) as store:
        yield {"store": store, "session": store.session(sid), "memory": store.memory(IDENTITY),
               "ids": ids}


def operations(w: dict[str, Any]) -> dict[str, Callable[[int], Any]]:
    s, memory, ids = w["session"], w["memory"], w["ids"]
    cache = w["store"]._e.reading.cache

    def get(i: int) -> Any:
        cache.clear()   # each get finds and opens its row
        return s.get((i * 997) % 5000)

    return {"get": get,
            "tail": lambda i: s.tail(50),
            "remember": lambda i: memory.remember("user", "fact", {"text": f"gamma {i}"},
                                                  key=f"g{i}"),
            "memory_get": lambda i: memory.get(ids[i]),
            "memory_get_again": lambda i: memory.get(ids[i % 5]),
            "find": lambda i: memory.find("user", f"ns{i % 10}/k{i}"),
            "find_again": lambda i: memory.find("user", f"ns{i % 5}/k{i % 5}"),
            "search": lambda i: memory.search("alpha", limit=5)}


def run(w: dict[str, Any], meter: Meter, name: str, kind: str | None) -> Cost:
    op = operations(w)[name]
    meter.measure(op, 20)   # warm-up

    def planted(i: int) -> None:
        op(20 + i)
        for conn in meter.conns:
            if kind == "recompile":
                conn.authorizer = conn.authorizer   # expires every prepared statement
            elif kind == "scan":
                conn.execute("SELECT max(raw_len) FROM chunks").fetchall()
    return meter.measure(planted, 20)


def counters(cost: Cost) -> dict[str, float]:
    return {"auth_per_execute": max(cost.auth_per_execute().values()),
            "authorizer": cost.authorizer, "prepares": cost.prepares,
            "vm_steps": cost.vm_steps, "fullscan_steps": cost.fullscan_steps,
            "statements": cost.statements}


def within(name: str, cost: Cost, limits: dict[str, float]) -> None:
    got = counters(cost)
    over = {k: (got[k], v) for k, v in limits.items()
            if got[k] > v * (VM_SLACK if k == "vm_steps" else 1)}
    assert not over, (f"{name}: over today's limit (measured, limit): {over}; "
                      f"authorizer callbacks per execute: {cost.auth_per_execute()}")


@pytest.mark.parametrize("kind", [None, "recompile"])
@pytest.mark.parametrize("name", list(LIMITS))
def test_authorizer_callbacks_per_execute(built, tmp_path, name, kind):
    with world(built, tmp_path, "a") as w, metered(w["store"]) as meter:
        clean = run(w, meter, name, None)
    within(name, clean, LIMITS[name])
    if kind is not None:
        with world(built, tmp_path, "b") as w, metered(w["store"]) as meter:
            planted = run(w, meter, name, kind)
        fails(lambda: within(name, planted, tightest(LIMITS[name], counters(clean))))


def plans(w: dict[str, Any], name: str, kind: str | None) -> dict[str, list[str]]:
    """The query plan of every statement the operation ran."""
    with metered(w["store"]) as meter:
        cost = run(w, meter, name, kind)
        conn = meter.conns[1]
        return {sql: plan(conn, sql, cost.bindings.get(sql.strip())) for sql in cost.by_sql}


def named(name: str, found: dict[str, list[str]]) -> None:
    scanned = {sql[:60]: scans(p) for sql, p in found.items() if set(scans(p)) - SCANNABLE}
    assert not scanned, f"{name}: a hot statement scans a table: {scanned}"
    reached = set().union(*(access(p) for p in found.values()))
    assert reached == ACCESS[name], (name, reached)


@pytest.mark.parametrize("kind", [None, "scan"])
@pytest.mark.parametrize("name", list(LIMITS))
def test_each_hot_statement_names_its_index(built, tmp_path, name, kind):
    with world(built, tmp_path, "a") as w:
        named(name, plans(w, name, None))
    if kind is not None:
        with world(built, tmp_path, "b") as w:
            found = plans(w, name, kind)
        fails(lambda: named(name, found))
