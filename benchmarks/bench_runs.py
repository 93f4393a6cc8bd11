"""The overhead of ``Session.run()`` on the turns it wraps (issue 17: <= 5 %).

A round writes, in a fresh store (default durability ``"full"``), RUNS runs
of TURNS agent turns each (user message, assistant message with a tool call
and usage, tool call, tool result: 6 events with the turn markers), once with
every run inside ``with s.run(...) as run:`` (plus one ``add_cost`` and one
``switch_model`` per run) and once the same turns bare.  What a run adds:
``run/started``, ``run/finalized`` (two durable appends), reading the run's
events back for its digest, and the switch.  The ratio wrapped / bare is the
median of ROUNDS (>= 5) interleaved rounds (the order alternates), with the
range; once with durability "full" (fsync per append: noisy on a shared
VM) and once "normal" (no fsync: the CPU cost, stable).  A last
figure wraps each single turn in its own run -- the worst case, two appends
on six -- for the record.

    python benchmarks/bench_runs.py [--quick] [--rounds K]
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


def workload(path: str, runs: int, turns: int, wrapped: bool, durability: str) -> float:
    with trajlog.open(path, durability=durability, repack=False) as store:
        s = store.create_session(cwd="/bench")
        t0 = time.perf_counter()
        for r in range(runs):
            if wrapped:
                with s.run(model="m-1", params={"temperature": 0}, policy_version="p1",
                           static_prefix="system prompt " * 50) as run:
                    for k in range(turns):
                        turn(s, r * turns + k)
                    s.switch_model(old="m-1", new="m-2", reason="bench")
                    run.add_cost("inference", 0.01)
            else:
                for k in range(turns):
                    turn(s, r * turns + k)
                s.append("model/switch", {"old": "m-1", "new": "m-2", "reason": "bench"})
        return time.perf_counter() - t0


def stat(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4)}


def measure(tmp: Path, rounds: int, runs: int, turns: int, label: str,
            durability: str = "full") -> dict[str, Any]:
    ratios, wrapped_s, bare_s = [], [], []
    for r in range(rounds):
        order = (True, False) if r % 2 else (False, True)
        got: dict[bool, float] = {}
        for wrapped in order:
            got[wrapped] = workload(str(tmp / f"{label}-{r}-{wrapped}.db"), runs, turns,
                                    wrapped, durability)
        ratios.append(got[True] / got[False])
        wrapped_s.append(got[True])
        bare_s.append(got[False])
        print(f"{label} round {r}: {got[True]:.3f} s / {got[False]:.3f} s", file=sys.stderr)
    return {"runs": runs, "turns_per_run": turns, "durability": durability,
            "ratio_wrapped_vs_bare": stat(ratios),
            "wrapped_s": stat(wrapped_s), "bare_s": stat(bare_s)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    runs, turns = (5, 20) if args.quick else (10, 20)
    tmp = Path(tempfile.mkdtemp(prefix="bench-runs-"))
    result: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                   f"{platform.python_version()}", "kernel": trajlog.backend, "rounds": rounds,
        "target": "ratio <= 1.05 for runs of 20 turns"}
    result["run_of_20_turns"] = measure(tmp, rounds, runs, turns, "runs")
    # without the fsyncs, whose jitter on a shared VM dwarfs the difference
    result["run_of_20_turns_normal"] = measure(tmp, rounds, runs, turns, "normal", "normal")
    result["run_per_turn"] = measure(tmp, rounds, runs * 2, 1, "per-turn")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
