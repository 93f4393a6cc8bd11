"""Shared parts of bench_postgres.py: the server (tests/kits/pgcluster.py's
cluster), trajlog stores on it, the floors (the backend's own statements
through psycopg alone, and plain tables), round trips counted from libpq's
protocol trace, and the figures' summaries."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import psycopg
from psycopg import pq

import trajlog
from bench_memory import stat
from kits import pgcluster
from trajlog.storage import postgres_rows as pr

TENANT = "bench"
T0 = 1_767_225_600_000
SYNC_ON = "options=-c%20synchronous_commit%3Don"


def with_sync(url: str) -> str:
    """``url`` with ``synchronous_commit=on`` for every transaction of its sessions."""
    return url + ("&" if "?" in url else "?") + SYNC_ON


# -- round trips ---------------------------------------------------------------------

@contextlib.contextmanager
def round_trips(*conns: Any) -> Iterator[list[int]]:
    """Count the round trips ``conns`` make in the block (appended to the list)."""
    out: list[int] = []
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(tempfile.TemporaryFile()) for _ in conns]
        for conn, f in zip(conns, files, strict=True):
            conn.pgconn.trace(f.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield out
        finally:
            total = 0
            for conn, f in zip(conns, files, strict=True):
                conn.pgconn.untrace()
                f.seek(0)
                sides = [line.split("\t")[0] for line in f.read().decode(errors="replace")
                         .splitlines() if line[:2] in ("F\t", "B\t")]
                total += sum(1 for i, side in enumerate(sides)
                             if side == "F" and (i == 0 or sides[i - 1] == "B"))
            out.append(total)


# -- the server, the stores, the floors ------------------------------------------------

PLAIN_DDL = """
CREATE SCHEMA IF NOT EXISTS plain;
CREATE TABLE IF NOT EXISTS plain.sessions(tenant_id text NOT NULL, sid bigint NOT NULL,
    id text NOT NULL, session_key bigint NOT NULL, created_ms bigint NOT NULL, cwd text NOT NULL,
    parent_sid bigint, seed_length bigint NOT NULL, seed_chain bigint NOT NULL,
    metadata bytea NOT NULL, header_check bigint NOT NULL, PRIMARY KEY (tenant_id, sid));
CREATE TABLE IF NOT EXISTS plain.chunks(tenant_id text NOT NULL, cid bigint NOT NULL,
    n bigint NOT NULL, raw_len bigint NOT NULL, codec smallint NOT NULL,
    body_check bigint NOT NULL, seed_chain bigint NOT NULL, last_chain bigint NOT NULL,
    body bytea NOT NULL, marks bytea, PRIMARY KEY (tenant_id, cid));
CREATE TABLE IF NOT EXISTS plain.event_index(tenant_id text NOT NULL, rid bigint NOT NULL,
    type text NOT NULL, time_ms bigint NOT NULL, source text, causal_parent bigint,
    workspace_revision text, data_class text, idempotency_key text,
    PRIMARY KEY (tenant_id, rid));
"""
PLAIN_CHUNK = ("INSERT INTO plain.chunks VALUES ('bench', %s,%s,%s,%s,%s,%s,%s,%s,%s)")
PLAIN_INDEX = ("INSERT INTO plain.event_index VALUES ('bench', %s,%s,%s,%s,%s,%s,%s,%s)")
PLAIN_SESSION = ("INSERT INTO plain.sessions VALUES ('bench', %s,%s,%s,%s,%s,%s,%s,%s,%s,%s)")


def open_store(url: str, schema: str, **options: Any) -> trajlog.Store:
    """``trajlog.open`` on a PostgresBackend (app role, tenant ``bench``, durability full)."""
    from trajlog.storage.postgres import PostgresBackend

    backend = PostgresBackend(url, schema=schema, tenant=TENANT, durability="full")
    if not hasattr(backend, "lease_alive"):
        # (a backend from before the seam's lease_alive: the host+pid rule)
        backend.lease_alive = lambda lease: None  # type: ignore[attr-defined]
    return trajlog.open(backend=backend, **options)


class Server:
    """The cluster and the connections every row uses."""

    def __init__(self, url: str | None) -> None:
        if url:
            os.environ["TRAJLOG_PG_URL"] = url
        self.cluster = pgcluster.start()
        with self.cluster.connect() as conn:
            self.version = str(conn.execute("SHOW server_version").fetchone()[0])
            self.settings = {k: str(conn.execute(f"SHOW {k}").fetchone()[0]) for k in (
                "fsync", "synchronous_commit", "wal_sync_method", "shared_buffers")}
            conn.execute(PLAIN_DDL)
        self.plain_sid = 0

    def store(self, **options: Any) -> trajlog.Store:
        """A trajlog store on a fresh schema, as the app role, tenant ``bench``."""
        return open_store(self.cluster.app_url, self.cluster.new_schema("b"), **options)

    def app(self) -> psycopg.Connection[Any]:
        return psycopg.connect(with_sync(self.cluster.app_url), autocommit=True)

    def admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(with_sync(self.cluster.admin_url), autocommit=True)

    def next_plain_sid(self) -> int:
        self.plain_sid += 1
        return self.plain_sid


def backend_of(store: trajlog.Store) -> Any:
    return store._e.backend


def begin_of(backend: Any) -> str:
    """The backend's BEGIN with its tenant settings (one simple query)."""
    return str(getattr(backend, "_begin", None) or backend._begin_write)


def sid_of(store: trajlog.Store, session_id: str) -> int:
    row = backend_of(store).reader().session_by_id(session_id)
    assert row is not None
    return int(row.sid)


def rows_of(server: Server, store: trajlog.Store, sid: int) -> tuple[list[Any], list[Any]]:
    """The chunk rows (with marks) and index rows of a session, as stored."""
    schema = backend_of(store).schema
    lo, hi = sid << 32, (sid << 32) + 0xFFFFFFFF
    with server.admin() as conn:
        chunks = conn.execute(f'SELECT {pr.CHUNK_COLUMNS}, marks FROM "{schema}".chunks WHERE '
                              "cid BETWEEN %s AND %s ORDER BY cid", (lo, hi)).fetchall()
        index = conn.execute(f'SELECT {pr.INDEX_COLUMNS} FROM "{schema}".event_index WHERE '
                             "rid BETWEEN %s AND %s ORDER BY rid", (lo, hi)).fetchall()
    return chunks, index


def rekey(rows: list[Any], sid: int) -> list[tuple[Any, ...]]:
    return [((sid << 32) + (r[0] & 0xFFFFFFFF), *r[1:]) for r in rows]


class Floor:
    """The backend's statements through one psycopg connection (as the app
    role, on the store's schema), in the backend's units of work."""

    def __init__(self, server: Server, store: trajlog.Store) -> None:
        backend = backend_of(store)
        self.store = store
        self.begin_write = begin_of(backend)
        self.settings = backend._settings
        self.conn = server.app()

    def fresh_sid(self) -> int:
        return sid_of(self.store, self.store.create_session(cwd="/floor").id)

    @contextlib.contextmanager
    def write(self) -> Iterator[psycopg.Connection[Any]]:
        self.conn.execute(self.begin_write, prepare=False)
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK", prepare=False)
            raise
        self.conn.execute("COMMIT", prepare=False)

    def read(self, fn: Callable[..., Any], *args: Any) -> Any:
        conn = self.conn
        with conn.pipeline():
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", prepare=False)
            conn.execute(self.settings)
            out = fn(conn, *args)
            conn.execute("COMMIT", prepare=False)
        return out

    def append_single(self, sid: int, rows: list[Any]) -> None:
        for r in rekey(rows, sid):
            with self.write() as conn:
                assert pr.insert_at_head(conn, sid, pr.chunk(r[:8]), r[8]) is not None

    def append_batches(self, sid: int, batches: list[tuple[list[Any], list[Any]]]) -> None:
        from trajlog.storage.event_index import IndexRow
        for chunks, index in batches:
            with self.write() as conn:
                pr.head(conn, sid, True)
                pr.insert(conn, sid, [pr.chunk(r[:8]) for r in rekey(chunks, sid)],
                          [IndexRow(r[0] & 0xFFFFFFFF, *r[1:]) for r in index],
                          [r[8] for r in chunks], ())

    def tail(self, sid: int, last: int) -> None:
        self.read(pr.chunks, sid, last - 49, last, -1, -1)

    def fork(self, header: Any, parent: int, cut: int) -> None:
        row = header._replace(id=str(uuid.uuid4()), parent_sid=parent, seed_length=cut + 1)
        with self.write() as conn:
            pr.insert_session(conn, row, cut, row.seed_chain)

    def close(self) -> None:
        self.conn.close()


def plain_append_single(conn: psycopg.Connection[Any], sid: int, rows: list[Any]) -> None:
    for r in rekey(rows, sid):
        conn.execute(PLAIN_CHUNK, r)


def plain_append_batches(conn: psycopg.Connection[Any], sid: int,
                         batches: list[tuple[list[Any], list[Any]]]) -> None:
    for chunks, index in batches:
        with conn.transaction():
            cur = conn.cursor()
            cur.executemany(PLAIN_CHUNK, rekey(chunks, sid))
            if index:
                cur.executemany(PLAIN_INDEX, rekey(index, sid))


# -- row 1: the store -------------------------------------------------------------------

def items(events: list[Any], lo: int, hi: int) -> list[Any]:
    return [(events[i][0], events[i][1], {"time": T0 + i}) for i in range(lo, hi)]


def split_batches(chunks: list[Any], index: list[Any], per: int,
                  n: int) -> list[tuple[list[Any], list[Any]]]:
    """The stored rows cut at every ``per`` events (batches never share a row)."""
    out = []
    for lo in range(0, n, per):
        hi = lo + per
        cs = [c for c in chunks if lo <= (c[0] & 0xFFFFFFFF) < hi]
        out.append((cs, [r for r in index if lo <= (r[0] & 0xFFFFFFFF) < hi]))
    return out


def turn_end(events: list[Any]) -> int:
    return max(i for i, (kind, _) in enumerate(events) if kind == "turn/end")


def rotate(names: list[str], r: int) -> list[str]:
    k = r % len(names)
    return names[k:] + names[:k]


def summary(times: dict[str, list[float]], ours: str, unit: str = "ms") -> dict[str, Any]:
    scale = 1000.0 if unit == "ms" else 1e6
    res: dict[str, Any] = {}
    for name, values in times.items():
        res[f"{name}_{unit}"] = stat([v * scale for v in values])
        if name != ours:
            res[f"ratio_vs_{name}"] = stat([a / b for a, b in zip(times[ours], values,
                                                                   strict=True)])
    return res
