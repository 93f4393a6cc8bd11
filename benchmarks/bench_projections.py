"""Projections over a long session: from scratch, and incrementally after one append.

A session of N workload events (benchmarks/workload.py; 100k, --quick 20k).  For
each projection: the time of a from-scratch fold (no saved state) as events/s
against a plain verified iteration of the same events (interleaved, best of 9
each), then the time of the call after one more append (the engine folds only
the new event; best of 5).  Last line: JSON.

    python benchmarks/bench_projections.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trajlog
import workload
from trajlog import projections


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 20_000 if args.quick else 100_000
    tmp = Path(tempfile.mkdtemp(prefix="trajlog-proj-"))
    results: dict[str, dict[str, float]] = {}
    try:
        with trajlog.open(str(tmp / "p.db")) as store:
            s = store.create_session(cwd="/bench")
            events = workload.events(n)
            for start in range(0, n, 2000):
                s.append_batch(events[start:start + 2000])
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                count = sum(1 for _ in s.events())
                best = min(best, time.perf_counter() - t)
            iterate_rate = count / best
            print(f"{n:,} events; plain verified iteration: {iterate_rate:,.0f} events/s")
            print(f"{'projection':<16}{'scratch ev/s':>14}{'vs iterate':>12}"
                  f"{'after 1 append':>16}")
            for name, fold in projections.FOLDS.items():
                # interleaved with a plain iteration, best of 9 each: the VM is noisy
                scratch = it_best = float("inf")
                for _ in range(9):
                    t = time.perf_counter()
                    sum(1 for _ in s.events())
                    it_best = min(it_best, time.perf_counter() - t)
                    store._e.views.states.clear()   # no memory state
                    projections.rebuild(s)       # no saved state
                    t = time.perf_counter()
                    projections.project(s, fold)
                    scratch = min(scratch, time.perf_counter() - t)
                iterate_rate = max(iterate_rate, count / it_best)
                incremental = float("inf")
                for k in range(5):
                    s.append("user/message", {"content": f"one more {name} {k}"})
                    t = time.perf_counter()
                    projections.project(s, fold)
                    incremental = min(incremental, time.perf_counter() - t)
                rate = count / scratch
                pair_rate = count / it_best
                results[name] = {"scratch_s": scratch, "scratch_events_per_s": rate,
                                 "ratio_scratch_vs_iterate": rate / pair_rate,
                                 "incremental_ms": incremental * 1000}
                print(f"{name:<16}{rate:>14,.0f}{rate / pair_rate:>11.2f}x"
                      f"{incremental * 1000:>13.3f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"bench": "projections", "quick": args.quick, "events": n,
                      "iterate_events_per_s": iterate_rate, "results": results}))


if __name__ == "__main__":
    main()
