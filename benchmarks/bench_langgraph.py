"""LangGraph checkpointer: TrajlogSaver against langgraph-checkpoint-sqlite's
SqliteSaver / AsyncSqliteSaver, in the same run.

One thread of 1,000 checkpoints (``--quick``: 300), each the child of the one
before, channel values of ~1 KiB (a text, a step, a small list) -- what a
graph step puts.  Each round, on fresh databases:

* put: one ``put`` per checkpoint (one durable commit each);
* writes: one ``put_writes`` of two channels per checkpoint;
* get_latest: 1,000 ``get_tuple`` of the thread's newest checkpoint;
* get_by_id: one ``get_tuple`` per checkpoint id (shuffled);
* list: ``list`` of the whole thread (1,000 tuples with their writes), 3 times;
* list_10: 100 ``list(limit=10)``;
* delete_thread: the whole thread, once (SqliteSaver deletes its rows;
  trajlog erases every event -- tombstones, the frames purged -- and appends
  the marker after which the thread starts again);
* aput: 1,000 ``aput`` with the async savers (trajlog: through ``trajlog.aio``
  and, second figure, through the executor; AsyncSqliteSaver on aiosqlite).

Both are durable in the same way: trajlog ``durability="full"``; SqliteSaver on
a WAL connection with ``synchronous=FULL``.  Ratios (trajlog / SQLite time)
are medians of ROUNDS (>= 5) interleaved rounds -- the order flips every round
-- with their range.  Also printed: the first ``get_tuple`` of the latest by a
fresh saver on the 1,000-checkpoint file (a backwards scan, not a read of the
whole log).

    python benchmarks/bench_langgraph.py [--quick] [--rounds K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

import trajlog
from bench_memory import stat, timed
from trajlog.adapters.langgraph import TrajlogSaver

OPS = ("put", "writes", "get_latest", "get_by_id", "list", "list_10", "delete_thread")
TEXT = "the agent read login.ts and found the session cookie is never refreshed; " * 14


def cfg(cid: str | None = None) -> Any:
    c: dict[str, Any] = {"thread_id": "bench", "checkpoint_ns": ""}
    if cid:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def checkpoints(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"text": TEXT, "step": i, "seen": list(range(i % 16))}
        cp["channel_versions"] = {"text": f"{i:032}.1", "step": f"{i:032}.2"}
        cp["id"] = f"1ef{i:05d}-0000-6000-8000-000000000000"
        out.append(cp)
    return out


def workload(cps: list[dict[str, Any]]) -> dict[str, Callable[[BaseCheckpointSaver[Any]], None]]:
    ids = [cp["id"] for cp in cps]
    shuffled = random.Random(3).sample(ids, len(ids))

    def put(s: BaseCheckpointSaver[Any]) -> None:
        parent = None
        for i, cp in enumerate(cps):
            s.put(cfg(parent), cp, {"source": "loop", "step": i, "parents": {}},  # type: ignore[arg-type]
                  cp["channel_versions"])
            parent = cp["id"]

    def writes(s: BaseCheckpointSaver[Any]) -> None:
        for i, cid in enumerate(ids):
            s.put_writes(cfg(cid), [("text", f"w{i}"), ("step", i)], f"task-{i}")

    def get_latest(s: BaseCheckpointSaver[Any]) -> None:
        for _ in ids:
            assert s.get_tuple(cfg()) is not None

    def get_by_id(s: BaseCheckpointSaver[Any]) -> None:
        for cid in shuffled:
            assert s.get_tuple(cfg(cid)) is not None

    def list_all(s: BaseCheckpointSaver[Any]) -> None:
        for _ in range(3):
            assert len(list(s.list(cfg()))) == len(ids)

    def list_10(s: BaseCheckpointSaver[Any]) -> None:
        for _ in range(100):
            assert len(list(s.list(cfg(), limit=10))) == 10

    def delete(s: BaseCheckpointSaver[Any]) -> None:
        s.delete_thread("bench")
        assert s.get_tuple(cfg()) is None

    return {"put": put, "writes": writes, "get_latest": get_latest, "get_by_id": get_by_id,
            "list": list_all, "list_10": list_10, "delete_thread": delete}


def sqlite_saver(path: str) -> tuple[SqliteSaver, sqlite3.Connection]:
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    conn.execute("PRAGMA synchronous=FULL")
    return saver, conn


async def aput_all(s: BaseCheckpointSaver[Any], cps: list[dict[str, Any]]) -> float:
    t0 = time.perf_counter()
    parent = None
    for i, cp in enumerate(cps):
        await s.aput(cfg(parent), cp, {"source": "loop", "step": i, "parents": {}},  # type: ignore[arg-type]
                     cp["channel_versions"])
        parent = cp["id"]
    return time.perf_counter() - t0


async def async_round(tmp: Path, r: int, cps: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    order = ["aio", "executor", "sqlite"]
    for name in (order if r % 2 == 0 else order[::-1]):
        path = str(tmp / f"a{r}-{name}.db")
        if name == "sqlite":
            async with aiosqlite.connect(path) as conn:
                saver = AsyncSqliteSaver(conn)
                await saver.setup()
                await conn.execute("PRAGMA synchronous=FULL")
                out[name] = await aput_all(saver, cps)
        else:
            store = await trajlog.aio.open(path)
            try:
                out[name] = await aput_all(TrajlogSaver(store, async_appends=name == "aio"),
                                           cps)
            finally:
                await store.close()
    return out


def one_round(tmp: Path, r: int, cps: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    ours = TrajlogSaver.open(str(tmp / f"t{r}.db"))
    theirs, conn = sqlite_saver(str(tmp / f"s{r}.db"))
    out: dict[str, tuple[float, float]] = {}
    try:
        for op, fn in workload(cps).items():
            if op == "delete_thread":
                # (first: a fresh saver's first read of the latest, on the whole file)
                cold = TrajlogSaver.open(str(tmp / f"t{r}.db"))
                try:
                    out["cold_latest"] = (timed(lambda c=cold: c.get_tuple(cfg())), 0.0)
                finally:
                    cold.close()
            if r % 2 == 0:
                a = timed(lambda: fn(ours))     # noqa: B023 -- called at once
                b = timed(lambda: fn(theirs))   # noqa: B023
            else:
                b = timed(lambda: fn(theirs))   # noqa: B023
                a = timed(lambda: fn(ours))     # noqa: B023
            out[op] = (a, b)
    finally:
        ours.close()
        conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    n = 300 if args.quick else 1000
    cps = checkpoints(n)
    tmp = Path(tempfile.mkdtemp(prefix="bench-langgraph-"))
    result: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                   f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}",
        "rounds": rounds, "kernel": trajlog.backend, "checkpoints": n}
    runs = [one_round(tmp, r, cps) for r in range(rounds)]
    for op in OPS:
        result[op] = {"ratio_vs_sqlite": stat([x[op][0] / x[op][1] for x in runs]),
                      "trajlog_ms": stat([x[op][0] * 1000 for x in runs]),
                      "sqlite_ms": stat([x[op][1] * 1000 for x in runs])}
        print(f"{op}: {result[op]}", file=sys.stderr)
    result["cold_latest_ms"] = stat([x["cold_latest"][0] * 1000 for x in runs])
    arun = [asyncio.run(async_round(tmp, r, cps)) for r in range(rounds)]
    result["aput"] = {"aio_ratio_vs_sqlite": stat([x["aio"] / x["sqlite"] for x in arun]),
                      "executor_ratio_vs_sqlite": stat([x["executor"] / x["sqlite"]
                                                        for x in arun]),
                      "aio_ms": stat([x["aio"] * 1000 for x in arun]),
                      "executor_ms": stat([x["executor"] * 1000 for x in arun]),
                      "sqlite_ms": stat([x["sqlite"] * 1000 for x in arun])}
    print(f"aput: {result['aput']}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
