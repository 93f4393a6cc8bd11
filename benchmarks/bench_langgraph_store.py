"""LangGraph store: TrajlogStore against langgraph-checkpoint-sqlite's SqliteStore.

1,000 items (``--quick``: 300) in 10 namespaces of the form ``("users", "u<i>", "memories")``,
values of ~200 bytes (a text, an int, a tag).  Each round, on fresh databases:

* put: one ``store.put`` per new key (one durable commit each);
* update: one ``store.put`` per existing key;
* get: one ``store.get`` per key;
* search: 100 ``store.search(("users", "u<i>"), limit=10)`` and 100 with a filter
  (``{"tag": "t3"}``) over the same namespaces;
* delete: 100 ``store.delete`` (trajlog: a revocation with its purge -- tombstone, blanked
  versions, free-page scrub, WAL checkpoint; SqliteStore: a ``DELETE``); and, as the floor of
  a purge, 100 more SqliteStore deletes each followed by ``PRAGMA wal_checkpoint(TRUNCATE)``
  (the WAL emptied, as a purge must: ``delete_purging``, trajlog's delete against those).

Both stores are durable in the same way: trajlog ``durability="full"``; SqliteStore on a WAL
connection with ``synchronous=FULL`` (its default journal would be slower).  Ratios
(trajlog / SqliteStore time) are medians of ROUNDS (>= 5) interleaved rounds -- the order
flips every round -- with their range.

    python benchmarks/bench_langgraph_store.py [--quick] [--rounds K]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

import trajlog
from bench_memory import stat, timed
from trajlog.adapters.langgraph.base_store import TrajlogStore

NAMESPACES = 10
QUERIES = 100
DELETES = 100


def value(i: int) -> dict[str, Any]:
    return {"text": f"memory {i}: " + "the user prefers short answers and dark mode " * 3,
            "n": i, "tag": f"t{i % 7}"}


def sqlite_store(path: str) -> tuple[SqliteStore, sqlite3.Connection]:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    store = SqliteStore(conn)
    store.setup()
    return store, conn


def workload(n: int) -> dict[str, Callable[[BaseStore], None]]:
    keys = [(("users", f"u{i % NAMESPACES}", "memories"), f"m{i}") for i in range(n)]

    def put(s: BaseStore) -> None:
        for i, (ns, k) in enumerate(keys):
            s.put(ns, k, value(i))

    def update(s: BaseStore) -> None:
        for i, (ns, k) in enumerate(keys):
            s.put(ns, k, value(i + 1))

    def get(s: BaseStore) -> None:
        for ns, k in keys:
            assert s.get(ns, k) is not None

    def search(s: BaseStore) -> None:
        for q in range(QUERIES):
            assert len(s.search(("users", f"u{q % NAMESPACES}"), limit=10)) == 10

    def search_filter(s: BaseStore) -> None:
        for q in range(QUERIES):
            assert s.search(("users", f"u{q % NAMESPACES}"), filter={"tag": "t3"}, limit=10)

    def delete(s: BaseStore) -> None:
        for ns, k in keys[:DELETES]:
            s.delete(ns, k)

    return {"put": put, "update": update, "get": get, "search": search,
            "search_filter": search_filter, "delete": delete}


def one_round(tmp: Path, r: int, n: int, first: str) -> dict[str, tuple[float, float]]:
    ours = TrajlogStore.open(str(tmp / f"t{r}.db"))
    theirs, conn = sqlite_store(str(tmp / f"s{r}.db"))
    out = {}
    for name, fn in workload(n).items():
        if first == "ours":
            a = timed(partial(fn, ours))
            b = timed(partial(fn, theirs))
        else:
            b = timed(partial(fn, theirs))
            a = timed(partial(fn, ours))
        out[name] = (a, b)

    def purging(s: SqliteStore) -> None:
        for i in range(DELETES, 2 * DELETES):
            s.delete(("users", f"u{i % NAMESPACES}", "memories"), f"m{i}")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    out["delete_purging"] = (out["delete"][0], timed(partial(purging, theirs)))
    ours.close()
    conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    n = 300 if args.quick else 1000
    tmp = Path(tempfile.mkdtemp(prefix="bench-lg-store-"))
    runs = [one_round(tmp, r, n, "ours" if r % 2 else "theirs") for r in range(rounds)]
    result: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                   f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}",
        "rounds": rounds, "items": n, "kernel": trajlog.backend}
    counts = {"put": n, "update": n, "get": n, "search": QUERIES, "search_filter": QUERIES,
              "delete": DELETES, "delete_purging": DELETES}
    for name, count in counts.items():
        result[name] = {
            "ratio_vs_sqlitestore": stat([x[name][0] / x[name][1] for x in runs]),
            "trajlog_ops_per_s": stat([count / x[name][0] for x in runs]),
            "sqlitestore_ops_per_s": stat([count / x[name][1] for x in runs])}
        print(f"{name}: {result[name]}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
