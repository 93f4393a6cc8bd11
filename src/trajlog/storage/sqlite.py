"""The SQLite backend, through apsw: its connections, transactions and the
:class:`SQLiteBackend` that puts them behind the storage seam.  The DDL and
triggers are in :mod:`.schema`, the migrations in :mod:`.migrate`, opening a
connection in :mod:`.sqlite_connect`, the statements in :mod:`.statements`
(and :mod:`.call_rows`, :mod:`.projection_rows`; :mod:`.memory_rows`,
:mod:`.sqlite_memory` for memory); no module outside ``storage/`` talks SQL.

Every connection is set up the same way and every setting is read back:
WAL, ``synchronous=FULL`` (``NORMAL`` only when asked), a busy timeout,
foreign keys, recursive triggers (so that the implicit delete of ``INSERT OR
REPLACE`` fires the delete guard), defensive mode, untrusted schema, triggers
enabled, and an authorizer that refuses schema changes and dangerous pragmas
outside migrations (reader connections refuse every write instead: read-only
open mode, ``query_only``, no ATTACH -- no Python callback at each compile).

What the triggers stop and what they cannot is written next to the DDL in
:mod:`.schema` and tested in ``tests/storage/test_storage.py``.  The statements are
module functions over a connection; the readers and writers here call them and
:class:`SQLiteBackend` puts them behind the
:class:`~trajlog.storage.base.Backend` protocol (u64 values at the seam, i64 in
SQLite: :func:`i64` and :func:`u64` are the one conversion).
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import apsw

from ..codec.chunks import Chunk
from ..errors import (
    SchemaError,
    StoreClosedError,
    StoreError,
)
from . import call_rows
from . import memory_rows as mr
from . import migrate as migrations
from . import projection_rows as projections
from . import statements as st
from .base import Head, Lease, LogRange, Purge, SessionRow
from .errors_map import translate
from .event_index import IndexRow, Mark
from .schema import MEMORY_FTS, MIN_SQLITE, SCHEMA_VERSION
from .sqlite_connect import _pragma, migrate, open_connection, probe, sqlite_version
from .sqlite_deleted import DeletedReads, DeletedWrites, refuse_deleted_id
from .sqlite_memory import MemoryReads, MemoryWrites
from .sqlite_search import SEARCH_DROP, SEARCH_FTS, SearchReads, SearchWrites
from .sqlite_search import exists as search_exists

# ---------------------------------------------------------------------------
# The Backend protocol over those statements.

class SQLiteReader(SearchReads, DeletedReads, MemoryReads):
    """:class:`~trajlog.storage.base.Reader` over one connection."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def session_by_id(self, session_id: str) -> SessionRow | None:
        with translate():
            return st.session_by_id(self.conn, session_id)

    def session_by_sid(self, sid: int) -> SessionRow | None:
        with translate():
            rows = st.sessions_where(self.conn, "WHERE sid = ?", (sid,))
        return rows[0] if rows else None

    def sessions(self, include_subagents: bool) -> list[SessionRow]:
        with translate():
            return st.listing(self.conn, include_subagents)

    def children(self, sid: int) -> list[SessionRow]:
        with translate():
            return st.sessions_where(self.conn, "WHERE parent_sid = ? ORDER BY sid", (sid,))

    def head(self, sid: int) -> Head:
        with translate():
            return st.head(self.conn, sid)

    def head_stored(self, sid: int) -> tuple[Head, int]:
        with translate():
            return st.head_stored(self.conn, sid)

    def chunks(self, sid: int, first: int, last: int, limit: int = -1,
               budget: int = -1) -> list[Chunk]:
        with translate():
            return st.chunks(self.conn, sid, first, last, limit, budget)

    def log_range(self, sid: int, first: int, last: int, limit: int = -1,
                  budget: int = -1) -> LogRange:
        with translate():
            rows = st.chunks(self.conn, sid, first, last, limit, budget)
            if not rows:
                return LogRange(rows, [], [])
            lo, hi = rows[0].first_seq, rows[-1].last_seq
            return LogRange(rows, st.index_range(self.conn, sid, lo - 1, hi),
                            st.marks(self.conn, sid, lo, hi))

    def chunk_at(self, sid: int, seq: int) -> Chunk | None:
        with translate():
            return st.chunk_at(self.conn, sid, seq)

    def locate(self, sid: int, seq: int, body: bool) -> tuple[int, int, Chunk | None]:
        with translate():
            return st.locate(self.conn, sid, seq, body)

    def chunk_meta(self, sid: int, after: int, upto: int) -> list[tuple[int, int, int]]:
        with translate():
            return st.chunk_meta(self.conn, sid, after, upto)

    def max_seq(self, sid: int) -> int:
        with translate():
            return st.max_seq(self.conn, sid)

    def repack_run(self, sid: int, first: int, last: int) -> tuple[list[Chunk], list[Mark]]:
        with translate():
            return st.repack_run(self.conn, sid, first, last)

    def row_checks(self, sid: int, first: int, last: int) -> list[tuple[int, int, int]]:
        with translate():
            return st.row_checks(self.conn, sid, first, last)

    def chunk_sizes(self, sid: int) -> tuple[int, int, int]:
        with translate():
            return st.chunk_sizes(self.conn, sid)

    def index_rows(self, sid: int, after: int, upto: int) -> list[IndexRow]:
        with translate():
            return st.index_range(self.conn, sid, after, upto)

    def marks(self, sid: int, first: int, last: int) -> list[Mark]:
        with translate():
            return st.marks(self.conn, sid, first, last)

    def seq_of_idempotency_key(self, sid: int, key: str) -> int | None:
        with translate():
            return st.seq_of_idempotency_key(self.conn, sid, key)

    def call_requested(self, sid: int, call_id: str) -> int | None:
        with translate():
            return call_rows.call_requested(self.conn, sid, call_id)

    def calls_requested(self, sid: int, call_ids: Sequence[str]) -> dict[str, int]:
        with translate():
            return call_rows.calls_requested(self.conn, sid, call_ids)

    def call_count(self, sid: int) -> int:
        with translate():
            return call_rows.call_count(self.conn, sid)

    def marker_at_or_before(self, sid: int, type_: str, seq: int) -> int | None:
        with translate():
            return st.marker_at_or_before(self.conn, sid, type_, seq)

    def marker_after(self, sid: int, type_: str, seq: int) -> int | None:
        with translate():
            return st.marker_after(self.conn, sid, type_, seq)

    def projection_state(self, sid: int, name: str,
                         version: int) -> tuple[int, int, bytes] | None:
        with translate():
            return projections.projection_state(self.conn, sid, name, version)


class SQLiteWriter(SearchWrites, DeletedWrites, MemoryWrites, SQLiteReader):
    """:class:`~trajlog.storage.base.Writer`: the write connection inside
    ``BEGIN IMMEDIATE``."""

    def __init__(self, conn: apsw.Connection, foreign_commit: bool) -> None:
        super().__init__(conn)
        self.foreign_commit = foreign_commit

    def insert_session(self, row: SessionRow, last_seq: int, chain_head: int) -> int:
        try:
            with translate():
                return st.insert_session(self.conn, row, last_seq, chain_head)
        except StoreError as exc:
            if isinstance(exc.__cause__, apsw.ConstraintError):
                refuse_deleted_id(self, row.id)   # (a deleted session keeps its id)
            raise

    def append(self, sid: int, chunks: Sequence[Chunk], index: Sequence[IndexRow],
               marks: Sequence[bytes | None], calls: Sequence[tuple[str, int]] = ()) -> None:
        if len(chunks) == 1 and not index and not calls:   # (most single appends)
            try:   # (translate's test without its object: this runs on every append)
                st.insert_chunk(self.conn, st.chunk_row(sid, chunks[0], marks[0]))
            except apsw.Error as exc:
                with translate():
                    raise exc
            return
        with translate():
            if len(chunks) == 1 or not index:
                st.insert_chunks(self.conn, st.chunk_rows(sid, chunks, marks))
                if index:
                    st.insert_index(self.conn, st.index_rows(sid, index))
            else:
                # each chunk's index rows right after it (the schema's rule: an
                # index row belongs to its session's last chunk row)
                i = 0
                for chunk, mark in zip(chunks, marks, strict=True):
                    st.insert_chunks(self.conn, st.chunk_rows(sid, [chunk], [mark]))
                    j = i
                    while j < len(index) and index[j].seq <= chunk.last_seq:
                        j += 1
                    if j > i:
                        st.insert_index(self.conn, st.index_rows(sid, index[i:j]))
                    i = j
            if calls:   # (after every chunk row: a call row's seq is at most the head's)
                call_rows.insert_calls(self.conn, sid, calls)

    def repack(self, sid: int, merged: Chunk, marks: bytes | None) -> int:
        with translate():
            return st.repack(self.conn, sid, merged, marks)

    def lock_heads(self, sids: Sequence[int]) -> dict[int, Head]:
        return {}   # (BEGIN IMMEDIATE holds the whole file; foreign_commit says the rest)

    def set_lease(self, sid: int, lease: Lease) -> None:
        with translate():
            st.set_lease(self.conn, sid, *lease)

    def heartbeat(self, sid: int, owner: str, now: int) -> None:
        with translate():
            st.heartbeat(self.conn, sid, owner, now)

    def save_projection_state(self, sid: int, name: str, version: int, seq: int, chain: int,
                              state: bytes) -> None:
        with translate():
            projections.save_projection_state(self.conn, sid, name, version, seq, chain, state)

    def drop_projection_states(self, sid: int) -> int:
        with translate():
            return projections.drop_projection_states(self.conn, sid)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        with translate():
            self.conn.execute("SAVEPOINT request")
        try:
            yield
        except BaseException:
            if not self.conn.getautocommit():
                with translate():
                    self.conn.execute("ROLLBACK TO request")
                    self.conn.execute("RELEASE request")
            raise
        with translate():
            self.conn.execute("RELEASE request")

    def in_transaction(self) -> bool:
        return not self.conn.getautocommit()


class _Transaction:
    """``BEGIN IMMEDIATE`` .. ``COMMIT`` on the write connection, under the
    backend's write lock; ``ROLLBACK`` if the block raises (a class, not a
    generator: it runs on every append).  Another connection's commit moves
    the data version (a file control, not a statement) when this connection's
    next transaction starts, as this connection's own commit does: so it is
    read after ``BEGIN IMMEDIATE`` (moved: a foreign commit) and once the
    transaction ended, under the lock (no transaction starts between)."""

    __slots__ = ("_backend", "_cur")

    def __init__(self, backend: SQLiteBackend) -> None:
        self._backend = backend   # (one per backend, reused: it keeps no state of its own)
        self._cur = backend._write.cursor()   # (BEGIN/COMMIT without a cursor made each)

    def __enter__(self) -> SQLiteWriter:
        backend = self._backend
        backend._lock.acquire()
        try:
            if backend._closed:
                raise StoreClosedError("the store is closed")
            conn = backend._write
            try:
                self._cur.execute("BEGIN IMMEDIATE")
                try:
                    foreign = conn.data_version() != backend._data_version
                    if foreign:
                        backend._check_schema(conn)
                        backend.foreign_commits += 1
                except BaseException:
                    if not conn.getautocommit():
                        conn.execute("ROLLBACK")
                    raise
            except apsw.Error as exc:
                with translate():
                    raise exc
            backend._writer.foreign_commit = foreign
            return backend._writer
        except BaseException:
            backend._lock.release()
            raise

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        backend = self._backend
        conn = backend._write
        try:
            if exc is None:
                try:
                    self._cur.execute("COMMIT")
                except BaseException:
                    if not conn.getautocommit():
                        conn.execute("ROLLBACK")
                    raise
            elif not conn.getautocommit():
                conn.execute("ROLLBACK")
        except apsw.Error as error:
            with translate():
                raise error
        finally:
            backend._data_version = conn.data_version()   # (this commit's own move)
            backend._lock.release()
        if exc is not None and isinstance(exc, apsw.Error):
            with translate():
                raise exc


class SQLiteBackend:
    """The embedded default backend: one SQLite file in WAL mode (or a private
    in-memory database for ``":memory:"``), a write connection and one reader
    connection per thread."""

    max_session_seq = st.MAX_SESSION_SEQ

    def __init__(self, path: str, *, durability: str = "full",
                 busy_timeout_ms: int = 10_000) -> None:
        self._memory = path == ":memory:"
        if self._memory:
            # One private database shared by this backend's connections.
            path = f"file:/trajlog-{uuid.uuid4().hex}?vfs=memdb"
        self.path = path
        self.durability = durability
        self._busy = busy_timeout_ms
        self._keeper: apsw.Connection | None = None
        if self._memory:  # keeps the shared in-memory database alive
            self._keeper = open_connection(path, migrations=True)
        migrate(path, durability=durability, busy_timeout_ms=busy_timeout_ms)
        self._write = self._connect()
        self.foreign_commits = 0
        with translate():
            self._schema_version = int(_pragma(self._write, "schema_version"))
        self._data_version = self._write.data_version()   # (see _Transaction)
        self._writer = SQLiteWriter(self._write, False)   # (reused by every transaction)
        self._transaction = _Transaction(self)
        self._lock = threading.Lock()  # owns the write connection
        self._local = threading.local()
        # thread -> its reader connection; a thread that ended gives its
        # connection back (swept when another one is made), so short-lived
        # threads do not pile up connections and file descriptors
        self._readers: dict[int, tuple[weakref.ref[threading.Thread], apsw.Connection]] = {}
        self._readers_lock = threading.Lock()
        self._closed = False

    def _check_schema(self, conn: apsw.Connection) -> None:
        """(In the write transaction, after another connection committed.)  A
        schema changed since open -- a trigger dropped by a foreign connection
        -- is refused before anything is written under it."""
        version = int(_pragma(conn, "schema_version"))
        if version == self._schema_version:
            return
        defect = migrations.schema_defect(conn)
        if defect is not None:
            raise SchemaError(f"{self.path!r}: the schema was changed outside trajlog while "
                              f"the store was open ({defect}); nothing was written")
        self._schema_version = version

    def _connect(self, reader: bool = False) -> apsw.Connection:
        return open_connection(self.path, durability=self.durability,
                               busy_timeout_ms=self._busy, reader=reader)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    def connection(self) -> apsw.Connection:
        """This thread's reader connection, read-only (tests and tools reach SQL here)."""
        self._check_open()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self._sweep()
            conn = self._local.conn = self._connect(reader=True)
            thread = threading.current_thread()
            with self._readers_lock:
                self._readers[id(conn)] = (weakref.ref(thread), conn)
        return conn

    def _sweep(self) -> None:
        """Close the reader connections of threads that have ended."""
        with self._readers_lock:
            dead = [k for k, (ref, _) in self._readers.items()
                    if (t := ref()) is None or not t.is_alive()]
            conns = [self._readers.pop(k)[1] for k in dead]
        for conn in conns:
            with contextlib.suppress(apsw.Error):
                conn.close()

    @property
    def reader_connections(self) -> int:
        """How many reader connections are open (one per live reading thread)."""
        with self._readers_lock:
            return len(self._readers)

    @property
    def write_connection(self) -> apsw.Connection:
        return self._write

    def reader(self) -> SQLiteReader:
        reader: SQLiteReader | None = getattr(self._local, "reader", None)
        if reader is None or reader.conn is not self.connection():
            reader = self._local.reader = SQLiteReader(self.connection())
        return reader

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[SQLiteReader]:
        reader = self.reader()
        conn = reader.conn
        if not conn.getautocommit():  # an outer snapshot on this thread: join it
            yield reader
            return
        with translate():
            conn.execute("BEGIN")
            conn.execute("SELECT 1 FROM session_heads LIMIT 1").fetchall()  # the snapshot starts
        try:
            yield reader
        finally:
            if not conn.getautocommit():
                with translate():
                    conn.execute("COMMIT")

    def transaction(self) -> _Transaction:
        return self._transaction

    def checkpoint(self) -> bool:
        """Copy the WAL into the database file and truncate it (an erasure's
        last step: no old page image stays in the WAL).  False when another
        connection's read snapshot still needs the WAL."""
        with self._lock:
            self._check_open()
            with translate():
                return mr.checkpoint(self._write)

    def lease_alive(self, lease: Lease) -> bool | None:
        return None   # (one machine: the host+pid rule and the heartbeat decide)

    def purge(self) -> Purge:
        """Zero the free pages (erased bytes freed by the rewrite) in a
        transaction of their own, then checkpoint and truncate the WAL."""
        with self._lock:   # (no transaction when there is nothing to zero)
            self._check_open()
            with translate():
                pages = int(_pragma(self._write, "freelist_count"))
        if pages:
            with self.transaction() as w:
                pages = w.scrub_free_pages()
        done = [f"{pages} free page(s) of the file zeroed"]
        residues = ["copies of the file made outside trajlog (backups, replicas) keep what "
                    "they copied"]
        if self.checkpoint():
            done.append("the WAL checkpointed and truncated")
        else:
            residues.insert(0, "the WAL's old pages: another connection holds a read snapshot; "
                               "they go at the next checkpoint")
        return Purge(tuple(done), tuple(residues))

    def size(self) -> int:
        """The file's bytes with its WAL and shared-memory file (0 in memory)."""
        if self._memory:
            return 0
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(self.path + suffix)
        return total

    def memory_index(self, present: bool) -> None:
        """Make (``present``) or drop the derived memory full-text index, on a
        migration connection (the store's own connections refuse DDL).  A
        made index is empty: fill it with a rebuild."""
        with self._ddl() as conn:
            exists = mr.fts_exists(conn)
            if present and not exists:
                conn.execute("BEGIN IMMEDIATE; " + MEMORY_FTS + "; COMMIT")
            elif not present and exists:
                conn.execute("DROP TABLE memory_fts")

    def search_index(self, present: bool) -> None:
        """Make (``present``: empty, every mark before the first seq) or drop
        the derived event search index, on a migration connection as
        :meth:`memory_index` does."""
        with self._ddl() as conn:
            if present != search_exists(conn):
                conn.execute("BEGIN IMMEDIATE; " + (SEARCH_FTS if present else SEARCH_DROP)
                             + "; COMMIT")

    @contextlib.contextmanager
    def _ddl(self) -> Iterator[apsw.Connection]:
        """A migration connection for a derived index's DDL (the store's own
        connections refuse DDL); after it, the schema version this store
        checks its schema against is the new one."""
        with self._lock:
            self._check_open()
            conn = open_connection(self.path, durability=self.durability,
                                   busy_timeout_ms=self._busy, migrations=True)
            try:
                with translate():
                    yield conn
            finally:
                conn.close()
            with translate():
                self._schema_version = int(_pragma(self._write, "schema_version"))

    def close(self) -> None:
        with self._lock:
            self._closed = True
        with self._readers_lock:
            readers = [conn for _, conn in self._readers.values()]
            self._readers.clear()
        for conn in [*readers, self._write, self._keeper]:
            if conn is not None:
                with contextlib.suppress(apsw.Error):
                    conn.close()


__all__ = ["MIN_SQLITE", "SCHEMA_VERSION", "SQLiteBackend", "SQLiteReader", "SQLiteWriter",
           "migrate", "open_connection", "probe", "sqlite_version", "translate"]
