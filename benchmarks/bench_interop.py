"""Import and export rates, against reading the same JSONL with orjson.

1. Real files (tests/realdata): each source format's files imported into a
   fresh store (opened before the clock starts; durability FULL, one
   transaction per session), against ``orjson.loads`` of every line of the
   same files (for the JSON-document formats: of the whole document).  For
   Claude Code the stages are timed apart too, to show where the time goes:
   JSON decoding alone (msgspec), decoding and mapping (``read()``: the
   importer without the store), the store alone (the same sessions mapped
   beforehand, written with the importer's bulk loader), and the whole
   import with durability FULL and NORMAL, and the whole import with the
   store stubbed out (every mapped event handed over, nothing written: the
   importer's own cost).  "ceiling" is what the store alone allows: the
   orjson time over the store-only time (the rate an import with a free
   reader and mapper would reach).  Target: Claude Code import >= 0.3x the
   orjson rate.
   (aider's Markdown has no JSON: its baseline splits and decodes the lines.)
2. A synthetic session of N events (default 1,000,000; the
   workload of benchmarks/workload.py): export to .tlog, .jsonl, .jsonl.zst;
   import of the .jsonl.zst and .tlog into a fresh store; orjson over the
   .jsonl's lines.

Every figure is the median of ROUNDS (>= 5) interleaved rounds (each round
times every contender once, alternating the order), with its range.

    python benchmarks/bench_interop.py [--events N] [--rounds K] [--json OUT]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import msgspec
import orjson

sys.path.insert(0, str(Path(__file__).parent))

import trajlog
from trajlog.errors import SessionNotFoundError
from trajlog.interop.formats import module
from trajlog.interop.importer import import_path, import_sessions
from trajlog.interop.mapping import Notes
from trajlog.interop.protocols import Loaded
from workload import events as workload_events

REAL = Path(__file__).parent.parent / "tests" / "realdata"
SOURCES = {
    "claude-code": sorted((REAL / "claude-code").rglob("*.jsonl")),
    "codex": sorted((REAL / "codex").rglob("*.jsonl")),
    "openhands": sorted((REAL / "openhands").rglob("*.json*")),
    "swe-agent": sorted((REAL / "swe-agent").glob("*.traj")),
    "inspect-ai": sorted((REAL / "inspect-ai").glob("*.json")),
    "aider": sorted((REAL / "aider").glob("*.md")),
}


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def rounds(contenders: dict[str, Callable[[], Any]], k: int) -> dict[str, list[float]]:
    """Seconds per contender, ``k`` interleaved rounds (order flips each round)."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(k):
        for name in (names if r % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - start)
    return times


class Fresh:
    """A new empty store per call (opened outside the timed part)."""

    def __init__(self, root: Path, durability: str = "full") -> None:
        self.root, self.durability, self.n = root, durability, 0
        self.store: trajlog.Store | None = None

    def prepare(self) -> trajlog.Store:
        if self.store is not None:
            self.store.close()
        self.n += 1
        self.store = trajlog.open(str(self.root / f"s{self.n}.db"), self.durability)
        return self.store


class _Header:
    def __init__(self, session_id: str) -> None:
        self.id = session_id


class NullStore:
    """A store that takes every mapped event and writes nothing: an import
    into it costs what the importer itself costs (reading, mapping, the
    items handed to the bulk loader)."""

    def __init__(self) -> None:
        self.lost: list[Loaded] = []

    def session(self, session_id: str) -> Any:
        raise SessionNotFoundError(session_id)

    def bulk_loader(self) -> NullStore:
        return self

    def load(self, spec: Any, items: Any, check: Any = None) -> Loaded:
        n = sum(1 for _ in items)
        return Loaded(_Header(spec.session_id), True, n, 0)  # type: ignore[arg-type]

    def close(self) -> None:
        pass


def orjson_lines(files: list[Path]) -> Callable[[], int]:
    """The baseline: ``orjson.loads`` of every line of a JSONL file, of the
    whole document of a JSON file; for aider's Markdown (no JSON to parse),
    splitting the file into lines and decoding them as UTF-8."""
    blobs = [(f.suffix, f.read_bytes()) for f in files]

    def run() -> int:
        n = 0
        for suffix, blob in blobs:
            if suffix == ".jsonl":
                for line in blob.splitlines():
                    if line.strip():
                        orjson.loads(line)
                        n += 1
            elif suffix == ".md":
                n += len(blob.decode("utf-8").splitlines())
            else:
                orjson.loads(blob)
                n += 1
        return n
    return run


def importing(fresh: Fresh, files: list[Path], fmt: str) -> tuple[Callable[[], None],
                                                                   Callable[[], None]]:
    """(prepare, run): a fresh store, then import ``files`` into it."""
    state: dict[str, trajlog.Store] = {}

    def prepare() -> None:
        state["store"] = fresh.prepare()

    def run() -> None:
        for f in files:
            state["store"].import_path(f, format=fmt)
    return prepare, run


def timed_with_prepare(pairs: dict[str, tuple[Callable[[], None] | None, Callable[[], Any]]],
                       k: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in pairs}
    names = list(pairs)
    for r in range(k):
        for name in (names if r % 2 == 0 else names[::-1]):
            prepare, run = pairs[name]
            if prepare is not None:
                prepare()
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def real_files(work: Path, k: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fmt, files in SOURCES.items():
        size = sum(f.stat().st_size for f in files)
        fresh = Fresh(work / fmt)
        (work / fmt).mkdir()
        count = fresh.prepare()
        for f in files:
            count.import_path(f, format=fmt)
        events = sum(count.session(h.id).last_seq + 1 - h.seed_length
                     for h in count.sessions(include_subagents=True))
        pairs: dict[str, tuple[Any, Any]] = {"orjson": (None, orjson_lines(files)),
                                             "import": importing(fresh, files, fmt)}
        if fmt == "claude-code":
            source = module("claude_code")
            decode = msgspec.json.Decoder().decode

            def decoding(files: list[Path] = files, decode: Any = decode) -> None:
                for f in files:
                    for line in f.read_bytes().splitlines():
                        if line.strip():
                            decode(line)

            def mapping(files: list[Path] = files, source: Any = source) -> None:
                for f in files:
                    for mapped in source.read(f, Notes()):
                        for _ in mapped.events:
                            pass
            normal = Fresh(work / fmt, "normal")
            def stubbed(files: list[Path] = files, fmt: str = fmt) -> None:
                null = NullStore()
                for f in files:
                    import_path(null, f, format=fmt)  # type: ignore[arg-type]
            pairs["msgspec decode"] = (None, decoding)
            pairs["decode + map"] = (None, mapping)
            pairs["import (store stubbed)"] = (None, stubbed)
            pairs["import (normal)"] = importing(normal, files, fmt)
            # the write path alone: the same sessions, mapped beforehand
            premapped = []
            for f in files:
                for mapped in source.read(f, Notes()):
                    premapped.append((mapped, list(mapped.events)))
            only = Fresh(work / fmt)
            target: dict[str, trajlog.Store] = {}

            def store_prepare(target: dict[str, Any] = target, only: Fresh = only) -> None:
                target["store"] = only.prepare()

            def store_only(premapped: list[Any] = premapped,
                           target: dict[str, Any] = target) -> None:
                sessions = []
                for mapped, mapped_events in premapped:
                    mapped.events = iter(mapped_events)
                    sessions.append(mapped)
                import_sessions(target["store"], sessions, Notes())
            pairs["store only (pre-mapped)"] = (store_prepare, store_only)
        times = timed_with_prepare(pairs, k)
        base = times["orjson"]
        row: dict[str, Any] = {"files": len(files), "bytes": size, "events": events}
        for name, values in times.items():
            ratios = [b / v for b, v in zip(base, values, strict=True)]
            row[name] = {"seconds": stats(values),
                         "MB/s": round(size / statistics.median(values) / 1e6, 1),
                         "events/s": round(events / statistics.median(values)),
                         "x orjson rate": {kk: round(vv, 3) for kk, vv in stats(ratios).items()}}
        if "store only (pre-mapped)" in times:
            # the store's own bound: the rate of an import whose reading and
            # mapping cost nothing (orjson time over the store-only time)
            row["ceiling x orjson rate"] = {kk: round(vv, 3) for kk, vv in stats(
                [b / v for b, v in zip(base, times["store only (pre-mapped)"],
                                       strict=True)]).items()}
        out[fmt] = row
        if fresh.store is not None:
            fresh.store.close()
    return out


def synthetic(work: Path, n: int, k: int) -> dict[str, Any]:
    root = work / "synthetic"
    root.mkdir()
    store = trajlog.open(str(root / "src.db"), "normal")
    s = store.create_session(cwd="/bench")
    evs = workload_events(n)
    for i in range(0, n, 5000):
        s.append_batch(evs[i:i + 5000])
    del evs
    paths = {fmt: root / f"s.{fmt}" for fmt in ("tlog", "jsonl", "jsonl.zst")}
    for p in paths.values():
        store.export(s.id, p)
    lines = paths["jsonl"].read_bytes().splitlines()
    fresh = Fresh(root)
    state: dict[str, trajlog.Store] = {}

    def prep() -> None:
        state["store"] = fresh.prepare()

    pairs: dict[str, tuple[Any, Any]] = {
        "orjson (.jsonl lines)": (None, lambda: [orjson.loads(x) for x in lines]),
        "export .tlog": (None, lambda: store.export(s.id, root / "t.tlog")),
        "export .jsonl": (None, lambda: store.export(s.id, root / "t.jsonl")),
        "export .jsonl.zst": (None, lambda: store.export(s.id, root / "t.jsonl.zst")),
        "import .jsonl.zst": (prep, lambda: state["store"].import_path(paths["jsonl.zst"])),
        "import .tlog": (prep, lambda: state["store"].import_path(paths["tlog"])),
    }
    times = timed_with_prepare(pairs, k)
    base = times["orjson (.jsonl lines)"]
    jsonl_size = paths["jsonl"].stat().st_size
    out: dict[str, Any] = {"events": n, "file bytes": {f: p.stat().st_size
                                                       for f, p in paths.items()}}
    for name, values in times.items():
        ratios = [b / v for b, v in zip(base, values, strict=True)]
        out[name] = {"seconds": stats(values),
                     "events/s": round(n / statistics.median(values)),
                     "MB/s of .jsonl": round(jsonl_size / statistics.median(values) / 1e6, 1),
                     "x orjson rate": {kk: round(vv, 3) for kk, vv in stats(ratios).items()}}
    store.close()
    if fresh.store is not None:
        fresh.store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--skip-real", action="store_true")
    args = parser.parse_args()
    if args.rounds < 5:
        parser.error("--rounds must be at least 5")
    work = Path(tempfile.mkdtemp(prefix="bench-interop-"))
    try:
        result: dict[str, Any] = {
            "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                       f"{platform.python_version()}, SQLite {apsw.sqlite_lib_version()}, "
                       f"kernel {trajlog.backend}", "rounds": args.rounds}
        if not args.skip_real:
            result["real files"] = real_files(work, args.rounds)
        if args.events:
            result["synthetic"] = synthetic(work, args.events, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
