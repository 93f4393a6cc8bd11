"""The SQLite backend, through apsw: connections, migrations and every SQL
statement trajlog runs.  No module outside ``storage/`` talks SQL.

Every connection is set up the same way and every setting is read back
(research/format-reliability.md 4.1): WAL, ``synchronous=FULL`` (``NORMAL`` only
when asked), a busy timeout, foreign keys, recursive triggers (so that the
implicit delete of ``INSERT OR REPLACE`` fires the delete guard), defensive
mode, untrusted schema, triggers enabled, and an authorizer that refuses schema
changes and dangerous pragmas outside migrations.

What the triggers stop and what they cannot is written next to the DDL in
:mod:`.schema` and tested in ``tests/test_storage.py``.  The statements are
module functions over a connection; :class:`SQLiteBackend` puts them behind the
:class:`~trajlog.storage.base.Backend` protocol (u64 values at the seam, i64 in
SQLite: :func:`i64` and :func:`u64` are the one conversion).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw

from ..errors import SchemaError, StoreBusyError, StoreClosedError, StoreError
from .base import Head, IndexEntry, Lease, SessionRow
from .schema import (
    APPLICATION_ID,
    MIGRATIONS,
    MIN_SQLITE,
    SCHEMA_VERSION,
    authorizer,
)


def sqlite_version() -> tuple[int, ...]:
    return tuple(int(x) for x in apsw.sqlite_lib_version().split("."))


def _pragma(conn: apsw.Connection, name: str, value: Any = None) -> Any:
    # One statement per execute, fully consumed: apsw runs later statements of
    # a multi-statement string only as the cursor is iterated.
    sql = f"PRAGMA {name}" if value is None else f"PRAGMA {name}={value}"
    rows = conn.execute(sql).fetchall()
    return rows[0][0] if rows else None


def open_connection(path: str, *, durability: str = "full", busy_timeout_ms: int = 10_000,
                    migrations: bool = False) -> apsw.Connection:
    """Open and configure one connection; every setting is read back.

    ``migrations=True`` gives the one connection allowed to change the schema
    (no authorizer); every other connection refuses schema changes.
    """
    if sqlite_version() < MIN_SQLITE:
        raise SchemaError(f"SQLite {apsw.sqlite_lib_version()} is older than "
                          f"{'.'.join(map(str, MIN_SQLITE))}, which fixes a WAL-reset race")
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
                               | apsw.SQLITE_OPEN_URI)
    except apsw.Error as exc:
        raise StoreError(f"cannot open {path!r}: {exc}") from exc
    try:
        conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
        conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 1)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_FKEY, 1)
        memory = path == ":memory:" or "vfs=memdb" in path
        wanted: list[tuple[str, Any, Any]] = [
            # first: every later pragma may need a lock another process holds
            ("busy_timeout", busy_timeout_ms, busy_timeout_ms),
            ("journal_mode", "WAL", "memory" if memory else "wal"),
            ("synchronous", {"full": "FULL", "normal": "NORMAL"}[durability],
             {"full": 2, "normal": 1}[durability]),
            ("foreign_keys", "ON", 1),
            ("recursive_triggers", "ON", 1),
            ("trusted_schema", "OFF", 0),
            ("journal_size_limit", 64 * 1024 * 1024, 64 * 1024 * 1024),
        ]
        for name, value, expect in wanted:
            try:
                _pragma(conn, name, value)
                got = _pragma(conn, name)
            except apsw.NotADBError as exc:
                raise SchemaError(f"{path!r} is not an SQLite database (or it is damaged "
                                  f"beyond SQLite's own recovery): {exc}") from exc
            except apsw.Error as exc:
                raise StoreError(f"cannot set up {path!r}: {type(exc).__name__}: {exc}") from exc
            if (got.lower() if isinstance(got, str) else got) != expect:
                raise SchemaError(f"PRAGMA {name} reads back {got!r}, expected {expect!r}")
        if conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, -1) != 1 or conn.config(
                apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, -1) != 1:
            raise SchemaError("defensive mode or triggers could not be enabled")
        if not migrations:
            conn.authorizer = authorizer
    except BaseException:
        conn.close()
        raise
    return conn


def migrate(path: str, *, durability: str = "full", busy_timeout_ms: int = 10_000) -> int:
    """Bring the schema up to :data:`SCHEMA_VERSION`; return the version found.

    Runs on its own connection, each migration in one ``BEGIN IMMEDIATE``
    transaction, so concurrent openers serialize and a crash leaves either the
    old or the new schema.
    """
    conn = open_connection(path, durability=durability, busy_timeout_ms=busy_timeout_ms,
                           migrations=True)
    try:
        with translate():
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = int(_pragma(conn, "user_version"))
                app = int(_pragma(conn, "application_id"))
                if found == 0 and app == 0 and _has_tables(conn):
                    raise SchemaError(f"{path!r} is an SQLite database but not a trajlog store")
                if found and app != APPLICATION_ID:
                    raise SchemaError(f"{path!r} is not a trajlog store")
                if found > SCHEMA_VERSION:
                    raise SchemaError(f"store schema version {found} is newer than this "
                                      f"trajlog's ({SCHEMA_VERSION}); upgrade trajlog")
                for version in range(found + 1, SCHEMA_VERSION + 1):
                    conn.execute(MIGRATIONS[version - 1])
                    _pragma(conn, "user_version", version)
                _pragma(conn, "application_id", APPLICATION_ID)
                conn.execute("COMMIT")
            except BaseException:
                if not conn.getautocommit():
                    conn.execute("ROLLBACK")
                raise
        return found
    finally:
        conn.close()


def _has_tables(conn: apsw.Connection) -> bool:
    return bool(conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()[0][0])


class translate:
    """Context manager: apsw exceptions become trajlog StoreErrors (cause kept)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None or not isinstance(exc, apsw.Error):
            return
        if isinstance(exc, apsw.BusyError):
            raise StoreBusyError(f"database is locked: {exc}") from exc
        if isinstance(exc, (apsw.ConnectionClosedError, apsw.CursorClosedError)):
            raise StoreClosedError("the store is closed") from exc
        raise StoreError(f"{type(exc).__name__}: {exc}") from exc


def i64(value: int) -> int:
    """A u64 (key, chain, check) as the i64 SQLite stores."""
    return value - (1 << 64) if value >= 1 << 63 else value


def u64(value: int) -> int:
    """An i64 read from SQLite as the u64 it stands for."""
    return int(value) & 0xFFFFFFFFFFFFFFFF


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------
# Statements.  Connections are passed in; the backend decides which.

SESSION_COLUMNS = ("sid, id, session_key, created_ms, cwd, parent_sid, seed_length, seed_chain, "
                   "origin, delegation_depth, agent_preset, metadata, header_check")
EVENT_COLUMNS = ("rid, type, time_ms, source, causal_parent, workspace_revision, data_class, "
                 "idempotency_key, chain, frame")
EVENT_INSERT = f"INSERT INTO events({EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)"
MAX_SESSION_SEQ = 2**32 - 1   # a session's own log in one store: 4.29 billion events
MAX_SESSIONS = 2**31 - 1
_MARKERS = {"turn/start", "turn/end", "sandbox/mode"}


def rid(sid: int, seq: int) -> int:
    """The events table key of (session, seq): one integer, so no second index."""
    return (sid << 32) + seq


def _session_row(r: Sequence[Any]) -> SessionRow:
    return SessionRow(int(r[0]), r[1], u64(r[2]), r[3], r[4], r[5], r[6], u64(r[7]), r[8], r[9],
                      r[10], bytes(r[11]), u64(r[12]))


def insert_session(conn: apsw.Connection, row: SessionRow, last_seq: int,
                   chain_head: int) -> int:
    """Insert a session header and its head; returns the new sid."""
    conn.execute(
        "INSERT INTO sessions(id, session_key, created_ms, cwd, parent_sid, seed_length, "
        "seed_chain, origin, delegation_depth, agent_preset, metadata, header_check) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (row.id, i64(row.key), row.created_ms, row.cwd, row.parent_sid, row.seed_length,
         i64(row.seed_chain), row.origin, row.delegation_depth, row.agent_preset, row.metadata,
         i64(row.header_check)))
    sid = int(conn.last_insert_rowid())
    conn.execute("INSERT INTO session_heads(sid, last_seq, chain_head) VALUES (?,?,?)",
                 (sid, last_seq, i64(chain_head)))
    return sid


def sessions_where(conn: apsw.Connection, where: str, args: Sequence[Any]) -> list[SessionRow]:
    return [_session_row(r) for r in conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions {where}", tuple(args))]


def head(conn: apsw.Connection, sid: int) -> Head:
    row: list[Any] = conn.execute(
        "SELECT last_seq, chain_head, lease_owner, lease_host, lease_pid, lease_started_ms, "
        "lease_heartbeat_ms FROM session_heads WHERE sid = ?", (sid,)).fetchall()
    if not row:
        raise StoreError(f"session {sid} has no head row")
    last_seq, chain, owner, host, pid, started, beat = row[0]
    return Head(int(last_seq), u64(chain), Lease(owner, host, pid, started, beat))


def data_version(conn: apsw.Connection) -> int:
    """Changes whenever another connection commits to the database."""
    return int(_pragma(conn, "data_version"))


def lease(conn: apsw.Connection, sid: int) -> Lease:
    return head(conn, sid).lease


def set_lease(conn: apsw.Connection, sid: int, owner: str | None, host: str | None,
              pid: int | None, started_ms: int | None, heartbeat_ms: int | None) -> None:
    conn.execute("UPDATE session_heads SET lease_owner = ?, lease_host = ?, lease_pid = ?, "
                 "lease_started_ms = ?, lease_heartbeat_ms = ? WHERE sid = ?",
                 (owner, host, pid, started_ms, heartbeat_ms, sid))


def heartbeat(conn: apsw.Connection, sid: int, owner: str, now: int) -> None:
    conn.execute("UPDATE session_heads SET lease_heartbeat_ms = ? WHERE sid = ? AND "
                 "lease_owner = ?", (now, sid, owner))


def insert_events(conn: apsw.Connection, rows: Iterable[Sequence[Any]]) -> None:
    conn.executemany(EVENT_INSERT, rows)


def seq_of_idempotency_key(conn: apsw.Connection, sid: int, key: str) -> int | None:
    rows: list[Any] = conn.execute(
        "SELECT seq FROM events WHERE sid = ? AND idempotency_key = ?", (sid, key)).fetchall()
    return int(rows[0][0]) if rows else None


def frames(conn: apsw.Connection, sid: int, first: int, last: int) -> list[bytes]:
    """Frames of seqs first..last (inclusive) of one session's own log, in order."""
    return [r[0] for r in conn.execute(
        "SELECT frame FROM events WHERE rid BETWEEN ? AND ? ORDER BY rid",
        (rid(sid, first), rid(sid, last)))]


def marker_at_or_before(conn: apsw.Connection, sid: int, type_: str, seq: int) -> int | None:
    """The last seq <= ``seq`` of an event of ``type_`` (an indexed marker type)."""
    assert type_ in _MARKERS
    # the type is a literal so that the planner can use the partial index
    rows: list[Any] = conn.execute(
        f"SELECT max(seq) FROM events WHERE sid = ? AND type = '{type_}' AND seq <= ?",
        (sid, seq)).fetchall()
    return None if rows[0][0] is None else int(rows[0][0])


def marker_after(conn: apsw.Connection, sid: int, type_: str, seq: int) -> int | None:
    """The first seq > ``seq`` of an event of ``type_`` (an indexed marker type)."""
    assert type_ in _MARKERS
    rows: list[Any] = conn.execute(
        f"SELECT min(seq) FROM events WHERE sid = ? AND type = '{type_}' AND seq > ?",
        (sid, seq)).fetchall()
    return None if rows[0][0] is None else int(rows[0][0])


def max_seq(conn: apsw.Connection, sid: int) -> int:
    """The highest seq stored for a session's own log (-1 when none)."""
    rows: list[Any] = conn.execute(
        "SELECT max(rid) FROM events WHERE rid BETWEEN ? AND ?",
        (rid(sid, 0), rid(sid, MAX_SESSION_SEQ))).fetchall()
    return -1 if rows[0][0] is None else int(rows[0][0]) - rid(sid, 0)


def frames_of_types(conn: apsw.Connection, sid: int, after: int, types: Sequence[str],
                    upto: int = MAX_SESSION_SEQ,
                    prefixes: Sequence[str] = ()) -> list[tuple[int, bytes]]:
    """(seq, frame) of the session's own events after ``after`` up to ``upto``
    whose type is one of ``types`` or starts with one of ``prefixes``."""
    match = [f"type IN ({','.join('?' * len(types))})"] if types else []
    match += ["type GLOB ?"] * len(prefixes)
    globs = [p.replace("[", "[[]").replace("*", "[*]").replace("?", "[?]") + "*"
             for p in prefixes]
    return [(int(r[0]), r[1]) for r in conn.execute(
        f"SELECT seq, frame FROM events WHERE rid > ? AND rid <= ? AND ({' OR '.join(match)}) "
        "ORDER BY rid", (rid(sid, after), rid(sid, upto), *types, *globs))]


def projection_state(conn: apsw.Connection, sid: int, name: str,
                     version: int) -> tuple[int, int, bytes] | None:
    """(seq, chain u64, state) of the saved projection state, if any."""
    rows: list[Any] = conn.execute(
        "SELECT seq, chain, state FROM projection_states WHERE sid = ? AND name = ? "
        "AND version = ?", (sid, name, version)).fetchall()
    if not rows:
        return None
    return int(rows[0][0]), u64(rows[0][1]), bytes(rows[0][2])


def save_projection_state(conn: apsw.Connection, sid: int, name: str, version: int, seq: int,
                          chain: int, state: bytes) -> None:
    """Keep one state per (session, projection): other versions are dropped."""
    conn.execute("DELETE FROM projection_states WHERE sid = ? AND name = ?", (sid, name))
    conn.execute("INSERT INTO projection_states VALUES (?,?,?,?,?,?)",
                 (sid, name, version, seq, i64(chain), state))


def drop_projection_states(conn: apsw.Connection, sid: int) -> None:
    conn.execute("DELETE FROM projection_states WHERE sid = ?", (sid,))


# ---------------------------------------------------------------------------
# The Backend protocol over those statements.

class SQLiteReader:
    """:class:`~trajlog.storage.base.Reader` over one connection."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def session_by_id(self, session_id: str) -> SessionRow | None:
        with translate():
            rows = sessions_where(self.conn, "WHERE id = ?", (session_id,))
        return rows[0] if rows else None

    def session_by_sid(self, sid: int) -> SessionRow | None:
        with translate():
            rows = sessions_where(self.conn, "WHERE sid = ?", (sid,))
        return rows[0] if rows else None

    def sessions(self, include_subagents: bool) -> list[SessionRow]:
        where = "" if include_subagents else "WHERE origin IS NULL"
        with translate():
            return sessions_where(self.conn, f"{where} ORDER BY sid", ())

    def children(self, sid: int) -> list[SessionRow]:
        with translate():
            return sessions_where(self.conn, "WHERE parent_sid = ? ORDER BY sid", (sid,))

    def head(self, sid: int) -> Head:
        with translate():
            return head(self.conn, sid)

    def frames(self, sid: int, first: int, last: int) -> list[bytes]:
        with translate():
            return frames(self.conn, sid, first, last)

    def frames_of_types(self, sid: int, after: int, types: Sequence[str], upto: int,
                        prefixes: Sequence[str] = ()) -> list[tuple[int, bytes]]:
        with translate():
            return frames_of_types(self.conn, sid, after, types, upto, prefixes)

    def max_seq(self, sid: int) -> int:
        with translate():
            return max_seq(self.conn, sid)

    def seq_of_idempotency_key(self, sid: int, key: str) -> int | None:
        with translate():
            return seq_of_idempotency_key(self.conn, sid, key)

    def marker_at_or_before(self, sid: int, type_: str, seq: int) -> int | None:
        with translate():
            return marker_at_or_before(self.conn, sid, type_, seq)

    def marker_after(self, sid: int, type_: str, seq: int) -> int | None:
        with translate():
            return marker_after(self.conn, sid, type_, seq)

    def projection_state(self, sid: int, name: str,
                         version: int) -> tuple[int, int, bytes] | None:
        with translate():
            return projection_state(self.conn, sid, name, version)


class SQLiteWriter(SQLiteReader):
    """:class:`~trajlog.storage.base.Writer`: the write connection inside
    ``BEGIN IMMEDIATE``."""

    def __init__(self, conn: apsw.Connection, foreign_commit: bool) -> None:
        super().__init__(conn)
        self.foreign_commit = foreign_commit

    def insert_session(self, row: SessionRow, last_seq: int, chain_head: int) -> int:
        with translate():
            return insert_session(self.conn, row, last_seq, chain_head)

    def append_frames(self, sid: int, first_seq: int, frames: Sequence[bytes],
                      chains: Sequence[int], index: Sequence[IndexEntry]) -> None:
        base = rid(sid, first_seq)
        with translate():
            insert_events(self.conn, [(base + i, e.type, e.time, e.source, e.causal_parent,
                                       e.workspace_revision, e.data_class, e.idempotency_key,
                                       i64(chain), frame)
                                      for i, (frame, chain, e) in enumerate(
                                          zip(frames, chains, index, strict=True))])

    def set_lease(self, sid: int, lease: Lease) -> None:
        with translate():
            set_lease(self.conn, sid, *lease)

    def heartbeat(self, sid: int, owner: str, now: int) -> None:
        with translate():
            heartbeat(self.conn, sid, owner, now)

    def save_projection_state(self, sid: int, name: str, version: int, seq: int, chain: int,
                              state: bytes) -> None:
        with translate():
            save_projection_state(self.conn, sid, name, version, seq, chain, state)

    def drop_projection_states(self, sid: int) -> None:
        with translate():
            drop_projection_states(self.conn, sid)

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
    backend's write lock; ``ROLLBACK`` if the block raises.  A class rather
    than a generator: it runs on every append."""

    __slots__ = ("_backend", "_conn")

    def __init__(self, backend: SQLiteBackend) -> None:
        self._backend = backend

    def __enter__(self) -> SQLiteWriter:
        backend = self._backend
        backend._lock.acquire()
        try:
            if backend._closed:
                raise StoreClosedError("the store is closed")
            self._conn = conn = backend._write
            with translate():
                conn.execute("BEGIN IMMEDIATE")
                try:
                    version = data_version(conn)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            foreign = version != backend._data_version
            backend._data_version = version
            return SQLiteWriter(conn, foreign)
        except BaseException:
            backend._lock.release()
            raise

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        conn = self._conn
        try:
            with translate():
                if exc is None:
                    try:
                        conn.execute("COMMIT")
                    except BaseException:
                        if not conn.getautocommit():
                            conn.execute("ROLLBACK")
                        raise
                elif not conn.getautocommit():
                    conn.execute("ROLLBACK")
        finally:
            self._backend._lock.release()
        if exc is not None and isinstance(exc, apsw.Error):
            with translate():
                raise exc


class SQLiteBackend:
    """The embedded default backend: one SQLite file in WAL mode (or a private
    in-memory database for ``":memory:"``), a write connection and one reader
    connection per thread."""

    max_session_seq = MAX_SESSION_SEQ

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
        with translate():
            self._data_version = data_version(self._write)
        self._lock = threading.Lock()  # owns the write connection
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False

    def _connect(self) -> apsw.Connection:
        return open_connection(self.path, durability=self.durability,
                               busy_timeout_ms=self._busy)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    def connection(self) -> apsw.Connection:
        """This thread's reader connection (tests and tools reach SQL here)."""
        self._check_open()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
            with self._readers_lock:
                self._readers.append(conn)
        return conn

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
        return _Transaction(self)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        for conn in [*self._readers, self._write, self._keeper]:
            if conn is not None:
                with contextlib.suppress(apsw.Error):
                    conn.close()
        self._readers.clear()


__all__ = ["MAX_SESSION_SEQ", "SQLiteBackend", "SQLiteReader", "SQLiteWriter", "i64",
           "open_connection", "translate", "u64"]
