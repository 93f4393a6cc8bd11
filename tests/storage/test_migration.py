"""A store written by trajlog 0.1 (one row per frame, schema 3) opens: the
migration to chunk rows keeps every frame byte for byte, is verified before
and after, resumes after a crash, and leaves a store it cannot migrate exactly
as it was.  The 0.1 store is tests/data/store_v01.db, made by trajlog 0.1
itself (tests/data/make_store_v01.py), with what 0.1 read back from it in
tests/data/store_v01.json."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import trajlog
from kits.tamper import frames_of, raw_body
from trajlog import errors, projections
from trajlog.storage.schema import SCHEMA_VERSION
from trajlog.storage.statements import rid

SQLITE_MIGRATE = "migrates a SQLite file of an older trajlog"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_MIGRATE)

DATA = Path(__file__).resolve().parents[1] / "data"
EXPECTED = json.loads((DATA / "store_v01.json").read_text())


def copy_store(tmp_path: Path) -> str:
    path = tmp_path / "store.db"
    shutil.copyfile(DATA / "store_v01.db", path)
    return str(path)


def logical_dump(path: str) -> list:
    """Everything a store holds, as values: schema, user_version, every row."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        out: list = [conn.execute("PRAGMA user_version").fetchall()]
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
        out.append(conn.execute("SELECT type, name, sql FROM sqlite_schema ORDER BY name")
                   .fetchall())
        for table in tables:
            out.append((table, conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()))
        return out
    finally:
        conn.close()


def old_frames(sid: int) -> bytes:
    conn = apsw.Connection(str(DATA / "store_v01.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return b"".join(r[0] for r in conn.execute(
            "SELECT frame FROM events WHERE rid BETWEEN ? AND ? ORDER BY rid",
            (rid(sid, 0), rid(sid, 2**32 - 1))))
    finally:
        conn.close()


def test_migration_of_a_01_store_keeps_every_event(tmp_path):
    path = copy_store(tmp_path)
    with trajlog.open(path) as st:
        headers = {h.id: h for h in st.sessions(include_subagents=True)}
        assert set(headers) == set(EXPECTED)
        for sid, want in EXPECTED.items():
            s = st.session(sid)
            h = headers[sid]
            assert {"cwd": h.cwd, "parent_session": h.parent_session,
                    "seed_length": h.seed_length, "origin": h.origin,
                    "delegation_depth": h.delegation_depth, "agent_preset": h.agent_preset,
                    "created_at": h.created_at, "metadata": dict(h.metadata)} == want["header"]
            assert s.last_seq == want["last_seq"]
            got = [[e.seq, e.type, e.time, e.data, e.envelope] for e in s.events()]
            assert json.loads(json.dumps(got)) == want["events"], sid
            assert s.verify().ok, (sid, s.verify().scan.reason)
        a = st.session("00000000-0000-4000-8000-00000000000a")
        assert [m.role for m in projections.model_history(a)][:1] == ["summary"]
        # the frames are the 0.1 frames, byte for byte
        conn = st._e.backend.connection()
        for sid in EXPECTED:
            internal = st.session(sid)._sid
            rows = conn.execute("SELECT cid, n, raw_len, codec, body_check, seed_chain, "
                                "last_chain, body FROM chunks WHERE cid BETWEEN ? AND ? "
                                "ORDER BY cid", (rid(internal, 0), rid(internal, 2**32 - 1)))
            assert b"".join(raw_body(r) for r in rows) == old_frames(internal), sid
        # 0.1's idempotency keys still deduplicate; the crashed session loads
        original = next(e for e in EXPECTED[a.id]["events"]
                        if e[4].get("idempotency_key") == "final-3")
        assert a.append("assistant/message", {"content": "done 3"}, time=original[2],
                        idempotency_key="final-3").seq == original[0]
        b = st.load("00000000-0000-4000-8000-00000000000b")
        assert [e.data.get("status") for e in b.events(4)] == ["TOOL_OUTCOME_UNKNOWN", None]
        assert conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION
        assert not conn.execute("SELECT name FROM sqlite_schema WHERE name = 'events'").fetchall()
    with trajlog.open(path) as again:          # a second open migrates nothing
        # the idempotent re-append above was recorded as one request/retry
        assert again.session(a.id).last_seq == EXPECTED[a.id]["last_seq"] + 1
        assert again.session(a.id).verify().ok


def test_migration_refuses_a_damaged_01_store_and_changes_nothing(tmp_path):
    path = copy_store(tmp_path)
    conn = apsw.Connection(path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    sid, = conn.execute("SELECT sid FROM sessions WHERE id = ?",
                        ("00000000-0000-4000-8000-00000000000a",)).fetchall()[0]
    frame = bytearray(conn.execute("SELECT frame FROM events WHERE rid = ?",
                                   (rid(sid, 9),)).fetchall()[0][0])
    frame[45] ^= 0x08
    conn.execute("UPDATE events SET frame = ? WHERE rid = ?", (bytes(frame), rid(sid, 9)))
    conn.close()
    before = logical_dump(path)
    with pytest.raises(errors.MigrationError) as info:
        trajlog.open(path)
    assert info.value.session == "00000000-0000-4000-8000-00000000000a"
    assert "seq 9" in str(info.value) and "nothing was migrated" in str(info.value)
    assert logical_dump(path) == before


CRASHER = """
import os, sys
from trajlog.storage import migrate
real, done = migrate._copy_session, []
def copy_then_die(conn, sid):
    if len(done) == 3:
        os._exit(9)          # killed in the middle of the migration
    done.append(sid)
    return real(conn, sid)
migrate._copy_session = copy_then_die
import trajlog
trajlog.open(sys.argv[1])
"""


def test_migration_resumes_after_a_crash(tmp_path):
    path = copy_store(tmp_path)
    proc = subprocess.run([sys.executable, "-c", CRASHER, path], capture_output=True,
                          timeout=120)
    assert proc.returncode == 9, proc.stderr
    conn = apsw.Connection(path)
    assert conn.execute("PRAGMA user_version").fetchall()[0][0] == 3   # not finished
    assert conn.execute("SELECT count(*) FROM migration_v4").fetchall()[0][0] == 3
    conn.close()
    with trajlog.open(path) as st:                 # resumes where it stopped
        for sid, want in EXPECTED.items():
            got = [[e.seq, e.type, e.time, e.data, e.envelope] for e in st.session(sid).events()]
            assert json.loads(json.dumps(got)) == want["events"], sid
            assert st.session(sid).verify().ok


def test_migration_rows_are_chunks_not_one_frame_each(tmp_path):
    """The point of the migration: the frames of a session now sit in few rows."""
    path = copy_store(tmp_path)
    with trajlog.open(path) as st:
        a = st.session("00000000-0000-4000-8000-00000000000a")
        conn = st._e.backend.connection()
        rows = conn.execute("SELECT n, body FROM chunks WHERE sid = ?", (a._sid,)).fetchall()
        assert len(rows) == 1 and rows[0][0] == len(frames_of(raw_body(
            conn.execute("SELECT cid, n, raw_len, codec, body_check, seed_chain, last_chain, "
                         "body FROM chunks WHERE sid = ?", (a._sid,)).fetchall()[0])))
