"""The PostgreSQL statements of the derived event search index (a
``tsvector`` table with a GIN index, the per-session marks), and its part of
the PostgreSQL Reader and Writer.

The tables always exist (``SEARCH`` in :mod:`.postgres_schema`): dropping
the index deletes the tenant's rows, so no DDL runs at run time.  Both carry
``tenant_id`` under row-level security like every other table: a tenant's
search never reads another's rows.  A search is one statement: the
``plainto_tsquery('simple', ...)`` match (a word is never query syntax), the
filters and the anti-join with the tombstones in one WHERE, then the rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .postgres_rows import Conn, T
from .search_model import DocRow, SearchFilter, SearchRow

_R = TypeVar("_R")

def behind(conn: Conn) -> list[tuple[int, int, int]]:
    rows = conn.execute(
        "SELECT h.sid, greatest(coalesce(m.seq, -1) + 1, s.seed_length), h.last_seq "
        "FROM session_heads h JOIN sessions s ON s.tenant_id = h.tenant_id AND s.sid = h.sid "
        "LEFT JOIN search_marks m ON m.tenant_id = h.tenant_id AND m.sid = h.sid "
        f"WHERE h.{T} AND h.last_seq > coalesce(m.seq, -1)").fetchall()
    return [(int(a), int(b), int(c)) for a, b, c in rows if b <= c]


def where(f: SearchFilter) -> tuple[str, list[Any]]:
    """The filters as SQL over ``d`` (the documents) and ``s`` (the sessions)."""
    sql: list[str] = []
    args: list[Any] = []
    for column, value in (("d.tenant", f.tenant), ('d."user"', f.user), ("s.cwd", f.cwd),
                          ("d.branch", f.branch), ("d.data_class", f.data_class)):
        if value is not None:
            sql.append(f"{column} = %s")
            args.append(value)
    if f.sids is not None:
        sql.append("d.sid = ANY(%s)")
        args.append(list(f.sids))
    if f.since_ms is not None:
        sql.append("d.ms >= %s")
        args.append(f.since_ms)
    if f.until_ms is not None:
        sql.append("d.ms <= %s")
        args.append(f.until_ms)
    if f.types is not None:
        exact = [t for t in f.types if not t.endswith("/")]
        ors = ["d.type = ANY(%s)"]
        args.append(exact)
        for t in f.types:
            if t.endswith("/"):
                ors.append("left(d.type, %s) = %s")
                args += [len(t), t]
        sql.append("(" + " OR ".join(ors) + ")")
    return "".join(" AND " + s for s in sql), args


def search_sql(f: SearchFilter) -> tuple[str, list[Any]]:
    """The one statement of a search; its bindings after (marks options, query)."""
    filters, args = where(f)
    return ("WITH q AS (SELECT plainto_tsquery('simple', %s) AS q) "
            "SELECT d.sid, s.id, d.seq, d.ms, d.type, ts_headline('simple', d.body, q.q, %s), "
            "ts_rank(d.tsv, q.q) AS score FROM q, search_text d "
            "JOIN sessions s ON s.tenant_id = d.tenant_id AND s.sid = d.sid "
            f"WHERE d.{T} AND d.tsv @@ q.q{filters} "
            "AND NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.tenant_id = d.tenant_id AND "
            "t.target_kind = 'event' AND t.target_sid = d.sid AND t.target_seq = d.seq) "
            "AND NOT EXISTS (SELECT 1 FROM deleted_sessions x WHERE x.tenant_id = d.tenant_id "
            "AND x.sid = d.sid) "
            "ORDER BY score DESC, d.sid, d.seq LIMIT %s", args)


def headline_options(marks: tuple[str, str]) -> str:
    def quote(s: str) -> str:
        return '"' + s.replace('"', '""') + '"'
    return (f"StartSel={quote(marks[0])}, StopSel={quote(marks[1])}, MaxWords=16, MinWords=6, "
            "ShortWord=0, FragmentDelimiter=...")


def search(conn: Conn, words: Sequence[str], f: SearchFilter, limit: int,
           marks: tuple[str, str]) -> list[SearchRow]:
    sql, args = search_sql(f)
    rows = conn.execute(sql, [" ".join(words), headline_options(marks), *args,
                              limit]).fetchall()
    return [SearchRow(int(r[0]), r[1], int(r[2]), int(r[3]), r[4], r[5], float(r[6]))
            for r in rows]


def insert(conn: Conn, sid: int, docs: Sequence[DocRow], upto: int) -> None:
    if docs:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO search_text(sid, seq, ms, type, branch, data_class, tenant, "
                '"user", body, tsv) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, '
                "to_tsvector('simple', %s)) ON CONFLICT DO NOTHING",
                [(d.sid, d.seq, d.ms, d.type, d.branch, d.data_class, d.tenant, d.user,
                  d.text, d.text) for d in docs])
    conn.execute("INSERT INTO search_marks(sid, seq) VALUES (%s, %s) ON CONFLICT (tenant_id, "
                 "sid) DO UPDATE SET seq = greatest(search_marks.seq, EXCLUDED.seq)",
                 (sid, upto))


def unindex(conn: Conn, sid: int, seqs: Sequence[int]) -> int:
    return int(conn.execute(f"DELETE FROM search_text WHERE {T} AND sid = %s AND "
                            "seq = ANY(%s)", (sid, list(seqs))).rowcount)


def clear(conn: Conn) -> None:
    conn.execute(f"DELETE FROM search_text WHERE {T}")
    conn.execute(f"DELETE FROM search_marks WHERE {T}")


def _rows(conn: Conn) -> int:
    return int(conn.execute(f"SELECT count(*) FROM search_text WHERE {T}").fetchall()[0][0])


class PgSearchReads:
    """The search index reads of a PostgreSQL Reader."""

    def _run(self, fn: Callable[..., _R], *args: Any) -> _R:
        raise NotImplementedError

    def search_index_exists(self) -> bool:
        return True   # (the tables always exist)

    def search_behind(self) -> list[tuple[int, int, int]]:
        return self._run(behind)

    def search_events(self, words: Sequence[str], f: SearchFilter, limit: int,
                      marks: tuple[str, str]) -> list[SearchRow]:
        return self._run(search, words, f, limit, marks)

    def search_index_rows(self) -> int:
        return self._run(_rows)


class PgSearchWrites:
    """The search index writes of a PostgreSQL Writer."""

    def _run(self, fn: Callable[..., _R], *args: Any) -> _R:
        raise NotImplementedError

    def index_events(self, sid: int, docs: Sequence[DocRow], upto: int) -> None:
        self._run(insert, sid, docs, upto)

    def unindex_events(self, sid: int, seqs: Sequence[int]) -> int:
        return self._run(unindex, sid, seqs)


__all__ = ["PgSearchReads", "PgSearchWrites",
           "clear", "search_sql", "unindex", "where"]
