"""The PostgreSQL statements of sessions, heads, chunks, the event index, call
rows and projection states, as functions over a psycopg connection (inside a
transaction whose ``trajlog.tenant`` is set: :mod:`.postgres`).

Every statement names the tenant itself (``tenant_id =
current_setting('trajlog.tenant')``) besides row-level security: the key's
leading column for the index, and isolation that holds for a role that
bypasses RLS too.  Keys are ``(sid << 32) + seq`` and u64 values are i64 in
the tables, as in SQLite (:mod:`.keys`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import psycopg

from ..codec.chunks import Chunk
from ..errors import row_damaged
from ..event_types import INDEX_ROWS
from . import keys
from .base import Head, Lease, SessionRow
from .event_index import IndexRow, Mark, unpack_marks
from .keys import MAX_SESSION_SEQ, bound, i64, no_head, rid, u64
from .postgres_deleted import NOT_DELETED

Conn = psycopg.Connection[Any]
T = "tenant_id = current_setting('trajlog.tenant')"
SESSION_COLUMNS = ("sid, id, session_key, created_ms, cwd, parent_sid, seed_length, seed_chain, "
                   "origin, delegation_depth, agent_preset, metadata, header_check")
CHUNK_COLUMNS = "cid, n, raw_len, codec, body_check, seed_chain, last_chain, body"
_CHUNK_META = "cid, n, raw_len, codec, body_check, seed_chain, last_chain, ''::bytea"
CHUNK_INSERT = (f"INSERT INTO chunks({CHUNK_COLUMNS}, marks) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)")
INDEX_COLUMNS = ("rid, type, time_ms, source, causal_parent, workspace_revision, data_class, "
                 "idempotency_key")
INDEX_INSERT = f"INSERT INTO event_index({INDEX_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)"
CALL_INSERT = "INSERT INTO call_index(sid, call_id, seq) VALUES (%s, %s, %s)"
HEAD_COLUMNS = ("last_seq, chain_head, lease_owner, lease_host, lease_pid, lease_started_ms, "
                "lease_heartbeat_ms")
_U64 = 0xFFFFFFFFFFFFFFFF


def _all(conn: Conn, query: str, args: Sequence[Any] = ()) -> list[Any]:
    return conn.execute(query, args).fetchall()


def _session_row(r: Sequence[Any]) -> SessionRow:
    return SessionRow(int(r[0]), r[1], u64(r[2]), r[3], r[4], r[5], r[6], u64(r[7]), r[8], r[9],
                      r[10], bytes(r[11]), u64(r[12]))


def chunk(r: Sequence[Any]) -> Chunk:
    return Chunk(r[0] & 0xFFFFFFFF, r[1], r[2], r[3], r[4] & _U64, r[5] & _U64, r[6] & _U64,
                 bytes(r[7]))


def _head(r: Sequence[Any]) -> Head:
    return Head(int(r[0]), u64(r[1]), Lease(r[2], r[3], r[4], r[5], r[6]))


# -- sessions and heads ---------------------------------------------------------

def insert_session(conn: Conn, row: SessionRow, last_seq: int, chain_head: int) -> int:
    """The header and its head, in one round trip (the head takes the sid
    the header was just given)."""
    with conn.pipeline():
        cur = conn.execute(
            "INSERT INTO sessions(id, session_key, created_ms, cwd, parent_sid, seed_length, "
            "seed_chain, origin, delegation_depth, agent_preset, metadata, header_check) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING sid",
            (row.id, i64(row.key), row.created_ms, row.cwd, row.parent_sid, row.seed_length,
             i64(row.seed_chain), row.origin, row.delegation_depth, row.agent_preset,
             row.metadata, i64(row.header_check)))
        conn.execute("INSERT INTO session_heads(sid, last_seq, chain_head) "
                     "VALUES (currval('sid_seq'), %s, %s)", (last_seq, i64(chain_head)))
        found = cur.fetchone()
    assert found is not None
    return int(found[0])


def sessions_where(conn: Conn, where: str, args: Sequence[Any]) -> list[SessionRow]:
    return [_session_row(r) for r in _all(
        conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE {T} {where}", args)]


def listing(conn: Conn, include_subagents: bool) -> list[SessionRow]:
    return sessions_where(conn, ("" if include_subagents else "AND origin IS NULL ")
                          + f"{NOT_DELETED} ORDER BY sid", ())


def head(conn: Conn, sid: int, lock: bool = False) -> Head:
    rows = _all(conn, f"SELECT {HEAD_COLUMNS} FROM session_heads WHERE {T} AND sid = %s"
                + (" FOR UPDATE" if lock else ""), (sid,))
    if not rows:
        raise no_head(sid)
    return _head(rows[0])


def lock_heads_sql(sids: Sequence[int]) -> str:
    """The statement locking the head rows of ``sids`` in sid order (the
    sids written into it: it may go in one simple query with the BEGIN)."""
    keys_ = ",".join(str(int(sid)) for sid in sorted(sids))
    return (f"SELECT sid, {HEAD_COLUMNS} FROM session_heads WHERE {T} AND "
            f"sid = ANY('{{{keys_}}}'::bigint[]) ORDER BY sid FOR UPDATE")


def heads_of(rows: Sequence[Any]) -> dict[int, Head]:
    return {int(r[0]): _head(r[1:]) for r in rows}


def lock_heads(conn: Conn, sids: Sequence[int]) -> dict[int, Head]:
    """Lock the head rows of ``sids`` in sid order (one statement)."""
    return heads_of(_all(conn, lock_heads_sql(sids)))


def head_stored(conn: Conn, sid: int) -> tuple[Head, int]:
    lo, hi = rid(sid, 0), rid(sid, MAX_SESSION_SEQ)
    rows = _all(conn,
                f"SELECT {HEAD_COLUMNS}, (SELECT last_seq FROM chunks WHERE {T} AND cid = "
                f"(SELECT max(cid) FROM chunks WHERE {T} AND cid BETWEEN %s AND %s)), "
                f"(SELECT max(rid) FROM event_index WHERE {T} AND rid BETWEEN %s AND %s) "
                f"FROM session_heads WHERE {T} AND sid = %s", (lo, hi, lo, hi, sid))
    if not rows:
        raise no_head(sid)
    r = rows[0]
    top = max(-1 if r[7] is None else int(r[7]), -1 if r[8] is None else int(r[8]) & 0xFFFFFFFF)
    return _head(r[:7]), top


def set_lease(conn: Conn, sid: int, lease: Lease) -> None:
    conn.execute(f"UPDATE session_heads SET lease_owner = %s, lease_host = %s, lease_pid = %s, "
                 f"lease_started_ms = %s, lease_heartbeat_ms = %s WHERE {T} AND sid = %s",
                 (*lease, sid))


def heartbeat(conn: Conn, sid: int, owner: str) -> int | None:
    """Stamp the lease's heartbeat with the server's clock; the stamp (None:
    ``owner`` does not hold the lease)."""
    rows = _all(conn, "UPDATE session_heads SET lease_heartbeat_ms = (extract(epoch FROM "
                f"clock_timestamp()) * 1000)::bigint WHERE {T} AND sid = %s AND "
                "lease_owner = %s RETURNING lease_heartbeat_ms", (sid, owner))
    return int(rows[0][0]) if rows else None


# -- chunks ---------------------------------------------------------------------

def _limit(limit: int) -> int | None:
    return None if limit < 0 else limit   # (LIMIT NULL is no limit)


def _range_sql(columns: str, budget: int) -> str:
    """The rows holding first..last from the row containing first, at most a
    limit of them, none past the one whose raw bytes reach the budget."""
    inner = (f"SELECT {columns}, coalesce(sum(raw_len) OVER (ORDER BY cid ROWS BETWEEN "
             "UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before FROM chunks "
             f"WHERE {T} AND cid BETWEEN coalesce((SELECT max(cid) FROM chunks WHERE {T} AND "
             "cid BETWEEN %s AND %s), %s) AND %s ORDER BY cid LIMIT %s")
    if budget < 0:
        return inner.replace(", coalesce(sum(raw_len) OVER (ORDER BY cid ROWS BETWEEN "
                             "UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before", "")
    return f"SELECT {columns} FROM ({inner}) r WHERE before < %s ORDER BY cid"


def _range_args(sid: int, first: int, last: int, limit: int, budget: int) -> list[Any]:
    lo, hi = bound(sid, first), bound(sid, last)
    args: list[Any] = [rid(sid, 0), lo, lo, hi, _limit(limit)]
    return [*args, budget] if budget >= 0 else args


def chunks(conn: Conn, sid: int, first: int, last: int, limit: int = -1,
           budget: int = -1) -> list[Chunk]:
    return [chunk(r) for r in _all(conn, _range_sql(CHUNK_COLUMNS, budget),
                                   _range_args(sid, first, last, limit, budget))]


def _marks_of(blob: bytes | None, sid: int) -> list[Mark]:
    if blob is None:
        return []
    try:
        return unpack_marks(bytes(blob))
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
        raise row_damaged("postgresql", "chunks", sid,
                          f"its marks do not decode ({exc})") from None


def log_range(conn: Conn, sid: int, first: int, last: int, limit: int,
              budget: int) -> tuple[list[Chunk], list[IndexRow], list[Mark]]:
    """The chunk rows (with their marks) and the index rows of the seqs they
    hold, in one statement (one snapshot, one round trip)."""
    rows_sql = _range_sql(CHUNK_COLUMNS + ", marks", budget)
    nulls = ", NULL" * 8
    query = (f"WITH c AS MATERIALIZED ({rows_sql}), b AS (SELECT min(cid) AS lo, "
             "max(cid + n - 1) AS hi FROM c) "
             f"SELECT 0 AS kind, {CHUNK_COLUMNS}, marks{nulls} FROM c UNION ALL "
             f"SELECT 1, rid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, type, time_ms, "
             "source, causal_parent, workspace_revision, data_class, idempotency_key, NULL "
             f"FROM event_index, b WHERE {T} AND rid BETWEEN b.lo AND b.hi ORDER BY 1, 2")
    out: list[Chunk] = []
    index: list[IndexRow] = []
    marks: list[Mark] = []
    for r in _all(conn, query, _range_args(sid, first, last, limit, budget)):
        if r[0] == 0:
            out.append(chunk(r[1:9]))
            marks += _marks_of(r[9], sid)
        else:
            index.append(IndexRow(int(r[1]) & 0xFFFFFFFF, *r[10:17]))
    return out, index, marks   # (the marks of exactly the rows read, as SQLite's)


def chunk_at(conn: Conn, sid: int, seq: int) -> Chunk | None:
    rows = _all(conn, f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE {T} AND cid BETWEEN %s AND %s "
                "ORDER BY cid DESC LIMIT 1", (rid(sid, 0), bound(sid, seq)))
    if not rows:
        return None
    found = chunk(rows[0])
    return found if found.last_seq >= seq else None


def locate(conn: Conn, sid: int, seq: int, body: bool) -> tuple[int, int, Chunk | None]:
    cols = CHUNK_COLUMNS if body else _CHUNK_META
    rows = _all(conn, f"SELECT h.last_seq, h.chain_head, c.* FROM session_heads h LEFT JOIN "
                f"LATERAL (SELECT {cols} FROM chunks WHERE {T} AND cid BETWEEN %s AND %s "
                f"ORDER BY cid DESC LIMIT 1) c ON true WHERE h.{T} AND h.sid = %s",
                (rid(sid, 0), bound(sid, seq), sid))
    if not rows:
        raise no_head(sid)
    r = rows[0]
    return int(r[0]), u64(r[1]), None if r[2] is None else chunk(r[2:])


def _row_ints(conn: Conn, sid: int, column: str, after: int,
              upto: int) -> list[tuple[int, int, int]]:
    rows = _all(conn, f"SELECT cid, n, {column} FROM chunks WHERE {T} AND cid > %s AND "
                "cid <= %s ORDER BY cid", (bound(sid, after), bound(sid, upto)))
    return [(r[0] & 0xFFFFFFFF, r[1], r[2]) for r in rows]


def chunk_meta(conn: Conn, sid: int, after: int, upto: int) -> list[tuple[int, int, int]]:
    return _row_ints(conn, sid, "raw_len", after, upto)


def row_checks(conn: Conn, sid: int, first: int, last: int) -> list[tuple[int, int, int]]:
    return [(seq, n, u64(check))
            for seq, n, check in _row_ints(conn, sid, "body_check", first - 1, last)]


def chunk_sizes(conn: Conn, sid: int) -> tuple[int, int, int]:
    r = _all(conn, "SELECT count(*), coalesce(sum(raw_len), 0), coalesce(sum(length(body)), 0) "
             f"FROM chunks WHERE {T} AND cid > %s AND cid <= %s",
             (bound(sid, -1), bound(sid, 0xFFFFFFFF - 1)))[0]
    return int(r[0]), int(r[1]), int(r[2])


def max_seq(conn: Conn, sid: int) -> int:
    rows = _all(conn, f"SELECT last_seq FROM chunks WHERE {T} AND cid = (SELECT max(cid) FROM "
                f"chunks WHERE {T} AND cid BETWEEN %s AND %s)",
                (rid(sid, 0), rid(sid, MAX_SESSION_SEQ)))
    return -1 if not rows else int(rows[0][0])


def repack_run(conn: Conn, sid: int, first: int, last: int) -> tuple[list[Chunk], list[Mark]]:
    rows = _all(conn, f"SELECT {CHUNK_COLUMNS}, marks FROM chunks WHERE {T} AND cid BETWEEN %s "
                "AND %s ORDER BY cid", (rid(sid, first), rid(sid, last)))
    out, marks = [], []
    for r in rows:
        out.append(chunk(r[:8]))
        marks += _marks_of(r[8], sid)
    return out, marks


def repack(conn: Conn, sid: int, merged: Chunk, marks: bytes | None) -> int:
    key = rid(sid, merged.first_seq)
    with conn.pipeline():
        conn.execute(f"UPDATE chunks SET n = %s, raw_len = %s, codec = %s, body_check = %s, "
                     f"last_chain = %s, body = %s, marks = %s WHERE {T} AND cid = %s",
                     (merged.n, merged.raw_len, merged.codec, i64(merged.body_check),
                      i64(merged.last_chain), merged.body, marks, key))
        cur = conn.execute(f"DELETE FROM chunks WHERE {T} AND cid > %s AND cid <= %s",
                           (key, rid(sid, merged.last_seq)))
    return int(cur.rowcount)


def marks(conn: Conn, sid: int, first: int, last: int) -> list[Mark]:
    lo, hi = bound(sid, first), bound(sid, last)
    out: list[Mark] = []
    for (blob,) in _all(conn, f"SELECT marks FROM chunks WHERE {T} AND cid BETWEEN coalesce("
                        f"(SELECT max(cid) FROM chunks WHERE {T} AND cid BETWEEN %s AND %s), "
                        "%s) AND %s AND marks IS NOT NULL ORDER BY cid",
                        (rid(sid, 0), lo, lo, hi)):
        out += [m for m in _marks_of(blob, sid) if first <= m.seq <= last]
    return out


_LEASE_OF_H = ", ".join(f"(SELECT {c} FROM h)" for c in (
    "lease_owner", "lease_host", "lease_pid", "lease_started_ms", "lease_heartbeat_ms"))


def insert_at_head(conn: Conn, sid: int, row: Chunk, mark: bytes | None) -> Head | None:
    """A single append's chunk row in one statement that first locks the
    head: inserted only when it starts at the head's next seq.  The head it
    moved to (None: it had moved -- nothing written, the transaction goes on)."""
    params = keys.chunk_row(sid, row, mark)
    found = _all(conn, f"WITH h AS (SELECT {HEAD_COLUMNS} FROM session_heads WHERE {T} AND "
                 f"sid = %s FOR UPDATE) INSERT INTO chunks({CHUNK_COLUMNS}, marks) "
                 "SELECT %s,%s,%s,%s,%s,%s,%s,%s,%s FROM h WHERE h.last_seq = %s "
                 f"RETURNING {_LEASE_OF_H}", (sid, *params, row.first_seq - 1))
    if not found:
        return None
    return Head(row.last_seq, row.last_chain, Lease(*found[0]))


def insert(conn: Conn, sid: int, rows: Sequence[Chunk], index: Sequence[IndexRow],
           packed: Sequence[bytes | None], calls: Sequence[tuple[str, int]]) -> None:
    """Chunk rows, each followed by its index rows, then the call rows: one
    statement per row (the append trigger checks each against the head the
    one before moved), all in one round trip."""
    params = keys.chunk_rows(sid, rows, packed)
    with conn.pipeline():
        cur = conn.cursor()
        i = 0
        for c, p in zip(rows, params, strict=True):
            cur.execute(CHUNK_INSERT, p)
            j = i
            while j < len(index) and index[j].seq <= c.last_seq:
                j += 1
            if j > i:
                cur.executemany(INDEX_INSERT, keys.index_rows(sid, index[i:j]))
            i = j
        if calls:
            cur.executemany(CALL_INSERT, [(sid, call_id, seq) for call_id, seq in calls])


# -- the event index, call rows, projection states -----------------------------

def index_range(conn: Conn, sid: int, after: int, upto: int) -> list[IndexRow]:
    rows = _all(conn, f"SELECT {INDEX_COLUMNS} FROM event_index WHERE {T} AND rid > %s AND "
                "rid <= %s ORDER BY rid", (bound(sid, after), bound(sid, upto)))
    return [IndexRow(int(r[0]) & 0xFFFFFFFF, *r[1:]) for r in rows]


def seq_of_idempotency_key(conn: Conn, sid: int, key: str) -> int | None:
    rows = _all(conn, f"SELECT rid FROM event_index WHERE {T} AND rid >> 32 = %s AND "
                "idempotency_key = %s", (sid, key))
    return int(rows[0][0]) & 0xFFFFFFFF if rows else None


def marker(conn: Conn, sid: int, type_: str, seq: int, after: bool) -> int | None:
    """The first seq after ``seq`` (``after``) or the last one at or before it
    of a marker event of ``type_``: a seek of the partial index (the type is
    a literal -- a registered type with index rows -- so that every plan can
    use it)."""
    if type_ not in INDEX_ROWS:
        raise KeyError(type_)
    if after:
        agg, where, args = "min", "rid > %s AND rid <= %s", (bound(sid, seq),
                                                              rid(sid, MAX_SESSION_SEQ))
    else:
        agg, where, args = "max", "rid BETWEEN %s AND %s", (rid(sid, 0), bound(sid, seq))
    found = _all(conn, f"SELECT {agg}(rid) FROM event_index WHERE {T} AND type = '{type_}' "
                 f"AND {where}", args)[0][0]
    return None if found is None else int(found) & 0xFFFFFFFF


def call_requested(conn: Conn, sid: int, call_id: str) -> int | None:
    rows = _all(conn, f"SELECT seq FROM call_index WHERE {T} AND sid = %s AND call_id = %s",
                (sid, call_id))
    return int(rows[0][0]) if rows else None


def calls_requested(conn: Conn, sid: int, call_ids: Sequence[str]) -> dict[str, int]:
    if not call_ids:
        return {}
    return {r[0]: int(r[1]) for r in _all(
        conn, f"SELECT call_id, seq FROM call_index WHERE {T} AND sid = %s AND "
        "call_id = ANY(%s)", (sid, list(call_ids)))}


def call_count(conn: Conn, sid: int) -> int:
    return int(_all(conn, f"SELECT count(*) FROM call_index WHERE {T} AND sid = %s",
                    (sid,))[0][0])


def projection_state(conn: Conn, sid: int, name: str,
                     version: int) -> tuple[int, int, bytes] | None:
    rows = _all(conn, f"SELECT seq, chain, state FROM projection_states WHERE {T} AND sid = %s "
                "AND name = %s AND version = %s", (sid, name, version))
    return (int(rows[0][0]), u64(rows[0][1]), bytes(rows[0][2])) if rows else None


def save_projection_state(conn: Conn, sid: int, name: str, version: int, seq: int, chain: int,
                          state: bytes) -> None:
    with conn.pipeline():
        conn.execute(f"DELETE FROM projection_states WHERE {T} AND sid = %s AND name = %s",
                     (sid, name))
        conn.execute("INSERT INTO projection_states(sid, name, version, seq, chain, state) "
                     "VALUES (%s,%s,%s,%s,%s,%s)", (sid, name, version, seq, i64(chain), state))


def drop_projection_states(conn: Conn, sid: int) -> int:
    cur = conn.execute(f"DELETE FROM projection_states WHERE {T} AND sid = %s", (sid,))
    return int(cur.rowcount)


__all__ = ["CHUNK_COLUMNS", "HEAD_COLUMNS", "INDEX_COLUMNS", "SESSION_COLUMNS", "Conn", "T",
           "chunk", "head", "insert", "lock_heads"]
