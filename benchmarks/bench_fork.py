"""Fork cost and reading through a fork, against copying the prefix.

1. Fork cost: parents of 1k, 100k and 1M events (--quick: 1k, 10k, 100k) made of
   small agent turns; fork() at the middle and at the end of the parent, median
   of repeated forks (each one a durable commit).  Baseline: a raw apsw
   ``INSERT ... SELECT`` copying the same prefix rows into another table.
2. Reading a child: a parent of N workload events (DESIGN.md section 8), a fork
   at its middle with 1,000 own events (small turns), against a flat session
   holding exactly the same events; full verified reads, best of 3.

Prints ratios; last line: JSON.

    python benchmarks/bench_fork.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trajlog
import workload
from trajlog.storage import sqlite as storage


def small_turns(n: int) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    i = 0
    while len(out) < n:
        out += [("turn/start", {}), ("user/message", {"content": f"question {i}"}),
                ("assistant/message", {"content": f"answer {i}", "tool_calls": []}),
                ("turn/end", {"interrupted": False})]
        i += 1
    return out[:n - n % 4] if n % 4 else out


def fill(session: trajlog.Session, events: list[tuple[str, dict]]) -> None:
    for start in range(0, len(events), 5000):
        session.append_batch(events[start:start + 5000])


def fork_cost(store: trajlog.Store, n: int, repeats: int) -> dict[str, float]:
    parent = store.create_session(cwd="/bench")
    fill(parent, small_turns(n))
    out: dict[str, float] = {"events": parent.last_seq + 1}
    for where, at in (("middle", parent.last_seq // 2), ("end", parent.last_seq)):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            child = parent.fork(at)
            times.append(time.perf_counter() - t)
        out[f"fork_{where}_ms"] = statistics.median(times) * 1000
        out[f"seed_{where}"] = child.header.seed_length
    # baseline: copy the prefix (to the middle) with INSERT ... SELECT
    seed = out["seed_middle"]
    raw = storage.open_connection(store.path, migrations=True)
    raw.execute("CREATE TABLE IF NOT EXISTS prefix_copy(rid INTEGER PRIMARY KEY, type TEXT, "
                "time_ms INTEGER, chain INTEGER, frame BLOB)")
    times = []
    for k in range(max(1, repeats // 5)):
        t = time.perf_counter()
        with raw:
            raw.execute("INSERT INTO prefix_copy SELECT rid + ?, type, time_ms, chain, frame "
                        "FROM events WHERE rid BETWEEN ? AND ?",
                        ((k + 1) << 40, storage.rid(parent._sid, 0),
                         storage.rid(parent._sid, int(seed) - 1)))
        times.append(time.perf_counter() - t)
    raw.execute("DROP TABLE prefix_copy")
    raw.close()
    out["copy_prefix_ms"] = statistics.median(times) * 1000
    return out


def read_cost(store: trajlog.Store, n: int) -> dict[str, float]:
    events = workload.events(n)
    parent = store.create_session(cwd="/bench/read")
    fill(parent, events)
    at = n // 2
    child = parent.fork(at)
    seed = child.header.seed_length
    own = small_turns(1000)   # own turns (no tool calls that could clash with the parent's)
    fill(child, own)
    flat = store.create_session(cwd="/bench/flat")
    fill(flat, events[:seed] + own)

    def read(s: trajlog.Session) -> float:
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            count = sum(1 for _ in s.events())
            best = min(best, time.perf_counter() - t)
        assert count == seed + len(own)
        return best

    t_child, t_flat = read(child), read(flat)
    return {"events": seed + len(own), "child_read_s": t_child, "flat_read_s": t_flat,
            "ratio_child_over_flat": t_child / t_flat}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
    tmp = Path(tempfile.mkdtemp(prefix="trajlog-fork-"))
    results: dict[str, object] = {}
    try:
        with trajlog.open(str(tmp / "fork.db")) as store:
            costs = {str(n): fork_cost(store, n, 31) for n in sizes}
            results["fork"] = costs
            small, big = costs[str(sizes[0])], costs[str(sizes[-1])]
            results["ratio_fork_largest_over_smallest"] = (big["fork_middle_ms"]
                                                           / small["fork_middle_ms"])
            print(f"{'parent events':>14}{'fork@middle ms':>16}{'fork@end ms':>13}"
                  f"{'copy prefix ms':>16}")
            for n, r in costs.items():
                print(f"{int(n):>14,}{r['fork_middle_ms']:>16.3f}{r['fork_end_ms']:>13.3f}"
                      f"{r['copy_prefix_ms']:>16.1f}")
            print(f"fork cost, {sizes[-1]:,} vs {sizes[0]:,} events: "
                  f"{results['ratio_fork_largest_over_smallest']:.2f}x")
            read = read_cost(store, 10_000 if args.quick else 100_000)
            results["read"] = read
            print(f"reading a fork of {read['events']:,} events: {read['child_read_s']:.3f} s; "
                  f"the same events flat: {read['flat_read_s']:.3f} s; "
                  f"ratio {read['ratio_child_over_flat']:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"bench": "fork", "quick": args.quick, **results}))


if __name__ == "__main__":
    main()
