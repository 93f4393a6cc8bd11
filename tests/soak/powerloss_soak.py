"""Power-loss soak: many simulated power losses of a trajlog store.

    python tests/soak/powerloss_soak.py --crashes 1000 --mode full --seed 1

The loop is ``tests/kits/powerloss_sim.py``.  Prints a table and, last, one JSON line; exits 1 if
any check failed, or if durability "full" lost an acknowledged event, or if
"normal" lost none in 200 or more crashes (then the harness is not dropping
unsynced writes).  Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/

from kits import powerloss_sim as sim


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--crashes", type=int, default=1000)
    ap.add_argument("--mode", choices=("full", "normal"), default="full")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", help="where runs and images go (default: a temp dir)")
    ap.add_argument("--show-failures", type=int, default=10)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="trajlog-soak-") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        s = sim.simulate(workdir, mode=args.mode, crashes=args.crashes, seed=args.seed)

    rows = [
        ("mode", s.mode),
        ("crashes", s.crashes),
        ("acknowledged events", s.acked),
        ("lost acknowledged events", s.lost),
        ("crashes with loss", s.crashes_with_loss),
        ("integrity failures", s.integrity_failures),
        ("verify failures", s.verify_failures),
        ("load failures", s.load_failures),
        ("other failures", s.other_failures),
        ("crash during (stage)", " ".join(f"{k}={v}" for k, v in sorted(s.crashed_in.items()))),
        ("crash write hit (file)", " ".join(f"{k}={v}" for k, v in sorted(s.crash_file.items()))),
        ("seed", s.seed),
        ("wall time (s)", f"{s.wall_s:.1f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    for o in s.failures[:args.show_failures]:
        print("FAILURE", o)
    print(json.dumps(s.row()))

    bad = bool(s.integrity_failures or s.verify_failures or s.load_failures or s.other_failures
               or s.failures)
    if s.mode == "full" and (s.lost or s.crashes_with_loss):
        bad = True
    if s.mode == "normal" and s.crashes >= 200 and not s.crashes_with_loss:
        print("harness broken: NORMAL lost nothing", file=sys.stderr)
        bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
