"""Schema migrations, up to storage v2 (schema 4), its guards (schema 5),
memory (schema 6), the call and pause index (schema 7: :func:`to_v7`) and deleted
sessions (schema 8).

Schemas 1-3 are SQL only and run in one transaction.  Schema 4 rewrites a
store written by trajlog 0.1 (one row per frame) into chunk rows and the event
index, and is **resumable** and **verified**:

1. one transaction makes the new tables and a progress table;
2. each session is copied in its own transaction: its stored frames are
   verified (every check, the chain from its seed to its head), cut into
   chunks byte for byte, indexed, written, read back and compared with the
   frames they came from; the session is then marked done;
3. one last transaction checks that every session is done and that the frame
   counts agree, drops the old table and makes the new triggers.

A crash anywhere leaves a store that the next open resumes.  A session that
does not verify, or any other failure, abandons the migration: the new tables
are dropped, so the store is exactly the 0.1 store it was, and
:class:`MigrationError` says which session and why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import apsw

from .._format import Cursor, Status
from ..codec.chunks import ChunkCompressor, cut, open_chunk, pack
from ..codec.compression import Compressor
from ..codec.frames import scan
from ..codec.records import decode_frame
from ..codec.stream import decode_events
from ..errors import MigrationError, SchemaError, orphaned_rows
from . import statements as st
from .event_index import (
    PAUSES,
    IndexRow,
    Mark,
    entry,
    event_marks,
    requested,
    split_marks,
    unpack_marks,
)
from .schema import (
    APPLICATION_ID,
    MIGRATIONS,
    SCHEMA_VERSION,
    V4_ABANDON,
    V4_FINISH,
    V4_TABLES,
    V5,
    V6,
    V7,
    V7_TRIGGERS,
)
from .sqlite_deleted import V8_DELETED


def _pragma(conn: apsw.Connection, name: str, value: Any = None) -> Any:
    # One statement per execute, fully consumed.
    sql = f"PRAGMA {name}" if value is None else f"PRAGMA {name}={value}"
    rows = conn.execute(sql).fetchall()
    return rows[0][0] if rows else None


@contextmanager
def _immediate(conn: apsw.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise


def _has_tables(conn: apsw.Connection) -> bool:
    return bool(conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()[0][0])


def _table(conn: apsw.Connection, name: str) -> bool:
    return bool(conn.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
                             "name = ?", (name,)).fetchall()[0][0])


def migrate(conn: apsw.Connection, path: str, *, check: bool = True,
            progress: Callable[[int, int], None] | None = None) -> int:
    """Bring the store on ``conn`` (the migration connection) to
    :data:`SCHEMA_VERSION`, then (``check``) refuse it if its schema is not
    exactly trajlog's; return the version it had.  A store already current
    is only read: opening it to read writes nothing."""
    if (int(_pragma(conn, "user_version")) == SCHEMA_VERSION
            and int(_pragma(conn, "application_id")) == APPLICATION_ID):
        if check:
            check_schema(conn, path)
        return SCHEMA_VERSION
    with _immediate(conn):
        found = int(_pragma(conn, "user_version"))
        app = int(_pragma(conn, "application_id"))
        if found == 0 and app == 0 and _has_tables(conn):
            raise SchemaError(f"{path!r} is an SQLite database but not a trajlog store")
        if found and app != APPLICATION_ID:
            raise SchemaError(f"{path!r} is not a trajlog store")
        if found > SCHEMA_VERSION:
            raise SchemaError(f"store schema version {found} is newer than this "
                              f"trajlog's ({SCHEMA_VERSION}); upgrade trajlog")
        for version in range(found + 1, min(3, SCHEMA_VERSION) + 1):
            conn.execute(MIGRATIONS[version - 1])
            _pragma(conn, "user_version", version)
        _pragma(conn, "application_id", APPLICATION_ID)
    if found < 4:
        to_v4(conn, progress)
    if found < 5:
        with _immediate(conn):
            if int(_pragma(conn, "user_version")) == 4:
                conn.execute(V5)
                _pragma(conn, "user_version", 5)
    if found < 6:
        with _immediate(conn):
            if int(_pragma(conn, "user_version")) == 5:
                for table in ("memories", "tombstones"):
                    if conn.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]:
                        raise MigrationError(f"{path!r}: table {table} holds rows no trajlog "
                                             "wrote (it was empty before schema 6); nothing "
                                             "was migrated", session=None)
                conn.execute(V6)
                _pragma(conn, "user_version", 6)
    if found < 7:
        with _immediate(conn):
            if int(_pragma(conn, "user_version")) == 6:
                to_v7(conn)
                _pragma(conn, "user_version", 7)
    if found < 8:
        with _immediate(conn):
            if int(_pragma(conn, "user_version")) == 7:
                conn.execute(V8_DELETED)
                _pragma(conn, "user_version", 8)
    if check:
        check_schema(conn, path)
    return found


# ---------------------------------------------------------------------------
# The schema check at open: the store's schema must be exactly the one these
# migrations make -- a trigger dropped or replaced, an index gone, a trigger
# or view added by a foreign connection all weaken guarantees silently, so
# the store is refused (SchemaError) rather than written to.

_EXPECTED: frozenset[tuple[str, str, str, str | None]] | None = None


def _objects(conn: apsw.Connection) -> frozenset[tuple[str, str, str, str | None]]:
    # sqlite_stat* tables belong to ANALYZE, which changes no guarantee; the
    # tables of memory_fts and search_fts are derived (dropped and rebuilt at will).
    try:
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema "
                            "WHERE name NOT LIKE 'sqlite_stat%' AND NOT (type IN ('table', "
                            "'index') AND (tbl_name LIKE 'memory_fts%' OR tbl_name LIKE "
                            "'search_fts%'))").fetchall()
    except UnicodeDecodeError:
        raise SchemaError(f"{conn.filename!r}: the schema holds text that is not UTF-8 "
                          "(the file is damaged); the store is refused") from None
    return frozenset((str(t), str(n), str(tbl), None if sql is None else str(sql))
                     for t, n, tbl, sql in rows)


def expected_schema() -> frozenset[tuple[str, str, str, str | None]]:
    """(type, name, table, sql) of every schema object of a current store:
    made once per process by running the migrations on a private database."""
    global _EXPECTED
    if _EXPECTED is None:
        conn = apsw.Connection(":memory:")
        try:
            migrate(conn, ":memory:", check=False)
            _EXPECTED = _objects(conn)
        finally:
            conn.close()
    return _EXPECTED


def schema_defect(conn: apsw.Connection) -> str | None:
    """What differs between the store's schema and trajlog's (None: nothing)."""
    found, expected = _objects(conn), expected_schema()
    if found == expected:
        return None
    names = {(t, n): sql for t, n, _tbl, sql in found}
    for t, n, _tbl, sql in sorted(expected, key=lambda o: (o[0], o[1])):
        if (t, n) not in names:
            return f"{t} {n} is missing"
        if names[(t, n)] != sql:
            return f"{t} {n} is not trajlog's"
    extra = sorted((t, n) for t, n, _tbl, _sql in found - expected)
    return f"{extra[0][0]} {extra[0][1]} is not part of trajlog's schema"


def orphan_defect(conn: apsw.Connection) -> str | None:
    """Rows that belong to no session header -- a header deleted or moved by a
    foreign connection with triggers off leaves its log unlisted, so its
    acknowledged events would be hidden.  O(sessions), at open."""
    found: list[Any] = conn.execute(
        "SELECT sid FROM session_heads h WHERE NOT EXISTS (SELECT 1 FROM sessions s "
        "WHERE s.sid = h.sid) LIMIT 1").fetchall()
    if found:
        return f"the head of internal session {found[0][0]} has no session header"
    found = conn.execute(
        "SELECT sid, parent_sid FROM sessions c WHERE parent_sid IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM sessions p WHERE p.sid = c.parent_sid) LIMIT 1").fetchall()
    if found:
        return (f"internal session {found[0][0]} names a parent ({found[0][1]}) that has no "
                "session header")
    for table, key in (("chunks", "cid"), ("event_index", "rid")):
        top: list[Any] = conn.execute(f"SELECT max({key}) >> 32 FROM {table}").fetchall()
        if top[0][0] is not None and not conn.execute(
                "SELECT 1 FROM sessions WHERE sid = ?", (top[0][0],)).fetchall():
            return f"{table} rows of internal session {top[0][0]} have no session header"
    return None


def check_schema(conn: apsw.Connection, path: str) -> None:
    """Refuse a store whose schema is not exactly trajlog's (see above), or
    whose rows belong to no session header (:func:`orphan_defect`)."""
    conn.execute("BEGIN")
    try:
        defect = schema_defect(conn)
        orphans = orphan_defect(conn) if defect is None else None
    finally:
        conn.execute("COMMIT")
    if defect is not None:
        raise SchemaError(f"{path!r}: the schema was changed outside trajlog ({defect}); "
                          "its guarantees no longer hold, so the store is refused")
    if orphans is not None:
        raise orphaned_rows(path, orphans)


def to_v4(conn: apsw.Connection,
          progress: Callable[[int, int], None] | None = None) -> None:
    """Schema 3 -> 4 (see the module docstring); a no-op once done.
    ``progress(sessions done, total)`` after each session."""
    with _immediate(conn):
        if int(_pragma(conn, "user_version")) != 3:
            return
        if not _table(conn, "migration_v4"):
            conn.execute(V4_TABLES)
    try:
        sids = [int(r[0]) for r in conn.execute("SELECT sid FROM sessions ORDER BY sid")]
        for n, sid in enumerate(sids, 1):
            with _immediate(conn):
                if not conn.execute("SELECT 1 FROM migration_v4 WHERE sid = ?",
                                    (sid,)).fetchall():
                    frames = _copy_session(conn, sid)
                    conn.execute("INSERT INTO migration_v4 VALUES (?, ?)", (sid, frames))
            if progress is not None:
                progress(n, len(sids))
        with _immediate(conn):
            if int(_pragma(conn, "user_version")) != 3:
                return
            done, copied = conn.execute("SELECT count(*), coalesce(sum(frames), 0) FROM "
                                        "migration_v4").fetchall()[0]
            sessions, rows = (conn.execute("SELECT count(*) FROM sessions").fetchall()[0][0],
                              conn.execute("SELECT count(*) FROM events").fetchall()[0][0])
            if done != sessions or copied != rows:
                raise MigrationError(f"{done} of {sessions} sessions and {copied} of {rows} "
                                     "frames were copied", session=None)
            conn.execute(V4_FINISH)
            _pragma(conn, "user_version", 4)
    except BaseException:
        with _immediate(conn):
            if int(_pragma(conn, "user_version")) == 3:
                conn.execute(V4_ABANDON)
        raise


def _copy_session(conn: apsw.Connection, sid: int) -> int:
    """Copy one session's frames into chunks and index rows; returns how many."""
    found: list[Any] = conn.execute(
        "SELECT id, session_key, seed_length, seed_chain FROM sessions WHERE sid = ?",
        (sid,)).fetchall()
    session_id, key, seed, seed_chain = str(found[0][0]), st.u64(found[0][1]), int(
        found[0][2]), st.u64(found[0][3])
    heads: list[Any] = conn.execute("SELECT last_seq, chain_head FROM session_heads WHERE "
                                    "sid = ?", (sid,)).fetchall()
    last_seq, chain_head = int(heads[0][0]), st.u64(heads[0][1])
    rows = [bytes(r[0]) for r in conn.execute(
        "SELECT frame FROM events WHERE rid BETWEEN ? AND ? ORDER BY rid",
        (st.rid(sid, 0), st.rid(sid, st.MAX_SESSION_SEQ)))]
    expected = last_seq - seed + 1
    blob = b"".join(rows)
    before = scan(blob, key, Cursor(0, seed, seed_chain), watermark=last_seq)
    if (before.status != Status.END or before.frames != expected or len(rows) != expected
            or (expected and before.cursor.chain != chain_head)):
        raise MigrationError(f"session {session_id} does not verify before migration "
                             f"({before.reason or 'frame count or chain head differs'}, at "
                             f"seq {before.cursor.next_seq}): nothing was migrated",
                             session=session_id)
    if not expected:
        return 0
    sizes = [len(r) for r in rows]
    runs = cut(blob, sizes, seed, seed_chain)
    compressor = ChunkCompressor()
    stored = compressor.compress([body for body, *_ in runs])
    chunks = [pack(key, body, first, n, seed_c, last_c, packed)
              for (body, first, n, seed_c, last_c), packed in zip(runs, stored, strict=True)]
    payloads = Compressor()
    index: list[IndexRow] = []
    marks: list[Mark] = []
    for i, frame in enumerate(rows):
        ev = decode_frame(frame, seed + i, payloads, session=session_id)
        indexed = entry(ev, seed + i)
        if indexed is not None:
            index.append(indexed)
        event_marks(ev, seed + i, marks)
    packed = split_marks(marks, [(c.first_seq, c.last_seq) for c in chunks])
    st.insert_chunks(conn, st.chunk_rows(sid, chunks, packed))
    st.insert_index(conn, st.index_rows(sid, index))
    back = st.chunks(conn, sid, seed, last_seq)
    raw = []
    for row in back:
        opened = open_chunk(key, row, compressor)
        if not isinstance(opened, tuple):
            raise MigrationError(f"session {session_id}: a migrated chunk does not verify "
                                 f"({opened.reason})", session=session_id)
        raw.append(bytes(opened[0]))
    if b"".join(raw) != blob or sum(c.n for c in back) != expected:
        raise MigrationError(f"session {session_id}: the migrated chunks differ from the "
                             "frames they were made of", session=session_id)
    return expected


# A stand-in payload for an erased frame: its type is gone with its payload
# (the pause events are never erased content; this only steps over the frame).
_ERASED = b"\x93\xaetrajlog/erased\x00\x80"


def to_v7(conn: apsw.Connection) -> None:
    """Schema 6 -> 7, inside the caller's transaction: the call index and the
    pause index made, and filled for the logs written before -- each
    session's call rows from its marks, its pause events' index rows from its
    frames (every row verified as it is read; a row that does not verify
    abandons the migration, naming the session).  The guards of both tables
    are made once the old rows are in."""
    conn.execute(V7)
    guard = str(conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND "
                             "name = 'event_index_append'").fetchall()[0][0])
    conn.execute("DROP TRIGGER event_index_append")   # (it refuses rows for older seqs)
    compressor, payloads = ChunkCompressor(), Compressor()
    sessions: list[Any] = conn.execute(
        "SELECT s.sid, s.id, s.session_key, s.seed_length, h.last_seq FROM sessions s "
        "JOIN session_heads h ON h.sid = s.sid ORDER BY s.sid").fetchall()
    for sid, session_id, key, seed, last_seq in sessions:
        sid, key, seed, last_seq = int(sid), st.u64(key), int(seed), int(last_seq)
        calls: dict[str, int] = {}
        for (blob,) in conn.execute(
                "SELECT marks FROM chunks WHERE cid BETWEEN ? AND ? AND marks IS NOT NULL "
                "ORDER BY cid", (st.rid(sid, 0), st.rid(sid, st.MAX_SESSION_SEQ))):
            try:
                found = unpack_marks(blob)
            except Exception as exc:  # (any decode failure: the store is damaged)
                raise MigrationError(f"session {session_id}: its marks do not decode ({exc}); "
                                     "nothing was migrated", session=str(session_id)) from None
            for call_id, seq in requested(found):
                calls.setdefault(call_id, seq)   # (the first request of an id counts)
        conn.executemany("INSERT INTO call_index(sid, call_id, seq) VALUES (?, ?, ?)",
                         [(sid, c, q) for c, q in calls.items()])
        gone = {int(r[0]) for r in conn.execute(
            "SELECT target_seq FROM tombstones WHERE target_kind = 'event' AND target_sid = ?",
            (sid,))}

        def erased(seq: int, gone: set[int] = gone) -> bytes | None:
            return _ERASED if seq in gone else None
        first = seed
        while first <= last_seq:
            rows = st.chunks(conn, sid, first, last_seq, 64)
            if not rows:
                break
            index: list[IndexRow] = []
            for row in rows:
                opened = open_chunk(key, row, compressor, erased=erased)
                if not isinstance(opened, tuple):
                    raise MigrationError(f"session {session_id}: the row at seq "
                                         f"{row.first_seq} does not verify ({opened.reason}); "
                                         "nothing was migrated", session=str(session_id))
                raw, table = opened
                for ev in decode_events(raw, table, 0, len(table), payloads, str(session_id),
                                        want=PAUSES.__contains__):
                    indexed = entry(ev, ev.seq)
                    if indexed is not None and not conn.execute(
                            "SELECT 1 FROM event_index WHERE rid = ?",
                            (st.rid(sid, ev.seq),)).fetchall():
                        index.append(indexed)
            st.insert_index(conn, st.index_rows(sid, index))
            first = rows[-1].last_seq + 1
    conn.execute(guard)
    conn.execute(V7_TRIGGERS)


__all__ = ["check_schema", "expected_schema", "migrate", "orphan_defect", "schema_defect",
           "to_v4", "to_v7"]
