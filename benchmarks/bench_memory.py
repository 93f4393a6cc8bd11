"""Memory: remember, search at 10k and 1M items, erase and revoke with their
cascade -- each against a plain SQLite FTS5 table in the same run.

1. remember.  ``mem.remember()`` one item per call (each its own durable
   transaction: gate, merge check, framed version, index row) against one
   autocommit ``INSERT`` into a plain FTS5 table holding the same text and
   filter columns, same durability (FULL).  ``remember_many`` of 1,000 items
   per transaction against 1,000 INSERTs in one transaction; and its floor
   in today's schema: the very statements it ran (merge look-up, version
   rows with their triggers and indexes, full-text rows), replayed on a fresh
   store by a plain connection in one transaction -- SQLite's share alone.
2. search.  Stores of 10k and 1M items (--quick: 10k and 100k) spread over
   100 tenants x 10 users (user scope) plus tenant-scope items; texts of 8
   words from a 5,000-word vocabulary (Zipf-like), so a query word matches
   from a few to thousands of items.  ``mem.search(word, limit=10)`` for an
   identity (tenant + user) -- scope predicates in the query, before the
   rank; each hit read from its framed, checked version -- against the same
   MATCH with the same scope filter and ``ORDER BY rank LIMIT 10`` on the
   plain table (returning its text).  Queries: 200 words, the same for both.
   Target: trajlog / plain <= 2 at 1M.
3. erase.  ``store.erase()`` of one event of a 2,000-event session
   (tombstone, row rewritten and verified, projection states, free-page
   scrub, WAL checkpoint) and ``mem.revoke()`` of one item of the 10k store,
   against deleting one row of the plain FTS5 table (FTS5 secure-delete on,
   ``secure_delete`` pragma on) and checkpointing.

Ratios are medians of ROUNDS (>= 5) interleaved rounds (trajlog and the
plain table alternate; the order flips every round), with their range.

    python benchmarks/bench_memory.py [--quick] [--rounds K]
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
from trajlog import Identity

TENANTS, USERS = 100, 10
VOCAB = 5000
QUERIES = 200


def words(rng: random.Random) -> list[str]:
    return [f"w{int(VOCAB ** rng.random()) - 1}" for _ in range(8)]


def plain_db(path: str) -> apsw.Connection:
    conn = apsw.Connection(path)
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "secure_delete=ON"):
        conn.execute(f"PRAGMA {pragma}").fetchall()
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS plain USING fts5(text, tenant UNINDEXED, "
                 "scope UNINDEXED, scope_key UNINDEXED, type UNINDEXED)")
    conn.execute("INSERT INTO plain(plain, rank) VALUES ('secure-delete', 1)")
    return conn


PLAIN_SEARCH = ("SELECT rowid, text FROM plain WHERE plain MATCH ? AND (scope = 'global' OR "
                "(tenant = ? AND ((scope = 'tenant' AND scope_key = ?) OR "
                "(scope = 'user' AND scope_key = ?)))) ORDER BY rank LIMIT ?")


def item_specs(n: int, seed: int = 7) -> list[tuple[str, str, str, str]]:
    """(tenant, user, scope, text) of n items."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = f"t{i % TENANTS}"
        u = f"u{(i // TENANTS) % USERS}"
        scope = "tenant" if i % 10 == 0 else "user"
        out.append((t, u, scope, " ".join(words(rng))))
    return out


def build(n: int, tmp: Path) -> tuple[trajlog.Store, apsw.Connection]:
    store = trajlog.open(str(tmp / f"mem{n}.db"), durability="normal")
    plain = plain_db(str(tmp / f"plain{n}.db"))
    plain.execute("PRAGMA synchronous=NORMAL").fetchall()
    specs = item_specs(n)
    by_ident: dict[tuple[str, str], list[dict[str, Any]]] = {}
    approval = {"kind": "human_approval", "by": "human:bench"}
    for t, u, scope, text in specs:
        by_ident.setdefault((t, u), []).append(
            {"scope": scope, "type": "fact", "content": {"text": text},
             "evidence": approval if scope == "tenant" else None})
    for (t, u), batch in by_ident.items():
        view = store.memory(Identity(t, user=u))
        for start in range(0, len(batch), 1000):
            view.remember_many(batch[start:start + 1000])
    with plain:
        plain.executemany("INSERT INTO plain(text, tenant, scope, scope_key, type) "
                          "VALUES (?,?,?,?,'fact')",
                          [(text, t, scope, t if scope == "tenant" else u)
                           for t, u, scope, text in specs])
    return store, plain


def timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def search_round(store: trajlog.Store, plain: apsw.Connection, queries: list[tuple[str, str,
                 str]], first: str) -> tuple[float, float, int, int]:
    views = {(t, u): store.memory(Identity(t, user=u)) for t, u, _ in queries}
    hits = [0, 0]

    def ours() -> None:
        for t, u, w in queries:
            hits[0] += len(views[(t, u)].search(w, limit=10))

    def theirs() -> None:
        for t, u, w in queries:
            hits[1] += len(plain.execute(PLAIN_SEARCH, (f'"{w}"', t, t, u, 10)).fetchall())

    if first == "ours":
        a, b = timed(ours), timed(theirs)
    else:
        b, a = timed(theirs), timed(ours)
    return a, b, hits[0], hits[1]


def sql_of(store: trajlog.Store, act: Any) -> list[tuple[str, Any]]:
    """Every statement ``act`` runs on the store's write connection, with its bindings."""
    conn = store._e.backend.write_connection
    seen: list[tuple[str, Any]] = []

    def trace(_cursor: Any, sql: str, bindings: Any) -> bool:
        seen.append((sql, bindings))
        return True

    conn.exec_trace = trace
    try:
        act()
    finally:
        conn.exec_trace = None
    return seen


def replay(path: str, statements: list[tuple[str, Any]]) -> float:
    """Time of ``statements`` run again, as they were, by a plain connection."""
    conn = apsw.Connection(path)
    conn.execute("PRAGMA synchronous=FULL").fetchall()
    t0 = time.perf_counter()
    for sql, bindings in statements:
        conn.execute(sql, bindings).fetchall()
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def remember_round(tmp: Path, n: int, r: int, first: str) -> dict[str, float]:
    store = trajlog.open(str(tmp / f"rem{r}.db"))
    plain = plain_db(str(tmp / f"rplain{r}.db"))
    view = store.memory(Identity("acme", user="alice"))
    rng = random.Random(r)
    texts = [" ".join(words(rng)) + f" r{r}i{i}" for i in range(n)]
    batch = [" ".join(words(rng)) + f" b{r}i{i}" for i in range(1000)]

    def ours() -> None:
        for text in texts:
            view.remember("user", "fact", {"text": text})

    def theirs() -> None:
        for text in texts:
            plain.execute("INSERT INTO plain(text, tenant, scope, scope_key, type) "
                          "VALUES (?, 'acme', 'user', 'alice', 'fact')", (text,))

    def ours_many() -> None:
        view.remember_many([{"scope": "user", "type": "fact", "content": {"text": x}}
                            for x in batch])

    def theirs_many() -> None:
        with plain:
            for x in batch:
                plain.execute("INSERT INTO plain(text, tenant, scope, scope_key, type) "
                              "VALUES (?, 'acme', 'user', 'alice', 'fact')", (x,))

    # the floor: remember_many's statements on a fresh store, replayed on another
    fresh, twin = str(tmp / f"floor{r}a.db"), str(tmp / f"floor{r}b.db")
    for p in (fresh, twin):
        trajlog.open(p).close()
    with trajlog.open(fresh) as st:
        ran = sql_of(st, lambda: st.memory(Identity("acme", user="alice")).remember_many(
            [{"scope": "user", "type": "fact", "content": {"text": x}} for x in batch]))
    floor = replay(twin, ran)

    pairs = [(ours, theirs), (ours_many, theirs_many)]
    out = []
    for a_fn, b_fn in pairs:
        if first == "ours":
            a, b = timed(a_fn), timed(b_fn)
        else:
            b, a = timed(b_fn), timed(a_fn)
        out.append((a, b))
    store.close()
    plain.close()
    return {"floor_s": floor, "statements": len(ran),
            "single_s": out[0][0], "single_plain_s": out[0][1], "many_s": out[1][0],
            "many_plain_s": out[1][1]}


def erase_round(tmp: Path, r: int, first: str, store10k: trajlog.Store) -> dict[str, float]:
    store = trajlog.open(str(tmp / f"erase{r}.db"))
    s = store.create_session()
    rng = random.Random(r)
    s.append_batch([("user/message", {"content": " ".join(words(rng))}) for _ in range(2000)])
    store.repack(s.id)
    plain = plain_db(str(tmp / f"eplain{r}.db"))
    with plain:
        plain.executemany("INSERT INTO plain(text, tenant, scope, scope_key, type) VALUES "
                          "(?, 't', 'user', 'u', 'fact')",
                          [(" ".join(words(rng)),) for _ in range(10_000)])
    view = store10k.memory(Identity("t3", user="u0"))
    victim = view.list(limit=1000)[r].id

    def ours() -> None:
        store.erase(s.id, 1000 + r, reason="bench")

    def ours_revoke() -> None:
        view.revoke(victim, reason="bench")

    def theirs() -> None:
        plain.execute("DELETE FROM plain WHERE rowid = ?", (5000 + r,))
        plain.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    if first == "ours":
        a, c, b = timed(ours), timed(ours_revoke), timed(theirs)
    else:
        b, a, c = timed(theirs), timed(ours), timed(ours_revoke)
    store.close()
    plain.close()
    return {"erase_s": a, "revoke_s": c, "plain_delete_s": b}


def stat(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    sizes = [10_000, 100_000] if args.quick else [10_000, 1_000_000]
    remember_n = 100 if args.quick else 300
    tmp = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    result: dict[str, Any] = {"machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                              f"{platform.python_version()}, SQLite {apsw.sqlite_lib_version()}",
                              "rounds": rounds, "kernel": trajlog.backend}
    built: dict[int, tuple[trajlog.Store, apsw.Connection]] = {}
    for n in sizes:
        t0 = time.perf_counter()
        built[n] = build(n, tmp)
        result[f"build_{n}_s"] = round(time.perf_counter() - t0, 1)
        print(f"built {n} items in {result[f'build_{n}_s']} s", file=sys.stderr)
    rng = random.Random(11)
    for n in sizes:
        store, plain = built[n]
        queries = [(f"t{rng.randrange(TENANTS)}", f"u{rng.randrange(USERS)}",
                    f"w{int(VOCAB ** rng.random()) - 1}") for _ in range(QUERIES)]
        ratios, ours_q, theirs_q = [], [], []
        hits = (0, 0)
        for r in range(rounds):
            a, b, h0, h1 = search_round(store, plain, queries, "ours" if r % 2 else "plain")
            ratios.append(a / b)
            ours_q.append(QUERIES / a)
            theirs_q.append(QUERIES / b)
            hits = (h0, h1)
        result[f"search_{n}"] = {"ratio_vs_plain": stat(ratios), "queries_per_s": stat(ours_q),
                                 "plain_queries_per_s": stat(theirs_q),
                                 "hits_per_round": hits[0], "plain_hits_per_round": hits[1]}
        print(f"search {n}: {result[f'search_{n}']}", file=sys.stderr)
    rem = [remember_round(tmp, remember_n, r, "ours" if r % 2 else "plain")
           for r in range(rounds)]
    result["remember_single"] = {
        "ratio_vs_plain": stat([x["single_s"] / x["single_plain_s"] for x in rem]),
        "items_per_s": stat([remember_n / x["single_s"] for x in rem]),
        "plain_per_s": stat([remember_n / x["single_plain_s"] for x in rem])}
    result["remember_many_1000"] = {
        "ratio_vs_plain": stat([x["many_s"] / x["many_plain_s"] for x in rem]),
        "items_per_s": stat([1000 / x["many_s"] for x in rem]),
        "plain_per_s": stat([1000 / x["many_plain_s"] for x in rem]),
        "floor_ratio_vs_plain": stat([x["floor_s"] / x["many_plain_s"] for x in rem]),
        "statements": rem[0]["statements"]}
    er = [erase_round(tmp, r, "ours" if r % 2 else "plain", built[sizes[0]][0])
          for r in range(rounds)]
    result["erase"] = {"erase_ms": stat([x["erase_s"] * 1000 for x in er]),
                       "revoke_ms": stat([x["revoke_s"] * 1000 for x in er]),
                       "plain_delete_ms": stat([x["plain_delete_s"] * 1000 for x in er]),
                       "erase_ratio_vs_plain": stat([x["erase_s"] / x["plain_delete_s"]
                                                     for x in er]),
                       "revoke_ratio_vs_plain": stat([x["revoke_s"] / x["plain_delete_s"]
                                                      for x in er])}
    for store, plain in built.values():
        store.close()
        plain.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
