"""Search across sessions: the append rate with indexing on against off, and
the query latency at a million events against a plain FTS5 table over the
same text -- each in the same run.

1. append.  Turns of three events (user message, assistant message, a tool
   result of 8..40 words from a 5,000-word vocabulary, Zipf-like), each
   appended on its own (a durable transaction, FULL), on a fresh store per
   mode: ``off`` (no index), ``turn`` (``store.update_search_index()`` at
   each turn's end: the catch-up a host runs there) and ``background``
   (``store.search_indexer(0.05)``: the optional thread).  The ratio is
   each mode's turns per second over ``off``'s in the same round.
2. query.  A store of --events events (default 1,000,000; --quick 50,000)
   in sessions of 1,000, indexed by one catch-up (its time reported), and a
   plain FTS5 table (``text`` only, rowid = the event) holding the same
   documents, in its own file.  ``store.search(word, limit=10)`` -- the
   catch-up check (one statement: nothing behind), the match with the
   tombstone anti-join, bm25 rank, snippets -- against the same MATCH with
   ``ORDER BY rank LIMIT 10`` and ``snippet()`` on the plain table, and the
   same with a session filter (``sessions=[one]`` vs a plain table
   holding the sid as an UNINDEXED column).  Queries: 200 words, the same
   for both.

Ratios are medians of ROUNDS (>= 5) interleaved rounds (the order flips every
round), with their range; the machine is in the output.

    python benchmarks/bench_search.py [--quick] [--events N] [--turns T] [--rounds K]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import apsw

import trajlog

VOCAB = 5000
QUERIES = 200
PER_SESSION = 1000


def text(rng: random.Random, n: int) -> str:
    return " ".join(f"w{int(VOCAB ** rng.random()) - 1}" for _ in range(n))


def turn(rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    return [("user/message", {"content": text(rng, 8)}),
            ("assistant/message", {"content": text(rng, 16)}),
            ("note", {"text": text(rng, 40)})]


def append_run(tmp: Path, mode: str, turns: int, r: int) -> float:
    """Turns per second of ``mode`` on a fresh store."""
    store = trajlog.open(str(tmp / f"a-{mode}-{r}.db"))
    rng = random.Random(r)
    work = [turn(rng) for _ in range(turns)]
    s = store.create_session(cwd="/repo")
    if mode == "background":
        store.search_indexer(0.05)
    t0 = time.perf_counter()
    for events in work:
        for type_, data in events:
            s.append(type_, data)
        if mode == "turn":
            store.update_search_index()
    dt = time.perf_counter() - t0
    if mode != "off":
        store.search_indexer(None)
        store.update_search_index()
        assert store._e.backend.reader().search_index_rows() == 3 * turns
    store.close()
    return turns / dt


def build(tmp: Path, n: int) -> tuple[trajlog.Store, apsw.Connection, list[str], float]:
    store = trajlog.open(str(tmp / "q.db"))
    plain = apsw.Connection(str(tmp / "plain.db"))
    plain.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL")
    plain.execute("CREATE VIRTUAL TABLE plain USING fts5(text, sid UNINDEXED)")
    rng = random.Random(7)
    ids = []
    done = 0
    while done < n:
        k = min(PER_SESSION, n - done)
        s = store.create_session(cwd=f"/repo{len(ids) % 10}")
        batch = [(t, d) for _ in range(k // 3 + 1) for t, d in turn(rng)][:k]
        s.append_batch(batch)
        with plain:
            plain.executemany("INSERT INTO plain(text, sid) VALUES (?, ?)",
                              [(d.get("content") or d.get("text"), len(ids)) for _, d in batch])
        ids.append(s.id)
        done += k
    t0 = time.perf_counter()
    indexed = store.update_search_index()
    took = time.perf_counter() - t0
    assert indexed == n, (indexed, n)
    return store, plain, ids, took


def timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def query_round(store: trajlog.Store, plain: apsw.Connection, words: list[str], one: str,
                one_sid: int, first: str) -> dict[str, float]:
    def ours() -> None:
        for w in words:
            store.search(w, limit=10)

    def theirs() -> None:
        for w in words:
            plain.execute("SELECT rowid, snippet(plain, 0, '[', ']', '...', 16) FROM plain "
                          "WHERE plain MATCH ? ORDER BY rank LIMIT 10", (f'"{w}"',)).fetchall()

    def ours_one() -> None:
        for w in words:
            store.search(w, limit=10, sessions=[one])

    def theirs_one() -> None:
        for w in words:
            plain.execute("SELECT rowid, snippet(plain, 0, '[', ']', '...', 16) FROM plain "
                          "WHERE plain MATCH ? AND sid = ? ORDER BY rank LIMIT 10",
                          (f'"{w}"', one_sid)).fetchall()

    out = {}
    for name, a_fn, b_fn in (("all", ours, theirs), ("session", ours_one, theirs_one)):
        if first == "ours":
            a, b = timed(a_fn), timed(b_fn)
        else:
            b, a = timed(b_fn), timed(a_fn)
        out[name] = a
        out[name + "_plain"] = b
    return out


def stat(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--events", type=int, default=None)
    ap.add_argument("--turns", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    n = args.events or (50_000 if args.quick else 1_000_000)
    turns = args.turns or (50 if args.quick else 200)
    tmp = Path(tempfile.mkdtemp(prefix="bench-search-"))
    result: dict[str, Any] = {"machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                              f"{platform.python_version()}, SQLite {apsw.sqlite_lib_version()}",
                              "rounds": rounds, "kernel": trajlog.backend, "events": n,
                              "turns": turns}
    modes = ["off", "turn", "background"]
    rates: dict[str, list[float]] = {m: [] for m in modes}
    ratios: dict[str, list[float]] = {"turn": [], "background": []}
    for r in range(rounds):
        order = modes[r % 3:] + modes[:r % 3]
        got = {m: append_run(tmp, m, turns, r) for m in order}
        for m in modes:
            rates[m].append(got[m])
        for m in ratios:
            ratios[m].append(got[m] / got["off"])
    result["append"] = {"turns_per_s": {m: stat(v) for m, v in rates.items()},
                        "ratio_vs_off": {m: stat(v) for m, v in ratios.items()}}
    print(f"append: {result['append']}", file=sys.stderr)
    t0 = time.perf_counter()
    store, plain, ids, index_s = build(tmp, n)
    result["build_s"] = round(time.perf_counter() - t0, 1)
    result["index_catch_up_s"] = round(index_s, 1)
    result["index_events_per_s"] = round(n / index_s)
    print(f"built {n} events in {result['build_s']} s (index {index_s:.1f} s)", file=sys.stderr)
    rng = random.Random(11)
    words = [f"w{int(VOCAB ** rng.random()) - 1}" for _ in range(QUERIES)]
    one = len(ids) // 2
    rows = []
    for r in range(rounds):
        rows.append(query_round(store, plain, words, ids[one], one,
                                "ours" if r % 2 else "plain"))
    for name in ("all", "session"):
        result[f"query_{name}"] = {
            "ratio_vs_plain": stat([x[name] / x[name + "_plain"] for x in rows]),
            "ms_per_query": stat([x[name] * 1000 / QUERIES for x in rows]),
            "plain_ms_per_query": stat([x[name + "_plain"] * 1000 / QUERIES for x in rows])}
    store.close()
    plain.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
