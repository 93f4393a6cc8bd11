"""Reader connections have no Python authorizer, and still refuse what the
authorizer refuses on the other connections: every schema change, every
write, ATTACH and the guarded pragmas that would change the database --
by their open mode (``SQLITE_OPEN_READONLY``, which no SQL undoes),
``query_only`` (temporary objects too) and ``SQLITE_LIMIT_ATTACHED`` = 0.
The authorizer ran a Python callback per column at every compile (and FTS5
compiles statements of its own at every ranked search)."""

from __future__ import annotations

import apsw
import pytest

import trajlog
from kits.tamper import SCHEMA_EDITS
from trajlog import Identity
from trajlog.storage import sqlite as storage

SQLITE_CONN = "runs SQL on the SQLite backend's own connections"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_CONN)

REFUSED = [
    # what test_storage_authorizer_refuses_schema_changes refuses on the other connections
    *SCHEMA_EDITS,
    "PRAGMA journal_mode=DELETE",
    "PRAGMA user_version=7",
    "ATTACH DATABASE ':memory:' AS other",
    # and any write, or a temporary object that would shadow a table
    "CREATE TEMP TABLE memories(x)",
    "CREATE TEMP VIEW chunks AS SELECT 1",
    "DELETE FROM memory_fts",
    "INSERT INTO memory_head VALUES (2, 0, 0)",
    "UPDATE session_heads SET lease_owner = 'x'",
    "PRAGMA application_id=1",
]


@pytest.fixture
def store(tmp_path):
    with trajlog.open(str(tmp_path / "r.db")) as st:
        s = st.create_session(cwd="/r")
        s.append("user/message", {"content": "x"})
        st.memory(Identity("acme", user="u")).remember("user", "fact", {"text": "tea"})
        yield st


def _schema(conn: apsw.Connection) -> list[tuple]:
    return conn.execute("SELECT type, name, sql FROM sqlite_schema ORDER BY name").fetchall()


def test_reader_connection_has_no_python_authorizer(store):
    conn = store._e.backend.connection()
    assert conn.authorizer is None
    assert conn.execute("PRAGMA query_only").fetchall()[0][0] == 1
    assert conn.limit(apsw.SQLITE_LIMIT_ATTACHED, -1) == 0
    assert conn.readonly("main")
    # the write connection keeps it (it may write: the authorizer refuses DDL there)
    assert store._e.backend.write_connection.authorizer is not None


@pytest.mark.parametrize("sql", REFUSED)
def test_reader_connection_refuses_what_the_authorizer_refused(store, sql):
    conn = store._e.backend.connection()
    before = _schema(store._e.backend.write_connection)
    with pytest.raises(apsw.Error):
        conn.execute(sql).fetchall()
    assert _schema(store._e.backend.write_connection) == before
    assert conn.execute("SELECT count(*) FROM sqlite_temp_schema").fetchall()[0][0] == 0


def test_reader_connection_stays_read_only_with_query_only_off(store):
    """``query_only`` can be switched off by SQL on the connection; the open
    mode cannot: the database and its schema stay out of reach."""
    conn = store._e.backend.connection()
    conn.execute("PRAGMA query_only=OFF").fetchall()
    try:
        before = _schema(store._e.backend.write_connection)
        for sql in ("DROP TRIGGER chunks_repack", "CREATE TABLE extra(x)",
                    "DELETE FROM memory_fts", "PRAGMA user_version=7"):
            with pytest.raises(apsw.Error):
                conn.execute(sql).fetchall()
        assert _schema(store._e.backend.write_connection) == before
    finally:
        conn.execute("PRAGMA query_only=ON").fetchall()


def test_reader_connection_reads_what_the_writer_commits(store):
    reader = store._e.backend.connection()
    mem = store.memory(Identity("acme", user="u"))
    item = mem.remember("user", "fact", {"text": "coffee"})
    assert item is not None and mem.get(item.id).content == {"text": "coffee"}
    assert reader.execute("SELECT count(*) FROM memories").fetchall()[0][0] == 2


def test_reader_connection_open_mode_is_asked_for(tmp_path):
    with trajlog.open(str(tmp_path / "o.db")) as st:
        path = st.path
    conn = storage.open_connection(path, reader=True)
    try:
        assert conn.authorizer is None and conn.readonly("main")
    finally:
        conn.close()
    conn = storage.open_connection(path)
    try:
        assert conn.authorizer is not None and not conn.readonly("main")
    finally:
        conn.close()
