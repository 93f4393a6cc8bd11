#!/usr/bin/env python3
"""Crash-injection soak: the loop of tests/integrity/test_crash.py for many iterations.

    python tests/soak/crash_soak.py --iterations 5000 --seed 7

Each iteration forks a child that appends realistic agent turns (single
appends, batches of 2-32, or 2-4 threads on their own sessions), SIGKILLs it at
a random moment, then checks the store against the expected-state model (see
tests/kits/crashkit.py).  Progress goes to stderr every 250 iterations; at the end a
table and, as the last line of stdout, one JSON object with the figures.

Exit status: 0 when every invariant held; 1 on any lost, changed or phantom
acknowledged data or any false corruption verdict (verify/read/integrity_check);
2 on any other broken invariant (load refused or not idempotent, unbalanced
after load, a child error).  Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kits import crashkit  # tests/kits/, shared with tests/integrity/test_crash.py


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=5000, help="kills (default 5000)")
    parser.add_argument("--seed", type=int, default=None, help="default: random, printed")
    parser.add_argument("--rotate", type=int, default=8,
                        help="iterations per database file (default 8)")
    parser.add_argument("--copy-share", type=float, default=0.5,
                        help="share of checks that load a copy, leaving recovery to the "
                             "next child (default 0.5)")
    parser.add_argument("--normal-share", type=float, default=0.2,
                        help="share of children writing with durability='normal' (default 0.2)")
    parser.add_argument("--workdir", default=None, help="where the databases live "
                        "(default: a temporary directory)")
    parser.add_argument("--stop-on-failure", action="store_true")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    print(f"crash soak: {args.iterations} iterations, seed {seed}", file=sys.stderr, flush=True)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="trajlog-crash-soak-") as tmp:
        harness = crashkit.Harness(tmp, seed, rotate=args.rotate, copy_share=args.copy_share,
                                   normal_share=args.normal_share, log=log)
        stats = harness.run(args.iterations, stop_on_failure=args.stop_on_failure)
    print(stats.table())
    print(json.dumps(stats.as_json()), flush=True)
    loss = (stats.lost_acked + stats.content_mismatches + stats.phantom_events
            + stats.history_changed)
    false_corruption = stats.false_corruption + stats.integrity_failures
    if loss or false_corruption:
        return 1
    return 0 if stats.ok else 2


if __name__ == "__main__":
    sys.exit(main())
