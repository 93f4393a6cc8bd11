"""Recovery cost: inspect() and load() of a crashed session against a plain
iteration of its events.

Builds a session of N workload events (benchmarks/workload.py; 100k, --quick 20k)
that stops in the middle of a turn with tool calls open, as a crash leaves it.
Each operation then runs in a fresh process on its own copy of the database
(so load() always finds the crashed state), and reports wall time and the
growth of peak RSS over the process's state just before the operation.
Prints the ratios inspect/iterate and load/iterate; last line: JSON.

    python benchmarks/bench_recovery.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trajlog
import workload

CHILD = """
import resource, sys, time, trajlog
path, sid, op = sys.argv[1], sys.argv[2], sys.argv[3]
store = trajlog.open(path)
s = store.session(sid)
s.last_seq
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if op == "iterate":
    n = sum(1 for _ in s.events())
elif op == "inspect":
    view, report = s.inspect()
    n = report.events
    assert report.outcome == "repair", report
else:
    loaded = store.load(sid)
    n = loaded.last_seq + 1
elapsed = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(elapsed, (after - before) / 1024, n)
"""


def build(path: str, n: int) -> tuple[str, int]:
    events = workload.events(n + 200)
    # cut inside a step, after a tool call started: the crash point
    cut = n
    while not (events[cut - 1][0] == "tool/call" and events[cut][0] == "tool/call"):
        cut += 1
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/bench")
        for start in range(0, cut, 1000):
            s.append_batch(list(events[start:min(start + 1000, cut)]))
        return s.id, cut


def run(op: str, src: str, sid: str, tmp: Path) -> dict[str, float]:
    best: dict[str, float] | None = None
    for i in range(3):
        copy = str(tmp / f"{op}{i}.db")
        shutil.copyfile(src, copy)
        res = subprocess.run([sys.executable, "-c", CHILD, copy, sid, op], check=True,
                             capture_output=True, text=True)
        seconds, rss, n = res.stdout.split()
        cur = {"seconds": float(seconds), "rss_growth_mb": float(rss), "events": float(n)}
        if best is None or cur["seconds"] < best["seconds"]:
            best = cur
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20k events")
    args = parser.parse_args()
    n = 20_000 if args.quick else 100_000
    tmp = Path(tempfile.mkdtemp(prefix="trajlog-recovery-"))
    try:
        src = str(tmp / "crashed.db")
        sid, count = build(src, n)
        results = {op: run(op, src, sid, tmp) for op in ("iterate", "inspect", "load")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    it = results["iterate"]["seconds"]
    ratios = {"inspect_over_iterate": results["inspect"]["seconds"] / it,
              "load_over_iterate": results["load"]["seconds"] / it}
    print(f"crashed session of {count:,} events (open turn, tool calls open)")
    for op, r in results.items():
        print(f"  {op:<8} {r['seconds'] * 1000:9.1f} ms  {count / r['seconds']:>10,.0f} events/s"
              f"  peak RSS +{r['rss_growth_mb']:.1f} MB")
    print(f"  inspect / iterate = {ratios['inspect_over_iterate']:.2f}x, "
          f"load / iterate = {ratios['load_over_iterate']:.2f}x")
    print(json.dumps({"bench": "recovery", "quick": args.quick, "events": count,
                      "results": results, "ratios": ratios}))


if __name__ == "__main__":
    main()
