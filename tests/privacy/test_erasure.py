"""Erasure and retention: tombstones that purge every copy while the log
still verifies -- proven on the raw bytes of the database files."""

from __future__ import annotations

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import trajlog
from kits.tamper import file_bytes
from trajlog import Identity, projections
from trajlog.errors import ChecksumError, CorruptionError, ErasureError

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
SQLITE_ERASED = "proves what is gone on the bytes of the SQLite file and its WAL"

SECRET = "S3CR3T-PAYLOAD-{}"




def _agent(s, secret: str, call: str = "c1") -> None:
    with s.turn():
        s.append("user/message", {"content": f"please remember {secret}"})
        with s.step():
            s.append("assistant/message", {"content": f"noted {secret}", "tool_calls": [
                {"id": call, "name": "write", "arguments": {"text": secret}}]})
            s.append("tool/call", {"call_id": call, "name": "write",
                                   "arguments": {"text": secret}})
            s.append("tool/result", {"call_id": call, "output": f"wrote {secret}",
                                     "is_error": False})


@pytest.fixture
def store(tmp_path):
    with trajlog.open(str(tmp_path / "erase.db")) as s:
        yield s


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_an_erased_event_is_gone_from_every_read_path_and_the_files(store):
    s = store.create_session(cwd="/r")
    _agent(s, SECRET.format(1))                       # seqs 0..7
    s.append_batch([("note/big", {"text": SECRET.format(2) + " " + "filler " * 400})]
                   + [("note/small", {"n": i}) for i in range(30)])   # a compressed row
    store.repack(s.id)
    projections.checkpoint(s)                         # saved projection states hold it too
    history = projections.model_history(s)
    assert any(SECRET.format(1) in str(m.content) for m in history)
    report = store.erase(s.id, [1, 3, 4, 5, 8], reason="user request", actor="human:alice")
    assert report.frames_blanked == 5 and "the WAL checkpointed and truncated" in report.purged
    assert report.projection_states_dropped >= 1 and report.sessions_affected == (s.id,)
    for seq in (1, 3, 4, 5, 8):
        ev = s.get(seq)
        assert ev.data["erased"]["reason"] == "user request"
        assert ev.data["erased"]["actor"] == "human:alice"
    assert s.get(4).data["call_id"] == "c1" and s.get(4).data["name"] == "write"
    assert s.get(3).data["tool_calls"] == [{"id": "c1", "name": "write"}]
    every = list(s.events())
    assert SECRET.format(1) not in repr(every) and SECRET.format(2) not in repr(every)
    assert SECRET.format(1) not in repr(s.tail(50))
    for fold in (projections.model_history, projections.chat, projections.trajectory):
        assert SECRET.format(1) not in repr(fold(s))
    assert s.verify().ok and store.verify_memory().ok
    view, _ = s.inspect()
    assert SECRET.format(1) not in repr(view)
    raw = file_bytes(store.path)     # the store still open: its WAL is there too
    assert SECRET.format(1).encode() not in raw and SECRET.format(2).encode() not in raw
    store.close()
    raw = file_bytes(store.path)
    assert SECRET.format(1).encode() not in raw and SECRET.format(2).encode() not in raw
    with trajlog.open(store.path) as again:
        assert again.session(s.id).verify().ok
        assert again.session(s.id).get(1).data["erased"]["tombstone"] == 1


def test_erasure_is_idempotent_and_verify_still_passes(store):
    s = store.create_session()
    _agent(s, "x")
    first = store.erase(s.id, 1, reason="r")
    again = store.erase(s.id, 1, reason="r")
    assert not first.already and again.already and again.frames_blanked == 0
    assert s.verify().ok and s.get(1).data["erased"]["tombstone"] == 1


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_a_parents_payload_erased_under_a_fork_is_erased_for_the_children(store):
    s = store.create_session()
    _agent(s, SECRET.format(3))
    s.append("user/message", {"content": "after"})
    child = s.fork(7)
    sub = s.fork_subagent("review")
    # erased through the child: the frame is the parent's
    report = store.erase(child.id, [1, 3, 4, 5], reason="gdpr")
    assert set(report.sessions_affected) == {s.id, child.id, sub.id}
    for x in (s, child, sub):
        assert x.get(1).data["erased"]["reason"] == "gdpr"
        assert x.verify().ok
        assert SECRET.format(3) not in repr(list(x.events()))
    store.close()
    raw = file_bytes(store.path)
    assert raw.count(SECRET.format(3).encode()) == 0


def test_an_erasure_names_what_it_cannot_do(store):
    s = store.create_session()
    _agent(s, "x")
    with pytest.raises(ErasureError, match="no event 99"):
        store.erase(s.id, 99, reason="r")
    with pytest.raises(ErasureError, match="says why"):
        store.erase(s.id, 1, reason=" ")
    with pytest.raises(trajlog.errors.SessionNotFoundError):
        store.erase("00000000-0000-4000-8000-000000000000", 1, reason="r")
    assert s.get(1).data == {"content": "please remember x"}


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_a_blank_frame_without_a_tombstone_is_corruption_not_an_erasure(store):
    s = store.create_session()
    _agent(s, "keep")
    store.erase(s.id, 1, reason="r")
    # an erasure of seq 2 forged without its tombstone
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    cid = (s._ref.sid << 32) + 2
    body = conn.execute("SELECT body FROM chunks WHERE cid = ?", (cid,)).fetchall()[0][0]
    blanked = body[:40] + bytes(len(body) - 40)
    from trajlog.codec.chunks import body_seed
    from trajlog.codec.frames import checksum
    check = checksum(blanked, body_seed(s._ref.key, 2))
    conn.execute("UPDATE chunks SET body = ?, body_check = ? WHERE cid = ?",
                 (blanked, check - (1 << 64) if check >= 1 << 63 else check, cid))
    conn.close()
    store._e.reading.cache.clear()
    report = s.verify()
    assert not report.ok and report.scan.cursor.next_seq == 2
    with pytest.raises(ChecksumError):
        s.get(2)


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_a_tombstone_whose_payload_was_not_blanked_is_a_defect(store):
    s = store.create_session()
    _agent(s, "kept")
    store.erase(s.id, 1, reason="r")
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    tomb = conn.execute("SELECT * FROM tombstones").fetchall()[0]
    frame = bytes(tomb[-1])
    # the same tombstone record, now naming seq 2 (whose payload is still there)
    conn.execute("UPDATE tombstones SET target_seq = 2")
    conn.close()
    assert frame
    audit = store.verify_memory()
    assert not audit.ok


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_the_chunk_guard_lets_an_erasure_through_only_with_a_tombstone(store):
    s = store.create_session()
    _agent(s, "x")
    conn = apsw.Connection(store.path)
    cid = (s._ref.sid << 32) + 1
    with pytest.raises(apsw.ConstraintError, match="repack or an erasure"):
        conn.execute("UPDATE chunks SET body = body WHERE cid = ?", (cid,))
    store.erase(s.id, 2, reason="r")   # a tombstone for another row does not open this one
    with pytest.raises(apsw.ConstraintError, match="repack or an erasure"):
        conn.execute("UPDATE chunks SET body = x'00' WHERE cid = ?", (cid,))


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_a_damaged_row_is_never_erased(store):
    s = store.create_session()
    _agent(s, "x")
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    cid = (s._ref.sid << 32) + 1
    body = bytearray(conn.execute("SELECT body FROM chunks WHERE cid = ?", (cid,)).fetchall()[0][0])
    body[45] ^= 1
    conn.execute("UPDATE chunks SET body = ? WHERE cid = ?", (bytes(body), cid))
    conn.close()
    store._e.reading.cache.clear()
    with pytest.raises(CorruptionError, match="nothing was erased"):
        store.erase(s.id, 1, reason="r")
    assert store._e.backend.connection().execute(
        "SELECT count(*) FROM tombstones").fetchall()[0][0] == 0


# -- revocation ---------------------------------------------------------------------

@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_a_revoked_item_is_absent_from_reads_the_index_and_the_files(store):
    s = store.create_session()
    _agent(s, "x")
    mem = store.memory(Identity("acme", user="alice", session=s.id))
    item = mem.remember("user", "preference", {"text": "REVOKEDWORDXYZ tabs"},
                        source=(s.id, 1))
    mem.quarantine(item.id, reason="check")
    mem.restore(item.id, reason="fine")
    other = mem.remember("user", "fact", {"text": "unrelated words"})
    assert [i.id for i in mem.search("REVOKEDWORDXYZ")] == [item.id]
    report = mem.revoke(item.id, reason="gdpr", actor="human:alice")
    assert report.memory_versions_blanked == 3 and report.index_rows_removed == 1
    assert mem.search("REVOKEDWORDXYZ") == [] and mem.get(item.id).state == "revoked"
    assert all(v.content is None for v in mem.history(item.id))
    assert mem.get(other.id).content == {"text": "unrelated words"}
    assert store.verify_memory().ok and mem.revoke(item.id, reason="again").already
    store.rebuild_memory_index()
    assert mem.search("REVOKEDWORDXYZ") == []
    assert b"REVOKEDWORDXYZ" not in file_bytes(store.path)   # open: database and WAL
    store.close()
    assert b"REVOKEDWORDXYZ" not in file_bytes(store.path)


# -- retention -------------------------------------------------------------------------

@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_retention_revokes_expired_items_and_erases_old_events_idempotently(store):
    s = store.create_session()
    _agent(s, SECRET.format(7))
    s.append("retention/policy", {"ttl_ms": 1000})
    mem = store.memory(Identity("acme", user="alice", session=s.id))
    short = mem.remember("user", "fact", {"text": "EXPIRINGFACT"}, retention={"ttl_ms": 10})
    closing = mem.remember("session", "fact", {"text": "UNTILCLOSED"},
                           retention={"until_event": "session/closed"})
    forever = mem.remember("user", "fact", {"text": "forever"})
    later = max(e.time for e in s.events()) + 5000
    report = store.apply_retention(now_ms=later)
    assert report.items_revoked == (short.id,)
    kept = {e.seq for e in s.events() if "erased" not in (e.data or {})}
    assert {e.type for e in s.events() if e.seq in kept} <= {
        "turn/start", "turn/end", "step/start", "step/end", "retention/policy"}
    assert {seq for _, seq in report.events_erased} == {1, 3, 4, 5}
    assert mem.get(closing.id).state == "active" and mem.get(forever.id).state == "active"
    s.append("session/closed", {"reason": "done"})
    second = store.apply_retention(now_ms=later)
    assert second.items_revoked == (closing.id,) and second.events_erased == ()
    third = store.apply_retention(now_ms=later)
    assert third.items_revoked == () and third.events_erased == ()
    assert s.verify().ok and store.verify_memory().ok
    tomb = store._e.backend.connection().execute(
        "SELECT reason, actor FROM tombstones ORDER BY tid").fetchall()
    assert all(r.startswith("retention: ") and a == "trajlog:retention" for r, a in tomb)
    store.close()
    raw = file_bytes(store.path)
    for word in (SECRET.format(7).encode(), b"EXPIRINGFACT", b"UNTILCLOSED"):
        assert word not in raw
    assert b"forever" in raw


def test_an_until_event_policy_erases_the_whole_session_once_it_closes(store):
    s = store.create_session()
    s.append("retention/policy", {"until_event": "session/closed"})
    _agent(s, SECRET.format(8))
    assert store.apply_retention().events_erased == ()
    s.append("session/closed", {})
    done = store.apply_retention()
    assert {seq for _, seq in done.events_erased} == {2, 4, 5, 6}
    assert SECRET.format(8) not in repr(list(s.events())) and s.verify().ok


def test_erased_rows_repack_fork_and_load_like_any_other(tmp_path):
    with trajlog.open(str(tmp_path / "r.db"), repack=False) as store:
        s = store.create_session()
        for i in range(3):
            _agent(s, f"RPK{i}", f"c{i}")    # single appends: one small row each
        store.erase(s.id, [1, 9, 11, 12, 13], reason="r")
        assert store.repack(s.id) > 0         # rows holding blank frames merge
        assert s.verify().ok and s.get(9).data["erased"]["reason"] == "r"
        child = s.fork(15)
        assert child.verify().ok and child.get(13).data["call_id"] == "c1"
        assert child.get(11).data["tool_calls"] == [{"id": "c1", "name": "write"}]
        with s.turn():
            s.append("user/message", {"content": "open turn"})
        assert store.load(s.id).verify().ok
        assert "RPK1" not in repr(list(s.events()))



@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=hs.lists(hs.integers(1, 40), min_size=1, max_size=5),
       picks=hs.lists(hs.integers(0, 10_000), min_size=1, max_size=12),
       repack=hs.booleans(), fork=hs.booleans())
@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_property_erasure_removes_exactly_what_it_names(tmp_path_factory, batches, picks,
                                                        repack, fork):
    path = str(tmp_path_factory.mktemp("prop") / "e.db")
    with trajlog.open(path, repack=False) as store:
        s = store.create_session()
        n = 0
        for size in batches:   # single appends and batches: raw and compressed rows
            if size == 1:
                s.append("note/x", {"text": f"TOKEN{n:05d}X " * 3})
            else:
                s.append_batch([("note/x", {"text": f"TOKEN{n + i:05d}X " * 3})
                                for i in range(size)])
            n += size
        if repack:
            store.repack(s.id)
        child = s.fork_subagent("c") if fork else None
        erased = sorted({p % n for p in picks})
        store.erase(s.id, erased, reason="prop")
        events = list(s.events())
        assert s.verify().ok and store.verify_memory().ok
        for ev in events:
            if ev.seq in erased:
                assert ev.data["erased"]["reason"] == "prop"
            else:
                assert ev.data == {"text": f"TOKEN{ev.seq:05d}X " * 3}
        if child is not None:
            assert child.verify().ok
        raw = file_bytes(path)
        for seq in erased:    # (kept ones may be inside compressed rows: not greppable)
            assert f"TOKEN{seq:05d}X".encode() not in raw, seq


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_store_verify_covers_every_session_and_the_memory(store):
    s = store.create_session()
    _agent(s, "v")
    store.memory(Identity("acme", user="u")).remember("user", "fact", {"text": "x"})
    store.erase(s.id, 1, reason="r")
    assert store.verify().ok
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    conn.execute("UPDATE memories SET state = 'revoked'")
    conn.close()
    found = store.verify()
    assert not found.ok and found.sessions[s.id].ok and not found.memory.ok


def test_another_store_on_the_file_never_shows_an_erased_payload(tmp_path):
    path = str(tmp_path / "two.db")
    with trajlog.open(path) as a, trajlog.open(path) as b:
        s = a.create_session()
        _agent(s, "OTHERSTORE")
        seen = b.session(s.id)
        assert "OTHERSTORE" in repr(projections.model_history(seen))   # b caches its state
        assert "OTHERSTORE" in repr(seen.get(1))                        # and its chunk
        a.erase(s.id, [1, 3, 4, 5], reason="r")
        assert "OTHERSTORE" not in repr(projections.model_history(seen))
        assert "OTHERSTORE" not in repr(seen.get(1)) and seen.verify().ok


def test_the_asyncio_store_erases_applies_retention_and_verifies(tmp_path):
    import asyncio

    async def main() -> None:
        async with await trajlog.aio.open(str(tmp_path / "a.db")) as astore:
            s = await astore.create_session()
            await s.append("user/message", {"content": "ASYNCSECRET"})
            report = await astore.erase(s.id, 0, reason="r")
            assert report.frames_blanked == 1 and (await s.get(0)).data["erased"]
            assert (await astore.apply_retention()).events_erased == ()
            assert (await astore.verify()).ok

    asyncio.run(main())
