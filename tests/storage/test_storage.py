"""The SQLite layer: connection settings read back, the append-only triggers,
and every bypass storage/schema.py claims to stop (and the ones it says only verify()
catches).  Runs on real database files."""

from __future__ import annotations

import apsw
import pytest

import trajlog
from kits import tamper
from kits.tamper import SCHEMA_EDITS, flip_frame_bits, write_conn
from trajlog import errors
from trajlog.codec import Status
from trajlog.storage import sqlite as storage
from trajlog.storage import statements

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_APSW)


@pytest.fixture
def filled(store):
    s = store.create_session(cwd="/repo")
    s.append_batch([("user/message", {"content": f"m{i}"}, {"idempotency_key": f"k{i}"})
                    for i in range(5)])
    return store, s


def raw_write(store) -> apsw.Connection:
    """A connection with the store's own settings and authorizer, used like a
    careless application would use the database."""
    return storage.open_connection(store.path)


def test_storage_pragmas_read_back(store):
    conn = write_conn(store)
    assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchall()[0][0] == 2
    assert conn.execute("PRAGMA foreign_keys").fetchall()[0][0] == 1
    assert conn.execute("PRAGMA recursive_triggers").fetchall()[0][0] == 1
    assert conn.execute("PRAGMA trusted_schema").fetchall()[0][0] == 0
    assert conn.execute("PRAGMA busy_timeout").fetchall()[0][0] == 10_000
    assert conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, -1) == 1


def test_storage_normal_durability_is_explicit(tmp_path):
    with trajlog.open(str(tmp_path / "n.db"), durability="normal") as st:
        assert write_conn(st).execute("PRAGMA synchronous").fetchall()[0][0] == 1
    with pytest.raises(errors.InvalidArgumentError):
        trajlog.open(str(tmp_path / "x.db"), durability="off")


def test_storage_sqlite_version_floor():
    assert storage.sqlite_version() >= storage.MIN_SQLITE


def test_storage_schema_version_and_foreign_files(tmp_path):
    path = str(tmp_path / "v.db")
    trajlog.open(path).close()
    conn = apsw.Connection(path)
    assert conn.execute("PRAGMA user_version").fetchall()[0][0] == storage.SCHEMA_VERSION
    conn.execute(f"PRAGMA user_version={storage.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(errors.SchemaError, match="newer"):
        trajlog.open(path)
    other = str(tmp_path / "other.db")
    c2 = apsw.Connection(other)
    c2.execute("CREATE TABLE x(a)")
    c2.close()
    with pytest.raises(errors.SchemaError, match="not a trajlog store"):
        trajlog.open(other)


def plain(store) -> apsw.Connection:
    """A plain connection with SQLite's default settings (no recursive
    triggers, no authorizer, no defensive mode): the guards must hold here too."""
    return apsw.Connection(store.path)


CONNECTIONS = {"trajlog-settings": raw_write, "plain-defaults": plain}


@pytest.mark.parametrize("how", CONNECTIONS)
@pytest.mark.parametrize("sql", [
    "UPDATE chunks SET body = x'00'",
    "UPDATE chunks SET n = n + 1",
    "UPDATE chunks SET seed_chain = 7",
    "DELETE FROM chunks",
    "DELETE FROM chunks WHERE cid = (SELECT max(cid) FROM chunks)",
    "UPDATE event_index SET type = 'x'",
    "DELETE FROM event_index",
    "UPDATE sessions SET cwd = '/elsewhere'",
    "DELETE FROM sessions",
    "DELETE FROM session_heads",
    "UPDATE session_heads SET last_seq = last_seq - 1",
    "UPDATE session_heads SET last_seq = last_seq + 1",   # forged advance: no such row
    "UPDATE session_heads SET chain_head = 42",
    "UPDATE session_heads SET sid = sid + 100",
    "REPLACE INTO session_heads(sid, last_seq, chain_head) SELECT sid, -1, 0 FROM session_heads",
    "INSERT OR REPLACE INTO sessions SELECT * FROM sessions",
])
def test_storage_triggers_refuse_mutation(filled, sql, how):
    store, s = filled
    conn = CONNECTIONS[how](store)
    with pytest.raises(apsw.ConstraintError, match="trajlog"):
        conn.execute(sql)
    conn.close()
    assert [e.seq for e in s.events()] == [0, 1, 2, 3, 4]
    assert s.verify().ok


def _chunk_row(store, s, seq):
    conn = write_conn(store)
    return conn.execute(f"SELECT {statements.CHUNK_COLUMNS} FROM chunks WHERE cid <= ? "
                        "ORDER BY cid DESC LIMIT 1", (statements.rid(s._sid, seq),)).fetchall()[0]


@pytest.mark.parametrize("how", CONNECTIONS)
@pytest.mark.parametrize("verb", ["INSERT OR REPLACE", "INSERT OR IGNORE", "REPLACE",
                                  "INSERT"])
def test_storage_replace_and_ignore_bypasses(filled, verb, how):
    """Re-inserting an existing row is an error, never a silent replace or skip."""
    store, s = filled
    row = [*_chunk_row(store, s, 2), None]
    row[7] = b"\x00" * 48
    conn = CONNECTIONS[how](store)
    with pytest.raises(apsw.ConstraintError):
        conn.execute(statements.CHUNK_INSERT.replace("INSERT", verb, 1), row)
    index = conn.execute(f"SELECT {statements.INDEX_COLUMNS} FROM event_index").fetchall()
    if index:
        with pytest.raises(apsw.ConstraintError):
            conn.execute(statements.INDEX_INSERT.replace("INSERT", verb, 1), index[0])
    conn.close()
    assert s.get(2).type == "user/message" and s.verify().ok


def test_storage_idempotency_key_cannot_be_replaced(store):
    """INSERT OR REPLACE through the idempotency index would delete the
    original key's row on a default connection: refused."""
    s = store.create_session(cwd="/r")
    ev = s.append("user/message", {"content": "x"}, idempotency_key="k")
    s.append("user/message", {"content": "y"})
    conn = plain(store)
    with pytest.raises(apsw.ConstraintError, match="trajlog"):
        conn.execute(f"INSERT OR REPLACE INTO event_index({statements.INDEX_COLUMNS}) "
                     "VALUES (?, 'user/message', 0, NULL, NULL, NULL, NULL, 'k')",
                     (statements.rid(s._sid, 1),))
    conn.close()
    assert s.append("user/message", {"content": "x"}, idempotency_key="k").seq == ev.seq


@pytest.mark.parametrize("how", CONNECTIONS)
def test_storage_upsert_bypass(filled, how):
    store, s = filled
    row = _chunk_row(store, s, 2)
    conn = CONNECTIONS[how](store)
    with pytest.raises(apsw.ConstraintError):
        conn.execute(f"INSERT INTO chunks({statements.CHUNK_COLUMNS}) VALUES (?,?,?,?,?,?,?,?) "
                     "ON CONFLICT(cid) DO UPDATE SET body = x'00'", row)
    conn.close()


@pytest.mark.parametrize("seq", [4, 6, 7, 100])
def test_storage_rows_start_at_the_heads_next_seq(filled, seq):
    store, s = filled
    row = [*_chunk_row(store, s, 4), None]
    row[0] = statements.rid(s._sid, seq)
    conn = raw_write(store)
    with pytest.raises(apsw.ConstraintError, match="next seq"):
        conn.execute(statements.CHUNK_INSERT, row)
    conn.close()


def test_storage_head_advances_with_the_insert(filled):
    """A raw insert of a row at the right next seq moves the head in the same
    statement; verify() then sees that its frames do not continue the log."""
    store, s = filled
    row = [*_chunk_row(store, s, 4), None]
    row[0] = statements.rid(s._sid, 5)
    conn = raw_write(store)
    conn.execute(statements.CHUNK_INSERT, row)
    conn.close()
    assert s.last_seq == 5 + row[1] - 1
    report = s.verify()
    assert not report.ok and report.scan.cursor.next_seq == 5


def test_storage_only_a_repack_rewrites_rows(store):
    """The one UPDATE the triggers allow: a row grows over the rows after it,
    ending where they end with their chain; then the covered rows may go."""
    s = store.create_session(cwd="/r")
    for i in range(4):
        s.append("user/message", {"content": f"m{i}"})
    tamper.settle(store)
    conn = plain(store)
    first, last = (_chunk_row(store, s, 0), _chunk_row(store, s, 3))
    if first[0] == last[0]:
        pytest.skip("already repacked into one row")
    with pytest.raises(apsw.ConstraintError, match="repack"):      # wrong chain at the end
        conn.execute("UPDATE chunks SET n = 4, last_chain = 1 WHERE cid = ?", (first[0],))
    with pytest.raises(apsw.ConstraintError, match="repacked row"):  # not covered yet
        conn.execute("DELETE FROM chunks WHERE cid = ?", (last[0],))
    conn.close()
    assert store.repack(s.id) == 3 and s.verify().ok
    assert [e.data["content"] for e in s.events()] == [f"m{i}" for i in range(4)]


@pytest.mark.parametrize("sql", [
    *SCHEMA_EDITS,
    "PRAGMA writable_schema=ON",
    "PRAGMA journal_mode=DELETE",
    "PRAGMA synchronous=OFF",
    "PRAGMA recursive_triggers=OFF",
    "PRAGMA foreign_keys=OFF",
    "PRAGMA user_version=7",
    "ATTACH DATABASE ':memory:' AS other",
])
def test_storage_authorizer_refuses_schema_changes(filled, sql):
    store, _ = filled
    conn = raw_write(store)
    with pytest.raises(apsw.AuthError):
        conn.execute(sql)
    conn.close()


def test_storage_defensive_mode_blocks_writable_schema_even_without_authorizer(filled):
    store, _ = filled
    conn = raw_write(store)
    conn.authorizer = None
    conn.execute("PRAGMA writable_schema=ON")
    with pytest.raises(apsw.Error):
        conn.execute("DELETE FROM sqlite_schema WHERE type = 'trigger'")
    conn.close()


def test_storage_what_triggers_cannot_stop_verify_finds(filled):
    """A foreign connection that disables triggers can rewrite an event; only
    verify() (recomputing the frame checks) finds it, and says where."""
    store, s = filled
    flip_frame_bits(store, s._sid, 3, 45, 0x01)
    report = s.verify()
    assert not report.ok
    assert report.scan.cursor.next_seq == 3 and report.scan.status == Status.BAD_PAYLOAD
    with pytest.raises(errors.ChecksumError) as info:
        report.scan.raise_for(s.id)
    assert info.value.seq == 3
    with pytest.raises(errors.CorruptionError):
        list(s.events())


def test_storage_memories_and_tombstones_are_append_only(store):
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "x"})
    mem = store.memory(trajlog.Identity("acme", user="u", session=s.id))
    mem.remember("session", "fact", {"text": "a"}, source=(s.id, 0))
    mem.revoke(mem.remember("user", "fact", {"text": "b"}).id, reason="test")
    conn = write_conn(store)
    for sql in ("UPDATE memories SET state = 'active'", "DELETE FROM memories",
                "UPDATE tombstones SET reason = 'x'", "DELETE FROM tombstones",
                "UPDATE memory_head SET last_mid = 0", "DELETE FROM memory_head"):
        with pytest.raises(apsw.ConstraintError):
            conn.execute(sql)
