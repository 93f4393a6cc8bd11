"""Agents SDK sessions: TrajlogSession against the SDK's own SQLiteSession.

A 10,000-item session (``--quick``: 2,000) in the shape a runner writes: turns
of a user message, a function call, its output and an assistant message (the
Responses-API dicts the SDK stores).  Each round, on fresh databases:

* add_items: the items in batches of 20 (one ``add_items`` each, one durable
  commit each, as a runner saves a turn);
* get_items: ``get_items()`` of the whole session, 5 times;
* get_items(limit=20): 200 calls (what a run with ``SessionSettings(limit=20)`` reads);
* pop_item: 100 calls (each one durable commit: SQLiteSession deletes the newest
  row, trajlog appends ``history/pop``);
* clear_session: once, of the whole session (SQLiteSession deletes its rows,
  trajlog appends ``history/clear``: the log keeps them).

Both sessions are opened (the database and its schema made) before the clock
starts, as SQLiteSession does in its constructor.

Both are durable in the same way: trajlog ``durability="full"``; SQLiteSession on its
WAL connection with SQLite's default ``synchronous=FULL``.  Ratios (trajlog /
SQLiteSession time) are medians of ROUNDS (>= 5) interleaved rounds -- the order
flips every round -- with their range.

    python benchmarks/bench_agents.py [--quick] [--rounds K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import SQLiteSession

import trajlog
from bench_memory import stat, timed
from trajlog.adapters.openai_agents import TrajlogSession

BATCH, FULL_READS, LIMIT_READS, LIMIT, POPS = 20, 5, 200, 20, 100


def items(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in range(n // 4):
        call = f"call_{t}"
        out += [{"role": "user", "content": f"question {t}: what is the weather in city {t}?"},
                {"type": "function_call", "call_id": call, "name": "get_weather",
                 "arguments": json.dumps({"city": f"city {t}"}), "id": f"fc_{t}",
                 "status": "completed"},
                {"type": "function_call_output", "call_id": call,
                 "output": json.dumps({"city": f"city {t}", "forecast": "sunny", "c": 21})},
                {"type": "message", "role": "assistant", "id": f"msg_{t}",
                 "status": "completed", "content": [{"type": "output_text", "annotations": [],
                                                     "text": f"It is sunny in city {t}."}]}]
    return out


def workload(data: list[dict[str, Any]]) -> dict[str, Any]:
    async def add(s: Any) -> None:
        for i in range(0, len(data), BATCH):
            await s.add_items(data[i:i + BATCH])

    async def get_all(s: Any) -> None:
        for _ in range(FULL_READS):
            assert len(await s.get_items()) == len(data)

    async def get_limit(s: Any) -> None:
        for _ in range(LIMIT_READS):
            assert len(await s.get_items(limit=LIMIT)) == LIMIT

    async def pop(s: Any) -> None:
        for _ in range(POPS):
            assert await s.pop_item() is not None

    async def clear(s: Any) -> None:
        await s.clear_session()

    return {"add_items": add, "get_items": get_all, "get_items_limit": get_limit,
            "pop_item": pop, "clear_session": clear}


def one_round(tmp: Path, r: int, data: list[dict[str, Any]],
              first: str) -> dict[str, tuple[float, float]]:
    ours = TrajlogSession(f"bench-{r}", str(tmp / f"t{r}.db"))
    theirs = SQLiteSession(f"bench-{r}", tmp / f"s{r}.db")
    for s in (ours, theirs):   # opened before the clock (trajlog opens on first use)
        assert asyncio.run(s.get_items()) == []
    out = {}
    for name, fn in workload(data).items():
        def a(fn: Any = fn) -> None:
            asyncio.run(fn(ours))

        def b(fn: Any = fn) -> None:
            asyncio.run(fn(theirs))

        if first == "ours":
            ta, tb = timed(a), timed(b)
        else:
            tb, ta = timed(b), timed(a)
        out[name] = (ta, tb)
    ours.close()
    theirs.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    n = 2000 if args.quick else 10_000
    data = items(n)
    tmp = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    runs = [one_round(tmp, r, data, "ours" if r % 2 else "theirs") for r in range(rounds)]
    result: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                   f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}",
        "rounds": rounds, "items": n, "kernel": trajlog.backend}
    counts = {"add_items": n // BATCH, "get_items": FULL_READS, "get_items_limit": LIMIT_READS,
              "pop_item": POPS, "clear_session": 1}
    for name, count in counts.items():
        result[name] = {
            "ratio_vs_sqlitesession": stat([x[name][0] / x[name][1] for x in runs]),
            "trajlog_calls_per_s": stat([count / x[name][0] for x in runs]),
            "sqlitesession_calls_per_s": stat([count / x[name][1] for x in runs])}
        print(f"{name}: {result[name]}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
