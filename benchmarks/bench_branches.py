"""Appends to a branch of investigation against plain appends, and the start
of a subagent's run, against the length of the log.

Each round, on a fresh SQLite store (durability NORMAL: the figures are the
write path's own work, not fsync), one session of T whole turns (tool call
and result each) with a branch started at its end; then, interleaved in
blocks of 50, single appends of a ``note/text`` on the main line (plain) and
the same with ``branch_id`` (branch).  Figures: microseconds per append of
each, and their ratio ``branch / plain`` (the same round, the same process),
for T = 10 and T = 500; the median of ROUNDS rounds with the range of the
rounds.  ``child_run_ms``: starting and finalizing a run of a subagent whose
parent run began after T turns, on the store reopened (the parent run is open
in no context, as in another process; the child's log as long).

    python benchmarks/bench_branches.py [--rounds K] [--appends N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trajlog

TURNS = (10, 500)


def turn(i: int) -> list[tuple[str, dict[str, Any], dict[str, int]]]:
    cid = f"c{i}"
    evs = [("turn/start", {}), ("user/message", {"content": f"question {i}"}),
           ("assistant/message", {"content": "", "tool_calls": [{"id": cid, "name": "t"}]}),
           ("tool/call", {"call_id": cid, "name": "t"}),
           ("tool/result", {"call_id": cid, "output": f"result {i}"}), ("turn/end", {})]
    return [(t, d, {"time": 0}) for t, d in evs]


def fill(s: Any, turns: int) -> None:
    for k in range(0, turns, 100):
        s.append_batch([ev for i in range(k, min(turns, k + 100)) for ev in turn(i)])


def round_appends(tmp: Path, turns: int, appends: int) -> dict[str, float]:
    with trajlog.open(str(tmp / f"b{turns}-{time.monotonic_ns()}.db"), repack=False,
                      durability="normal") as store:
        s = store.create_session(cwd="/bench")
        fill(s, turns)
        s.start_branch("try", from_seq=s.last_seq)
        spent = {"plain": 0.0, "branch": 0.0}
        for block in range(2 * appends // 50):
            kind = "branch" if block % 2 else "plain"
            kw = {"branch_id": "try"} if kind == "branch" else {}
            t0 = time.perf_counter()
            for i in range(50):
                s.append("note/text", {"text": f"n{block}.{i}"}, **kw)
            spent[kind] += time.perf_counter() - t0
    out = {k: v / appends * 1e6 for k, v in spent.items()}
    out["ratio"] = out["branch"] / out["plain"]
    return out


def round_child_run(tmp: Path, turns: int) -> float:
    path = str(tmp / f"d{turns}-{time.monotonic_ns()}.db")
    with trajlog.open(path, repack=False, durability="normal") as store:
        parent = store.create_session(cwd="/bench")
        fill(parent, turns)
        with parent.run(model="big"):
            child = parent.spawn_subagent("look it up")
        fill(child, turns)
    with trajlog.open(path, repack=False, durability="normal") as store:
        again = store.session(child.id)
        t0 = time.perf_counter()
        with again.run(model="small"):
            pass
        return (time.perf_counter() - t0) * 1e3


def median_range(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--appends", type=int, default=500, help="of each kind, a round")
    args = parser.parse_args()
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for _ in range(args.rounds):
            for turns in TURNS:   # (the sizes interleaved within each round)
                for k, v in round_appends(tmp, turns, args.appends).items():
                    figures.setdefault(f"{k}_us_{turns}" if k != "ratio" else
                                       f"ratio_{turns}", []).append(v)
                figures.setdefault(f"child_run_ms_{turns}", []).append(
                    round_child_run(tmp, turns))
    out = {k: median_range(v) for k, v in sorted(figures.items())}
    for k, v in out.items():
        print(f"{k:20} {v['median']:10.3f}   [{v['min']:.3f} .. {v['max']:.3f}]")
    print(json.dumps({"rounds": args.rounds, "appends": args.appends, "figures": out,
                      "machine": {"python": sys.version.split()[0],
                                  "platform": platform.platform(), "cpus": os.cpu_count(),
                                  "trajlog": trajlog.__version__}}))


if __name__ == "__main__":
    main()
