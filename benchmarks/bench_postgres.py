"""trajlog on PostgreSQL against its floor and its peers on the same server.

The server: a throwaway cluster of ``tests/kits/pgcluster.py`` (initdb +
pg_ctl in a tempdir, loopback, ``fsync=on``), or ``--url`` / ``TRAJLOG_PG_URL``
(a superuser URL: a database of its own is made there and dropped).  trajlog
runs as the kit's app role (row-level security on, tenant ``bench``), a
fresh schema each round.  Every side commits with ``synchronous_commit=on``
(trajlog ``durability="full"``; the peers' connections set it).

1. Store rows, trajlog on PostgreSQL against (all timed in the same round,
   the order rotating every round):

   * ``floor_sql``: the backend's own statements (``storage/postgres_rows.py``)
     through one psycopg connection, with the backend's unit of work (BEGIN +
     tenant settings, the statements, COMMIT) and none of trajlog's engine
     above them: the rows trajlog wrote in the same round, re-keyed to a
     fresh session of the same schema (triggers and RLS run);
   * ``floor_plain``: the same chunk (and index) rows into plain tables with
     the same keys -- no triggers, no RLS, no head row -- autocommit INSERTs
     (a batch: one transaction);
   * trajlog on SQLite (``durability="full"``), for context.

   append single (one durable commit each), append batch (100 events per
   ``append_batch``), load (``Store.load`` of a 10k-event session: verified;
   ``--quick``: 2k), ``tail(50)`` and ``fork`` (at a turn end).
2. LangGraph: ``TrajlogSaver`` on a PostgreSQL store against
   langgraph-checkpoint-postgres's ``PostgresSaver`` (psycopg, autocommit, as
   its ``from_conn_string`` makes it): bench_langgraph.py's workload (put,
   put_writes, get_tuple latest / by id, list, list(limit=10), delete_thread)
   on 1,000 checkpoints (``--quick``: 100).
3. Agents SDK: ``TrajlogSession`` on a PostgreSQL store against the SDK's
   ``SQLAlchemySession`` (SQLAlchemy asyncio on asyncpg): bench_agents.py's
   workload (add_items in batches of 20, get_items, get_items(limit=20),
   pop_item, clear_session) on 2,000 items (``--quick``: 200); one event loop
   per round.
4. Concurrency: N processes x M sessions (4 x 8; ``--quick``: 2 x 4), E single
   appends per session.  trajlog: each process one store (one write
   connection), a thread per session (group commit may fold several
   sessions' appends into one transaction).  floor_sql: each process one
   psycopg connection running the backend's single-append unit of work for
   its sessions in turn, one commit per event.  Events/s from the first
   process's start to the last one's end.

Round trips per operation (libpq's protocol trace, counted as
``tests/postgres/test_pg_cost.py`` counts them: a burst of the client's
messages answered by the server's) are printed for every trajlog operation
and every floor, on a store whose pool holds one connection.

Ratios are trajlog time / other time (above 1: trajlog slower), medians of
ROUNDS (>= 5) rounds with their range.  The JSON on the last line has every
figure.

    python benchmarks/bench_postgres.py [--quick] [--rounds K] [--url URL] [--only ROWS]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import psycopg

import trajlog
import workload
from bench_memory import stat, timed
from pgbench import (
    PLAIN_CHUNK,
    PLAIN_INDEX,
    PLAIN_SESSION,
    T0,
    Floor,
    Server,
    backend_of,
    begin_of,
    items,
    open_store,
    plain_append_batches,
    plain_append_single,
    rekey,
    rotate,
    round_trips,
    rows_of,
    sid_of,
    split_batches,
    summary,
    turn_end,
    with_sync,
)
from trajlog.storage import postgres_rows as pr

# -- row 1: the store -------------------------------------------------------------------

def store_round(server: Server, tmp: Path, r: int, events: list[Any], sizes: dict[str, int],
                out: dict[str, dict[str, float]]) -> None:
    """One round of row 1; ``out[op][side]`` gets seconds per operation."""
    single, batches, load_n, forks = (sizes["single"], sizes["batches"], sizes["load"],
                                      sizes["forks"])
    store = server.store(repack=False)
    lite = trajlog.open(str(tmp / f"lite{r}.db"), durability="full", repack=False)
    floor = Floor(server, store)
    plain = server.admin()
    try:
        # the rows trajlog writes, made once per round (untimed), for the floors
        pre = store.create_session(cwd="/pre")
        for i in range(single):
            pre.append(*items(events, i, i + 1)[0][:2], time=T0 + i)
        s_rows, _ = rows_of(server, store, sid_of(store, pre.id))
        pre_b = store.create_session(cwd="/pre")
        for k in range(batches):
            pre_b.append_batch(items(events, k * 100, k * 100 + 100))
        b_chunks, b_index = rows_of(server, store, sid_of(store, pre_b.id))
        b_split = split_batches(b_chunks, b_index, 100, batches * 100)
        sides: dict[str, dict[str, Callable[[], Any]]] = {}

        def ours_single(st: trajlog.Store) -> Callable[[], Any]:
            s = st.create_session(cwd="/bench")
            return lambda: [s.append(*items(events, i, i + 1)[0][:2], time=T0 + i)
                            for i in range(single)]

        def ours_batch(st: trajlog.Store) -> Callable[[], Any]:
            s = st.create_session(cwd="/bench")
            return lambda: [s.append_batch(items(events, k * 100, k * 100 + 100))
                            for k in range(batches)]

        def floor_single() -> Callable[[], Any]:
            sid = floor.fresh_sid()
            return lambda: floor.append_single(sid, s_rows)

        def floor_batch() -> Callable[[], Any]:
            sid = floor.fresh_sid()
            return lambda: floor.append_batches(sid, b_split)

        def plain_single() -> Callable[[], Any]:
            sid = server.next_plain_sid()
            return lambda: plain_append_single(plain, sid, s_rows)

        def plain_batch() -> Callable[[], Any]:
            sid = server.next_plain_sid()
            return lambda: plain_append_batches(plain, sid, b_split)

        sides["append_single"] = {"trajlog": ours_single(store), "floor_sql": floor_single(),
                                  "floor_plain": plain_single(), "sqlite": ours_single(lite)}
        sides["append_batch"] = {"trajlog": ours_batch(store), "floor_sql": floor_batch(),
                                 "floor_plain": plain_batch(), "sqlite": ours_batch(lite)}
        counts = {"append_single": single, "append_batch": batches}
        for op, fns in sides.items():
            names = rotate(list(fns), r)
            for name in names:
                out.setdefault(op, {}).setdefault(name, []).append(  # type: ignore[attr-defined]
                    timed(fns[name]) / counts[op])
        # reads: a load_n-event session in each (batches of 1000, one row per event
        # budget as the store cuts them), plus its rows in the plain table
        big = store.create_session(cwd="/load")
        big_lite = lite.create_session(cwd="/load")
        for lo in range(0, load_n, 1000):
            big.append_batch(items(events, lo, min(lo + 1000, load_n)))
            big_lite.append_batch(items(events, lo, min(lo + 1000, load_n)))
        big_sid = sid_of(store, big.id)
        l_chunks, l_index = rows_of(server, store, big_sid)
        psid = server.next_plain_sid()
        with plain.transaction():
            plain.cursor().executemany(PLAIN_CHUNK, rekey(l_chunks, psid))
            plain.cursor().executemany(PLAIN_INDEX, rekey(l_index, psid))
        last = load_n - 1
        cut = turn_end(events[:load_n])

        def ours_load(st: trajlog.Store, sess: Any) -> Callable[[], Any]:
            def run() -> None:
                st._e.reading.cache.clear()
                st.load(sess.id)
            return run

        def ours_tail(st: trajlog.Store, sess: Any) -> Callable[[], Any]:
            def run() -> None:
                for _ in range(20):
                    st._e.reading.cache.clear()
                    assert len(sess.tail(50)) == 50
            return run

        def ours_fork(sess: Any) -> Callable[[], Any]:
            return lambda: [sess.fork(cut) for _ in range(forks)]

        def plain_load() -> None:
            lo, hi = psid << 32, (psid << 32) + 0xFFFFFFFF
            with plain.transaction():
                plain.execute("SELECT cid, n, raw_len, codec, body_check, seed_chain, "
                              "last_chain, body, marks FROM plain.chunks WHERE tenant_id = "
                              "'bench' AND cid BETWEEN %s AND %s ORDER BY cid", (lo, hi)
                              ).fetchall()
                plain.execute("SELECT * FROM plain.event_index WHERE tenant_id = 'bench' AND "
                              "rid BETWEEN %s AND %s ORDER BY rid", (lo, hi)).fetchall()

        def plain_tail() -> None:
            for _ in range(20):
                lo = psid << 32   # (the rows holding the last 50 events, as trajlog reads)
                plain.execute("SELECT cid, n, raw_len, codec, body_check, seed_chain, "
                              "last_chain, body FROM plain.chunks WHERE tenant_id = 'bench' "
                              "AND cid >= (SELECT max(cid) FROM plain.chunks WHERE tenant_id = "
                              "'bench' AND cid BETWEEN %s AND %s) AND cid <= %s ORDER BY cid",
                              (lo, lo + last - 49, lo + last)).fetchall()

        def plain_fork() -> None:
            for _ in range(forks):
                plain.execute(PLAIN_SESSION, (server.next_plain_sid(), "0" * 36, 1, T0, "/f",
                                              psid, cut + 1, 2, b"\x80", 3))

        def floor_load() -> None:
            floor.read(pr.log_range, big_sid, 0, last, -1, -1)

        def floor_tail() -> None:
            for _ in range(20):
                floor.tail(big_sid, last)

        header = backend_of(store).reader().session_by_sid(big_sid)

        def floor_fork() -> None:
            for _ in range(forks):
                floor.fork(header, big_sid, cut)

        reads = {
            "load": {"trajlog": ours_load(store, big), "floor_sql": floor_load,
                     "floor_plain": plain_load, "sqlite": ours_load(lite, big_lite)},
            "tail50": {"trajlog": ours_tail(store, big), "floor_sql": floor_tail,
                       "floor_plain": plain_tail, "sqlite": ours_tail(lite, big_lite)},
            "fork": {"trajlog": ours_fork(big), "floor_sql": floor_fork,
                     "floor_plain": plain_fork, "sqlite": ours_fork(big_lite)}}
        per = {"load": 1, "tail50": 20, "fork": forks}
        for op, fns in reads.items():
            for name in rotate(list(fns), r):
                out.setdefault(op, {}).setdefault(name, []).append(  # type: ignore[attr-defined]
                    timed(fns[name]) / per[op])
    finally:
        floor.close()
        plain.close()
        lite.close()
        store.close()




def store_trips(server: Server, events: list[Any], load_n: int) -> dict[str, int]:
    """Round trips of one trajlog operation and of its floor (a store whose
    pool holds one connection: the one traced)."""
    out: dict[str, int] = {}
    store = server.store(repack=False)
    try:
        backend = backend_of(store)
        backend._pool.resize(1, 1)
        s = store.create_session(cwd="/trips")
        s.append_batch(items(events, 0, 2000))
        conn = backend._pool.getconn()
        backend._pool.putconn(conn)
        wconn = backend._wconn
        with round_trips(wconn, conn) as t:
            s.append("note/x", {"i": 1})
        out["append_single"] = t[0]
        with round_trips(wconn, conn) as t:
            s.append_batch(items(events, 2000, 2100))
        out["append_batch"] = t[0]
        big = store.create_session(cwd="/trips")
        for lo in range(0, load_n, 1000):
            big.append_batch(items(events, lo, min(lo + 1000, load_n)))
        store._e.reading.cache.clear()
        with round_trips(wconn, conn) as t:
            store.load(big.id)
        out["load"] = t[0]
        store._e.reading.cache.clear()
        with round_trips(wconn, conn) as t:
            s.tail(50)
        out["tail50"] = t[0]
        cut = turn_end(events[:2000])
        with round_trips(wconn, conn) as t:
            s.fork(cut)
        out["fork"] = t[0]
        floor = Floor(server, store)
        fsid = floor.fresh_sid()
        pre = store.create_session(cwd="/pre")
        pre.append("note/x", {"i": 1})
        rows, _ = rows_of(server, store, sid_of(store, pre.id))
        with round_trips(floor.conn) as t:
            floor.append_single(fsid, rows)
        out["floor_append_single"] = t[0]
        with round_trips(floor.conn) as t:
            floor.read(pr.log_range, sid_of(store, big.id), 0, load_n - 1, -1, -1)
        out["floor_load"] = t[0]
        with round_trips(floor.conn) as t:
            floor.tail(sid_of(store, big.id), load_n - 1)
        out["floor_tail50"] = t[0]
        header = backend_of(store).reader().session_by_sid(sid_of(store, s.id))
        with round_trips(floor.conn) as t:
            floor.fork(header, sid_of(store, s.id), cut)
        out["floor_fork"] = t[0]
        b_chunks, b_index = rows_of(server, store, sid_of(store, s.id))
        batch = split_batches(b_chunks, b_index, 100, 2100)[:1]   # (seqs from 0)
        with round_trips(floor.conn) as t:
            floor.append_batches(floor.fresh_sid(), batch)
        out["floor_append_batch"] = t[0]
        floor.close()
    finally:
        store.close()
    return out


# -- row 2: LangGraph ---------------------------------------------------------------------

def langgraph_round(server: Server, r: int, cps: list[Any], theirs: Any,
                    out: dict[str, dict[str, list[float]]]) -> None:
    import bench_langgraph as bl
    from trajlog.adapters.langgraph import TrajlogSaver

    store = server.store()
    ours = TrajlogSaver(store)
    try:
        for op, fn in bl.workload(cps).items():
            pair = {"trajlog": ours, "postgressaver": theirs}
            for name in rotate(list(pair), r):
                out.setdefault(op, {}).setdefault(name, []).append(
                    timed(lambda s=pair[name], f=fn: f(s)))
    finally:
        store.close()


def langgraph_trips(server: Server, cps: list[Any], theirs: Any, conn: Any) -> dict[str, int]:
    import bench_langgraph as bl
    from trajlog.adapters.langgraph import TrajlogSaver

    store = server.store()
    out: dict[str, int] = {}
    try:
        backend = backend_of(store)
        backend._pool.resize(1, 1)
        ours = TrajlogSaver(store)
        for saver in (ours, theirs):
            parent = None
            for i, cp in enumerate(cps[:20]):
                saver.put(bl.cfg(parent), cp, {"source": "loop", "step": i, "parents": {}},
                          cp["channel_versions"])
                parent = cp["id"]
        pconn = backend._pool.getconn()
        backend._pool.putconn(pconn)
        cp = cps[20]
        for name, saver, conns in (("trajlog", ours, (backend._wconn, pconn)),
                                   ("postgressaver", theirs, (conn,))):
            with round_trips(*conns) as t:
                saver.put(bl.cfg(cps[19]["id"]), cp, {"source": "loop", "step": 20,
                                                      "parents": {}}, cp["channel_versions"])
            out[f"{name}_put"] = t[0]
            with round_trips(*conns) as t:
                saver.get_tuple(bl.cfg())
            out[f"{name}_get_latest"] = t[0]
            with round_trips(*conns) as t:
                saver.get_tuple(bl.cfg(cps[10]["id"]))
            out[f"{name}_get_by_id"] = t[0]
            with round_trips(*conns) as t:
                list(saver.list(bl.cfg(), limit=10))
            out[f"{name}_list_10"] = t[0]
            with round_trips(*conns) as t:
                saver.delete_thread("bench")
            out[f"{name}_delete_thread_21"] = t[0]
    finally:
        store.close()
    return out


# -- row 3: the Agents SDK ------------------------------------------------------------------

def agents_engine(server: Server) -> Any:
    from sqlalchemy.ext.asyncio import create_async_engine

    url = server.cluster.admin_url.replace("postgresql://", "postgresql+asyncpg://")
    return create_async_engine(url, connect_args={
        "server_settings": {"synchronous_commit": "on"}})


async def agents_round(server: Server, r: int, data: list[Any],
                       out: dict[str, dict[str, list[float]]]) -> None:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

    import bench_agents as ba
    from trajlog.adapters.openai_agents import TrajlogSession

    store = server.store()
    engine = agents_engine(server)
    ours = TrajlogSession(f"bench-{r}", store)
    theirs = SQLAlchemySession(f"bench-{r}", engine=engine, create_tables=True)
    try:
        for s in (ours, theirs):   # opened (schema made) before the clock
            assert await s.get_items() == []
        pair = {"trajlog": ours, "sqlalchemysession": theirs}
        for op, fn in ba.workload(data).items():
            for name in rotate(list(pair), r):
                t0 = time.perf_counter()
                await fn(pair[name])
                out.setdefault(op, {}).setdefault(name, []).append(time.perf_counter() - t0)
    finally:
        ours.close()
        await engine.dispose()
        store.close()


async def agents_trips(server: Server, data: list[Any]) -> dict[str, int]:
    """Round trips of TrajlogSession's calls (the peer's asyncpg has no libpq trace)."""
    from trajlog.adapters.openai_agents import TrajlogSession

    store = server.store()
    out: dict[str, int] = {}
    try:
        backend = backend_of(store)
        backend._pool.resize(1, 1)
        ours = TrajlogSession("trips", store)
        await ours.add_items(data[:40])
        conn = backend._pool.getconn()
        backend._pool.putconn(conn)
        conns = (backend._wconn, conn)
        with round_trips(*conns) as t:
            await ours.add_items(data[40:60])
        out["trajlog_add_items_20"] = t[0]
        with round_trips(*conns) as t:
            await ours.get_items(limit=20)
        out["trajlog_get_items_limit_20"] = t[0]
        with round_trips(*conns) as t:
            await ours.get_items()
        out["trajlog_get_items_60"] = t[0]
        with round_trips(*conns) as t:
            await ours.pop_item()
        out["trajlog_pop_item"] = t[0]
        ours.close()
    finally:
        store.close()
    return out


# -- row 4: N processes x M sessions ----------------------------------------------------------

def _child(mode: str, app_url: str, schema: str, m: int, e: int, rows: list[Any],
           events: list[Any], barrier: Any, result: Any) -> None:
    store = open_store(app_url, schema, repack=False)
    sessions = [store.create_session(cwd="/conc") for _ in range(m)]
    if mode == "trajlog":
        def run(s: Any) -> None:
            for i in range(e):
                s.append(events[i][0], events[i][1], time=T0 + i)
        threads = [threading.Thread(target=run, args=(s,)) for s in sessions]
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t1 = time.perf_counter()
    else:
        backend = backend_of(store)
        sids = [sid_of(store, s.id) for s in sessions]
        begin = begin_of(backend)
        conn = psycopg.connect(with_sync(app_url), autocommit=True)
        keyed = {sid: rekey(rows, sid) for sid in sids}
        barrier.wait()
        t0 = time.perf_counter()
        for i in range(e):
            for sid in sids:
                row = keyed[sid][i]
                conn.execute(begin, prepare=False)
                assert pr.insert_at_head(conn, sid, pr.chunk(row[:8]), row[8]) is not None
                conn.execute("COMMIT", prepare=False)
        t1 = time.perf_counter()
        conn.close()
    store.close()
    result.put((t0, t1, m * e))


def concurrency_round(server: Server, r: int, n: int, m: int, e: int, events: list[Any],
                      rows: list[Any], out: dict[str, list[float]]) -> None:
    ctx = mp.get_context("spawn")
    for mode in rotate(["trajlog", "floor_sql"], r):
        schema = server.cluster.new_schema("c")
        barrier = ctx.Barrier(n)
        result = ctx.Queue()
        procs = [ctx.Process(target=_child, args=(mode, server.cluster.app_url, schema, m, e,
                                                  rows, events[:e], barrier, result))
                 for _ in range(n)]
        for p in procs:
            p.start()
        got = [result.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
            assert p.exitcode == 0, (mode, p.exitcode)
        span = max(g[1] for g in got) - min(g[0] for g in got)
        out.setdefault(mode, []).append(sum(g[2] for g in got) / span)


# -- main ------------------------------------------------------------------------------------



def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--url", default=os.environ.get("TRAJLOG_PG_URL"),
                    help="a superuser URL of an existing server (default: a throwaway cluster)")
    ap.add_argument("--only", default="store,langgraph,agents,concurrency")
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    only = set(args.only.split(","))
    q = args.quick
    sizes = {"single": 50 if q else 200, "batches": 10 if q else 40,
             "load": 2000 if q else 10_000, "forks": 10 if q else 30}
    n_proc, m_sess, e_each = (2, 4, 20) if q else (4, 8, 50)
    events = workload.events(max(sizes["load"], sizes["batches"] * 100, 2100),
                             seed=1)
    server = Server(args.url)
    tmp = Path(tempfile.mkdtemp(prefix="bench-postgres-"))
    result: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python "
                   f"{platform.python_version()}, PostgreSQL {server.version} "
                   f"(fsync={server.settings['fsync']}, wal_sync_method="
                   f"{server.settings['wal_sync_method']}, shared_buffers="
                   f"{server.settings['shared_buffers']}), psycopg {psycopg.__version__}, "
                   "loopback TCP",
        "durability": "synchronous_commit=on on every side (trajlog durability=full); SQLite "
                      "context: trajlog durability=full",
        "rounds": rounds, "kernel": trajlog.backend, "sizes": sizes}
    try:
        if "store" in only:
            times: dict[str, dict[str, Any]] = {}
            for r in range(rounds):
                store_round(server, tmp, r, events, sizes, times)
            for op, sides in times.items():
                result[op] = summary(sides, "trajlog", "ms")
                print(f"{op}: {result[op]}", file=sys.stderr)
            result["round_trips"] = store_trips(server, events, sizes["load"])
            print(f"round_trips: {result['round_trips']}", file=sys.stderr)
        if "langgraph" in only:
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row

            import bench_langgraph as bl

            cps = bl.checkpoints(100 if q else 1000)
            conn = psycopg.connect(with_sync(server.cluster.admin_url), autocommit=True,
                                   prepare_threshold=0, row_factory=dict_row)
            theirs = PostgresSaver(conn)
            theirs.setup()
            lg: dict[str, dict[str, list[float]]] = {}
            for r in range(rounds):
                langgraph_round(server, r, cps, theirs, lg)
            result["langgraph"] = {"checkpoints": len(cps), **{
                op: summary(sides, "trajlog", "ms") for op, sides in lg.items()}}
            result["langgraph"]["round_trips"] = langgraph_trips(server, cps, theirs, conn)
            conn.close()
            print(f"langgraph: {result['langgraph']}", file=sys.stderr)
        if "agents" in only:
            import bench_agents as ba

            data = ba.items(200 if q else 2000)
            ag: dict[str, dict[str, list[float]]] = {}
            for r in range(rounds):
                asyncio.run(agents_round(server, r, data, ag))
            result["agents"] = {"items": len(data), **{
                op: summary(sides, "trajlog", "ms") for op, sides in ag.items()},
                "round_trips": asyncio.run(agents_trips(server, data))}
            print(f"agents: {result['agents']}", file=sys.stderr)
        if "concurrency" in only:
            pre_store = server.store(repack=False)
            pre = pre_store.create_session(cwd="/pre")
            for i in range(e_each):
                pre.append(events[i][0], events[i][1], time=T0 + i)
            rows, _ = rows_of(server, pre_store, sid_of(pre_store, pre.id))
            pre_store.close()
            conc: dict[str, list[float]] = {}
            for r in range(rounds):
                concurrency_round(server, r, n_proc, m_sess, e_each, events, rows, conc)
            result["concurrency"] = {
                "processes": n_proc, "sessions_per_process": m_sess, "events_per_session":
                e_each, **{f"{k}_events_per_s": stat(v) for k, v in conc.items()},
                "ratio_trajlog_over_floor_sql": stat([a / b for a, b in zip(
                    conc["trajlog"], conc["floor_sql"], strict=True)])}
            print(f"concurrency: {result['concurrency']}", file=sys.stderr)
    finally:
        server.cluster.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
