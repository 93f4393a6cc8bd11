"""The overhead of ``Session.run()`` on the turns it wraps (the budget: <= 5 %).

A workload writes, in a fresh store, RUNS runs of TURNS agent turns each
(user message, assistant message with a tool call and usage, tool call, tool
result: 6 events with the turn markers) and one ``switch_model`` and one
``add_cost`` per run, once with every run inside ``with s.run(...) as run:``
and once the same turns bare.  Both sides do the identical non-run work (the
bare side calls ``switch_model`` too, outside any run), so what the ratio
shows is what a run adds: ``run/started`` and ``run/finalized`` (two
appends), collecting and hashing its events for the digest, its usage tally.

The standard shape is 5 runs of 20 turns.  A round times each side REPS times
(alternating, each in a fresh store) and keeps each side's fastest; the ratio
wrapped / bare is the median of ROUNDS (>= 5) rounds (the order alternates),
with the range, for wall time and for the process's CPU time.  Headline:
durability "normal" (no fsync: the CPU cost; target <= 1.05).  Beside it,
``attributed``: the time inside the run machinery over the rest, measured
within the wrapped workload itself (steady under other load, an upper bound).
For the record: one run per turn (the worst case: two appends on six), and,
without --quick, durability "full" (fsync per append: its jitter on a shared
VM dwarfs the difference).

    python benchmarks/bench_runs.py [--quick] [--rounds K] [--reps N]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trajlog


def turn(s: trajlog.Session, k: int) -> None:
    with s.turn():
        s.append("user/message", {"content": f"task {k}: fix the failing test"})
        s.append("assistant/message", {
            "content": "reading the file", "usage": {"input_tokens": 1200, "output_tokens": 80},
            "tool_calls": [{"id": f"c{k}", "name": "read", "arguments": {"path": "a.py"}}]})
        s.append("tool/call", {"call_id": f"c{k}", "name": "read",
                               "arguments": {"path": "a.py"}})
        s.append("tool/result", {"call_id": f"c{k}", "output": "x = 1\n" * 40,
                                 "is_error": False})


def workload(path: str, runs: int, turns: int, wrapped: bool,
             durability: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process: every thread, user + system)."""
    with trajlog.open(path, durability=durability, repack=False) as store:
        s = store.create_session(cwd="/bench")
        # open the store's reader first, on both sides, as any agent does (it
        # reads its log): else the first run/finalized (which reads the head)
        # pays that once-per-store ~0.8 ms, ~1.5 % of this short workload
        s.tail(1)
        t0, c0 = time.perf_counter(), time.process_time()
        for r in range(runs):
            if wrapped:
                with s.run(model="m-1", params={"temperature": 0}, policy_version="p1",
                           static_prefix="system prompt " * 50) as run:
                    for k in range(turns):
                        turn(s, r * turns + k)
                    s.switch_model(old="m-1", new="m-2", reason="bench")
                    run.add_cost("inference", 0.01)
            else:   # the same non-run work: the switch (run_id None), no add_cost
                for k in range(turns):
                    turn(s, r * turns + k)
                s.switch_model(old="m-1", new="m-2", reason="bench")
        return time.perf_counter() - t0, time.process_time() - c0


def attributed(tmp: Path, rounds: int, runs: int, turns: int) -> dict[str, Any]:
    """The run machinery's share measured inside the wrapped workload itself:
    the time in entering and leaving ``s.run()`` and in the per-append hook
    (``trajlog.api.run_scope.observe``, timed by a wrapper that adds its own
    ~0.2 us a call: an upper bound), over the rest.  Both sides of the ratio
    are timed in the same process at the same moments, so other load on the
    machine moves them together (unlike the A/B ratio)."""
    from trajlog.api import run_scope as api_runs
    hook, spent = api_runs.observe, [0.0]

    def timed_observe(session_id: str, events: list[trajlog.Event]) -> None:
        t = time.perf_counter()
        hook(session_id, events)
        spent[0] += time.perf_counter() - t

    shares = []
    api_runs.observe = timed_observe
    try:
        for r in range(rounds):
            with trajlog.open(str(tmp / f"attr-{r}.db"), durability="normal",
                              repack=False) as store:
                s = store.create_session(cwd="/bench")
                s.tail(1)
                spent[0] = 0.0
                t0 = time.perf_counter()
                for i in range(runs):
                    t = time.perf_counter()
                    cm = s.run(model="m-1", params={"temperature": 0}, policy_version="p1",
                               static_prefix="system prompt " * 50)
                    run = cm.__enter__()
                    spent[0] += time.perf_counter() - t
                    for k in range(turns):
                        turn(s, i * turns + k)
                    s.switch_model(old="m-1", new="m-2", reason="bench")
                    run.add_cost("inference", 0.01)
                    t = time.perf_counter()
                    cm.__exit__(None, None, None)
                    spent[0] += time.perf_counter() - t
                total = time.perf_counter() - t0
            shares.append(total / (total - spent[0]))
    finally:
        api_runs.observe = hook
    return {"runs": runs, "turns_per_run": turns, "durability": "normal",
            "wrapped_over_rest": stat(shares)}


def stat(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4)}


def measure(tmp: Path, rounds: int, runs: int, turns: int, label: str,
            durability: str = "full", reps: int = 1) -> dict[str, Any]:
    """Per round, each side's fastest of ``reps`` (wall and CPU apart); the
    ratios' median and range over the rounds."""
    ratio: dict[str, list[float]] = {"wall": [], "cpu": []}
    secs: dict[str, list[float]] = {"wrapped": [], "bare": []}
    for r in range(rounds):
        order = (True, False) if r % 2 else (False, True)
        best = {True: [math.inf, math.inf], False: [math.inf, math.inf]}
        for rep in range(reps):
            for wrapped in order if rep % 2 == 0 else order[::-1]:
                took = workload(str(tmp / f"{label}-{r}-{rep}-{wrapped}.db"), runs, turns,
                                wrapped, durability)
                best[wrapped] = [min(x, y) for x, y in zip(best[wrapped], took, strict=True)]
        ratio["wall"].append(best[True][0] / best[False][0])
        ratio["cpu"].append(best[True][1] / best[False][1])
        secs["wrapped"].append(best[True][0])
        secs["bare"].append(best[False][0])
        print(f"{label} round {r}: {best[True][0]:.4f} s / {best[False][0]:.4f} s wall, "
              f"cpu ratio {ratio['cpu'][-1]:.3f}", file=sys.stderr)
    return {"runs": runs, "turns_per_run": turns, "durability": durability, "reps": reps,
            "ratio_wrapped_vs_bare": stat(ratio["wall"]),
            "cpu_ratio_wrapped_vs_bare": stat(ratio["cpu"]),
            "wrapped_s": stat(secs["wrapped"]), "bare_s": stat(secs["bare"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3, help="timings per side per round")
    args = ap.parse_args()
    rounds, reps = max(5, args.rounds), max(1, args.reps)
    runs, turns = 5, 20
    tmp = Path(tempfile.mkdtemp(prefix="bench-runs-"))
    result: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                   f"{platform.python_version()}", "kernel": trajlog.backend,
        "load_avg_1m": os.getloadavg()[0], "rounds": rounds,
        "target": "ratio <= 1.05 for 5 runs of 20 turns, durability normal"}
    # the headline: without the fsyncs, whose jitter dwarfs the difference
    result["run_of_20_turns_normal"] = measure(tmp, rounds, runs, turns, "normal", "normal",
                                               reps)
    result["run_of_20_turns_attributed"] = attributed(tmp, rounds, runs, turns)
    result["run_per_turn_normal"] = measure(tmp, rounds, runs * 4, 1, "per-turn-normal",
                                            "normal", reps)
    if not args.quick:
        result["run_of_20_turns_full"] = measure(tmp, rounds, runs, turns, "full", "full")
        result["run_per_turn_full"] = measure(tmp, rounds, runs * 4, 1, "per-turn-full")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
