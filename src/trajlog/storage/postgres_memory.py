"""The PostgreSQL statements of memory versions, tombstones, the full-text
index (a ``tsvector`` side table with a GIN index) and the erasure of stored
payloads, and the memory part of the PostgreSQL Reader and Writer.

The full-text table always exists: ``memory_index(False)`` empties it and
marks it unused for the tenant (``memory_text_state``), so no DDL runs at
run time and the app role needs no ownership.  A search is a ``tsquery`` of
the caller's words ANDed by ``plainto_tsquery('simple', ...)``: a word is
never read as query syntax.  Scope and type filters are in the same WHERE as
the match, before the rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..codec.chunks import Chunk
from ..errors import record_damaged
from .base import MemoryRow, Scope, TombstoneRow
from .keys import i64, rid
from .memory_match import MergeKey, pick_matches
from .postgres_rows import Conn, T
from .postgres_search import unindex as search_unindex

MEMORY_COLUMNS = ("mid, item_id, version, tenant, scope, scope_key, type, state, key, digest, "
                  "source_sid, source_seq, expires_ms, until_event, sensitivity, created_ms, frame")
_M = ", ".join("m." + c for c in MEMORY_COLUMNS.split(", "))
TOMBSTONE_COLUMNS = ("tid, target_kind, target_sid, target_seq, target_item, reason, actor, "
                     "created_ms, frame")
_LATEST = ("m.version = (SELECT max(version) FROM memories v WHERE v.tenant_id = m.tenant_id "
           "AND v.item_id = m.item_id)")
_R = TypeVar("_R")


def _memory(r: Sequence[Any]) -> MemoryRow:
    return MemoryRow(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], bytes(r[9]),
                     r[10], r[11], r[12], r[13], r[14], int(r[15]), bytes(r[16]))


def _tombstone(r: Sequence[Any]) -> TombstoneRow:
    return TombstoneRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], int(r[7]), bytes(r[8]))


def _all(conn: Conn, query: str, args: Sequence[Any] = ()) -> list[Any]:
    return conn.execute(query, args).fetchall()


def scope_sql(tenant: str, scopes: Sequence[Scope], alias: str) -> tuple[str, list[Any]]:
    """Global items, or the tenant's items in one of ``scopes``."""
    a = f"{alias}."
    inner, args = [], []
    for scope, key in scopes:
        if scope != "global":
            inner.append(f"({a}scope = %s AND {a}scope_key = %s)")
            args += [scope, key]
    if not inner:
        return f"({a}scope = 'global')", []
    return (f"({a}scope = 'global' OR ({a}tenant = %s AND ({' OR '.join(inner)})))",
            [tenant, *args])


def _in(column: str, values: Sequence[str] | None) -> tuple[str, list[Any]]:
    return ("", []) if not values else (f" AND {column} = ANY(%s)", [list(values)])


def _rows(conn: Conn, query: str, args: Sequence[Any]) -> list[MemoryRow]:
    return [_memory(r) for r in _all(conn, query, args)]


def current(conn: Conn, tenant: str, scopes: Sequence[Scope], types: Sequence[str] | None,
            states: Sequence[str] | None, key: str | None, limit: int) -> list[MemoryRow]:
    where, args = scope_sql(tenant, scopes, "m")
    t_sql, t_args = _in("m.type", types)
    s_sql, s_args = _in("m.state", states)
    k_sql, k_args = ((" AND m.key = %s AND m.tenant IN ('', %s)", [key, tenant])
                     if key is not None else ("", []))
    return _rows(conn, f"SELECT {_M} FROM memories m WHERE m.{T} AND {_LATEST} AND {where}"
                 f"{t_sql}{s_sql}{k_sql} ORDER BY m.mid LIMIT %s",
                 [*args, *t_args, *s_args, *k_args, limit])


def latest_of(conn: Conn, item_id: str) -> MemoryRow | None:
    rows = _rows(conn, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {T} AND item_id = %s "
                 "ORDER BY version DESC LIMIT 1", [item_id])
    return rows[0] if rows else None


def merge_matches(conn: Conn, wanted: Sequence[MergeKey]) -> dict[MergeKey, MemoryRow]:
    want = set(wanted)
    if not want:
        return {}
    found = _all(conn, "SELECT mid, item_id, digest, tenant, scope, scope_key, type, key FROM "
                 f"memories WHERE {T} AND digest = ANY(%s) ORDER BY mid",
                 [sorted({w[0] for w in want})])
    return pick_matches(found, want, lambda item_id: latest_of(conn, item_id))


def _matches(words: Sequence[str], tenant: str, scopes: Sequence[Scope],
             types: Sequence[str] | None) -> tuple[str, list[Any]]:
    where, args = scope_sql(tenant, scopes, "f")
    t_sql, t_args = _in("f.type", types)
    return (f"SELECT {_M} FROM memory_text f JOIN memories m ON m.tenant_id = f.tenant_id AND "
            f"m.mid = f.mid WHERE f.{T} AND f.tsv @@ plainto_tsquery('simple', %s) AND {where}"
            f"{t_sql} AND m.state = 'active' AND {_LATEST}",
            [" ".join(words), *args, *t_args])


def search(conn: Conn, words: Sequence[str], tenant: str, scopes: Sequence[Scope],
           types: Sequence[str] | None, limit: int) -> list[MemoryRow]:
    select, args = _matches(words, tenant, scopes, types)
    return _rows(conn, f"{select} ORDER BY ts_rank(f.tsv, plainto_tsquery('simple', %s)) DESC, "
                 "m.mid LIMIT %s", [*args, " ".join(words), limit])


def recent(conn: Conn, words: Sequence[str], tenant: str, scopes: Sequence[Scope],
           types: Sequence[str] | None, before: tuple[int, int], limit: int) -> list[MemoryRow]:
    select, args = _matches(words, tenant, scopes, types)
    return _rows(conn, f"{select} AND (m.created_ms, m.mid) < (%s, %s) "
                 "ORDER BY m.created_ms DESC, m.mid DESC LIMIT %s", [*args, *before, limit])


def lock_memory_head(conn: Conn) -> tuple[int, int]:
    """Lock the tenant's memory head (made at its first memory write): the
    ids after it are this transaction's until it ends."""
    query = f"SELECT last_mid, last_tid FROM memory_head WHERE {T} FOR UPDATE"
    rows = _all(conn, query)
    if not rows:
        conn.execute("INSERT INTO memory_head(last_mid, last_tid) VALUES (0, 0) "
                     "ON CONFLICT DO NOTHING")
        rows = _all(conn, query)
    return int(rows[0][0]), int(rows[0][1])


def memory_head(conn: Conn) -> tuple[int, int, int, int]:
    r = _all(conn, f"SELECT (SELECT last_mid FROM memory_head WHERE {T}), (SELECT last_tid FROM "
             f"memory_head WHERE {T}), (SELECT count(*) FROM memories WHERE {T}), "
             f"(SELECT count(*) FROM tombstones WHERE {T})")[0]
    versions, tombs = int(r[2]), int(r[3])
    if r[0] is None:   # (no memory write yet: an empty head; rows without one: damage)
        return (0, 0, 0, 0) if not versions and not tombs else (-1, -1, versions, tombs)
    return int(r[0]), int(r[1]), versions, tombs


def rewrite_chunk(conn: Conn, sid: int, chunk: Chunk) -> None:
    cur = conn.execute(f"UPDATE chunks SET codec = %s, body_check = %s, body = %s WHERE {T} AND "
                       "cid = %s", (chunk.codec, i64(chunk.body_check), chunk.body,
                                    rid(sid, chunk.first_seq)))
    if cur.rowcount != 1:
        raise record_damaged(f"the chunk row of internal session {sid} at seq "
                             f"{chunk.first_seq} is not there to rewrite")


class PgMemoryReads:
    """The memory reads of a PostgreSQL Reader (``_run(f, *args)`` runs
    ``f(conn, *args)`` in the reader's unit of work)."""

    def _run(self, fn: Callable[..., _R], *args: Any) -> _R:
        raise NotImplementedError

    def memory_max_mid(self) -> int:
        return int(self._run(_all, f"SELECT coalesce(max(mid), 0) FROM memories WHERE {T}")[0][0])

    def max_tid(self) -> int:
        return int(self._run(_all, f"SELECT coalesce(max(tid), 0) FROM tombstones "
                                   f"WHERE {T}")[0][0])

    def memory_versions(self, item_id: str) -> list[MemoryRow]:
        return self._run(_rows, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {T} AND "
                                "item_id = %s ORDER BY version", [item_id])

    def memory_latest_of(self, item_id: str) -> MemoryRow | None:
        return self._run(latest_of, item_id)

    def memory_version(self, mid: int) -> MemoryRow | None:
        rows = self._run(_rows, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {T} AND mid = %s",
                         [mid])
        return rows[0] if rows else None

    def memory_current(self, tenant: str, scopes: Sequence[Scope],
                       types: Sequence[str] | None, states: Sequence[str] | None,
                       key: str | None, limit: int) -> list[MemoryRow]:
        return self._run(current, tenant, scopes, types, states, key,
                         limit)

    def memory_latest_keyed(self, tenant: str, scope: str, scope_key: str,
                            key: str) -> MemoryRow | None:
        rows = self._run(_rows, f"SELECT {_M} FROM memories m WHERE m.{T} AND m.tenant = %s AND "
                         f"m.key = %s AND m.scope = %s AND m.scope_key = %s AND {_LATEST} "
                         "ORDER BY m.mid DESC LIMIT 1", [tenant, key, scope, scope_key])
        return rows[0] if rows else None

    def memory_merge_match(self, digest: bytes, tenant: str, scope: str, scope_key: str,
                           type_: str, key: str | None) -> MemoryRow | None:
        want = (digest, tenant, scope, scope_key, type_, key)
        return self.memory_merge_matches([want]).get(want)

    def memory_merge_matches(self, wanted: Sequence[MergeKey]) -> dict[MergeKey, MemoryRow]:
        return self._run(merge_matches, wanted)

    def memory_expired(self, now_ms: int, limit: int) -> list[MemoryRow]:
        return self._run(_rows, f"SELECT {_M} FROM memories m WHERE m.{T} AND m.expires_ms IS "
                         f"NOT NULL AND m.expires_ms <= %s AND {_LATEST} AND m.state != "
                         "'revoked' ORDER BY m.mid LIMIT %s", [now_ms, limit])

    def memory_until_event(self, limit: int) -> list[MemoryRow]:
        return self._run(_rows, f"SELECT {_M} FROM memories m WHERE m.{T} AND m.until_event IS "
                         f"NOT NULL AND {_LATEST} AND m.state != 'revoked' ORDER BY m.mid "
                         "LIMIT %s", [limit])

    def memory_latest(self, after_mid: int, limit: int) -> list[MemoryRow]:
        return self._run(_rows, f"SELECT {_M} FROM memories m WHERE m.{T} AND m.mid > %s AND "
                         f"{_LATEST} ORDER BY m.mid LIMIT %s", [after_mid, limit])

    def memory_all(self, after_mid: int, limit: int) -> list[MemoryRow]:
        return self._run(_rows, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {T} AND mid > %s "
                         "ORDER BY mid LIMIT %s", [after_mid, limit])

    def memory_index_exists(self) -> bool:
        return bool(self._run(_all, "SELECT coalesce((SELECT present FROM memory_text_state "
                                    f"WHERE {T}), true)")[0][0])

    def memory_search(self, words: Sequence[str], tenant: str, scopes: Sequence[Scope],
                      types: Sequence[str] | None, limit: int) -> list[MemoryRow]:
        return self._run(search, words, tenant, scopes, types, limit)

    def memory_recent(self, words: Sequence[str], tenant: str, scopes: Sequence[Scope],
                      types: Sequence[str] | None, before: tuple[int, int],
                      limit: int) -> list[MemoryRow]:
        return self._run(recent, words, tenant, scopes, types, before, limit)

    def memory_indexed(self, mids: Sequence[int]) -> list[int]:
        rows = self._run(_all, f"SELECT mid FROM memory_text WHERE {T} AND mid = ANY(%s) "
                         "ORDER BY mid", [list(mids)])
        return [int(r[0]) for r in rows]

    def memory_index_rows(self) -> int:
        return int(self._run(_all, f"SELECT count(*) FROM memory_text WHERE {T}")[0][0])

    def tombstone_for_event(self, sid: int, seq: int) -> TombstoneRow | None:
        rows = self._run(_all, f"SELECT {TOMBSTONE_COLUMNS} FROM tombstones WHERE {T} AND "
                         "target_kind = 'event' AND target_sid = %s AND target_seq = %s",
                         [sid, seq])
        return _tombstone(rows[0]) if rows else None

    def tombstone_for_item(self, item_id: str) -> TombstoneRow | None:
        rows = self._run(_all, f"SELECT {TOMBSTONE_COLUMNS} FROM tombstones WHERE {T} AND "
                         "target_kind = 'memory' AND target_item = %s", [item_id])
        return _tombstone(rows[0]) if rows else None

    def tombstones(self, after_tid: int, limit: int) -> list[TombstoneRow]:
        rows = self._run(_all, f"SELECT {TOMBSTONE_COLUMNS} FROM tombstones WHERE {T} AND "
                         "tid > %s ORDER BY tid LIMIT %s", [after_tid, limit])
        return [_tombstone(r) for r in rows]

    def erased_seqs(self, sid: int, first: int = 0, last: int = (1 << 63) - 1) -> list[int]:
        rows = self._run(_all, f"SELECT target_seq FROM tombstones WHERE {T} AND target_kind = "
                         "'event' AND target_sid = %s AND target_seq BETWEEN %s AND %s "
                         "ORDER BY target_seq", [sid, first, min(last, (1 << 63) - 1)])
        return [int(r[0]) for r in rows]

    def memory_head(self) -> tuple[int, int, int, int]:
        return self._run(memory_head)


class PgMemoryWrites:
    """The memory writes of a PostgreSQL Writer."""

    def _run(self, fn: Callable[..., _R], *args: Any) -> _R:
        raise NotImplementedError

    def memory_max_mid(self) -> int:
        return int(self._run(lock_memory_head)[0])

    def max_tid(self) -> int:
        return int(self._run(lock_memory_head)[1])

    def insert_memory(self, row: MemoryRow) -> None:
        self._run(_all_none, f"INSERT INTO memories({MEMORY_COLUMNS}) VALUES "
                             f"({', '.join(['%s'] * 17)})", tuple(row))

    def blank_memory(self, mid: int, frame: bytes) -> None:
        self._run(_all_none, f"UPDATE memories SET frame = %s WHERE {T} AND mid = %s",
                  (frame, mid))

    def index_memory(self, row: MemoryRow, text: str) -> None:
        self._run(_all_none, "INSERT INTO memory_text(mid, tenant, scope, scope_key, type, tsv) "
                             "VALUES (%s, %s, %s, %s, %s, to_tsvector('simple', %s))",
                  (row.mid, row.tenant, row.scope, row.scope_key, row.type, text))

    def unindex_memory(self, mids: Sequence[int]) -> int:
        return int(self._run(_count, f"DELETE FROM memory_text WHERE {T} AND mid = ANY(%s)",
                             (list(mids),)))

    def clear_memory_index(self) -> None:
        self._run(_all_none, f"DELETE FROM memory_text WHERE {T}", ())

    def optimize_memory_index(self) -> None:
        """(Nothing to do: GIN merges its pending list as it goes, and VACUUM
        by the owner or autovacuum does the rest.)"""

    def insert_tombstone(self, row: TombstoneRow) -> None:
        self._run(_all_none, f"INSERT INTO tombstones({TOMBSTONE_COLUMNS}) VALUES "
                             f"({', '.join(['%s'] * 9)})", tuple(row))
        if row.target_kind == "event" and row.target_sid is not None and (
                row.target_seq is not None):
            # the search index's copy goes with the payload, in the erasure's
            # own transaction (delete, retention: all erase)
            self._run(search_unindex, row.target_sid, [row.target_seq])

    def rewrite_chunk(self, sid: int, chunk: Chunk) -> None:
        self._run(rewrite_chunk, sid, chunk)


def _all_none(conn: Conn, query: str, args: Sequence[Any]) -> None:
    conn.execute(query, args)


def _count(conn: Conn, query: str, args: Sequence[Any]) -> int:
    return int(conn.execute(query, args).rowcount)


__all__ = ["MEMORY_COLUMNS", "TOMBSTONE_COLUMNS", "PgMemoryReads", "PgMemoryWrites", "scope_sql"]
