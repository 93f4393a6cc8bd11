"""Peak memory of exporting and importing a 1M-event session (the benchmark
workload: 1.1 GB as JSONL, 225 MB as .jsonl.zst), each step in its own
process, read from ``ru_maxrss``: a store opened alone, the export to
.jsonl.zst, the import of that file into an empty store.

    python benchmarks/bench_interop_memory.py [--events N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import trajlog


def peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def step(name: str, work: Path, events: int) -> dict[str, object]:
    if name == "make":
        from workload import events as workload_events
        with trajlog.open(str(work / "src.db"), "normal") as st:
            s = st.create_session()
            evs = workload_events(events)
            for i in range(0, len(evs), 5000):
                s.append_batch(evs[i:i + 5000])
            (work / "sid").write_text(s.id)
        return {}
    if name == "open":
        with trajlog.open(str(work / "src.db")):
            return {"step": "open a store", "peak MB": peak_mb()}
    if name == "export":
        with trajlog.open(str(work / "src.db")) as st:
            start = time.perf_counter()
            report = st.export((work / "sid").read_text(), work / "s.jsonl.zst")
            return {"step": "export .jsonl.zst", "events": report.events, "bytes": report.bytes,
                    "seconds": round(time.perf_counter() - start, 1), "peak MB": peak_mb()}
    with trajlog.open(str(work / "dst.db")) as st:
        start = time.perf_counter()
        imported = st.import_path(work / "s.jsonl.zst")
        return {"step": "import .jsonl.zst", "events": imported.events,
                "seconds": round(time.perf_counter() - start, 1), "peak MB": peak_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--dir", help="work folder (default: a new temporary one)")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(step(args.step, Path(args.dir), args.events)))
        return
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-interop-mem-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        for name in ("make", "open", "export", "import"):
            out = subprocess.run([sys.executable, __file__, "--step", name, "--dir", str(work),
                                  "--events", str(args.events)], check=True,
                                 capture_output=True, text=True).stdout
            if name != "make":
                print(out.strip())
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
