"""The PostgreSQL backend, through psycopg 3: its connections, units of work
and the :class:`PostgresBackend` that puts them behind the storage seam (DDL
and triggers: :mod:`.postgres_schema`; statements: :mod:`.postgres_rows`,
:mod:`.postgres_memory`; reads: :mod:`.postgres_reader`; errors:
:mod:`.postgres_errors`).

Every unit of work -- a write transaction, a read snapshot, a single read --
is a transaction that first sets ``trajlog.tenant`` (``SET LOCAL``, in the
same round trip as ``BEGIN``): row-level security shows and accepts only that
tenant's rows.  Writes: one write connection, held by the transaction, under
an in-process lock (group commit serializes a process's writes); across
processes and hosts the head rows' locks order appends per session
(:meth:`PgWriter.lock_heads`).  Reads: a pool; a read outside a snapshot is a
REPEATABLE READ unit of its own, a snapshot one REPEATABLE READ READ ONLY.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import pq
from psycopg_pool import ConnectionPool

from ..codec.chunks import Chunk
from ..errors import (
    HeadMovedError,
    InvalidArgumentError,
    LeaseHeldError,
    StoreClosedError,
    StoreError,
    TransactionConflictError,
)
from . import postgres_rows as pr
from .base import Head, Lease, Purge, SessionRow, refuse_deleted_id
from .event_index import IndexRow
from .keys import MAX_SESSION_SEQ, no_head
from .postgres_deleted import PgDeletedWrites
from .postgres_memory import PgMemoryWrites
from .postgres_open import (
    SCHEMA_VERSION,
    errors_for,
    migrate,
    open_schema,
    probe,
    redact,
    schema_in,
    with_schema,
)
from .postgres_reader import PgReader
from .postgres_schema import ident
from .postgres_search import PgSearchWrites
from .postgres_search import clear as search_clear

_R = TypeVar("_R")
_IDLE = pq.TransactionStatus.IDLE
_INTRANS = pq.TransactionStatus.INTRANS


class PgWriter(PgSearchWrites, PgDeletedWrites, PgMemoryWrites, PgReader):
    """:class:`~trajlog.storage.base.Writer` over the transaction's connection.
    The heads it locked are kept (and moved with its own appends), so a
    second look at one costs nothing."""

    foreign_commit = False   # (no store-wide signal: heads are locked per session)

    def __init__(self, backend: PostgresBackend) -> None:
        super().__init__(backend)
        self.conn: pr.Conn | None = None
        self._heads: dict[int, Head] = {}
        self._begun = False

    def _run(self, fn: Callable[..., _R], *args: Any) -> _R:
        with self._backend._errors:
            if not self._begun:
                self._begin("")
            return fn(self.conn, *args)

    def _begin(self, then: str) -> Any:
        """BEGIN and the settings (tenant, lock timeout, durability), with
        ``then`` -- a statement without parameters -- in the same round trip;
        ``then``'s rows (as psycopg's cursor)."""
        for attempt in (0, 1):
            conn = self.conn
            assert conn is not None
            try:
                cur = conn.execute(self._backend._begin + then, prepare=False)
                while then and cur.nextset():   # (to the last statement's rows)
                    pass
                return cur
            except psycopg.OperationalError:
                if attempt or not conn.broken:
                    raise
                # the idle connection was lost (a server restart, a terminated
                # backend): nothing was sent in this transaction; connect again
                self.conn = self._backend._write_connection()
            finally:   # (BEGIN ran even when ``then`` failed: the transaction is to end)
                self._begun = not conn.closed and conn.info.transaction_status != _IDLE
        raise AssertionError("unreachable")

    def _lock(self, sids: Sequence[int]) -> dict[int, Head]:
        """Lock head rows; a transaction's first statement goes with its BEGIN."""
        if self._begun:
            return self._run(pr.lock_heads, sids)
        with self._backend._errors:
            return pr.heads_of(self._begin("; " + pr.lock_heads_sql(sids)).fetchall())

    def head(self, sid: int) -> Head:
        found = self._heads.get(sid)
        if found is None:
            self._heads.update(self._lock([sid]))
            found = self._heads.get(sid)
            if found is None:
                raise no_head(sid)
        return found

    def lock_heads(self, sids: Sequence[int]) -> dict[int, Head]:
        want = sorted(set(sids) - self._heads.keys())
        if want:
            self._heads.update(self._lock(want))
        return {sid: self._heads[sid] for sid in sids if sid in self._heads}

    def insert_session(self, row: SessionRow, last_seq: int, chain_head: int) -> int:
        try:
            return self._run(pr.insert_session, row, last_seq, chain_head)
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                # a deleted session keeps its id (read outside this aborted transaction)
                refuse_deleted_id(self._backend.reader(), row.id)
                # another connection made this session id meanwhile (a writer
                # looks before it makes one): run the transaction again
                raise TransactionConflictError(
                    f"{self._backend.path}: session {row.id} was made by another writer "
                    "meanwhile; nothing of this transaction was written") from exc.__cause__
            raise

    def append(self, sid: int, chunks: Sequence[Chunk], index: Sequence[IndexRow],
               marks: Sequence[bytes | None], calls: Sequence[tuple[str, int]] = ()) -> None:
        got = self._heads.get(sid)
        if got is None and len(chunks) == 1 and not index and not calls:
            # (most single appends: the head's lock, its check and the row in one statement)
            moved = self._run(pr.insert_at_head, sid, chunks[0], marks[0])
            if moved is not None:
                self._heads[sid] = moved
                return
        got = self.head(sid)   # (locked: nobody else appends until this transaction ends)
        if chunks[0].first_seq != got.last_seq + 1:
            raise HeadMovedError(f"the append starts at seq {chunks[0].first_seq} but the "
                                 f"session's head is at {got.last_seq}: another writer moved "
                                 "it; nothing was written", sid=sid)
        self._run(pr.insert, sid, chunks, index, marks, calls)
        self._heads[sid] = got._replace(last_seq=chunks[-1].last_seq,
                                        chain=chunks[-1].last_chain)

    def repack(self, sid: int, merged: Chunk, marks: bytes | None) -> int:
        return self._run(pr.repack, sid, merged, marks)

    def set_lease(self, sid: int, lease: Lease) -> None:
        """The lease row, and -- for a writer that takes one -- its liveness
        token: a session-level advisory lock on the write connection, which
        the server drops with the connection (:meth:`PostgresBackend.lease_alive`)."""
        self._run(pr.set_lease, sid, lease)
        if lease.owner is not None and not self._run(self._backend._hold_token, lease.owner):
            raise LeaseHeldError(f"the writer id {lease.owner} is held by another connection")
        got = self._heads.get(sid)
        if got is not None:
            self._heads[sid] = got._replace(lease=Lease(*lease))

    def heartbeat(self, sid: int, owner: str, now_ms: int) -> None:
        """(The server's clock, not ``now_ms``: hosts' clocks differ.)"""
        stamped = self._run(pr.heartbeat, sid, owner)
        got = self._heads.get(sid)
        if got is not None and got.lease.owner == owner and stamped is not None:
            self._heads[sid] = got._replace(lease=got.lease._replace(heartbeat_ms=stamped))

    def save_projection_state(self, sid: int, name: str, version: int, seq: int, chain: int,
                              state: bytes) -> None:
        self._run(pr.save_projection_state, sid, name, version, seq, chain, state)

    def drop_projection_states(self, sid: int) -> int:
        return self._run(pr.drop_projection_states, sid)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        heads = dict(self._heads)   # (a rolled-back savepoint releases the locks it took)
        self._run(_savepoint)
        conn = self.conn
        assert conn is not None
        try:
            yield
        except BaseException:
            if conn.info.transaction_status in (_INTRANS, pq.TransactionStatus.INERROR):
                with self._backend._errors:
                    conn.execute("ROLLBACK TO SAVEPOINT request; RELEASE SAVEPOINT request",
                                 prepare=False)
                self._heads = heads
            raise
        with self._backend._errors:
            conn.execute("RELEASE SAVEPOINT request", prepare=False)

    def in_transaction(self) -> bool:
        return self.conn is not None and (
            not self._begun or self.conn.info.transaction_status == _INTRANS)


class _Transaction:
    """A write transaction on the write connection, under the backend's
    lock: BEGIN with its first statement, COMMIT when the block ends,
    ROLLBACK if it raises."""

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend

    def __enter__(self) -> PgWriter:
        backend = self._backend
        backend._lock.acquire()
        try:
            if backend._closed:
                raise StoreClosedError("the store is closed")
            writer = backend._writer
            writer.conn, writer._heads = backend._write_connection(), {}
            writer._begun = False   # (BEGIN goes with the first statement: PgWriter._begin)
            return writer
        except BaseException:
            backend._lock.release()
            raise

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        backend = self._backend
        writer = backend._writer
        conn, begun = writer.conn, writer._begun
        writer.conn, writer._heads = None, {}
        try:
            assert conn is not None
            with backend._errors:
                if not begun:
                    pass   # (nothing ran: nothing to end)
                elif exc is None:
                    conn.execute("COMMIT", prepare=False)
                elif not conn.closed and conn.info.transaction_status != _IDLE:
                    conn.execute("ROLLBACK", prepare=False)
        finally:
            backend._lock.release()
        if isinstance(exc, psycopg.Error):
            raise backend._errors.convert(exc) from exc


class PostgresBackend:
    """A trajlog store in a PostgreSQL schema, for one tenant.

    ``url`` is a libpq connection string (``postgresql://`` or
    ``postgres://``; several hosts allowed, passed to libpq as is).
    ``durability``: ``full`` commits with ``synchronous_commit=on`` (durable
    on the server, and on synchronous standbys as the server is set up, when
    COMMIT returns); ``normal`` with ``synchronous_commit=off`` (a server
    crash may lose the last commits, never corrupt the log).  Lock waits end
    after ``lock_timeout_ms`` (``StoreBusyError``).  ``tenant`` binds every
    unit of work (row-level security); ``schema`` holds the tables (default:
    the URL's ``options=-csearch_path=<schema>``, else ``trajlog``; given, it
    is written into the URL, so that :attr:`path` opens this store again).

    A missing schema is made at open by the connecting role, which then
    owns it, with the app role ``trajlog_app`` granted its DML when that role
    exists (create it ``NOLOGIN`` and make the app's login roles its
    members); a role that may not create it gets a ``SchemaError`` saying to
    run ``trajlog migrate`` as the owner.

    :meth:`purge` runs VACUUM when this role owns the tables (it frees the
    erased row versions but leaves their bytes in the pages' free space);
    ``vacuum_full`` makes it VACUUM FULL instead (the tables rewritten into
    new files, none of their pages holding the erased bytes -- at the price
    of an exclusive lock on them, every tenant's rows, for the rewrite).
    """

    max_session_seq = MAX_SESSION_SEQ
    foreign_commits = 0   # (never counted: see PgWriter.foreign_commit)

    def __init__(self, url: str, *, durability: str = "full", lock_timeout_ms: int = 10_000,
                 tenant: str = "", schema: str | None = None, pool_size: int = 8,
                 vacuum_full: bool = False) -> None:
        if durability not in ("full", "normal"):
            raise InvalidArgumentError(f"durability must be 'full' or 'normal', not {durability!r}")
        if schema is None:
            schema = schema_in(url)
        else:
            url = with_schema(url, schema)   # (so that ``path`` opens this store again)
        self._url = url
        self.path = redact(url)
        self.durability = durability
        self.tenant = tenant
        self.schema = schema
        self._vacuum_full = vacuum_full
        self._errors = errors_for(url)
        settings = ("SELECT set_config('trajlog.tenant', {t}, true), "
                    "set_config('search_path', {p}, true), "
                    "set_config('synchronous_commit', {c}, true), "
                    "set_config('lock_timeout', {lt}, true)")
        self._settings = settings.format(
            t=_literal(tenant), p=_literal(f"{ident(schema)}, pg_temp"),
            c=_literal("on" if durability == "full" else "off"),
            lt=_literal(f"{int(lock_timeout_ms)}ms"))
        self._begin = "BEGIN; " + self._settings
        self._begin_snapshot = ("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                                + self._settings)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._closed = False
        self._wconn: pr.Conn | None = None
        self._tokens: set[str] = set()   # writer ids whose token the write connection holds
        open_schema(url, schema, self._errors)
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, open=False,
            name="trajlog")
        with self._errors:
            try:
                self._pool.open(wait=True, timeout=30)
            except psycopg.Error:
                raise
            except Exception as exc:   # (the pool's own timeout)
                raise StoreError(f"{self.path}: cannot connect ({self._errors.text(exc)})"
                                 ) from None
        self._reader = PgReader(self)
        self._writer = PgWriter(self)
        self._transaction = _Transaction(self)
        self._held: list[pr.Conn | None] = [None]   # (the write connection: dropped without
        # close(), the backend's connections close quietly, as SQLite's do)
        self._release = weakref.finalize(self, _release, self._pool, self._held)

    def __repr__(self) -> str:
        return f"PostgresBackend({self.path!r}, tenant={self.tenant!r}, schema={self.schema!r})"
    # -- connections and units of work --------------------------------------------

    def _connect(self) -> pr.Conn:
        with self._errors:
            return psycopg.connect(self._url, autocommit=True)

    def _write_connection(self) -> pr.Conn:
        conn = self._wconn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    conn.close()
            conn = self._wconn = self._held[0] = self._connect()
            owners, self._tokens = self._tokens, set()
            for owner in owners:   # (the old connection's tokens died with it: take them again)
                with self._errors:
                    self._hold_token(conn, owner)
        return conn

    def _token(self, owner: str) -> int:
        """A writer's advisory lock key: 64 bits of (schema, tenant, writer id)."""
        digest = hashlib.blake2b(f"{self.schema}\0{self.tenant}\0{owner}".encode(),
                                 digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    def _hold_token(self, conn: pr.Conn, owner: str) -> bool:
        """Hold ``owner``'s liveness token on the write connection (once)."""
        if owner in self._tokens:
            return True
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self._token(owner),)).fetchone()
        if row and row[0]:
            self._tokens.add(owner)
            return True
        return False

    def lease_alive(self, lease: Lease) -> bool | None:
        """True while a connection holds the lease writer's liveness token
        (the server drops it with the connection): live however idle.  Not
        held: None -- the host+pid rule and the heartbeat decide, since a
        live writer whose connection was lost (a server restart, a failover)
        takes its token again only at its next write."""
        if lease.owner is None:
            return None
        key = self._token(lease.owner) & 0xFFFFFFFFFFFFFFFF
        return True if self._read(_token_held, (key >> 32, key & 0xFFFFFFFF)) else None

    def _read(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(conn, *args)`` in this thread's snapshot, or in a read unit
        of its own: BEGIN, the settings and the reads in one round trip."""
        snap = getattr(self._local, "snap", None)
        if snap is not None:
            with self._errors:
                return fn(snap, *args)
        if self._closed:
            raise StoreClosedError("the store is closed")
        with self._errors:
            for attempt in (0, 1):
                with self._pool.connection() as conn:
                    try:
                        return self._read_unit(conn, fn, args)
                    except psycopg.OperationalError:
                        if attempt or not conn.broken:
                            raise
                # a pooled connection was lost (a server restart, a terminated
                # backend): drop the dead ones, read again (reads are idempotent)
                self._pool.check()
        raise AssertionError("unreachable")

    def _read_unit(self, conn: pr.Conn, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        try:
            with conn.pipeline():
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", prepare=False)
                conn.execute(self._settings)
                result = fn(conn, *args)
                conn.execute("COMMIT", prepare=False)
            return result
        finally:
            if not conn.closed and conn.info.transaction_status != _IDLE:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK", prepare=False)

    def reader(self) -> PgReader:
        return self._reader

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[PgReader]:
        if getattr(self._local, "snap", None) is not None:   # an outer snapshot: join it
            yield self._reader
            return
        if self._closed:
            raise StoreClosedError("the store is closed")
        with self._pool.connection() as conn:
            with self._errors:
                conn.execute(self._begin_snapshot, prepare=False)
            self._local.snap = conn
            try:
                yield self._reader
            finally:
                self._local.snap = None
                status = conn.info.transaction_status
                if not conn.closed and status != _IDLE:
                    with self._errors:
                        conn.execute("COMMIT" if status == _INTRANS else "ROLLBACK", prepare=False)

    def transaction(self) -> _Transaction:
        return self._transaction

    # -- maintenance ------------------------------------------------------------------

    def purge(self) -> Purge:
        """VACUUM the tables an erasure rewrites, when this role may (it
        owns them), and name what stays: PostgreSQL keeps the old row
        versions until VACUUM, and copies of the pages elsewhere."""
        done: list[str] = []
        residues: list[str] = []
        tables = ("chunks", "memories", "memory_text", "search_text")
        with self._lock:
            if self._closed:
                raise StoreClosedError("the store is closed")
            conn = self._write_connection()
            with self._errors:
                owned = conn.execute(
                    "SELECT bool_and(pg_has_role(c.relowner, 'USAGE')) FROM pg_class c JOIN "
                    "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND "
                    "c.relname = ANY(%s)", (self.schema, list(tables))).fetchone()
                ran = bool(owned and owned[0])
                full = " FULL" if self._vacuum_full else ""
                for table in tables if ran else ():
                    conn.execute(f"VACUUM{full} {ident(self.schema)}.{ident(table)}")
        if ran:
            done.append(f"VACUUM{full} ran on " + ", ".join(tables) + " and their TOAST" + (
                ": the tables were rewritten into new files, no page of them holds the erased "
                "bytes" if full else ": the erased row versions' space is free for reuse"))
        else:
            residues.append("the erased row versions (dead tuples) and their TOAST chunks stay "
                            "in the table files until a VACUUM by the tables' owner or "
                            "autovacuum")
        residues.append(
            "the old files of the rewritten tables are free space of the file system, not "
            "overwritten" if ran and full else
            "VACUUM frees the space of dead row versions without zeroing it: their bytes stay "
            "in the pages' free space until overwritten (VACUUM FULL by the owner rewrites the "
            "tables without them)")
        residues.append("the server's WAL segments keep the erased bytes until they are "
                        "recycled after checkpoints; the WAL archive, streaming replicas and "
                        "base backups keep them under the operator's retention")
        return Purge(tuple(done), tuple(residues))

    def size(self) -> int:
        """The bytes of the schema's tables, with their indexes and TOAST
        (every tenant's rows: the tables are shared)."""
        with self._errors, self._pool.connection() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN "
                "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND "
                "c.relkind IN ('r', 'p', 'm')", (self.schema,)).fetchone()
        return int(row[0]) if row else 0

    def memory_index(self, present: bool) -> None:
        """Use (``present``: an empty index, a rebuild fills it) or stop using
        the full-text index; its table always exists, so this is DML."""
        with self.transaction() as w:
            w._run(_index_state, present)

    def search_index(self, present: bool) -> None:
        """Drop (not ``present``: the tenant's rows and marks deleted) the
        derived event search index; its tables always exist."""
        if not present:
            with self.transaction() as w:
                w._run(search_clear)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wconn = None
        self._release()   # (the write connection and the pool, once)

    @property
    def closed(self) -> bool:
        return self._closed


def _release(pool: ConnectionPool[Any], held: list[pr.Conn | None]) -> None:   # (close())
    conn, held[0] = held[0], None
    if conn is not None:
        with contextlib.suppress(psycopg.Error):
            conn.close()
    pool.close()


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _savepoint(conn: pr.Conn) -> None:
    conn.execute("SAVEPOINT request", prepare=False)


def _token_held(conn: pr.Conn, high: int, low: int) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
        "database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND "
        "classid::bigint = %s AND objid::bigint = %s AND objsubid = 1)", (high, low)).fetchone()
    return bool(row and row[0])


def _index_state(conn: pr.Conn, present: bool) -> None:
    if not present:
        conn.execute(f"DELETE FROM memory_text WHERE {pr.T}")
    conn.execute("INSERT INTO memory_text_state(present) VALUES (%s) ON CONFLICT (tenant_id) "
                 "DO UPDATE SET present = EXCLUDED.present", (present,))


__all__ = ["SCHEMA_VERSION", "PgReader", "PgWriter", "PostgresBackend", "migrate", "probe",
           "redact"]
