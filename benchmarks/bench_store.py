"""Store throughput against raw apsw and JSONL, measured in one run.

Workload: benchmarks/workload.py, fixed seed; N = 100k
events (--quick: 10k).  Every figure is the median of ROUNDS interleaved
rounds -- in each round the baseline and trajlog run one after the other, on
fresh databases -- with the range of the rounds.

  trajlog                                    baseline (same events, same round)
  -------                                    --------
  batch append, 1000 per transaction         raw apsw, 1000 INSERTs per transaction
  single append, FULL / NORMAL               raw apsw autocommit INSERT, FULL / NORMAL
  8 / 64 threads on 8 / 64 sessions, FULL    trajlog's own single-writer rate (FULL)
  64 asyncio tasks on 64 sessions, FULL      trajlog's own single-writer rate (FULL)
  load-all, verified: eager / lazy decode    raw SELECT + orjson.loads of every row
  tail(50) at N                              raw SELECT of the last 50 rows + orjson
  get(seq) at random: cold / warm cache      raw SELECT of one row + orjson
  bytes per event                            JSONL of the same events (orjson)
  repack: merge per row of single appends    raw apsw autocommit INSERT, NORMAL
  repack: raw bytes rewritten per appended   --
  WAL pages per commit (64 threads)          --
  peak RSS growth of a streaming pass        --

Raw apsw rows are (session, seq, orjson bytes of {seq, type, time, data}) in a
STRICT table with PRIMARY KEY(session, seq), WAL; serialization is inside the
timed loop on both sides.  Single and concurrent appends are fsync-bound, so
they run on a slice of the events, in interleaved blocks of 50.

Ceilings (``ceiling_*``): for the targets that depend on the machine, the
same baseline against the least work trajlog's design must do, timed in the
same round: storing its chunk rows and index rows already built
(``ceiling_batch``: the SQL alone); validating, encoding, framing,
compressing and storing the rows with none of trajlog's bookkeeping
(``ceiling_batch_work``); one BEGIN IMMEDIATE transaction with the head update
per append (single FULL); exactly N raw inserts per FULL commit (threads).
The JSON on the last line has every figure.

    python benchmarks/bench_store.py [--quick] [--rounds K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import apsw
import msgspec
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trajlog
import workload
from trajlog.storage import statements

T0 = 1_767_225_600_000  # fixed event times: 2026-01-01


def fresh(tmp: Path, name: str) -> str:
    path = tmp / name
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()
    return str(path)


def raw_conn(path: str, sync: str) -> apsw.Connection:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute(f"PRAGMA synchronous={sync}").fetchall()
    conn.execute("CREATE TABLE IF NOT EXISTS raw(session INTEGER NOT NULL, seq INTEGER NOT NULL, "
                 "body BLOB NOT NULL, PRIMARY KEY (session, seq)) STRICT")
    return conn


def raw_body(i: int, ev: tuple[str, dict[str, Any]]) -> bytes:
    return orjson.dumps({"seq": i, "type": ev[0], "time": T0 + i, "data": ev[1]})


def items(events: list[Any], lo: int, hi: int) -> list[Any]:
    return [(events[i][0], events[i][1], {"time": T0 + i}) for i in range(lo, hi)]


def db_bytes(path: str) -> int:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    return os.path.getsize(path)


# -- one round ------------------------------------------------------------------

def round_batch(tmp: Path, events: list[Any], out: dict[str, float]) -> tuple[str, str, str]:
    """Batch append both sides; leaves the databases for the read benchmarks."""
    n = len(events)
    raw_path = fresh(tmp, "raw.db")
    conn = raw_conn(raw_path, "FULL")
    t = time.perf_counter()
    for start in range(0, n, 1000):
        with conn:
            conn.executemany("INSERT INTO raw VALUES (1, ?, ?)", [
                (i, raw_body(i, events[i])) for i in range(start, min(start + 1000, n))])
    out["raw_batch"] = n / (time.perf_counter() - t)
    conn.close()
    path = fresh(tmp, "trajlog.db")
    with trajlog.open(path, repack=False) as store:
        s = store.create_session(cwd="/bench")
        t = time.perf_counter()
        for start in range(0, n, 1000):
            s.append_batch(items(events, start, min(start + 1000, n)))
        out["batch"] = n / (time.perf_counter() - t)
        sid = s.id
    out["ratio_batch"] = out["batch"] / out["raw_batch"]
    out["bytes_per_event"] = db_bytes(path) / n
    out["raw_bytes_per_event"] = db_bytes(raw_path) / n
    return raw_path, path, sid


def round_ceiling_batch(tmp: Path, trajlog_path: str, raw_path: str, n: int,
                        out: dict[str, float]) -> None:
    """The least SQL work of the chunked design: inserting the rows trajlog
    made (already built) into an empty copy of the schema, 1000 events' worth
    per transaction, against the raw batch insert."""
    src = apsw.Connection(trajlog_path)
    chunks = src.execute(f"SELECT {statements.CHUNK_COLUMNS}, marks FROM chunks ORDER BY cid"
                         ).fetchall()
    index = src.execute(f"SELECT {statements.INDEX_COLUMNS} FROM event_index ORDER BY rid"
                        ).fetchall()
    src.close()
    path = fresh(tmp, "ceiling.db")
    with trajlog.open(path):
        pass
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("PRAGMA synchronous=FULL").fetchall()
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    per = max(1, len(chunks) * 1000 // max(n, 1))
    t = time.perf_counter()
    for k in range(0, len(chunks), per):
        part = chunks[k:k + per]
        lo, hi = part[0][0], part[-1][0] + part[-1][1]
        with conn:
            conn.executemany(statements.CHUNK_INSERT, part)
            conn.executemany(statements.INDEX_INSERT, [r for r in index if lo <= r[0] < hi])
    out["ceiling_batch"] = (n / (time.perf_counter() - t)) / out["raw_batch"]
    conn.close()


def round_ceiling_batch_work(tmp: Path, events: list[Any], out: dict[str, float]) -> None:
    """The least CPU and SQL work of a durable chunked batch append, with none
    of trajlog's bookkeeping: validate each event's data (the JSON rules),
    encode it (MessagePack), frame and cut and compress the batch (one kernel
    call, zstd), insert the rows in one FULL transaction -- against the raw batch."""
    from trajlog.codec import session_key, start_cursor
    from trajlog.codec.chunks import ChunkCompressor
    from trajlog.codec.records import encode_chunks
    from trajlog.events import check_json

    enc = msgspec.msgpack.Encoder()
    compressor = ChunkCompressor()
    key = session_key(bytes(range(16)))
    path = fresh(tmp, "ceiling_work.db")
    with trajlog.open(path):
        pass
    conn = apsw.Connection(path)
    conn.execute("PRAGMA synchronous=FULL").fetchall()
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    cursor = start_cursor(key)
    n = len(events)
    t = time.perf_counter()
    for start in range(0, n, 1000):
        batch = events[start:start + 1000]
        for _, data in batch:
            check_json(data)
        payloads = [enc.encode((kind, T0 + start + i, data))
                    for i, (kind, data) in enumerate(batch)]
        chunks, cursor = encode_chunks(key, payloads, cursor, compressor)
        with conn:
            conn.executemany(statements.CHUNK_INSERT, statements.chunk_rows(
                1, chunks, [None] * len(chunks)))
    out["ceiling_batch_work"] = (n / (time.perf_counter() - t)) / out["raw_batch"]
    conn.close()


def round_reads(raw_path: str, path: str, sid: str, n: int, out: dict[str, float]) -> None:
    conn = apsw.Connection(raw_path)
    t = time.perf_counter()
    for (body,) in conn.execute("SELECT body FROM raw WHERE session = 1 ORDER BY seq"):
        orjson.loads(body)
    out["raw_load"] = n / (time.perf_counter() - t)
    with trajlog.open(path, repack=False) as store:
        s = store.session(sid)
        store._e.reading.cache.clear()
        t = time.perf_counter()
        count = sum(1 for _ in s.events())
        out["load_eager"] = count / (time.perf_counter() - t)
        assert count == n
        store._e.reading.cache.clear()
        t = time.perf_counter()
        count = sum(1 for _ in s.events(lazy=True))
        out["load_lazy"] = count / (time.perf_counter() - t)
        out["ratio_load_eager"] = out["load_eager"] / out["raw_load"]
        out["ratio_load_lazy"] = out["load_lazy"] / out["raw_load"]
        # tail(50): best of 50 calls each
        raw_t = ours_t = float("inf")
        for _ in range(50):
            t = time.perf_counter()
            [orjson.loads(b) for (b,) in conn.execute(
                "SELECT body FROM raw WHERE session = 1 ORDER BY seq DESC LIMIT 50")][::-1]
            raw_t = min(raw_t, time.perf_counter() - t)
            t = time.perf_counter()
            s.tail(50)
            ours_t = min(ours_t, time.perf_counter() - t)
        out["raw_tail50_us"], out["tail50_us"] = raw_t * 1e6, ours_t * 1e6
        out["ratio_tail50"] = ours_t / raw_t
        # get(seq) at random: median of 200 calls each; cold = cache cleared
        rng = random.Random(5)
        seqs = [rng.randrange(n) for _ in range(200)]
        raw_ts, cold_ts, warm_ts = [], [], []
        cache = store._e.reading.cache
        for q in seqs:
            t = time.perf_counter()
            orjson.loads(conn.execute("SELECT body FROM raw WHERE session = 1 AND seq = ?",
                                      (q,)).fetchall()[0][0])
            raw_ts.append(time.perf_counter() - t)
            cache.clear()
            t = time.perf_counter()
            s.get(q)
            cold_ts.append(time.perf_counter() - t)
            t = time.perf_counter()
            s.get(q)
            warm_ts.append(time.perf_counter() - t)
        raw_get = statistics.median(raw_ts)
        out["raw_get_us"] = raw_get * 1e6
        out["get_cold_us"] = statistics.median(cold_ts) * 1e6
        out["get_warm_us"] = statistics.median(warm_ts) * 1e6
        out["ratio_get_cold"] = statistics.median(cold_ts) / raw_get
        out["ratio_get_warm"] = statistics.median(warm_ts) / raw_get
    conn.close()


def round_single(tmp: Path, events: list[Any], single_n: int, durability: str,
                 out: dict[str, float]) -> None:
    """Interleaved blocks of 50: raw autocommit, trajlog single appends, and
    the ceiling: a BEGIN IMMEDIATE transaction with the head update (the
    least SQL of a durable append with a head row, without the framing)."""
    sync = durability.upper()
    raw = raw_conn(fresh(tmp, f"raw_single_{sync}.db"), sync)
    store = trajlog.open(fresh(tmp, f"single_{sync}.db"), durability=durability)
    s = store.create_session(cwd="/bench")
    head = raw_conn(fresh(tmp, f"head_{sync}.db"), sync)
    head.execute("CREATE TABLE IF NOT EXISTS heads(sid INTEGER PRIMARY KEY, last_seq INTEGER) "
                 "STRICT")
    head.execute("INSERT INTO heads VALUES (1, -1)")
    t_raw = t_ours = t_head = 0.0
    for start in range(0, single_n, 50):
        block = range(start, min(start + 50, single_n))
        t = time.perf_counter()
        for i in block:
            raw.execute("INSERT INTO raw VALUES (1, ?, ?)", (i, raw_body(i, events[i])))
        t_raw += time.perf_counter() - t
        t = time.perf_counter()
        for i in block:
            s.append(events[i][0], events[i][1], time=T0 + i)
        t_ours += time.perf_counter() - t
        t = time.perf_counter()
        for i in block:
            head.execute("BEGIN IMMEDIATE")
            head.execute("INSERT INTO raw VALUES (1, ?, ?)", (i, raw_body(i, events[i])))
            head.execute("UPDATE heads SET last_seq = ? WHERE sid = 1", (i,))
            head.execute("COMMIT")
        t_head += time.perf_counter() - t
    store.close()
    raw.close()
    head.close()
    out[f"raw_single_{durability}"] = single_n / t_raw
    out[f"single_{durability}"] = single_n / t_ours
    out[f"ratio_single_{durability}"] = t_raw / t_ours
    out[f"ceiling_single_{durability}"] = t_raw / t_head


def round_repack(tmp: Path, events: list[Any], n: int, out: dict[str, float]) -> None:
    """The repack of ``n`` single appends.  ``repack_rewritten``: raw bytes
    the background repack rewrites per raw byte appended, for a host that
    pauses after each turn (the worker drained at every ``turn/end``; the rows
    the repack merged away over the rows stored at the end: 1.0 when every
    frame is merged once and none is left).  ``ratio_repack_row``: a raw
    NORMAL autocommit insert (this round's) against ``Store.repack`` of the
    same rows, per row merged away."""
    path = fresh(tmp, "repack_bg.db")
    with trajlog.open(path, durability="normal") as store:
        conn = store._e.backend.write_connection
        auth, conn.authorizer = conn.authorizer, None   # (it refuses DDL)
        try:
            conn.execute("CREATE TEMP TABLE written(raw INTEGER)")
            for op in ("INSERT", "UPDATE"):
                conn.execute(f"CREATE TEMP TRIGGER written_{op.lower()} AFTER {op} ON "
                             "main.chunks BEGIN INSERT INTO written VALUES (NEW.raw_len); END")
        finally:
            conn.authorizer = auth
        s = store.create_session(cwd="/bench")
        for i in range(n):
            s.append(events[i][0], events[i][1], time=T0 + i)
            if events[i][0] == "turn/end":
                store._e.repacker.drain()
        store._e.repacker.drain()
        written = conn.execute("SELECT total(raw) FROM temp.written").fetchall()[0][0]
        final = conn.execute("SELECT total(raw_len) FROM chunks").fetchall()[0][0]
    out["repack_rewritten"] = (written - final) / final
    path = fresh(tmp, "repack_now.db")
    with trajlog.open(path, durability="normal", repack=False) as store:
        s = store.create_session(cwd="/bench")
        for i in range(n):
            s.append(events[i][0], events[i][1], time=T0 + i)
        t = time.perf_counter()
        gone = store.repack(s.id)
        per_row = (time.perf_counter() - t) / max(gone, 1)
    out["repack_us_per_row"] = per_row * 1e6
    out["ratio_repack_row"] = (1 / out["raw_single_normal"]) / per_row


def _wal_pages(conn: apsw.Connection, pages: list[int]) -> None:
    """Record the WAL frames each commit of ``conn`` adds (and checkpoint now
    and then: the hook replaces SQLite's autocheckpoint)."""
    last = [0]

    def hook(c: apsw.Connection, name: str, npages: int) -> int:
        if npages >= last[0]:
            pages.append(npages - last[0])
        last[0] = npages
        if npages > 4000:
            c.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        return apsw.SQLITE_OK

    conn.set_wal_hook(hook)


def round_threads(tmp: Path, events: list[Any], writers: int, per: int,
                  out: dict[str, float]) -> None:
    store = trajlog.open(fresh(tmp, f"threads{writers}.db"))
    sessions = [store.create_session(cwd=f"/bench/{k}") for k in range(writers)]
    pages: list[int] = []
    if writers == 64:
        _wal_pages(store._e.backend.write_connection, pages)
    barrier = threading.Barrier(writers + 1)

    def worker(k: int) -> None:
        s = sessions[k]
        barrier.wait()
        for i in range(per):
            s.append(events[i][0], events[i][1], time=T0 + i)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(writers)]
    for th in threads:
        th.start()
    barrier.wait()
    t = time.perf_counter()
    for th in threads:
        th.join()
    out[f"threads{writers}"] = writers * per / (time.perf_counter() - t)
    out[f"ratio_threads{writers}"] = out[f"threads{writers}"] / out["single_full"]
    if pages:
        out["wal_pages_per_commit"] = statistics.median(pages)
        out["commits_64"] = len(pages)
        out["events_per_commit_64"] = writers * per / max(1, len(pages))
    store.close()


def round_asyncio(tmp: Path, events: list[Any], tasks: int, per: int,
                  out: dict[str, float]) -> None:
    async def main() -> float:
        store = await trajlog.aio.open(fresh(tmp, f"aio{tasks}.db"))
        sessions = [await store.create_session(cwd=f"/bench/{k}") for k in range(tasks)]

        async def task(k: int) -> None:
            s = sessions[k]
            for i in range(per):
                await s.append(events[i][0], events[i][1], time=T0 + i)

        t = time.perf_counter()
        await asyncio.gather(*(task(k) for k in range(tasks)))
        dt = time.perf_counter() - t
        await store.close()
        return dt

    out[f"asyncio{tasks}"] = tasks * per / asyncio.run(main())
    out[f"ratio_asyncio{tasks}"] = out[f"asyncio{tasks}"] / out["single_full"]


def round_ceiling_threads(tmp: Path, events: list[Any], per_commit: int, n: int,
                          out: dict[str, float]) -> None:
    """Exactly ``per_commit`` raw inserts per FULL commit against one: what
    group commit could reach with no Python at all."""
    one = raw_conn(fresh(tmp, "ceil_one.db"), "FULL")
    many = raw_conn(fresh(tmp, "ceil_many.db"), "FULL")
    t = time.perf_counter()
    for i in range(n):
        with one:
            one.execute("INSERT INTO raw VALUES (1, ?, ?)", (i, raw_body(i, events[i])))
    t_one = time.perf_counter() - t
    t = time.perf_counter()
    for g in range(0, 4 * n, per_commit):   # 4n rows, per_commit of them per commit
        with many:
            many.executemany("INSERT INTO raw VALUES (?, ?, ?)",
                             [(k, g, raw_body(g, events[(g + k) % len(events)]))
                              for k in range(per_commit)])
    t_many = time.perf_counter() - t
    out[f"ceiling_threads_{per_commit}"] = (n * 4 / t_many) / (n / t_one)
    one.close()
    many.close()


def jsonl_bytes(tmp: Path, events: list[Any]) -> float:
    path = tmp / "events.jsonl"
    with path.open("wb") as f:
        for i, ev in enumerate(events):
            f.write(raw_body(i, ev) + b"\n")
    return path.stat().st_size / len(events)


RSS_CHILD = """
import resource, sys, trajlog
store = trajlog.open(sys.argv[1])
s = store.session(sys.argv[2])
next(iter(s.events()))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
n = sum(1 for _ in s.events())
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) / 1024, n)
"""


def streaming_rss(path: str, session_id: str) -> float:
    res = subprocess.run([sys.executable, "-c", RSS_CHILD, path, session_id], check=True,
                         capture_output=True, text=True)
    return float(res.stdout.split()[0])


# -- the run -------------------------------------------------------------------------

def median_range(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


TARGETS = {   # figure: (comparison, target) -- the speed targets of the store (docs/performance.md)
    "ratio_single_normal": (">=", 0.9), "ratio_single_full": (">=", 0.9),
    "ratio_batch": (">=", 1.2), "ratio_load_eager": (">=", 1.2), "ratio_load_lazy": (">=", 1.2),
    "ratio_tail50": ("<=", 1.2), "ratio_get_cold": ("<=", 4.0), "ratio_bytes": ("<=", 0.40),
    "ratio_get_warm": ("<=", 2.0), "ratio_threads64": (">=", 5.0),
    "ratio_asyncio64": (">=", 5.0), "ratio_threads8": (">=", 1.6),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k events (< 60 s)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = 10_000 if args.quick else 100_000
    single_n = 150 if args.quick else 600
    per64 = 6 if args.quick else 20
    per8 = 25 if args.quick else 100
    events = workload.events(n)
    tmp = Path(tempfile.mkdtemp(prefix="trajlog-bench-"))
    rounds: list[dict[str, float]] = []
    try:
        jsonl = jsonl_bytes(tmp, events)
        for _ in range(args.rounds):
            out: dict[str, float] = {}
            raw_path, path, sid = round_batch(tmp, events, out)
            round_ceiling_batch(tmp, path, raw_path, n, out)
            round_ceiling_batch_work(tmp, events, out)
            round_reads(raw_path, path, sid, n, out)
            out["ratio_bytes"] = out["bytes_per_event"] / jsonl
            round_single(tmp, events, single_n, "full", out)
            round_single(tmp, events, single_n * 2, "normal", out)
            round_repack(tmp, events, single_n * 2, out)
            round_threads(tmp, events, 8, per8, out)
            round_threads(tmp, events, 64, per64, out)
            round_asyncio(tmp, events, 64, per64, out)
            round_ceiling_threads(tmp, events, 8, single_n // 2, out)
            round_ceiling_threads(tmp, events, 64, single_n // 8, out)
            rounds.append(out)
            print(f"round {len(rounds)}: " + ", ".join(
                f"{k} {out[k]:.2f}" for k in TARGETS), flush=True)
        rss = streaming_rss(path, sid)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures = {k: median_range([r[k] for r in rounds]) for k in rounds[0]}
    figures["rss_growth_mb"] = {"median": rss, "min": rss, "max": rss}
    figures["jsonl_bytes_per_event"] = {"median": jsonl, "min": jsonl, "max": jsonl}
    print(f"\n== {n:,} events, {args.rounds} interleaved rounds "
          f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, SQLite {apsw.sqlite_lib_version()}) ==")
    for k, v in figures.items():
        mark = ""
        if k in TARGETS:
            op, goal = TARGETS[k]
            met = v["median"] >= goal if op == ">=" else v["median"] <= goal
            mark = f"   target {op} {goal}: {'met' if met else 'MISSED'}"
        print(f"  {k:<28} {v['median']:>12,.2f}  [{v['min']:,.2f} - {v['max']:,.2f}]{mark}")
    print(json.dumps({"bench": "store", "quick": args.quick, "events": n,
                      "rounds": args.rounds, "figures": figures,
                      "targets": {k: list(v) for k, v in TARGETS.items()},
                      "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                  "sqlite": apsw.sqlite_lib_version()},
                      "rusage_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


if __name__ == "__main__":
    main()
