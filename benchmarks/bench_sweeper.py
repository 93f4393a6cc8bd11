"""The retention sweeper against appends: the append rate of a host with the
background sweeper running (and work for it: every tool output due) over the
same host with the sweeper off, in the same process.

Each round opens two fresh stores, one per mode, in alternating order, each
holding ``--backlog`` workload events whose tool outputs are all due under
``tool_outputs=0``; it then times ``--appends`` single appends (durability
full: each one durable) to a session of their own.  With the sweeper on
(``sweep_seconds=0.01``, ``per_pass`` as given) it erases the backlog meanwhile;
the figures say how much it erased during the timed appends.  A third store
runs the sweeper with nothing due ("idle": its passes find nothing).  Medians of
``--rounds`` (default 5) interleaved rounds, with ranges; the ratio is
on / off per round.  ``--pg URL`` runs the same on a PostgreSQL database (a
schema per store, dropped afterwards).

    python benchmarks/bench_sweeper.py [--quick] [--rounds K] [--pg URL]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import trajlog
from trajlog.memory import RetentionRules
from workload import turns

DUE = 0   # every tool output due at once: the sweeper has work throughout


def _location(base: str, pg: str | None, name: str) -> str:
    if pg is None:
        return os.path.join(base, f"{name}.db")
    sep = "&" if "?" in pg else "?"
    return f"{pg}{sep}options=-csearch_path%3D{name}"


def _fill(store: Any, n: int) -> None:
    """About ``n`` workload events, whole turns, in sessions of about 2000."""
    done = 0
    s = store.create_session()
    batch: list[Any] = []
    for turn in turns(random.Random(1)):
        batch += turn
        if len(batch) >= 500:
            s.append_batch(batch)
            done += len(batch)
            batch = []
            if done >= n:
                return
            if done % 2000 < 500:
                s = store.create_session()


def _round(base: str, pg: str | None, mode: str, backlog: int, appends: int,
           per_pass: int) -> dict[str, float]:
    # "idle": the sweeper runs its passes with nothing due (messages kept 90 days)
    due = {"messages": "90d"} if mode == "idle" else {"tool_outputs": DUE}
    quiet = RetentionRules.of(due, per_pass=per_pass)   # (no sweeper yet)
    rules = RetentionRules.of(due, per_pass=per_pass, sweep_seconds=0.01)
    name = f"sweep_{mode}_{uuid.uuid4().hex[:8]}"
    if pg is not None:
        _schema(pg, name, create=True)
    try:
        store = trajlog.open(_location(base, pg, name), retention=quiet)
        try:
            _fill(store, backlog)
            if mode != "off":   # the sweeper starts once the backlog is in
                store.retention = rules
            s = store.create_session()
            erased_before = sum(len(p.erased) for p in store._sweeper.passes)
            t0 = time.perf_counter()
            for i in range(appends):
                s.append("user/message", {"content": f"message {i}"})
            took = time.perf_counter() - t0
            erased = sum(len(p.erased) for p in store._sweeper.passes) - erased_before
            yielded = sum(p.yielded for p in store._sweeper.passes)
        finally:
            store.close()
    finally:
        if pg is not None:
            _schema(pg, name, create=False)
        else:
            for suffix in ("", "-wal", "-shm"):
                path = os.path.join(base, f"{name}.db{suffix}")
                if os.path.exists(path):
                    os.remove(path)
    return {"appends_per_s": appends / took, "erased_meanwhile": erased, "yielded": yielded}


def _schema(pg: str, name: str, *, create: bool) -> None:
    import psycopg
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}" if create else f"DROP SCHEMA {name} CASCADE")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pg", default=None, help="a postgresql:// URL (default: SQLite files)")
    args = ap.parse_args()
    backlog = 4_000 if args.quick else 20_000
    appends = 900 if args.quick else 3_000   # (past the sweeper's longest yield)
    per_pass = 1000
    rows: dict[str, list[dict[str, float]]] = {"off": [], "on": [], "idle": []}
    ratios, idle_ratios = [], []
    with tempfile.TemporaryDirectory() as base:
        for r in range(args.rounds):
            order = ("off", "on", "idle") if r % 2 == 0 else ("idle", "on", "off")
            got = {m: _round(base, args.pg, m, backlog, appends, per_pass) for m in order}
            for m in order:
                rows[m].append(got[m])
            ratios.append(got["on"]["appends_per_s"] / got["off"]["appends_per_s"])
            idle_ratios.append(got["idle"]["appends_per_s"] / got["off"]["appends_per_s"])
            print(f"round {r + 1}: off {got['off']['appends_per_s']:.0f}/s, on "
                  f"{got['on']['appends_per_s']:.0f}/s (erased {got['on']['erased_meanwhile']:.0f}"
                  f" meanwhile), ratio {ratios[-1]:.3f}; idle sweeper "
                  f"{got['idle']['appends_per_s']:.0f}/s, ratio {idle_ratios[-1]:.3f}", flush=True)

    def med(mode: str, key: str) -> float:
        return statistics.median(x[key] for x in rows[mode])

    def rng(mode: str, key: str) -> list[float]:
        vals = [x[key] for x in rows[mode]]
        return [min(vals), max(vals)]

    machine = {"cpus": os.cpu_count(), "python": platform.python_version(),
               "platform": platform.platform(), "backend": "postgresql" if args.pg else "sqlite",
               "kernel": trajlog.backend}
    out = {"bench": "sweeper", "rounds": args.rounds, "backlog_events": backlog,
           "appends": appends, "per_pass": per_pass, "durability": "full", "machine": machine,
           "appends_per_s_off": med("off", "appends_per_s"),
           "appends_per_s_off_range": rng("off", "appends_per_s"),
           "appends_per_s_on": med("on", "appends_per_s"),
           "appends_per_s_on_range": rng("on", "appends_per_s"),
           "ratio_on_over_off": statistics.median(ratios),
           "ratio_range": [min(ratios), max(ratios)],
           "appends_per_s_idle": med("idle", "appends_per_s"),
           "ratio_idle_over_off": statistics.median(idle_ratios),
           "ratio_idle_range": [min(idle_ratios), max(idle_ratios)],
           "erased_meanwhile_on": med("on", "erased_meanwhile"),
           "erased_meanwhile_on_range": rng("on", "erased_meanwhile"),
           "sweeper_yields_on": med("on", "yielded")}
    print(f"== sweeper: appends/s off {out['appends_per_s_off']:.0f}, on "
          f"{out['appends_per_s_on']:.0f}, ratio {out['ratio_on_over_off']:.3f} "
          f"[{out['ratio_range'][0]:.3f}, {out['ratio_range'][1]:.3f}]; idle sweeper ratio "
          f"{out['ratio_idle_over_off']:.3f} [{out['ratio_idle_range'][0]:.3f}, "
          f"{out['ratio_idle_range'][1]:.3f}] over {args.rounds} rounds")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
