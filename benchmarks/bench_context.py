"""The context builder over a long session, against a plain verified read.

A session of N workload events (benchmarks/workload.py; 20k, --quick 5k).  Each
round times, one after the other on the same store: a plain verified iteration
of the log (the baseline: the least any build must do), ``build_context`` with
``record=False`` (the events only), the same with memory layers (a view holding
a constitution, a tenant policy, a preference and 200 facts), and a build for a
target model whose data-class policy is recorded in the log.  Figures are the
ratio of each build's time to the baseline's in the same round (lower is
better): medians of ROUNDS interleaved rounds with their range.  Last line: JSON.

    python benchmarks/bench_context.py [--quick] [--rounds K]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trajlog
import workload
from trajlog.memory import Identity
from trajlog.projections.context import build_context


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = 5_000 if args.quick else 20_000
    tmp = Path(tempfile.mkdtemp(prefix="trajlog-ctx-"))
    ratios: dict[str, list[float]] = {"build": [], "build_memory": [], "build_model": []}
    try:
        with trajlog.open(str(tmp / "c.db")) as store:
            s = store.create_session(cwd="/bench", metadata={"tenant": "acme", "user": "ann"})
            events = workload.events(n)
            for start in range(0, n, 2000):
                s.append_batch(events[start:start + 2000])
            store.deploy_global("policy", {"text": "Never push to main."}, key="git.push",
                                actor="deploy:bench")
            memory = store.memory(Identity("acme", "ann"))
            memory.remember("tenant", "policy", {"text": "Deploys need a change ticket."},
                            key="deploy", evidence={"kind": "human_approval", "by": "human:b"})
            memory.remember("user", "preference", {"text": "Answer in short sentences."},
                            key="style")
            for i in range(200):
                memory.remember("user", "fact", {"text": f"service {i} deploys with tool "
                                                 f"{i % 7}"}, key=f"svc{i}")
            has_policy = "model/policy" in trajlog.event_types.BY_NAME
            if has_policy:
                s.append("model/policy", {"model": "vendor",
                                          "allowed_data_classes": ["public", "internal"]},
                         source="human:bench")
            for _ in range(args.rounds):
                base = _timed(lambda: sum(1 for _ in s.events()))
                ratios["build"].append(_timed(lambda: build_context(s, record=False)) / base)
                if "memory" in build_context.__code__.co_varnames:
                    ratios["build_memory"].append(_timed(lambda: build_context(
                        s, record=False, memory=memory)) / base)
                ratios["build_model"].append(_timed(lambda: build_context(
                    s, record=False, target_model="vendor")) / base)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
               for k, v in ratios.items() if v}
    for k, f in figures.items():
        print(f"{k:<14} {f['median']:.2f}x a plain read  [{f['min']:.2f}, {f['max']:.2f}]")
    print(json.dumps({"bench": "context", "quick": args.quick, "events": n,
                      "rounds": args.rounds, "figures": figures,
                      "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}))


if __name__ == "__main__":
    main()
