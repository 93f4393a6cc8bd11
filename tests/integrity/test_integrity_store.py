"""What an adversarial review found in the stored state: a schema
weakened by a foreign connection, a damaged session header, index rows that
decide forks and retries, saved projection states.  Each test failed before
its fix (commit ad986d4)."""

from __future__ import annotations

import apsw
import pytest

import trajlog
from kits.tamper import foreign, settle
from trajlog.errors import CorruptionError, SchemaError
from trajlog.storage.statements import rid

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_APSW)


def _plain(path: str) -> apsw.Connection:
    """A plain apsw connection with SQLite's default settings."""
    return apsw.Connection(path)


@pytest.fixture
def store_path(tmp_path):
    return str(tmp_path / "s.db")


def _seeded(path: str, n: int = 6) -> tuple[str, int]:
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/w", metadata={"user": "ada"})
        for i in range(n):
            s.append("user/message", {"content": f"m{i}"})
        settle(store)
        return s.id, s._sid


# -- the schema ---------------------------------------------------------------------

@pytest.mark.parametrize("ddl", [
    "DROP TRIGGER chunks_append",
    "DROP TRIGGER chunks_advance_head",
    "DROP TRIGGER heads_forward_only",
    "DROP INDEX event_index_idempotency",
    "CREATE TRIGGER evil AFTER INSERT ON chunks BEGIN SELECT 1; END",
    "CREATE VIEW v AS SELECT 1",
    "CREATE INDEX extra ON chunks(n)",
])
def test_a_schema_changed_by_a_foreign_connection_is_refused_at_open(store_path, ddl):
    _seeded(store_path)
    conn = _plain(store_path)
    conn.execute(ddl)
    conn.close()
    with pytest.raises(SchemaError, match="schema was changed outside trajlog"):
        trajlog.open(store_path)


def test_a_trigger_dropped_while_open_is_refused_before_a_write(store_path):
    sid, _ = _seeded(store_path)
    with trajlog.open(store_path) as store:
        s = store.session(sid)
        s.append("note", {"n": 1})
        conn = _plain(store_path)
        conn.execute("DROP TRIGGER chunks_advance_head")
        conn.close()
        before = s.last_seq
        with pytest.raises(SchemaError, match="chunks_advance_head is missing"):
            s.append("note", {"n": 2})
        # nothing acknowledged was hidden: nothing was acknowledged
        assert s.last_seq == before


def test_a_analyze_does_not_count_as_a_schema_change(store_path):
    _seeded(store_path)
    conn = _plain(store_path)
    conn.execute("ANALYZE")
    conn.close()
    trajlog.open(store_path).close()


# -- the session header ---------------------------------------------------------------

@pytest.mark.parametrize("column,value", [
    ("cwd", "/elsewhere"),
    ("agent_preset", "root"),
    ("created_ms", 1),
    ("metadata", b"\x81\xa4user\xa3eve"),        # decodes: another user
    ("metadata", b"\xc1\xc1"),                   # does not decode
    ("metadata", b"\x93\x01\x02\x03"),           # decodes, but not a map
])
def test_b_a_damaged_header_is_refused_by_load_and_reported_by_verify(store_path, column,
                                                                      value):
    sid, internal = _seeded(store_path)
    with trajlog.open(store_path) as store:
        conn = foreign(store)
        conn.execute(f"UPDATE sessions SET {column} = ? WHERE sid = ?", (value, internal))
        conn.close()
        with pytest.raises(CorruptionError, match="session header") as exc:
            store.load(sid)
        assert exc.value.session == sid
        s = store.session(sid)      # a handle, for verify and listing
        assert s.header.damage is not None
        report = s.verify()         # reports, never raises
        assert not report.ok and "session header" in report.scan.reason
        _, recovery = s.inspect()
        assert recovery.outcome == "refused"
        with pytest.raises(CorruptionError):
            list(s.events())
        with pytest.raises(CorruptionError):
            s.append("note", {})
        # the listing goes on and shows which header is damaged
        listed = {h.id: h for h in store.sessions()}
        assert listed[sid].damage is not None


def test_b_listing_and_cli_verify_go_on_past_a_damaged_header(store_path):
    with trajlog.open(store_path) as store:
        good = [store.create_session(cwd=f"/{i}") for i in range(3)]
        for s in good:
            s.append("note", {})
        settle(store)
        conn = foreign(store)
        conn.execute("UPDATE sessions SET metadata = x'c1' WHERE sid = ?", (good[1]._sid,))
        conn.close()
        headers = store.sessions()
        assert [h.id for h in headers] == [s.id for s in good]
        assert [h.damage is None for h in headers] == [True, False, True]
    from trajlog.cli.main import main
    code = main(["verify", "--db", store_path])
    assert code != 0
    # every session was verified, not only up to the damaged one
    for s in (good[0], good[2]):
        assert main(["verify", "--db", store_path, s.id]) == 0


def test_b_a_handle_made_before_damage_notices_it_in_verify(store_path):
    sid, internal = _seeded(store_path)
    with trajlog.open(store_path) as store:
        s = store.session(sid)
        assert s.verify().ok
        conn = foreign(store)
        conn.execute("UPDATE sessions SET cwd = '/x' WHERE sid = ?", (internal,))
        conn.close()
        assert not s.verify().ok


# -- index rows that decide ---------------------------------------------------------

def _turns(store, n_turns: int = 3):
    s = store.create_session(cwd="/t")
    for t in range(n_turns):
        with s.turn():
            s.append("user/message", {"content": f"u{t}"})
            s.append("assistant/message", {"content": f"a{t}"})
    settle(store)
    return s


def test_c_a_relabelled_turn_marker_does_not_move_a_fork_cut(store_path):
    with trajlog.open(store_path) as store:
        s = _turns(store)
        # turn 1 is seq 4..7: relabel its user message's index row? it has none;
        # relabel the turn/start of turn 2 (seq 8) as a turn/end instead.
        events = list(s.events())
        start2 = [e.seq for e in events if e.type == "turn/start"][2]
        end1 = [e.seq for e in events if e.type == "turn/end"][1]
        conn = foreign(store)
        conn.execute("UPDATE event_index SET type = 'turn/end' WHERE rid = ?",
                     (rid(s._sid, start2),))
        conn.close()
        # forking inside turn 2 would now cut at seq start2 (mid-turn), or at
        # end1: either way the index decides against the log -- refused.
        with pytest.raises(CorruptionError, match=f"index row of seq {start2}"):
            s.fork(start2 + 1)
        assert s.fork(end1).header.seed_length == end1 + 1  # turn 1 is unaffected
        assert not s.verify().ok


def test_c_an_index_row_pointing_a_retried_key_elsewhere_is_corruption(store_path):
    with trajlog.open(store_path) as store:
        s = store.create_session(cwd="/k")
        s.append("note", {"n": 0}, idempotency_key="k0")
        s.append("note", {"n": 1}, idempotency_key="k1")
        settle(store)
        conn = foreign(store)
        # swap the keys of the two index rows: a retry of k0 would find seq 1
        conn.execute("UPDATE event_index SET idempotency_key = 'tmp' WHERE rid = ?",
                     (rid(s._sid, 0),))
        conn.execute("UPDATE event_index SET idempotency_key = 'k0' WHERE rid = ?",
                     (rid(s._sid, 1),))
        conn.execute("UPDATE event_index SET idempotency_key = 'k1' WHERE rid = ?",
                     (rid(s._sid, 0),))
        conn.close()
        before = s.last_seq
        with pytest.raises(CorruptionError, match="idempotency key 'k0'"):
            s.append("note", {"n": 0}, idempotency_key="k0")
        assert s.last_seq == before


def test_c_an_index_row_whose_key_was_removed_is_found_by_verify(store_path):
    with trajlog.open(store_path) as store:
        s = store.create_session(cwd="/k")
        s.append("note", {"n": 0}, idempotency_key="k0")
        settle(store)
        conn = foreign(store)
        conn.execute("UPDATE event_index SET idempotency_key = NULL WHERE rid = ?",
                     (rid(s._sid, 0),))
        conn.close()
        report = s.verify()
        assert not report.ok and "index row of seq 0" in report.scan.reason


def test_c_insert_or_replace_through_the_idempotency_index_is_refused(store_path):
    with trajlog.open(store_path) as store:
        s = store.create_session(cwd="/k")
        s.append("note", {"n": 0}, idempotency_key="k0")
        s.append("note", {"n": 1})
        settle(store)
        conn = _plain(store_path)
        with pytest.raises(apsw.ConstraintError):
            conn.execute("INSERT OR REPLACE INTO event_index(rid, type, time_ms, "
                         "idempotency_key) VALUES (?, 'note', 0, 'k0')", (rid(s._sid, 1),))
        conn.close()
        assert [e.idempotency_key for e in s.events()] == ["k0", None]
        assert s.verify().ok


# -- saved projection states ------------------------------------------------------------

def test_d_a_damaged_saved_projection_state_is_rebuilt_not_served(store_path):
    with trajlog.open(store_path) as store:
        s = store.create_session(cwd="/p")
        with s.turn():
            s.append("user/message", {"content": "the real question"})
            s.append("assistant/message", {"content": "the real answer"})
        truth = trajlog.projections.model_history(s)
        trajlog.projections.checkpoint(s)
        sid = s.id
    with trajlog.open(store_path) as store:
        conn = foreign(store)
        rows = conn.execute("SELECT name, state FROM projection_states").fetchall()
        assert rows
        forged_any = False
        for name, state in rows:
            forged = bytes(state).replace(b"the real answer", b"a forged answer")
            forged_any |= forged != bytes(state)
            conn.execute("UPDATE projection_states SET state = ? WHERE name = ?",
                         (forged, name))
        assert forged_any
        conn.close()
        assert trajlog.projections.model_history(store.session(sid)) == truth


def test_d_a_projection_state_moved_to_another_session_is_not_served(store_path):
    with trajlog.open(store_path) as store:
        a = store.create_session(cwd="/a")
        b = store.create_session(cwd="/b")
        for s, word in ((a, "alpha"), (b, "beta")):
            with s.turn():
                s.append("user/message", {"content": word})
        truth_b = trajlog.projections.model_history(b)
        trajlog.projections.checkpoint(a)
        ids = a.id, b.id
        sids = a._sid, b._sid
    with trajlog.open(store_path) as store:
        conn = foreign(store)
        conn.execute("DELETE FROM projection_states WHERE sid = ?", (sids[1],))
        conn.execute("UPDATE projection_states SET sid = ? WHERE sid = ?", (sids[1], sids[0]))
        conn.close()
        assert trajlog.projections.model_history(store.session(ids[1])) == truth_b
