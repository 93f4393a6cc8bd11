"""eventsourcing recorders: trajlog's against eventsourcing's own SQLite recorder.

10,000 stored events (``--quick``: 2,000) in aggregates of 10 events, states of
~100 bytes of JSON (what eventsourcing's transcoder writes).  Each round, on
fresh database files, both application recorders do:

* insert: one ``insert_events`` of 10 events per new aggregate (one durable
  commit each; trajlog writes the aggregate's session and the application
  sequence in that one transaction);
* insert single: 200 ``insert_events`` of one event (a commit's latency);
* select: ``select_events(id)`` of every aggregate;
* select last: ``select_events(id, desc=True, limit=1)`` of every aggregate
  (what finding the latest snapshot does);
* notifications: ``select_notifications`` in pages of 100 over every event.

Both are durable in the same way: trajlog ``durability="full"``; the SQLite
recorder on its WAL connection with sqlite3's default ``synchronous=FULL``.
Ratios (trajlog / SQLite time) are medians of ROUNDS (>= 5) interleaved rounds
-- the order flips every round -- with their range.

    python benchmarks/bench_eventsourcing.py [--quick] [--rounds K]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eventsourcing.persistence import ApplicationRecorder, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

import trajlog
from bench_memory import stat, timed
from trajlog.adapters.eventsourcing import TrajlogApplicationRecorder

PER_AGGREGATE = 10
SINGLES = 200
PAGE = 100


def workload(n: int) -> list[list[StoredEvent]]:
    batches = []
    for a in range(n // PER_AGGREGATE):
        oid = uuid.UUID(int=a + 1)
        batches.append([StoredEvent(oid, v, "bank:Account.Credited", json.dumps(
            {"amount": f"{v}.00", "note": "x" * 60, "timestamp": "2026-01-01T00:00:00Z"},
        ).encode()) for v in range(1, PER_AGGREGATE + 1)])
    return batches


def run(recorder: ApplicationRecorder, batches: list[list[StoredEvent]]) -> dict[str, float]:
    ids = [b[0].originator_id for b in batches]
    n = sum(len(b) for b in batches)

    def insert() -> None:
        for b in batches:
            recorder.insert_events(b)

    def singles() -> None:
        for i in range(SINGLES):
            recorder.insert_events([StoredEvent(uuid.UUID(int=10**9 + i), 1, "t", b"{}")])

    def select() -> None:
        for oid in ids:
            assert len(recorder.select_events(oid)) == PER_AGGREGATE

    def last() -> None:
        for oid in ids:
            assert recorder.select_events(oid, desc=True, limit=1)[0].originator_version == 10

    def notifications() -> None:
        start, seen = 0, 0
        while seen < n:
            page = recorder.select_notifications(start, PAGE, inclusive_of_start=False)
            seen, start = seen + len(page), page[-1].id

    steps: dict[str, Callable[[], None]] = {"insert": insert, "insert_single": singles,
                                            "select": select, "select_last": last,
                                            "notifications": notifications}
    return {name: timed(fn) for name, fn in steps.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    n = 2_000 if args.quick else 10_000
    batches = workload(n)
    times: dict[str, dict[str, list[float]]] = {"trajlog": {}, "sqlite": {}}
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            order = ["trajlog", "sqlite"] if r % 2 == 0 else ["sqlite", "trajlog"]
            for who in order:
                if who == "trajlog":
                    store = trajlog.open(os.path.join(tmp, "t.db"), durability="full")
                    got = run(TrajlogApplicationRecorder(store), batches)
                    store.close()
                else:
                    ds = SQLiteDatastore(os.path.join(tmp, "s.db"))
                    rec = SQLiteApplicationRecorder(ds)
                    rec.create_table()
                    got = run(rec, batches)
                    ds.close()
                for k, v in got.items():
                    times[who].setdefault(k, []).append(v)
    out: dict[str, Any] = {
        "events": n, "rounds": rounds,
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                   f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}",
    }
    for k in times["trajlog"]:
        t, s = times["trajlog"][k], times["sqlite"][k]
        out[k] = {"trajlog_s": stat(t), "sqlite_s": stat(s),
                  "ratio": stat([a / b for a, b in zip(t, s, strict=True)])}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
