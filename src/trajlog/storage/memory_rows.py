"""The SQL of memory versions, tombstones, the memory full-text index and the
erasure of stored payloads (schema 6).

Rows are plain tuples at the Backend seam (:class:`MemoryRow`,
:class:`TombstoneRow`); every frame and check is made and read by the codec.
Scope predicates are built here, from an identity's scopes, and go into the
same ``WHERE`` as the full-text match: they filter before ``ORDER BY rank``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from ..codec.chunks import Chunk
from ..errors import record_damaged
from . import statements as st
from .base import MemoryRow, Scope, TombstoneRow
from .memory_match import MergeKey, pick_matches

MEMORY_COLUMNS = ("mid, item_id, version, tenant, scope, scope_key, type, state, key, digest, "
                  "source_sid, source_seq, expires_ms, until_event, sensitivity, created_ms, frame")
_M_COLUMNS = ", ".join("m." + c for c in MEMORY_COLUMNS.split(", "))   # (aliased m)
TOMBSTONE_COLUMNS = ("tid, target_kind, target_sid, target_seq, target_item, reason, actor, "
                     "created_ms, frame")


def _memory(r: Sequence[Any]) -> MemoryRow:
    try:
        return MemoryRow(int(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]), str(r[5]),
                         str(r[6]), str(r[7]), None if r[8] is None else str(r[8]),
                         bytes(r[9]), None if r[10] is None else int(r[10]),
                         None if r[11] is None else int(r[11]),
                         None if r[12] is None else int(r[12]),
                         None if r[13] is None else str(r[13]), str(r[14]), int(r[15]),
                         bytes(r[16]))
    except (TypeError, ValueError) as exc:
        raise record_damaged(f"memory version row {r[0]!r} holds a value of the wrong type "
                              f"({exc})") from None


def _tombstone(r: Sequence[Any]) -> TombstoneRow:
    try:
        return TombstoneRow(int(r[0]), str(r[1]), None if r[2] is None else int(r[2]),
                            None if r[3] is None else int(r[3]),
                            None if r[4] is None else str(r[4]), str(r[5]),
                            None if r[6] is None else str(r[6]), int(r[7]), bytes(r[8]))
    except (TypeError, ValueError) as exc:
        raise record_damaged(f"tombstone row {r[0]!r} holds a value of the wrong type "
                              f"({exc})") from None


def scope_sql(tenant: str, scopes: Sequence[Scope], alias: str = "") -> tuple[str, list[Any]]:
    """The mandatory scope predicate of a query: global items, or the
    tenant's items in one of ``scopes``."""
    a = f"{alias}." if alias else ""
    parts, args = [f"{a}scope = 'global'"], []
    inner = []
    for scope, key in scopes:
        if scope == "global":
            continue
        inner.append(f"({a}scope = ? AND {a}scope_key = ?)")
        args += [scope, key]
    if inner:
        parts.append(f"({a}tenant = ? AND ({' OR '.join(inner)}))")
        args = [tenant, *args]
    return "(" + " OR ".join(parts) + ")", args


def _in(column: str, values: Sequence[str] | None) -> tuple[str, list[Any]]:
    if not values:
        return "", []
    return f" AND {column} IN ({', '.join('?' * len(values))})", list(values)


# -- reads --------------------------------------------------------------------

def max_mid(conn: apsw.Connection) -> int:
    row: Any = conn.execute("SELECT coalesce(max(mid), 0) FROM memories").fetchall()[0][0]
    return int(row)


def versions(conn: apsw.Connection, item_id: str) -> list[MemoryRow]:
    return [_memory(r) for r in conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories WHERE item_id = ? ORDER BY version",
        (item_id,))]


def latest_of(conn: apsw.Connection, item_id: str) -> MemoryRow | None:
    """The latest version of one item (None: no such item)."""
    rows = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE item_id = ? "
                        "ORDER BY version DESC LIMIT 1", (item_id,)).fetchall()
    return _memory(rows[0]) if rows else None


def version_at(conn: apsw.Connection, mid: int) -> MemoryRow | None:
    rows = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE mid = ?",
                        (mid,)).fetchall()
    return _memory(rows[0]) if rows else None


_LATEST = "m.version = (SELECT max(version) FROM memories v WHERE v.item_id = m.item_id)"


def current(conn: apsw.Connection, tenant: str, scopes: Sequence[Scope],
            types: Sequence[str] | None, states: Sequence[str] | None, key: str | None,
            limit: int) -> list[MemoryRow]:
    """The latest version of every item in scope, oldest item first."""
    where, args = scope_sql(tenant, scopes, "m")
    t_sql, t_args = _in("m.type", types)
    s_sql, s_args = _in("m.state", states)
    # a key lookup names the tenant outside the scope OR (global items have
    # tenant ''), so the planner seeks memories_key instead of scanning the scope
    k_sql, k_args = ((" AND m.key = ? AND m.tenant IN ('', ?)", [key, tenant])
                     if key is not None else ("", []))
    return [_memory(r) for r in conn.execute(
        f"SELECT {_M_COLUMNS} FROM memories m "
        f"WHERE {_LATEST} AND {where}{t_sql}{s_sql}{k_sql} ORDER BY m.mid LIMIT ?",
        (*args, *t_args, *s_args, *k_args, limit))]


def latest_keyed(conn: apsw.Connection, tenant: str, scope: str, scope_key: str,
                 key: str) -> MemoryRow | None:
    """The newest item holding ``key`` in one (non-global) scope, as its
    latest version: a seek of ``memories_key``, pinned (unpinned, the
    planner walks the whole scope through ``memories_scope``).  A row that
    is not its item's latest version is never returned (an item whose
    latest version left the scope is not in it)."""
    rows = conn.execute(
        f"SELECT {_M_COLUMNS} FROM memories m INDEXED BY memories_key "
        f"WHERE m.tenant = ? AND m.key = ? AND m.scope = ? AND m.scope_key = ? AND {_LATEST} "
        "ORDER BY m.mid DESC LIMIT 1", (tenant, key, scope, scope_key)).fetchall()
    return _memory(rows[0]) if rows else None


def merge_match(conn: apsw.Connection, digest: bytes, tenant: str, scope: str, scope_key: str,
                type_: str, key: str | None) -> MemoryRow | None:
    """The first item whose latest version has this (digest, scope, type,
    key) and is not revoked: a merge returns it instead of writing again.
    The key is part of it: the same content under another key is another
    item (else that key would never be stored)."""
    # (no ORDER BY in SQL: with it the planner spends ~60 us on an empty match)
    found: list[Any] = conn.execute(
        "SELECT mid, item_id FROM memories WHERE digest = ? AND scope = ? AND scope_key = ? "
        "AND type = ? AND tenant = ? AND key IS ?",
        (digest, scope, scope_key, type_, tenant, key)).fetchall()
    for _mid, item_id in sorted(found):
        latest: list[Any] = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE "
                                         "item_id = ? ORDER BY version DESC LIMIT 1",
                                         (item_id,)).fetchall()
        if latest and latest[0][7] != "revoked" and bytes(latest[0][9]) == digest:
            return _memory(latest[0])
    return None


# merge_matches binds this many digests per statement (padded with repeats):
# a few statement texts, each prepared once
_MERGE_BUCKETS = (1, 8, 64, 500)


def merge_matches(conn: apsw.Connection,
                  wanted: Sequence[MergeKey]) -> dict[MergeKey, MemoryRow]:
    """:func:`merge_match` of many (digest, tenant, scope, scope_key, type,
    key) at once: one look-up of the digests per up to 500, then the latest
    version of each candidate whose whole key is wanted."""
    want = set(wanted)
    digests = sorted({w[0] for w in want})
    found: list[Any] = []
    while digests:
        size = next((b for b in _MERGE_BUCKETS if b >= len(digests)), _MERGE_BUCKETS[-1])
        part, digests = digests[:size], digests[size:]
        part += [part[-1]] * (size - len(part))
        found += conn.execute(
            "SELECT mid, item_id, digest, tenant, scope, scope_key, type, key FROM memories "
            f"WHERE digest IN ({', '.join('?' * size)})", part).fetchall()
    return pick_matches(sorted(found), want, lambda item_id: latest_of(conn, item_id))


def expired(conn: apsw.Connection, now_ms: int, limit: int) -> list[MemoryRow]:
    """Latest versions past their expiry that are not revoked."""
    return [_memory(r) for r in conn.execute(
        f"SELECT {_M_COLUMNS} FROM memories m "
        f"WHERE m.expires_ms IS NOT NULL AND m.expires_ms <= ? AND {_LATEST} "
        f"AND m.state != 'revoked' ORDER BY m.mid LIMIT ?", (now_ms, limit))]


def until_event(conn: apsw.Connection, limit: int) -> list[MemoryRow]:
    """Latest versions kept until an event, not revoked."""
    return [_memory(r) for r in conn.execute(
        f"SELECT {_M_COLUMNS} FROM memories m "
        f"WHERE m.until_event IS NOT NULL AND {_LATEST} AND m.state != 'revoked' "
        f"ORDER BY m.mid LIMIT ?", (limit,))]


def latest(conn: apsw.Connection, after_mid: int, limit: int) -> list[MemoryRow]:
    """The latest version of every item, in mid order."""
    return [_memory(r) for r in conn.execute(
        f"SELECT {_M_COLUMNS} FROM memories m "
        f"WHERE m.mid > ? AND {_LATEST} ORDER BY m.mid LIMIT ?", (after_mid, limit))]


def all_versions(conn: apsw.Connection, after_mid: int, limit: int) -> list[MemoryRow]:
    return [_memory(r) for r in conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories WHERE mid > ? ORDER BY mid LIMIT ?",
        (after_mid, limit))]


def fts_exists(conn: apsw.Connection) -> bool:
    return bool(conn.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'table' "
                             "AND name = 'memory_fts'").fetchall()[0][0])


def fts_match(words: Sequence[str]) -> str:
    """The FTS5 query matching every one of ``words``, each a quoted string
    (so that no word is read as FTS5 syntax)."""
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def search(conn: apsw.Connection, match: str, tenant: str, scopes: Sequence[Scope],
           types: Sequence[str] | None, limit: int) -> list[MemoryRow]:
    """Active versions matching ``match`` (an FTS5 query), best first; the
    scope and type filters are in the same WHERE, applied before the rank."""
    select, args = _active_matches(match, tenant, scopes, types)
    return [_memory(r) for r in conn.execute(f"{select} ORDER BY f.rank LIMIT ?",
                                             (*args, limit))]


def _active_matches(match: str, tenant: str, scopes: Sequence[Scope],
                    types: Sequence[str] | None) -> tuple[str, list[Any]]:
    """The SELECT of the active latest versions matching ``match`` in the
    scopes and types, and its bindings.  Only an item's active latest version:
    a stale index row (the index is derived) is left out before any LIMIT."""
    where, args = scope_sql(tenant, scopes, "f")
    t_sql, t_args = _in("f.type", types)
    return (f"SELECT {_M_COLUMNS} "
            f"FROM memory_fts f JOIN memories m ON m.mid = f.rowid "
            f"WHERE memory_fts MATCH ? AND {where}{t_sql} AND m.state = 'active' AND {_LATEST}",
            [match, *args, *t_args])


def recent(conn: apsw.Connection, match: str, tenant: str, scopes: Sequence[Scope],
           types: Sequence[str] | None, before: tuple[int, int],
           limit: int) -> list[MemoryRow]:
    """Active latest versions matching ``match``, the latest written first
    (``created_ms``, then ``mid``, descending), from just before ``before``
    = (created_ms, mid): one page of a walk that stops when it has enough.
    The FTS5 match without ``ORDER BY rank`` compiles nothing of its own."""
    select, args = _active_matches(match, tenant, scopes, types)
    return [_memory(r) for r in conn.execute(
        f"{select} AND (m.created_ms < ? OR (m.created_ms = ? AND m.mid < ?)) "
        f"ORDER BY m.created_ms DESC, m.mid DESC LIMIT ?",
        (*args, before[0], before[0], before[1], limit))]


def fts_indexed(conn: apsw.Connection, mids: Sequence[int]) -> list[int]:
    out = []
    for mid in mids:
        if conn.execute("SELECT 1 FROM memory_fts WHERE rowid = ?", (mid,)).fetchall():
            out.append(mid)
    return out


def fts_rows(conn: apsw.Connection) -> int:
    row: Any = conn.execute("SELECT count(*) FROM memory_fts").fetchall()[0][0]
    return int(row)


def tombstone_event(conn: apsw.Connection, sid: int, seq: int) -> TombstoneRow | None:
    rows = conn.execute(f"SELECT {TOMBSTONE_COLUMNS} FROM tombstones WHERE target_kind = "
                        "'event' AND target_sid = ? AND target_seq = ?", (sid, seq)).fetchall()
    return _tombstone(rows[0]) if rows else None


def tombstone_item(conn: apsw.Connection, item_id: str) -> TombstoneRow | None:
    rows = conn.execute(f"SELECT {TOMBSTONE_COLUMNS} FROM tombstones WHERE target_kind = "
                        "'memory' AND target_item = ?", (item_id,)).fetchall()
    return _tombstone(rows[0]) if rows else None


def tombstones(conn: apsw.Connection, after_tid: int, limit: int) -> list[TombstoneRow]:
    return [_tombstone(r) for r in conn.execute(
        f"SELECT {TOMBSTONE_COLUMNS} FROM tombstones WHERE tid > ? ORDER BY tid LIMIT ?",
        (after_tid, limit))]


def erased_seqs(conn: apsw.Connection, sid: int, first: int = 0,
                last: int = (1 << 63) - 1) -> list[int]:
    rows: list[Any] = conn.execute(
        "SELECT target_seq FROM tombstones WHERE target_kind = 'event' AND target_sid = ? "
        "AND target_seq BETWEEN ? AND ? ORDER BY target_seq", (sid, first, last)).fetchall()
    return [int(r[0]) for r in rows]


# -- writes -------------------------------------------------------------------

def insert_version(conn: apsw.Connection, row: MemoryRow) -> None:
    conn.execute(f"INSERT INTO memories({MEMORY_COLUMNS}) VALUES "
                 "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", tuple(row))


def blank_version(conn: apsw.Connection, mid: int, frame: bytes) -> None:
    conn.execute("UPDATE memories SET frame = ? WHERE mid = ?", (frame, mid))


def index_text(conn: apsw.Connection, row: MemoryRow, text: str) -> None:
    conn.execute("INSERT INTO memory_fts(rowid, text, tenant, scope, scope_key, type) "
                 "VALUES (?,?,?,?,?,?)",
                 (row.mid, text, row.tenant, row.scope, row.scope_key, row.type))


def unindex(conn: apsw.Connection, mids: Sequence[int]) -> int:
    n = 0
    for mid in mids:
        conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (mid,))
        n += conn.changes()
    return n


def clear_index(conn: apsw.Connection) -> None:
    conn.execute("DELETE FROM memory_fts")


def optimize_index(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")


def insert_tombstone(conn: apsw.Connection, row: TombstoneRow) -> None:
    conn.execute(f"INSERT INTO tombstones({TOMBSTONE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                 tuple(row))


def memory_head(conn: apsw.Connection) -> tuple[int, int, int, int]:
    """``(last_mid, last_tid)`` of the head, then the versions and tombstones stored."""
    rows: list[Any] = conn.execute(
        "SELECT (SELECT last_mid FROM memory_head), (SELECT last_tid FROM memory_head), "
        "(SELECT count(*) FROM memories), (SELECT count(*) FROM tombstones)").fetchall()
    r = rows[0]
    return (-1 if r[0] is None else int(r[0]), -1 if r[1] is None else int(r[1]), int(r[2]),
            int(r[3]))


def max_tid(conn: apsw.Connection) -> int:
    row: Any = conn.execute("SELECT coalesce(max(tid), 0) FROM tombstones").fetchall()[0][0]
    return int(row)


def rewrite_chunk(conn: apsw.Connection, sid: int, chunk: Chunk) -> None:
    """The erasure of payloads inside a row: same frames, same chains, a new
    stored body (the schema lets it through only with a tombstone)."""
    conn.execute("UPDATE chunks SET codec = ?, body_check = ?, body = ? WHERE cid = ?",
                 (chunk.codec, st.i64(chunk.body_check), chunk.body,
                  st.rid(sid, chunk.first_seq)))
    if conn.changes() != 1:
        raise record_damaged(f"the chunk row of internal session {sid} at seq "
                              f"{chunk.first_seq} is not there to rewrite")


def scrub_free_pages(conn: apsw.Connection) -> int:
    """Overwrite every free page with zeros: a blob of zeros as large as the
    free list takes its pages (SQLite reuses free pages first), then goes
    (zeroed again by ``secure_delete``).  Returns how many pages were free."""
    found: Any = conn.execute("PRAGMA freelist_count").fetchall()[0][0]
    free = int(found)
    if free:
        page: Any = conn.execute("PRAGMA page_size").fetchall()[0][0]
        size = int(page)
        conn.execute("INSERT INTO scrub(b) VALUES (zeroblob(?))", (free * size,))
        conn.execute("DELETE FROM scrub")
    return free


def checkpoint(conn: apsw.Connection) -> bool:
    """Copy the WAL into the database and truncate it; False when a reader
    still holds an older snapshot (the WAL keeps its pages until then)."""
    busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
    return not busy


__all__ = ["MEMORY_COLUMNS", "TOMBSTONE_COLUMNS", "MergeKey", "scope_sql"]
