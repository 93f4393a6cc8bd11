"""Every SQL statement trajlog runs on a store, as functions over a connection.

Keys: a session's chunk rows and index rows are keyed by one integer,
``(sid << 32) + seq`` (:func:`rid`), so a session's rows sit together in one
b-tree range and need no second index.  Keys, chains and checks are u64 at
the Backend seam and i64 in SQLite: :func:`i64` / :func:`u64` are the one
conversion.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import apsw
import msgspec

from ..codec.chunks import Chunk
from ..errors import (
    CorruptionError,
    row_damaged,
)
from .base import Head, Lease, SessionRow
from .event_index import IndexRow, Mark, unpack_marks
from .keys import (
    MAX_SESSION_SEQ,
    MAX_SESSIONS,
    bound,
    chunk_row,
    chunk_rows,
    i64,
    index_rows,
    no_head,
    now_ms,
    rid,
    u64,
)
from .sqlite_deleted import NOT_DELETED

SESSION_COLUMNS = ("sid, id, session_key, created_ms, cwd, parent_sid, seed_length, seed_chain, "
                   "origin, delegation_depth, agent_preset, metadata, header_check")
CHUNK_COLUMNS = "cid, n, raw_len, codec, body_check, seed_chain, last_chain, body"
_CHUNK_META = "cid, n, raw_len, codec, body_check, seed_chain, last_chain, x''"
CHUNK_INSERT = f"INSERT INTO chunks({CHUNK_COLUMNS}, marks) VALUES (?,?,?,?,?,?,?,?,?)"
INDEX_COLUMNS = ("rid, type, time_ms, source, causal_parent, workspace_revision, data_class, "
                 "idempotency_key")
INDEX_INSERT = f"INSERT INTO event_index({INDEX_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)"
# The partial index of each marker type, and its WHERE term: a query names
# that term exactly (SQLite uses a partial index only for a query that
# repeats its condition, and would otherwise walk the session's index rows
# back to the last match: the whole log when there is none) and pins it.
_TURNS = ("event_index_markers", "type IN ('turn/start', 'turn/end', 'sandbox/mode')")
_PAUSE = ("event_index_pauses", "type IN ('redaction/paused', 'redaction/resumed')")
_MARKERS = {"turn/start": _TURNS, "turn/end": _TURNS, "sandbox/mode": _TURNS,
            "redaction/paused": _PAUSE, "redaction/resumed": _PAUSE}


# -- sessions and heads ---------------------------------------------------------

# -- damaged rows ------------------------------------------------------------------
# SQLite keeps any value in any column, so a flipped bit in a record header
# can turn an integer into NULL or text into a blob, and a flipped text byte
# makes apsw's UTF-8 decode fail.  Rows are checked as they are read: such a
# row is corruption named by store, table and session, never a TypeError.

_F = TypeVar("_F", bound=Callable[..., Any])
_INT: tuple[type, ...] = (int,)
_TEXT: tuple[type, ...] = (str,)
_SESSION_TYPES: tuple[tuple[type, ...], ...] = (
    _INT, _TEXT, _INT, _INT, _TEXT, (int, type(None)), _INT, _INT, (str, type(None)), _INT,
    (str, type(None)), (bytes,), _INT)
_SESSION_AS_BLOBS = ("sid, CAST(id AS BLOB), session_key, created_ms, CAST(cwd AS BLOB), "
                     "parent_sid, seed_length, seed_chain, CAST(origin AS BLOB), "
                     "delegation_depth, CAST(agent_preset AS BLOB), metadata, header_check")
_PLACEHOLDER: dict[tuple[type, ...], Any] = {_INT: 0, _TEXT: "?", (bytes,): b""}


def _damaged(conn: apsw.Connection, table: str, sid: int | None,
             reason: str) -> CorruptionError:
    return row_damaged(conn.filename, table, sid, reason)


def _typed(conn: apsw.Connection, table: str, sid: int | None, row: Sequence[Any],
           names: str, types: Sequence[tuple[type, ...]]) -> None:
    for value, kinds, name in zip(row, types, names.split(", "), strict=True):
        if type(value) not in kinds:
            raise _damaged(conn, table, sid, f"its {name} is {type(value).__name__}")


def _readable(table: str) -> Callable[[_F], _F]:
    """Decorate a statement function ``f(conn, sid, ...)``: text that is not
    UTF-8 in a fetched row (apsw decodes text as it fetches; a flipped type
    byte can also make an integer column text) is corruption of ``table``."""
    def wrap(f: _F) -> _F:
        @functools.wraps(f)
        def read(conn: apsw.Connection, sid: int, *args: Any, **kwargs: Any) -> Any:
            try:
                return f(conn, sid, *args, **kwargs)
            except UnicodeDecodeError:
                raise _damaged(conn, table, sid, "a row holds text that is not UTF-8 (or a "
                               "value whose type changed)") from None
        return read  # type: ignore[return-value]
    return wrap


def _session_row(r: Sequence[Any], damage: str | None = None) -> SessionRow:
    if damage is None:
        for value, kinds in zip(r, _SESSION_TYPES, strict=True):
            if type(value) not in kinds:
                damage = f"a field holds {type(value).__name__}"
                break
    if damage is not None:
        # Listed, flagged: the header's own check cannot hold, reads refuse it.
        r = [v.decode("utf-8", "replace") if kinds is _TEXT and type(v) is bytes
             else v if type(v) in kinds else _PLACEHOLDER.get(kinds)
             for v, kinds in zip(r, _SESSION_TYPES, strict=True)]
    return SessionRow(int(r[0]), r[1], u64(r[2]), r[3], r[4], r[5], r[6], u64(r[7]), r[8], r[9],
                      r[10], bytes(r[11]), u64(r[12]), damage)


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
    try:
        return [_session_row(r) for r in conn.execute(
            f"SELECT {SESSION_COLUMNS} FROM sessions {where}", tuple(args))]
    except UnicodeDecodeError:
        pass
    # A text field that is not UTF-8 fails the whole statement: read row by
    # row, and the damaged ones with their text as bytes -- one damaged
    # header must not stop the listing of the others.
    out = []
    for (sid,) in conn.execute(f"SELECT sid FROM sessions {where}", tuple(args)).fetchall():
        try:
            r = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE sid = ?",
                             (sid,)).fetchall()[0]
            out.append(_session_row(r))
        except UnicodeDecodeError:
            r = conn.execute(f"SELECT {_SESSION_AS_BLOBS} FROM sessions WHERE sid = ?",
                             (sid,)).fetchall()[0]
            out.append(_session_row(r, "a text field is not UTF-8"))
    return out


_HEAD_COLUMNS = ("last_seq, chain_head, lease_owner, lease_host, lease_pid, lease_started_ms, "
                 "lease_heartbeat_ms")
_OPT_INT, _OPT_TEXT = (int, type(None)), (str, type(None))
_HEAD_TYPES = (_INT, _INT, _OPT_TEXT, _OPT_TEXT, _OPT_INT, _OPT_INT, _OPT_INT)


def _head_row(conn: apsw.Connection, sid: int, sql: str, args: tuple[Any, ...]) -> list[Any]:
    try:
        row: list[Any] = conn.execute(sql, args).fetchall()
    except UnicodeDecodeError:
        raise _damaged(conn, "session_heads", sid, "its lease holds text that is not "
                       "UTF-8") from None
    if not row:
        raise no_head(sid)
    _typed(conn, "session_heads", sid, row[0][:7], _HEAD_COLUMNS, _HEAD_TYPES)
    return list(row[0])


def session_by_id(conn: apsw.Connection, session_id: str) -> SessionRow | None:
    """The header of ``session_id``.  The id index is SQLite's (no trajlog
    check covers it): a damaged entry can lead to another session's row or
    to none, so the table itself decides whenever the index does not give
    the row asked for -- a miss costs a scan of the headers."""
    rows = sessions_where(conn, f"WHERE id = ? {NOT_DELETED}", (session_id,))
    if rows and rows[0].id == session_id:
        return rows[0]
    rows = sessions_where(conn, f"WHERE +id = ? {NOT_DELETED}",  # (+: not through the index)
                          (session_id,))
    return rows[0] if rows else None


def listing(conn: apsw.Connection, include_subagents: bool) -> list[SessionRow]:
    """Every session header (with subagents or not), oldest first.  If a
    damaged page stops the scan, the headers are read one by one -- the
    heads table names every session -- and one that cannot be read is
    listed as damaged, so that no session is silently left out and the
    others are still listed."""
    where = "" if include_subagents else "AND origin IS NULL"   # (a deleted one: never)
    try:
        return sessions_where(conn, f"WHERE 1 {NOT_DELETED} {where} ORDER BY sid", ())
    except apsw.CorruptError:
        pass
    sids: set[int] = set()
    for table in ("session_heads", "sessions"):
        with contextlib.suppress(apsw.CorruptError):   # (what was read before is kept)
            sids.update(int(r[0]) for r in conn.execute(
                f"SELECT sid FROM {table} WHERE NOT EXISTS "
                f"(SELECT 1 FROM deleted_sessions d WHERE d.sid = {table}.sid)"))
    out = []
    for sid in sorted(sids):
        try:
            rows = sessions_where(conn, "WHERE sid = ?" + (" AND origin IS NULL" if where
                                                          else ""), (sid,))
            if rows or conn.execute("SELECT 1 FROM sessions WHERE sid = ?",
                                    (sid,)).fetchall():
                out += rows
                continue
            reason = "its header row is missing"
        except apsw.CorruptError as exc:
            reason = f"its header row cannot be read ({exc})"
        out.append(SessionRow(sid, f"<damaged header, internal id {sid}>", 0, 0, "?", None, 0,
                              0, None, 0, None, b"", 0, reason))
    return out


def head(conn: apsw.Connection, sid: int) -> Head:
    last_seq, chain, owner, host, pid, started, beat = _head_row(
        conn, sid, f"SELECT {_HEAD_COLUMNS} FROM session_heads WHERE sid = ?", (sid,))
    return Head(int(last_seq), u64(chain), Lease(owner, host, pid, started, beat))


def head_stored(conn: apsw.Connection, sid: int) -> tuple[Head, int]:
    """The head and the highest seq stored for the session's own log -- in a
    chunk row or an index row -- (-1: none), in one statement: one snapshot,
    so that rows stored beyond the head (a head moved back) are told from
    rows appended meanwhile."""
    lo, hi = rid(sid, 0), rid(sid, MAX_SESSION_SEQ)
    last_seq, chain, owner, host, pid, started, beat, stored, indexed = _head_row(
        conn, sid, f"SELECT {_HEAD_COLUMNS}, (SELECT last_seq FROM chunks WHERE cid = (SELECT "
        "max(cid) FROM chunks WHERE cid BETWEEN ? AND ?)), (SELECT max(rid) FROM event_index "
        "WHERE rid BETWEEN ? AND ?) FROM session_heads WHERE sid = ?", (lo, hi, lo, hi, sid))
    if type(stored) not in _OPT_INT or type(indexed) not in _OPT_INT:
        raise _damaged(conn, "chunks", sid, "a key or last seq is not an integer")
    # an index row beyond every frame is a trace of a truncated tail too
    top = max(-1 if stored is None else int(stored),
              -1 if indexed is None else int(indexed) & 0xFFFFFFFF)
    return Head(int(last_seq), u64(chain), Lease(owner, host, pid, started, beat)), top


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


# -- chunks ---------------------------------------------------------------------

_CHUNK_TYPES = (_INT,) * 7 + ((bytes,),)
_U64 = 0xFFFFFFFFFFFFFFFF
_make = tuple.__new__


def _chunk(conn: apsw.Connection, r: Sequence[Any]) -> Chunk:
    if (type(r[0]) is not int or type(r[1]) is not int or type(r[2]) is not int
            or type(r[3]) is not int or type(r[4]) is not int or type(r[5]) is not int
            or type(r[6]) is not int or type(r[7]) is not bytes):
        _typed(conn, "chunks", r[0] >> 32 if type(r[0]) is int else None, r, CHUNK_COLUMNS,
               _CHUNK_TYPES)
    # (u64 inlined, no Chunk.__new__: a read over small rows makes one a row)
    return _make(Chunk, (r[0] & 0xFFFFFFFF, r[1], r[2], r[3], r[4] & _U64, r[5] & _U64,
                         r[6] & _U64, r[7]))


def insert_chunks(conn: apsw.Connection, rows: Iterable[Sequence[Any]]) -> None:
    conn.executemany(CHUNK_INSERT, rows)


def insert_chunk(conn: apsw.Connection, row: Sequence[Any]) -> None:
    """:func:`insert_chunks` of one row."""
    conn.execute(CHUNK_INSERT, row)


@_readable("chunks")
def chunks(conn: apsw.Connection, sid: int, first: int, last: int,
           limit: int = -1, budget: int = -1) -> list[Chunk]:
    """The rows holding seqs first..last, in order: from the row that
    contains ``first`` (or the first row after it, if none does); at most
    ``limit`` rows (-1: all), none past the one whose raw bytes reach
    ``budget`` (-1: no bound): many small rows a statement, few big ones."""
    lo, hi = bound(sid, first), bound(sid, last)
    # The limit is written into the statement: a bound LIMIT makes SQLite
    # prepare the statement anew at every call (measured: 30 us a call).
    cursor = conn.execute(
        f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE cid BETWEEN coalesce((SELECT max(cid) FROM "
        f"chunks WHERE cid BETWEEN ? AND ?), ?) AND ? ORDER BY cid LIMIT {int(limit)}",
        (rid(sid, 0), lo, lo, hi))
    if budget < 0:
        return [_chunk(conn, r) for r in cursor]
    rows, total = [], 0
    for r in cursor:
        rows.append(_chunk(conn, r))
        total += r[2]
        if total >= budget:
            cursor.close()   # (ends the statement, and the read it holds)
            break
    return rows


@_readable("chunks")
def chunk_at(conn: apsw.Connection, sid: int, seq: int) -> Chunk | None:
    """The row that contains ``seq`` (None if none does)."""
    rows: list[Any] = conn.execute(
        f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE cid BETWEEN ? AND ? ORDER BY cid DESC "
        "LIMIT 1", (rid(sid, 0), bound(sid, seq))).fetchall()
    if not rows:
        return None
    found = _chunk(conn, rows[0])
    return found if found.last_seq >= seq else None


@_readable("chunks")
def locate(conn: apsw.Connection, sid: int, seq: int,
           body: bool) -> tuple[int, int, Chunk | None]:
    """``(head's last seq, head's chain, the row holding seq or the last
    before it)`` in one statement; the row's body only when ``body`` (else
    empty)."""
    cols = CHUNK_COLUMNS if body else _CHUNK_META
    # (One statement SQLite keeps prepared: a join on the subquery would be
    # prepared anew at every call, ~30 us.)
    rows: list[Any] = conn.execute(
        "SELECT (SELECT last_seq FROM session_heads WHERE sid = ?1), (SELECT chain_head FROM "
        f"session_heads WHERE sid = ?1), {cols} FROM chunks WHERE cid BETWEEN ?2 AND ?3 "
        "ORDER BY cid DESC LIMIT 1", (sid, rid(sid, 0), bound(sid, seq))).fetchall()
    if not rows:
        got = head(conn, sid)
        return got.last_seq, got.chain, None
    last, chain = rows[0][0], rows[0][1]
    if last is None:
        raise no_head(sid)
    if type(last) is not int or type(chain) is not int:
        raise _damaged(conn, "session_heads", sid, "its last seq or chain is not an integer")
    return last, u64(chain), _chunk(conn, rows[0][2:])


def _row_ints(conn: apsw.Connection, sid: int, column: str, after: int,
              upto: int) -> list[tuple[int, int, int]]:
    """``(first_seq, n, <column>)`` of the rows starting after ``after`` up
    to ``upto``, in order (an integer column; no bodies)."""
    rows: list[Any] = conn.execute(
        f"SELECT cid, n, {column} FROM chunks WHERE cid > ? AND cid <= ? ORDER BY cid",
        (bound(sid, after), bound(sid, upto))).fetchall()
    for r in rows:   # (the common case in one test: no call per row)
        if type(r[0]) is not int or type(r[1]) is not int or type(r[2]) is not int:
            _typed(conn, "chunks", sid, r, f"cid, n, {column}", (_INT,) * 3)
    return [(r[0] & 0xFFFFFFFF, r[1], r[2]) for r in rows]


@_readable("chunks")
def chunk_meta(conn: apsw.Connection, sid: int, after: int,
               upto: int) -> list[tuple[int, int, int]]:
    """``(first_seq, n, raw_len)`` of the rows starting after ``after`` up to
    ``upto`` (no bodies: what a repack plans with)."""
    return _row_ints(conn, sid, "raw_len", after, upto)


def chunk_sizes(conn: apsw.Connection, sid: int) -> tuple[int, int, int]:
    """``(rows, raw bytes, stored bytes)`` of the session's own chunk rows:
    what ``trajlog stats`` reports as its size and compression."""
    rows: list[Any] = conn.execute(
        "SELECT count(*), coalesce(sum(raw_len), 0), coalesce(sum(length(body)), 0) "
        "FROM chunks WHERE cid > ? AND cid <= ?",
        (bound(sid, -1), bound(sid, 0xFFFFFFFF - 1))).fetchall()
    return int(rows[0][0]), int(rows[0][1]), int(rows[0][2])


@_readable("chunks")
def max_seq(conn: apsw.Connection, sid: int) -> int:
    """The highest seq stored for a session's own log (-1 when none)."""
    rows: list[Any] = conn.execute(
        "SELECT last_seq FROM chunks WHERE cid = (SELECT max(cid) FROM chunks "
        "WHERE cid BETWEEN ? AND ?)", (rid(sid, 0), rid(sid, MAX_SESSION_SEQ))).fetchall()
    if rows and type(rows[0][0]) is not int:
        raise _damaged(conn, "chunks", sid, "its last seq is not an integer")
    return -1 if not rows else int(rows[0][0])


@_readable("chunks")
def repack_run(conn: apsw.Connection, sid: int, first: int,
               last: int) -> tuple[list[Chunk], list[Mark]]:
    """The rows a repack merges -- those starting at seqs ``first`` ..
    ``last`` -- and their marks, in order: one statement."""
    rows: list[Any] = conn.execute(
        f"SELECT {CHUNK_COLUMNS}, marks FROM chunks WHERE cid BETWEEN ? AND ? ORDER BY cid",
        (rid(sid, first), rid(sid, last))).fetchall()
    chunks, marks = [], []
    for r in rows:
        chunks.append(_chunk(conn, r[:-1]))
        if r[-1] is not None:
            try:
                marks += unpack_marks(r[-1])
            except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
                raise _damaged(conn, "chunks", sid, f"its marks do not decode ({exc})") from None
    return chunks, marks


@_readable("chunks")
def row_checks(conn: apsw.Connection, sid: int, first: int,
               last: int) -> list[tuple[int, int, int]]:
    """``(first_seq, n, body_check)`` of the rows starting at seqs ``first`` ..
    ``last``, in order (no bodies)."""
    return [(seq, n, u64(check))
            for seq, n, check in _row_ints(conn, sid, "body_check", first - 1, last)]


def repack(conn: apsw.Connection, sid: int, merged: Chunk, marks: bytes | None) -> int:
    """Grow the row at ``merged.first_seq`` into ``merged`` and delete the rows
    it now holds; returns how many went."""
    key = rid(sid, merged.first_seq)
    conn.execute("UPDATE chunks SET n = ?, raw_len = ?, codec = ?, body_check = ?, "
                 "last_chain = ?, body = ?, marks = ? WHERE cid = ?",
                 (merged.n, merged.raw_len, merged.codec, i64(merged.body_check),
                  i64(merged.last_chain), merged.body, marks, key))
    conn.execute("DELETE FROM chunks WHERE cid > ? AND cid <= ?",
                 (key, rid(sid, merged.last_seq)))
    return int(conn.changes())


@_readable("chunks")
def marks(conn: apsw.Connection, sid: int, first: int, last: int) -> list[Mark]:
    """The marks of seqs first..last (from the rows that hold them)."""
    lo, hi = bound(sid, first), bound(sid, last)
    out: list[Mark] = []
    for (blob,) in conn.execute(
            "SELECT marks FROM chunks WHERE cid BETWEEN coalesce((SELECT max(cid) FROM chunks "
            "WHERE cid BETWEEN ? AND ?), ?) AND ? AND marks IS NOT NULL ORDER BY cid",
            (rid(sid, 0), lo, lo, hi)):
        try:
            found = unpack_marks(blob)
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
            raise _damaged(conn, "chunks", sid, f"its marks do not decode ({exc})") from None
        out += [m for m in found if first <= m.seq <= last]
    return out


# -- the event index ---------------------------------------------------------------

def insert_index(conn: apsw.Connection, rows: Iterable[Sequence[Any]]) -> None:
    conn.executemany(INDEX_INSERT, rows)


def index_range(conn: apsw.Connection, sid: int, after: int, upto: int) -> list[IndexRow]:
    """The index rows of seqs after ``after`` up to ``upto``, in order."""
    # (A wrong type in a copied column is found when the row is compared
    # with its frame; only its key must be an integer here.)
    try:
        rows: list[Any] = conn.execute(
            f"SELECT {INDEX_COLUMNS} FROM event_index WHERE rid > ? AND rid <= ? ORDER BY rid",
            (bound(sid, after), bound(sid, upto))).fetchall()
    except UnicodeDecodeError:
        raise _damaged(conn, "event_index", sid, "a row holds text that is not "
                       "UTF-8") from None
    return [IndexRow(int(r[0]) & 0xFFFFFFFF, *r[1:]) for r in rows]


@_readable("event_index")
def seq_of_idempotency_key(conn: apsw.Connection, sid: int, key: str) -> int | None:
    rows: list[Any] = conn.execute(
        "SELECT seq FROM event_index WHERE sid = ? AND idempotency_key = ?",
        (sid, key)).fetchall()
    return int(rows[0][0]) if rows else None


def marker_at_or_before(conn: apsw.Connection, sid: int, type_: str, seq: int) -> int | None:
    """The last seq <= ``seq`` of an event of ``type_`` (an indexed marker type)."""
    index, where = _MARKERS[type_]
    # the type is a literal so that the planner can use the partial index
    rows: list[Any] = conn.execute(
        f"SELECT max(rid) FROM event_index INDEXED BY {index} WHERE {where} AND "
        f"type = '{type_}' AND rid BETWEEN ? AND ?", (rid(sid, 0), bound(sid, seq))).fetchall()
    return None if rows[0][0] is None else int(rows[0][0]) & 0xFFFFFFFF


def marker_after(conn: apsw.Connection, sid: int, type_: str, seq: int) -> int | None:
    """The first seq > ``seq`` of an event of ``type_`` (an indexed marker type)."""
    index, where = _MARKERS[type_]
    rows: list[Any] = conn.execute(
        f"SELECT min(rid) FROM event_index INDEXED BY {index} WHERE {where} AND "
        f"type = '{type_}' AND rid > ? AND rid <= ?",
        (bound(sid, seq), rid(sid, MAX_SESSION_SEQ))).fetchall()
    return None if rows[0][0] is None else int(rows[0][0]) & 0xFFFFFFFF


# (the key helpers live in .keys, re-exported here for the SQLite modules)
__all__ = ["CHUNK_COLUMNS", "CHUNK_INSERT", "INDEX_COLUMNS", "INDEX_INSERT", "MAX_SESSIONS",
           "MAX_SESSION_SEQ", "bound", "chunk_at", "chunk_meta", "chunk_row", "chunk_rows",
           "chunk_sizes", "chunks", "head", "i64", "index_rows", "insert_chunk", "insert_chunks",
           "insert_index", "insert_session", "lease", "no_head", "now_ms", "rid", "set_lease",
           "u64"]
