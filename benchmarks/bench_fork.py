"""Fork cost and reading through a fork, against copying the prefix and a flat log.

1. Fork cost.  Parents of 1k, 2k, 100k, 200k and 1M events (--quick: 1k, 2k,
   10k, 100k, 200k) made
   of small agent turns, each in a store of its own, written with
   ``append_batch`` of 1,000 events (so the rows are exactly what the store
   writes: chunk rows, index rows, marks) on a ``durability="normal"`` store,
   repacked, reopened with the default ``"full"`` and verified with
   ``session.verify()``.
   ``fork()`` at the middle of each parent (its cut lies inside a chunk row)
   and at its end (a row boundary); each fork is one durable commit, timed
   with trajlog's chunk cache cleared before it (the row holding the cut is
   read and verified every time).  Baseline, same round: copying the chunk
   rows that hold the middle prefix with one durable ``INSERT ... SELECT``
   into another database file -- what a fork that copied its prefix would
   write at least.  Target: a fork of the largest parent <= 1 ms; its ratio to
   a fork of the 1k-event parent says whether the cost grows with the log.
1b. The cold fork.  The same parents; each fork made by a store just
   reopened (as a host does: nothing of the parent is cached) at one of
   COLD_CUTS turn ends spread over the parent, then the child's first append
   (a turn with a tool call, which the write path checks against the prefix:
   call ids used, calls left open, the turn, the redaction pause).  Timed:
   the fork alone and the fork with that first append, the round's figure the
   median over the cuts.  Targets: the cold fork of the largest parent
   <= 1 ms, and the cold fork at 200k within 3x the one at 2k; the cold fork
   + first append of the largest parent within 3x the smallest's (what a
   prefix read would break).
   A store just reopened pays, at its first write, what any SQLite
   connection pays at its first commit after opening a file (the WAL made
   anew, its header synced; the statements compiled).  So the same round
   also times (a) the first fork of a parent nothing of which is cached, in
   a store that has already written (``first_fork``: a host's first fork of
   a session it has not read), and (b) plain apsw's first durable commit of
   one small INSERT after opening a database file of its own
   (``raw_first_commit``: that per-open floor).
2. Reading a child.  A parent of N workload events (benchmarks/workload.py; 100k,
   --quick 10k) and two forks near its middle, each with 1,000 own events
   (small turns): one cut at a turn end INSIDE a parent chunk row (the read
   stops half-way through that row), one at a turn end that is a row
   boundary.  Each against a flat session holding exactly the same events;
   full verified reads, eager and lazy, chunk cache cleared before each read.
   Target: child / flat <= 1.2.

Every figure is the median of ROUNDS (>= 5) interleaved rounds -- in a round
each size (fork cost) or each child and its flat twin (reads) are measured
one after the other, in an order that alternates between rounds -- with the
range of the rounds.  The parents are built once (a 1M-event log takes
seconds to write); forks and reads do not change them.

    python benchmarks/bench_fork.py [--quick] [--rounds K]
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

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trajlog
import workload
from trajlog.storage import statements

FORKS_PER_ROUND = 21   # forks at each point, per size and round (their median is the round's)
COPIES_PER_ROUND = 3
READ_OWN = 1_000       # a child's own events
READS_PER_ROUND = 3    # reads of each child and of its flat twin, per round
COLD_CUTS = (0.1, 0.3, 0.5, 0.7, 0.9)   # where the cold forks cut, as fractions of a parent


def small_turns(n: int, tag: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Turns of 4 events (start, question, answer, end): ``n`` rounded down to 4."""
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(n // 4):
        out += [("turn/start", {}), ("user/message", {"content": f"question {tag}{i}"}),
                ("assistant/message", {"content": f"answer {tag}{i}", "tool_calls": []}),
                ("turn/end", {"interrupted": False})]
    return out


def fill(session: trajlog.Session, events: list[Any], per: int = 1000) -> None:
    for start in range(0, len(events), per):
        session.append_batch(events[start:start + per])


def rows_of(store: trajlog.Store, s: trajlog.Session) -> list[tuple[int, int, int]]:
    """``(first_seq, n, raw_len)`` of the session's own chunk rows."""
    return store._e.backend.reader().chunk_meta(s._sid, -1, s.last_seq)


def cut_inside_row(store: trajlog.Store, s: trajlog.Session, cut: int) -> bool:
    """Whether seq ``cut`` (a fork's last inherited event) is not the last of its row."""
    row = store._e.backend.reader().chunk_at(s._sid, cut)
    assert row is not None
    return row.last_seq != cut


def verified(s: trajlog.Session) -> float:
    t = time.perf_counter()
    report = s.verify()
    dt = time.perf_counter() - t
    if not report.ok:
        raise SystemExit(f"session {s.id} does not verify: {report.scan.reason}")
    return dt


def median_range(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


# -- 1. fork cost ---------------------------------------------------------------------

class Parent:
    """A parent of ``n`` small-turn events in a store of its own, and the
    baseline's connection (the prefix rows copied into another file).

    Built on a ``durability="normal"`` store (the same rows, written faster),
    then reopened with the default ``"full"``: closing removes the WAL, so
    every parent's forks start from an empty WAL, whatever it took to write
    the parent.  (Measured: a fork's FULL commit costs ~0.2 ms more while
    the WAL file grows than once it has grown, so a store with a fresh, small
    WAL forks slower than one whose WAL grew while its 100k events were
    written -- which would make a small parent look slower to fork.)"""

    def __init__(self, tmp: Path, n: int) -> None:
        self.n = n
        self.path = path = str(tmp / f"parent{n}.db")
        with trajlog.open(path, durability="normal", repack=False) as store:
            s = store.create_session(cwd="/bench")
            t = time.perf_counter()
            fill(s, small_turns(n))
            self.build_s = time.perf_counter() - t
            store.repack(s.id)
            sid = s.id
        self.store = trajlog.open(path, repack=False)
        s = self.session = self.store.session(sid)
        self.verify_s = verified(s)
        self.rows = len(rows_of(self.store, s))
        # the middle: the first turn end from the middle on that lies inside a row
        at = s.last_seq // 2
        while not cut_inside_row(self.store, s, cut := turn_end(self.store, s, at)):
            at = cut + 1
        self.middle, self.end = cut, s.last_seq
        self.inside = {"middle": cut_inside_row(self.store, s, self.middle),
                       "end": cut_inside_row(self.store, s, self.end)}
        self.cold_cuts = [turn_end(self.store, s, int(f * s.last_seq)) for f in COLD_CUTS]
        # a session of its own that warms a reopened store (first_fork)
        warm = self.store.create_session(cwd="/bench/warm")
        fill(warm, small_turns(40))
        self.warm_id = warm.id
        # baseline: a plain connection reading the store, the copy in a file of its own
        self.raw = apsw.Connection(self.store.path)
        self.raw.execute("ATTACH DATABASE ? AS copy", (str(tmp / f"copy{n}.db"),))
        self.raw.execute("PRAGMA copy.journal_mode=WAL").fetchall()
        self.raw.execute("PRAGMA copy.synchronous=FULL").fetchall()
        self.raw.execute(f"CREATE TABLE copy.prefix({statements.CHUNK_COLUMNS}, marks, "
                         "PRIMARY KEY (cid))")
        self.copy_range = (statements.rid(s._sid, 0), statements.rid(s._sid, self.middle))
        self.copy_rows = self.raw.execute(
            "SELECT count(*) FROM chunks WHERE cid BETWEEN ? AND ?", self.copy_range
        ).fetchall()[0][0]

    def fork(self, at: int) -> float:
        """One fork at ``at``, timed, with trajlog's chunk cache cleared before it."""
        self.store._e.reading.cache.clear()
        t = time.perf_counter()
        child = self.session.fork(at)
        dt = time.perf_counter() - t
        assert child.header.seed_length == at + 1
        return dt

    def cold(self, cut: int, tag: str, warm: bool = False) -> tuple[float, float]:
        """``(fork, fork + first append)`` seconds on a store just reopened;
        ``warm``: after the store forked (and appended to) another session."""
        with trajlog.open(self.path, repack=False) as store:
            if warm:
                other = store.session(self.warm_id)
                other.fork(other.last_seq).append_batch(first_turn(f"warm-{tag}"))
            parent = store.session(self.session.id)
            t = time.perf_counter()
            child = parent.fork(cut)
            forked = time.perf_counter() - t
            child.append_batch(first_turn(tag))
            both = time.perf_counter() - t
        assert child.header.seed_length == cut + 1
        return forked, both

    def copies(self, k: int) -> list[float]:
        times = []
        for _ in range(k):
            t = time.perf_counter()
            with self.raw:
                self.raw.execute(f"INSERT INTO copy.prefix SELECT {statements.CHUNK_COLUMNS}, "
                                 "marks FROM main.chunks WHERE cid BETWEEN ? AND ?",
                                 self.copy_range)
            times.append(time.perf_counter() - t)
            with self.raw:
                self.raw.execute("DELETE FROM copy.prefix")
        return times

    def close(self) -> None:
        self.raw.close()
        self.store.close()


def first_turn(tag: str) -> list[tuple[str, dict[str, Any]]]:
    """A child's first append: a turn with one tool call, requested and answered."""
    cid = f"cold-{tag}"
    return [("turn/start", {}), ("user/message", {"content": "and now?"}),
            ("assistant/message", {"content": "", "tool_calls": [{"id": cid, "name": "t"}]}),
            ("tool/call", {"call_id": cid, "name": "t"}),
            ("tool/result", {"call_id": cid, "output": "ok"}), ("turn/end", {})]


def raw_first_commit(path: Path) -> float:
    """Plain apsw: open a database file (WAL, FULL, as a store's), run one
    small INSERT as a durable transaction, close; the commit's seconds."""
    conn = apsw.Connection(str(path))
    try:
        conn.execute("PRAGMA journal_mode=WAL").fetchall()
        conn.execute("PRAGMA synchronous=FULL").fetchall()
        conn.execute("CREATE TABLE IF NOT EXISTS t(a INTEGER PRIMARY KEY, b BLOB)")
        conn.execute("SELECT count(*) FROM t").fetchall()
        t = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE; INSERT INTO t(b) VALUES (zeroblob(200)); COMMIT")
        return time.perf_counter() - t
    finally:
        conn.close()


def cold_round(parents: list[Parent], flip: bool, r: int, out: dict[str, float],
               raw_path: Path) -> None:
    """Each cut of each parent once, cold and first (warm store), interleaved
    cut by cut across the sizes, with plain apsw's first commit between."""
    order = parents[::-1] if flip else parents
    forks: dict[int, list[float]] = {p.n: [] for p in parents}
    both: dict[int, list[float]] = {p.n: [] for p in parents}
    first: dict[int, list[float]] = {p.n: [] for p in parents}
    first_both: dict[int, list[float]] = {p.n: [] for p in parents}
    raw: list[float] = []
    for k in range(len(COLD_CUTS)):
        for p in order:
            for warm in ((True, False) if (k % 2 == 1) != flip else (False, True)):
                f, b = p.cold(p.cold_cuts[k], f"{r}-{k}-{warm}", warm)
                (first if warm else forks)[p.n].append(f)
                (first_both if warm else both)[p.n].append(b)
            raw.append(raw_first_commit(raw_path))
    for p in parents:
        out[f"cold_fork_ms_{p.n}"] = statistics.median(forks[p.n]) * 1000
        out[f"cold_fork_append_ms_{p.n}"] = statistics.median(both[p.n]) * 1000
        out[f"first_fork_ms_{p.n}"] = statistics.median(first[p.n]) * 1000
        out[f"first_fork_append_ms_{p.n}"] = statistics.median(first_both[p.n]) * 1000
    out["raw_first_commit_ms"] = statistics.median(raw) * 1000
    small, big = parents[0].n, parents[-1].n
    # what a cold fork costs beyond the per-open floor (robust to a busy disk)
    out[f"ratio_cold_fork_{big}_over_raw_first_commit"] = (out[f"cold_fork_ms_{big}"]
                                                          / out["raw_first_commit_ms"])
    sizes = {p.n for p in parents}
    if {2_000, 200_000} <= sizes:   # the cost guard's sizes (tests/cost/test_scaling.py)
        for what in ("cold_fork", "cold_fork_append", "first_fork"):
            out[f"ratio_{what}_200000_over_2000"] = (out[f"{what}_ms_200000"]
                                                    / out[f"{what}_ms_2000"])
    out["ratio_cold_fork_largest_over_smallest"] = (out[f"cold_fork_ms_{big}"]
                                                    / out[f"cold_fork_ms_{small}"])
    out["ratio_cold_fork_append_largest_over_smallest"] = (
        out[f"cold_fork_append_ms_{big}"] / out[f"cold_fork_append_ms_{small}"])


def turn_end(store: trajlog.Store, s: trajlog.Session, at: int) -> int:
    """The seq a fork at ``at`` cuts after (the end of its turn)."""
    return int(store._e.lineage.turn_end_of(s._ref, at))


def fork_round(parents: list[Parent], k: int, flip: bool, out: dict[str, float]) -> None:
    """``k`` forks at each point of each parent, interleaved fork by fork (the
    sizes share every stretch of the round), then the copies."""
    order = parents[::-1] if flip else parents
    times: dict[str, list[float]] = {}
    for _ in range(k):
        for p in order:
            for where, at in (("middle", p.middle), ("end", p.end)):
                times.setdefault(f"fork_{where}_ms_{p.n}", []).append(p.fork(at))
    for key, ts in times.items():
        out[key] = statistics.median(ts) * 1000
    for p in order:
        out[f"copy_prefix_ms_{p.n}"] = statistics.median(p.copies(COPIES_PER_ROUND)) * 1000
    small, big = parents[0].n, parents[-1].n
    for where in ("middle", "end"):
        out[f"ratio_fork_{where}_largest_over_smallest"] = (out[f"fork_{where}_ms_{big}"]
                                                            / out[f"fork_{where}_ms_{small}"])
    for p in parents:
        out[f"ratio_copy_over_fork_{p.n}"] = (out[f"copy_prefix_ms_{p.n}"]
                                              / out[f"fork_middle_ms_{p.n}"])


# -- 2. reading a child ------------------------------------------------------------------

class ReadCase:
    """A parent of workload events, a child cut inside a row and one cut at a
    row boundary, and the flat twin of each."""

    def __init__(self, tmp: Path, n: int) -> None:
        events = workload.events(n)
        path = str(tmp / "read.db")
        self.cuts: dict[str, int] = {}
        ids: dict[str, tuple[str, str]] = {}
        with trajlog.open(path, durability="normal", repack=False) as store:
            parent = store.create_session(cwd="/bench/read")
            fill(parent, events)
            store.repack(parent.id)
            rows = rows_of(store, parent)
            row_last = {first + count - 1 for first, count, _ in rows}
            ends = [i for i, (t, _) in enumerate(events) if t == "turn/end"]
            # the first turn end from the middle on that is not the last seq of its
            # row, and the row-boundary turn end nearest the middle (if there is one)
            self.cuts["inside"] = next(i for i in ends if i >= n // 2 and i not in row_last)
            boundary = min((i for i in ends if i in row_last), key=lambda i: abs(i - n // 2),
                           default=None)
            if boundary is not None:
                self.cuts["boundary"] = boundary
            for name, cut in self.cuts.items():
                child = parent.fork(cut)
                assert child.header.seed_length == cut + 1
                own = small_turns(READ_OWN, tag=f"{name}-")
                fill(child, own)
                flat = store.create_session(cwd=f"/bench/flat-{name}")
                fill(flat, events[:cut + 1] + own)
                ids[name] = (child.id, flat.id)
            store.repack()
            parent_id = parent.id
        self.parent_rows = len(rows)
        self.store = store = trajlog.open(path, repack=False)
        parent = store.session(parent_id)
        self.pairs = {name: (store.session(c), store.session(f)) for name, (c, f) in ids.items()}
        self.inside_row = {name: cut_inside_row(store, parent, cut)
                           for name, cut in self.cuts.items()}
        assert self.inside_row["inside"] and not self.inside_row.get("boundary", False)
        self.verify_s: dict[str, float] = {"parent": verified(parent)}
        for name, (child, flat) in self.pairs.items():
            self.verify_s[f"child_{name}"] = verified(child)
            self.verify_s[f"flat_{name}"] = verified(flat)
            # the same events, in the same order (times differ: each append stamps its own)
            same = all(a.seq == b.seq and a.type == b.type and a.data == b.data
                       for a, b in zip(child.events(), flat.events(), strict=True))
            assert same, f"fork {name} and its flat twin differ"
        self.events = {name: child.last_seq + 1 for name, (child, _) in self.pairs.items()}

    def read(self, s: trajlog.Session, lazy: bool, expect: int) -> float:
        self.store._e.reading.cache.clear()
        t = time.perf_counter()
        count = sum(1 for _ in s.events(lazy=lazy))
        dt = time.perf_counter() - t
        assert count == expect
        return dt

    def round(self, flip: bool, out: dict[str, float]) -> None:
        """Each child and its flat twin, READS_PER_ROUND reads each, alternating
        (the round's figure is their median)."""
        for name, (child, flat) in self.pairs.items():
            n = self.events[name]
            for lazy, mode in ((False, ""), (True, "_lazy")):
                t: dict[str, list[float]] = {"child": [], "flat": []}
                for i in range(READS_PER_ROUND):
                    pair = [("child", child), ("flat", flat)]
                    for who, s in (pair[::-1] if (i % 2 == 1) != flip else pair):
                        t[who].append(self.read(s, lazy, n))
                child_s, flat_s = statistics.median(t["child"]), statistics.median(t["flat"])
                out[f"child_read_s_{name}{mode}"] = child_s
                out[f"flat_read_s_{name}{mode}"] = flat_s
                out[f"ratio_read_{name}{mode}"] = child_s / flat_s


# -- the run ---------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="parents up to 100k (< 60 s)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.rounds < 5:
        parser.error("--rounds must be at least 5")
    sizes = ([1_000, 2_000, 10_000, 100_000, 200_000] if args.quick
             else [1_000, 2_000, 100_000, 200_000, 1_000_000])
    read_n = 10_000 if args.quick else 100_000
    big = sizes[-1]
    targets = {f"fork_middle_ms_{big}": ("<=", 1.0), f"fork_end_ms_{big}": ("<=", 1.0),
               "ratio_read_inside": ("<=", 1.2), "ratio_read_inside_lazy": ("<=", 1.2),
               "ratio_read_boundary": ("<=", 1.2), "ratio_read_boundary_lazy": ("<=", 1.2),
               "ratio_cold_fork_append_largest_over_smallest": ("<=", 3.0),
               f"cold_fork_ms_{big}": ("<=", 1.0), f"first_fork_ms_{big}": ("<=", 1.0),
               "ratio_cold_fork_200000_over_2000": ("<=", 3.0)}
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="trajlog-fork-"))
    rounds: list[dict[str, float]] = []
    parents: list[Parent] = []
    case: ReadCase | None = None
    try:
        for n in sizes:
            p = Parent(tmp, n)
            parents.append(p)
            print(f"parent of {n:,} events: built in {p.build_s:.2f} s "
                  f"({n / p.build_s:,.0f} events/s), {p.rows:,} chunk rows, verified in "
                  f"{p.verify_s:.2f} s; cut at the middle inside a row: "
                  f"{p.inside['middle']}, at the end: {p.inside['end']}", flush=True)
        case = ReadCase(tmp, read_n)
        print(f"read case: {read_n:,} workload events in {case.parent_rows:,} rows; cuts "
              + ", ".join(f"{k} at seq {v} (inside a row: {case.inside_row[k]})"
                          for k, v in case.cuts.items()), flush=True)
        for r in range(args.rounds):
            out: dict[str, float] = {}
            fork_round(parents, FORKS_PER_ROUND, r % 2 == 1, out)
            cold_round(parents, r % 2 == 1, r, out, tmp / "raw_first.db")
            case.round(r % 2 == 1, out)
            rounds.append(out)
            print(f"round {r + 1}: " + ", ".join(
                f"{k} {out[k]:.3f}" for k in targets if k in out)
                  + f", ratio_fork_middle_largest_over_smallest "
                    f"{out['ratio_fork_middle_largest_over_smallest']:.2f}", flush=True)
        parent_info = {str(p.n): {"build_s": p.build_s, "build_events_per_s": p.n / p.build_s,
                                  "verify_s": p.verify_s, "chunk_rows": p.rows,
                                  "cut_middle": p.middle, "cut_end": p.end,
                                  "cold_cuts": p.cold_cuts,
                                  "cut_inside_row": p.inside, "copied_rows": p.copy_rows}
                       for p in parents}
        read_info = {"events": case.events, "parent_events": read_n,
                     "parent_rows": case.parent_rows, "cuts": case.cuts,
                     "cut_inside_row": case.inside_row, "verify_s": case.verify_s}
    finally:
        if case is not None:
            case.store.close()
        for p in parents:
            p.close()
        shutil.rmtree(tmp, ignore_errors=True)
    figures = {k: median_range([r[k] for r in rounds]) for k in rounds[0]}
    print(f"\n== fork: parents {', '.join(f'{n:,}' for n in sizes)}; reads of {read_n:,}-event "
          f"parents; {args.rounds} interleaved rounds ({platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"SQLite {apsw.sqlite_lib_version()}) ==")
    print(f"{'parent events':>14}{'fork@middle ms':>24}{'fork@end ms':>24}"
          f"{'copy prefix ms':>26}")

    def cell(key: str) -> str:
        v = figures[key]
        return f"{v['median']:.3f} [{v['min']:.3f}-{v['max']:.3f}]"

    for n in sizes:
        print(f"{n:>14,}{cell(f'fork_middle_ms_{n}'):>24}{cell(f'fork_end_ms_{n}'):>24}"
              f"{cell(f'copy_prefix_ms_{n}'):>26}")
    print(f"{'parent events':>14}{'cold fork ms':>24}{'cold fork + append ms':>26}"
          f"{'first fork ms':>24}{'first fork + append ms':>26}")
    for n in sizes:
        print(f"{n:>14,}{cell(f'cold_fork_ms_{n}'):>24}{cell(f'cold_fork_append_ms_{n}'):>26}"
              f"{cell(f'first_fork_ms_{n}'):>24}{cell(f'first_fork_append_ms_{n}'):>26}")
    print(f"  plain apsw, first durable commit after opening a file: "
          f"{cell('raw_first_commit_ms')} ms")
    for k, v in figures.items():
        if k.startswith(("fork_", "copy_", "cold_", "first_", "raw_")):
            continue
        mark = ""
        if k in targets:
            op, goal = targets[k]
            met = v["median"] >= goal if op == ">=" else v["median"] <= goal
            mark = f"   target {op} {goal}: {'met' if met else 'MISSED'}"
        print(f"  {k:<36} {v['median']:>10.3f}  [{v['min']:.3f} - {v['max']:.3f}]{mark}")
    for k in (f"fork_middle_ms_{big}", f"fork_end_ms_{big}", f"cold_fork_ms_{big}",
              f"first_fork_ms_{big}"):
        v, (op, goal) = figures[k], targets[k]
        print(f"  {k:<36} {v['median']:>10.3f}  [{v['min']:.3f} - {v['max']:.3f}]   "
              f"target {op} {goal}: {'met' if v['median'] <= goal else 'MISSED'}")
    elapsed = time.perf_counter() - t_start
    print(f"  (run took {elapsed:.1f} s)")
    print(json.dumps({"bench": "fork", "quick": args.quick, "rounds": args.rounds,
                      "sizes": sizes, "read_events": read_n, "figures": figures,
                      "targets": {k: list(v) for k, v in targets.items()},
                      "parents": parent_info, "read": read_info, "elapsed_s": elapsed,
                      "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                  "sqlite": apsw.sqlite_lib_version()}}))


if __name__ == "__main__":
    main()
