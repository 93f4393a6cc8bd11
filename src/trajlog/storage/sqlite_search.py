"""The SQLite statements of the derived event search index, and its part of
the SQLite Reader and Writer.

The index is three tables, all named ``search_fts*`` so that the schema
check does not count them (they are derived: made on the first search,
dropped and rebuilt at will, on a migration connection as ``memory_fts``
is): ``search_fts`` (FTS5, rowid = a document, ``secure-delete`` on),
``search_fts_docs`` (what filters read: session, seq, time, type, branch,
data class, the header's tenant and user) and ``search_fts_marks`` (per
session, the last seq indexed).  A search is one statement: the match, the
filters and the anti-join with the tombstones in one WHERE, then the rank.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import apsw

from .errors_map import translate
from .search_model import DocRow, SearchFilter, SearchRow

# The derived event search index (made on demand; see the module docstring).
SEARCH_FTS = """
    CREATE VIRTUAL TABLE search_fts USING fts5(text);
    INSERT INTO search_fts(search_fts, rank) VALUES ('secure-delete', 1);
    CREATE TABLE search_fts_docs(
        doc        INTEGER PRIMARY KEY,
        sid        INTEGER NOT NULL,
        seq        INTEGER NOT NULL,
        ms         INTEGER NOT NULL,
        type       TEXT    NOT NULL,
        branch     TEXT,
        data_class TEXT,
        tenant     TEXT,
        user       TEXT
    ) STRICT;
    CREATE UNIQUE INDEX search_fts_docs_at ON search_fts_docs(sid, seq);
    CREATE TABLE search_fts_marks(
        sid INTEGER PRIMARY KEY,
        seq INTEGER NOT NULL
    ) STRICT;
"""
SEARCH_DROP = """
    DROP TABLE IF EXISTS search_fts;
    DROP TABLE IF EXISTS search_fts_docs;
    DROP TABLE IF EXISTS search_fts_marks;
"""


def exists(conn: apsw.Connection) -> bool:
    return bool(conn.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'table' "
                             "AND name = 'search_fts_marks'").fetchall()[0][0])


def fts_match(words: Sequence[str]) -> str:
    """Every one of ``words``, each a quoted string (no word is FTS5 syntax)."""
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def behind(conn: apsw.Connection) -> list[tuple[int, int, int]]:
    """``(sid, first seq to index, last committed seq)`` of every session
    whose head is past its mark (a fork's own log starts at its seed)."""
    rows: list[Any] = conn.execute(
        "SELECT s.sid, max(coalesce(m.seq, -1) + 1, s.seed_length), h.last_seq "
        "FROM session_heads h JOIN sessions s ON s.sid = h.sid "
        "LEFT JOIN search_fts_marks m ON m.sid = h.sid "
        "WHERE h.last_seq > coalesce(m.seq, -1)").fetchall()
    return [(int(a), int(b), int(c)) for a, b, c in rows if int(b) <= int(c)]


def where(f: SearchFilter) -> tuple[str, list[Any]]:
    """The filters as SQL over ``d`` (the docs) and ``s`` (the sessions)."""
    sql: list[str] = []
    args: list[Any] = []
    for column, value in (("d.tenant", f.tenant), ("d.user", f.user), ("s.cwd", f.cwd),
                          ("d.branch", f.branch), ("d.data_class", f.data_class)):
        if value is not None:
            sql.append(f"{column} = ?")
            args.append(value)
    if f.sids is not None:
        sql.append(f"d.sid IN ({', '.join('?' * len(f.sids))})" if f.sids else "0")
        args += f.sids
    if f.since_ms is not None:
        sql.append("d.ms >= ?")
        args.append(f.since_ms)
    if f.until_ms is not None:
        sql.append("d.ms <= ?")
        args.append(f.until_ms)
    if f.types is not None:
        ors = []
        for t in f.types:
            if t.endswith("/"):
                ors.append("substr(d.type, 1, ?) = ?")
                args += [len(t), t]
            else:
                ors.append("d.type = ?")
                args.append(t)
        sql.append("(" + " OR ".join(ors or ["0"]) + ")")
    return "".join(" AND " + s for s in sql), args


def search_sql(f: SearchFilter, marks: tuple[str, str]) -> tuple[str, list[Any]]:
    """The one statement of a search and its bindings (after the match)."""
    filters, args = where(f)
    return ("SELECT d.sid, s.id, d.seq, d.ms, d.type, "
            "snippet(search_fts, 0, ?, ?, '...', ?), bm25(search_fts) "
            "FROM search_fts f JOIN search_fts_docs d ON d.doc = f.rowid "
            "JOIN sessions s ON s.sid = d.sid "
            f"WHERE search_fts MATCH ?{filters} "
            "AND NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.target_kind = 'event' "
            "AND t.target_sid = d.sid AND t.target_seq = d.seq) "
            "AND NOT EXISTS (SELECT 1 FROM deleted_sessions x WHERE x.sid = d.sid) "
            "ORDER BY f.rank LIMIT ?", [marks[0], marks[1], 16, *args])


def search(conn: apsw.Connection, words: Sequence[str], f: SearchFilter, limit: int,
           marks: tuple[str, str]) -> list[SearchRow]:
    sql, args = search_sql(f, marks)
    args.insert(3, fts_match(words))
    return [SearchRow(int(r[0]), r[1], int(r[2]), int(r[3]), r[4], r[5], -float(r[6]))
            for r in conn.execute(sql, (*args, limit))]


def insert(conn: apsw.Connection, docs: Sequence[DocRow]) -> None:
    for d in docs:
        made = conn.execute("INSERT INTO search_fts_docs(sid, seq, ms, type, branch, "
                            "data_class, tenant, user) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                            "ON CONFLICT(sid, seq) DO NOTHING RETURNING doc",
                            (d.sid, d.seq, d.ms, d.type, d.branch, d.data_class, d.tenant,
                             d.user)).fetchall()
        if made:   # (another process indexed it first: nothing twice)
            conn.execute("INSERT INTO search_fts(rowid, text) VALUES (?, ?)",
                         (made[0][0], d.text))


def set_mark(conn: apsw.Connection, sid: int, seq: int) -> None:
    conn.execute("INSERT INTO search_fts_marks(sid, seq) VALUES (?, ?) ON CONFLICT(sid) "
                 "DO UPDATE SET seq = max(seq, excluded.seq)", (sid, seq))


# connection -> (its data version, whether the index exists then): the index
# is made and dropped only by other (migration) connections, whose commits
# move the data version, so an erasure's tombstones ask the schema once
_SEEN: weakref.WeakKeyDictionary[apsw.Connection, tuple[int, bool]] = (
    weakref.WeakKeyDictionary())


def _exists_seen(conn: apsw.Connection) -> bool:
    version = conn.data_version()
    seen = _SEEN.get(conn)
    if seen is None or seen[0] != version:
        seen = _SEEN[conn] = (version, exists(conn))
    return seen[1]


def unindex(conn: apsw.Connection, sid: int, seqs: Sequence[int]) -> int:
    """Delete the documents of ``sid``'s ``seqs`` (their words go from the
    FTS5 pages too: secure-delete); a missing index holds nothing (and costs
    no statement)."""
    if not _exists_seen(conn):
        return 0
    n = 0
    for seq in seqs:
        rows = conn.execute("DELETE FROM search_fts_docs WHERE sid = ? AND seq = ? "
                            "RETURNING doc", (sid, seq)).fetchall()
        for (doc,) in rows:
            conn.execute("DELETE FROM search_fts WHERE rowid = ?", (doc,))
            n += 1
    return n


def rows(conn: apsw.Connection) -> int:
    if not exists(conn):
        return 0
    n: Any = conn.execute("SELECT count(*) FROM search_fts_docs").fetchall()[0][0]
    return int(n)


class SearchReads:
    """The search index reads of an SQLite Reader."""

    conn: apsw.Connection

    def search_index_exists(self) -> bool:
        with translate():
            return exists(self.conn)

    def search_behind(self) -> list[tuple[int, int, int]]:
        """``(sid, first seq to index, last committed seq)`` of the sessions
        the index has not caught up with."""
        with translate():
            return behind(self.conn)

    def search_events(self, words: Sequence[str], f: SearchFilter, limit: int,
                      marks: tuple[str, str]) -> list[SearchRow]:
        with translate():
            return search(self.conn, words, f, limit, marks)

    def search_index_rows(self) -> int:
        with translate():
            return rows(self.conn)


class SearchWrites:
    """The search index writes of an SQLite Writer."""

    conn: apsw.Connection

    def index_events(self, sid: int, docs: Sequence[DocRow], upto: int) -> None:
        """Add ``docs`` of session ``sid`` and move its mark to ``upto``."""
        with translate():
            insert(self.conn, docs)
            set_mark(self.conn, sid, upto)

    def unindex_events(self, sid: int, seqs: Sequence[int]) -> int:
        with translate():
            return unindex(self.conn, sid, seqs)


__all__ = ["SEARCH_DROP", "SEARCH_FTS", "SearchReads", "SearchWrites", "exists", "fts_match",
           "search_sql", "where"]
