"""SQLite through apsw: connections, schema, migrations, triggers and every SQL
statement trajlog runs.  No other module talks SQL.

Every connection is set up the same way and every setting is read back
(research/format-reliability.md 4.1): WAL, ``synchronous=FULL`` (``NORMAL`` only
when asked), a busy timeout, foreign keys, recursive triggers (so that the
implicit delete of ``INSERT OR REPLACE`` fires the delete guard), defensive
mode, untrusted schema, triggers enabled, and an authorizer that refuses schema
changes and dangerous pragmas outside migrations.

What the triggers stop and what they cannot is written next to the DDL below
and tested in ``tests/test_storage.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import apsw

from .errors import (
    SchemaError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
)

MIN_SQLITE = (3, 51, 3)  # WAL-reset race fixed in 3.51.3 (sqlite.org/wal.html, section 11)
SCHEMA_VERSION = 3
APPLICATION_ID = 0x74726A6C  # "trjl"

# ---------------------------------------------------------------------------
# Schema.  Migration n takes user_version from n-1 to n, in one transaction.
#
# What the triggers stop (each has a test in tests/test_storage.py):
#   UPDATE or DELETE of an event, a session header or a session head row;
#   INSERT OR REPLACE / OR IGNORE / upsert over an existing event (the seq
#   guard fires first, and with recursive_triggers the implied delete too);
#   an event whose seq is not exactly the head's last_seq + 1 (gap, duplicate,
#   regression); moving a head other than by the append trigger (it must
#   advance by exactly one, to the chain of a stored event);
#   UPDATE or DELETE of memories and tombstones (append-only versions).
# What they cannot stop, and what does:
#   DROP TRIGGER / DROP TABLE / ALTER TABLE -- the authorizer refuses them on
#   every connection trajlog opens (migrations use their own connection);
#   PRAGMA writable_schema edits of sqlite_schema -- defensive mode;
#   sqlite3_db_config(ENABLE_TRIGGER, 0) on a foreign connection, and any
#   edit of the file's bytes outside SQLite -- only verify() detects these,
#   by recomputing every frame check and the chain against the head.

_MIGRATIONS: list[str] = [
    # 1: sessions, heads, events, memories, tombstones, append-only triggers.
    """
    CREATE TABLE sessions(
        sid              INTEGER PRIMARY KEY CHECK (sid BETWEEN 1 AND 2147483647),
        id               TEXT    NOT NULL UNIQUE CHECK (length(id) = 36),
        session_key      INTEGER NOT NULL,
        created_ms       INTEGER NOT NULL,
        cwd              TEXT    NOT NULL,
        parent_sid       INTEGER REFERENCES sessions(sid),
        seed_length      INTEGER NOT NULL DEFAULT 0 CHECK (seed_length >= 0),
        seed_chain       INTEGER NOT NULL,
        origin           TEXT    CHECK (origin IS NULL OR origin = 'subagent'),
        delegation_depth INTEGER NOT NULL DEFAULT 0 CHECK (delegation_depth >= 0),
        agent_preset     TEXT,
        metadata         BLOB    NOT NULL,
        header_check     INTEGER NOT NULL,
        CHECK (seed_length = 0 OR parent_sid IS NOT NULL)
    ) STRICT;

    CREATE TABLE session_heads(
        sid                INTEGER PRIMARY KEY REFERENCES sessions(sid),
        last_seq           INTEGER NOT NULL CHECK (last_seq >= -1),
        chain_head         INTEGER NOT NULL,
        lease_owner        TEXT,
        lease_host         TEXT,
        lease_pid          INTEGER,
        lease_started_ms   INTEGER,
        lease_heartbeat_ms INTEGER
    ) STRICT;

    CREATE TABLE events(
        rid                INTEGER PRIMARY KEY,  -- (sid << 32) + seq: the key, no extra index
        -- derived from rid and not stored; an event of an unknown session is
        -- refused by events_seq_next (its head row does not exist)
        sid                INTEGER GENERATED ALWAYS AS (rid >> 32) VIRTUAL,
        seq                INTEGER GENERATED ALWAYS AS (rid & 4294967295) VIRTUAL,
        type               TEXT    NOT NULL,
        time_ms            INTEGER NOT NULL,
        source             TEXT,
        causal_parent      INTEGER,
        workspace_revision TEXT,
        data_class         TEXT,
        idempotency_key    TEXT,
        chain              INTEGER NOT NULL,
        frame              BLOB    NOT NULL CHECK (length(frame) >= 40),
        CHECK (rid >= 4294967296)
    ) STRICT;
    CREATE UNIQUE INDEX events_idempotency ON events(sid, idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    CREATE TABLE memories(
        mid            INTEGER PRIMARY KEY,
        item_id        TEXT    NOT NULL,
        version        INTEGER NOT NULL CHECK (version >= 1),
        scope          TEXT    NOT NULL CHECK (scope IN ('global', 'tenant', 'user', 'session')),
        scope_key      TEXT    NOT NULL,
        type           TEXT    NOT NULL
                       CHECK (type IN ('policy', 'preference', 'fact', 'episode', 'trajectory')),
        state          TEXT    NOT NULL
                       CHECK (state IN ('provisional', 'active', 'quarantined', 'revoked')),
        content        BLOB    NOT NULL,
        content_digest BLOB    NOT NULL,
        source_sid     INTEGER REFERENCES sessions(sid),
        source_seq     INTEGER,
        retention_ms   INTEGER,
        sensitivity    TEXT,
        created_ms     INTEGER NOT NULL,
        frame          BLOB    NOT NULL,
        UNIQUE (item_id, version)
    ) STRICT;

    CREATE TABLE tombstones(
        tid         INTEGER PRIMARY KEY,
        target_kind TEXT    NOT NULL CHECK (target_kind IN ('event', 'memory')),
        target_sid  INTEGER REFERENCES sessions(sid),
        target_seq  INTEGER,
        target_item TEXT,
        reason      TEXT    NOT NULL,
        actor       TEXT,
        created_ms  INTEGER NOT NULL,
        frame       BLOB    NOT NULL
    ) STRICT;

    CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'trajlog: events are append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'trajlog: events are append-only'); END;
    CREATE TRIGGER events_seq_next BEFORE INSERT ON events
    WHEN NEW.seq IS NOT (SELECT last_seq + 1 FROM session_heads WHERE sid = NEW.sid)
    BEGIN SELECT RAISE(ABORT, 'trajlog: seq must be exactly the next one'); END;
    CREATE TRIGGER events_advance_head AFTER INSERT ON events
    BEGIN
        UPDATE session_heads SET last_seq = NEW.seq, chain_head = NEW.chain WHERE sid = NEW.sid;
    END;

    CREATE TRIGGER heads_forward_only BEFORE UPDATE OF last_seq, chain_head ON session_heads
    WHEN NEW.last_seq IS NOT OLD.last_seq + 1
      OR NEW.chain_head IS NOT (SELECT chain FROM events WHERE rid = (NEW.sid << 32) + NEW.last_seq)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a head only advances with its log'); END;
    CREATE TRIGGER heads_no_rebind BEFORE UPDATE OF sid ON session_heads
    BEGIN SELECT RAISE(ABORT, 'trajlog: heads are permanent'); END;
    CREATE TRIGGER heads_no_delete BEFORE DELETE ON session_heads
    BEGIN SELECT RAISE(ABORT, 'trajlog: heads are permanent'); END;

    CREATE TRIGGER sessions_no_update BEFORE UPDATE ON sessions
    BEGIN SELECT RAISE(ABORT, 'trajlog: session headers are immutable'); END;
    CREATE TRIGGER sessions_no_delete BEFORE DELETE ON sessions
    BEGIN SELECT RAISE(ABORT, 'trajlog: session headers are immutable'); END;

    CREATE TRIGGER memories_no_update BEFORE UPDATE ON memories
    BEGIN SELECT RAISE(ABORT, 'trajlog: memory versions are append-only'); END;
    CREATE TRIGGER memories_no_delete BEFORE DELETE ON memories
    BEGIN SELECT RAISE(ABORT, 'trajlog: memory versions are append-only'); END;
    CREATE TRIGGER tombstones_no_update BEFORE UPDATE ON tombstones
    BEGIN SELECT RAISE(ABORT, 'trajlog: tombstones are append-only'); END;
    CREATE TRIGGER tombstones_no_delete BEFORE DELETE ON tombstones
    BEGIN SELECT RAISE(ABORT, 'trajlog: tombstones are append-only'); END;
    """,
    # 2: small partial indexes over the events forks and subagents look for, so
    # that finding a turn's end or the latest sandbox settings is O(log n)
    # whatever the log's length (one entry per matching event only).
    """
    CREATE INDEX events_turn_start ON events(sid, seq) WHERE type = 'turn/start';
    CREATE INDEX events_turn_end ON events(sid, seq) WHERE type = 'turn/end';
    CREATE INDEX events_sandbox ON events(sid, seq) WHERE type = 'sandbox/mode';
    """,
    # 3: derived, rebuildable projection states (never authoritative; no
    # append-only triggers: a newer state replaces an older one).
    """
    CREATE TABLE projection_states(
        sid     INTEGER NOT NULL REFERENCES sessions(sid),
        name    TEXT    NOT NULL,
        version INTEGER NOT NULL,
        seq     INTEGER NOT NULL,
        chain   INTEGER NOT NULL,
        state   BLOB    NOT NULL,
        PRIMARY KEY (sid, name, version)
    ) STRICT;
    """,
]

# Authorizer: action codes refused on every non-migration connection.
_DENIED_ACTIONS = {
    apsw.SQLITE_CREATE_INDEX, apsw.SQLITE_CREATE_TABLE, apsw.SQLITE_CREATE_TEMP_INDEX,
    apsw.SQLITE_CREATE_TEMP_TABLE, apsw.SQLITE_CREATE_TEMP_TRIGGER,
    apsw.SQLITE_CREATE_TEMP_VIEW, apsw.SQLITE_CREATE_TRIGGER, apsw.SQLITE_CREATE_VIEW,
    apsw.SQLITE_DROP_INDEX, apsw.SQLITE_DROP_TABLE, apsw.SQLITE_DROP_TEMP_INDEX,
    apsw.SQLITE_DROP_TEMP_TABLE, apsw.SQLITE_DROP_TEMP_TRIGGER, apsw.SQLITE_DROP_TEMP_VIEW,
    apsw.SQLITE_DROP_TRIGGER, apsw.SQLITE_DROP_VIEW, apsw.SQLITE_ALTER_TABLE,
    apsw.SQLITE_CREATE_VTABLE, apsw.SQLITE_DROP_VTABLE, apsw.SQLITE_ATTACH,
    apsw.SQLITE_DETACH,
}
# Pragmas that may be read but never set outside set-up.
_GUARDED_PRAGMAS = {"writable_schema", "journal_mode", "synchronous", "recursive_triggers",
                    "foreign_keys", "trusted_schema", "schema_version", "user_version",
                    "application_id", "cell_size_check", "ignore_check_constraints",
                    "locking_mode", "query_only", "defer_foreign_keys"}
_PROTECTED_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master"}


def _authorizer(action: int, p1: str | None, p2: str | None, dbname: str | None,
                trigger: str | None) -> int:
    if action in _DENIED_ACTIONS:
        return apsw.SQLITE_DENY
    if action == apsw.SQLITE_PRAGMA and p1 is not None and p2 is not None and (
            p1.lower() in _GUARDED_PRAGMAS):
        return apsw.SQLITE_DENY
    if action in (apsw.SQLITE_INSERT, apsw.SQLITE_UPDATE, apsw.SQLITE_DELETE) and (
            p1 or "").lower() in _PROTECTED_TABLES:
        return apsw.SQLITE_DENY
    return apsw.SQLITE_OK


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
            conn.authorizer = _authorizer
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
                    conn.execute(_MIGRATIONS[version - 1])
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


# ---------------------------------------------------------------------------
# Statements.  Connections are passed in; the store decides which.

def begin(conn: apsw.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")


def commit(conn: apsw.Connection) -> None:
    conn.execute("COMMIT")


def rollback(conn: apsw.Connection) -> None:
    if not conn.getautocommit():
        conn.execute("ROLLBACK")


def savepoint(conn: apsw.Connection, name: str) -> None:
    conn.execute(f"SAVEPOINT {name}")


def release(conn: apsw.Connection, name: str) -> None:
    conn.execute(f"RELEASE {name}")


def rollback_to(conn: apsw.Connection, name: str) -> None:
    conn.execute(f"ROLLBACK TO {name}")
    conn.execute(f"RELEASE {name}")


SESSION_COLUMNS = ("sid, id, session_key, created_ms, cwd, parent_sid, seed_length, seed_chain, "
                   "origin, delegation_depth, agent_preset, metadata, header_check")


def insert_session(conn: apsw.Connection, row: Sequence[Any], last_seq: int,
                   chain_head: int) -> int:
    """Insert a session header and its head; returns the new sid."""
    conn.execute(
        "INSERT INTO sessions(id, session_key, created_ms, cwd, parent_sid, seed_length, "
        "seed_chain, origin, delegation_depth, agent_preset, metadata, header_check) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", tuple(row))
    sid = int(conn.last_insert_rowid())
    conn.execute("INSERT INTO session_heads(sid, last_seq, chain_head) VALUES (?,?,?)",
                 (sid, last_seq, chain_head))
    return sid


def session_by_id(conn: apsw.Connection, session_id: str) -> tuple[Any, ...] | None:
    rows = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?",
                        (session_id,)).fetchall()
    return rows[0] if rows else None


def session_by_sid(conn: apsw.Connection, sid: int) -> tuple[Any, ...] | None:
    rows = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE sid = ?",
                        (sid,)).fetchall()
    return rows[0] if rows else None


def list_sessions(conn: apsw.Connection, include_subagents: bool) -> list[tuple[Any, ...]]:
    where = "" if include_subagents else " WHERE origin IS NULL"
    return conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions{where} ORDER BY sid").fetchall()


def children_of(conn: apsw.Connection, sid: int) -> list[tuple[Any, ...]]:
    return conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE parent_sid = ? "
                        "ORDER BY sid", (sid,)).fetchall()


def head(conn: apsw.Connection, sid: int) -> tuple[int, int]:
    """(last_seq, chain_head as an unsigned 64-bit int)."""
    rows: list[Any] = conn.execute(
        "SELECT last_seq, chain_head FROM session_heads WHERE sid = ?", (sid,)).fetchall()
    if not rows:
        raise StoreError(f"session {sid} has no head row")
    return int(rows[0][0]), int(rows[0][1]) & 0xFFFFFFFFFFFFFFFF


def head_and_lease(conn: apsw.Connection, sid: int) -> tuple[Any, ...]:
    """(last_seq, chain_head u64, lease_owner, lease_host, lease_pid,
    lease_started_ms, lease_heartbeat_ms)."""
    row: list[Any] = conn.execute(
        "SELECT last_seq, chain_head, lease_owner, lease_host, lease_pid, lease_started_ms, "
        "lease_heartbeat_ms FROM session_heads WHERE sid = ?", (sid,)).fetchall()
    if not row:
        raise StoreError(f"session {sid} has no head row")
    last_seq, chain, *lease = row[0]
    return (int(last_seq), int(chain) & 0xFFFFFFFFFFFFFFFF, *lease)


def data_version(conn: apsw.Connection) -> int:
    """Changes whenever another connection commits to the database."""
    return int(_pragma(conn, "data_version"))


def lease(conn: apsw.Connection, sid: int) -> tuple[Any, ...]:
    return conn.execute("SELECT lease_owner, lease_host, lease_pid, lease_started_ms, "
                        "lease_heartbeat_ms FROM session_heads WHERE sid = ?",
                        (sid,)).fetchall()[0]


def set_lease(conn: apsw.Connection, sid: int, owner: str | None, host: str | None,
              pid: int | None, started_ms: int | None, heartbeat_ms: int | None) -> None:
    conn.execute("UPDATE session_heads SET lease_owner = ?, lease_host = ?, lease_pid = ?, "
                 "lease_started_ms = ?, lease_heartbeat_ms = ? WHERE sid = ?",
                 (owner, host, pid, started_ms, heartbeat_ms, sid))


def heartbeat(conn: apsw.Connection, sid: int, owner: str, now_ms: int) -> None:
    conn.execute("UPDATE session_heads SET lease_heartbeat_ms = ? WHERE sid = ? AND "
                 "lease_owner = ?", (now_ms, sid, owner))


EVENT_COLUMNS = ("rid, type, time_ms, source, causal_parent, workspace_revision, data_class, "
                 "idempotency_key, chain, frame")
EVENT_INSERT = f"INSERT INTO events({EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)"
MAX_SESSION_SEQ = 2**32 - 1   # a session's own log in one store: 4.29 billion events
MAX_SESSIONS = 2**31 - 1


def rid(sid: int, seq: int) -> int:
    """The events table key of (session, seq): one integer, so no second index."""
    return (sid << 32) + seq


def insert_events(conn: apsw.Connection, rows: Iterable[Sequence[Any]]) -> None:
    conn.executemany(EVENT_INSERT, rows)


def event_by_idempotency_key(conn: apsw.Connection, sid: int,
                             key: str) -> tuple[int, bytes] | None:
    rows: list[Any] = conn.execute(
        "SELECT seq, frame FROM events WHERE sid = ? AND idempotency_key = ?",
        (sid, key)).fetchall()
    return (int(rows[0][0]), bytes(rows[0][1])) if rows else None


def frames(conn: apsw.Connection, sid: int, first: int, last: int) -> list[bytes]:
    """Frames of seqs first..last (inclusive) of one session's own log, in order."""
    return [r[0] for r in conn.execute(
        "SELECT frame FROM events WHERE rid BETWEEN ? AND ? ORDER BY rid",
        (rid(sid, first), rid(sid, last)))]


_MARKERS = {"turn/start", "turn/end", "sandbox/mode"}


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
                    upto: int = MAX_SESSION_SEQ) -> list[tuple[int, bytes]]:
    """(seq, frame) of the session's own events after ``after`` up to
    ``upto`` whose type is one of ``types``."""
    marks = ",".join("?" * len(types))
    return [(int(r[0]), r[1]) for r in conn.execute(
        f"SELECT seq, frame FROM events WHERE rid > ? AND rid <= ? AND type IN ({marks}) "
        "ORDER BY rid", (rid(sid, after), rid(sid, upto), *types))]


def projection_state(conn: apsw.Connection, sid: int, name: str,
                     version: int) -> tuple[int, int, bytes] | None:
    """(seq, chain u64, state) of the saved projection state, if any."""
    rows: list[Any] = conn.execute(
        "SELECT seq, chain, state FROM projection_states WHERE sid = ? AND name = ? "
        "AND version = ?", (sid, name, version)).fetchall()
    if not rows:
        return None
    return int(rows[0][0]), int(rows[0][1]) & 0xFFFFFFFFFFFFFFFF, bytes(rows[0][2])


def save_projection_state(conn: apsw.Connection, sid: int, name: str, version: int, seq: int,
                          chain: int, state: bytes) -> None:
    """Keep one state per (session, projection): other versions are dropped."""
    conn.execute("DELETE FROM projection_states WHERE sid = ? AND name = ?", (sid, name))
    conn.execute("INSERT INTO projection_states VALUES (?,?,?,?,?,?)",
                 (sid, name, version, seq, chain - (1 << 64) if chain >= 1 << 63 else chain,
                  state))


def drop_projection_states(conn: apsw.Connection, sid: int) -> None:
    conn.execute("DELETE FROM projection_states WHERE sid = ?", (sid,))


def now_ms() -> int:
    return time.time_ns() // 1_000_000
