"""Deleting a session (docs/deleting.md): the payloads erased under
tombstones with erasure's purge, the session gone from every listing and
look-up, a durable record of who deleted it, the space returned, children
refused, and no write ever bringing the id back -- on both backends."""

from __future__ import annotations

import asyncio
import os

import apsw
import pytest
import zstandard

import trajlog
from kits.pgstores import active as on_postgres
from kits.tamper import file_bytes
from trajlog.api.deletion import _record
from trajlog.codec.chunks import ZSTD
from trajlog.errors import DependentSessionsError, SessionDeletedError
from trajlog.interop.protocols import SessionSpec

SECRET = "D3L3T3-ME-{}"


def _fill(s: trajlog.Session, n: int = 20, size: int = 3000) -> None:
    with s.turn():
        for i in range(n):
            s.append("user/message", {"content": f"{SECRET.format(i)} " + "lorem ipsum " * (
                size // 12)})


def _bodies(store: trajlog.Store, sid: int) -> bytes:
    """Every stored chunk body of the session's own log, decompressed."""
    out = []
    for row in store._e.backend.reader().chunks(sid, 0, 1 << 31):
        out.append(zstandard.ZstdDecompressor().decompress(row.body) if row.codec == ZSTD
                   else bytes(row.body))
    return b"".join(out)


def _sid(store: trajlog.Store, session: trajlog.Session) -> int:
    return session._ref.sid


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "delete.db")


def test_a_deleted_session_is_purged_hidden_and_recorded(path):
    with trajlog.open(path) as store:
        s, other = store.create_session(cwd="/gone"), store.create_session(cwd="/kept")
        _fill(s)
        _fill(other, 3)
        sid = _sid(store, s)
        assert SECRET.format(7).encode() in _bodies(store, sid)
        report = store.delete_session(s.id, reason="user asked", actor="human:alice")
        assert report.session == s.id and not report.already
        assert report.events_erased == 22 and report.last_seq == 21   # turn, 20 messages, end
        assert report.purge is not None and report.purge.frames_blanked == 22
        # gone from listings, stats, lookups
        assert [h.id for h in store.sessions(include_subagents=True)] == [other.id]
        assert [m.id for m in store.stats().sessions] == [other.id]
        for look in (store.session, store.load, store.dependents):
            with pytest.raises(SessionDeletedError) as caught:
                look(s.id)
            assert caught.value.actor == "human:alice" and caught.value.reason == "user asked"
            assert caught.value.deleted_ms == report.deleted_ms and s.id in str(caught.value)
        # the payloads: gone from every stored row, every read of the old handle
        assert SECRET.format(7).encode() not in _bodies(store, sid)
        assert SECRET.format(7) not in repr(list(s.events()))
        assert SECRET.format(0).encode() in _bodies(store, _sid(store, other))
        # the log: append-only, verifies, ends with the record of the deletion
        last = s.get(s.last_seq)
        assert last.type == "session/deleted" and last.seq == 22
        assert last.data == {"reason": "user asked", "actor": "human:alice",
                             "deleted_ms": report.deleted_ms}
        assert s.verify().ok and store.verify().ok and store.verify_memory().ok
        if not on_postgres():
            store.close()
            assert SECRET.format(7).encode() not in file_bytes(path)
    with trajlog.open(path) as again:    # the record is durable
        with pytest.raises(SessionDeletedError, match="human:alice"):
            again.session(s.id)
        assert [h.id for h in again.sessions()] == [other.id]
        again_report = again.delete_session(s.id, reason="twice")   # idempotent
        assert again_report.already and again_report.reason == "user asked"
        assert again_report.events_erased == 0 and again_report.purge is None


def test_no_write_brings_a_deleted_session_back(path):
    with trajlog.open(path) as store, trajlog.open(path) as elsewhere:
        s = store.create_session()
        _fill(s, 2, 100)
        held = elsewhere.session(s.id)   # another store's handle, from before
        held.append("note/x", {"n": 1})
        store.delete_session(s.id, reason="r")
        for write in (lambda: s.append("note/x", {"n": 2}),
                      lambda: held.append("note/x", {"n": 3}),
                      lambda: held.append_batch([("note/x", {"n": 4})]),
                      lambda: store.append_atomic([(s.id, [("note/x", {})], None)]),
                      lambda: store.append_atomic([(s.id, [("note/x", {})], None)],
                                                  create={s.id: None}),
                      lambda: store.create_session(session_id=s.id),
                      lambda: elsewhere.create_session(session_id=s.id),
                      lambda: held.fork(0),
                      lambda: store.load_session(SessionSpec(s.id, "."), [("note/x", {})])):
            with pytest.raises(SessionDeletedError):
                write()
        bulk = store.bulk_loader()
        with pytest.raises(SessionDeletedError):
            bulk.load(SessionSpec(s.id, "."), [("note/x", {})])
        bulk.close()
        assert held.verify().ok and store.verify().ok
        assert [h.id for h in elsewhere.sessions()] == []


def test_a_session_with_forks_or_subagents_is_refused_until_they_go(path):
    with trajlog.open(path) as store:
        parent = store.create_session()
        _fill(parent, 3, 100)
        fork = parent.fork(parent.last_seq)
        fork.append("note/own", {"text": SECRET.format("fork")})
        with parent.turn():
            sub = parent.spawn_subagent("look")
            sub.append("note/own", {"text": "sub"})
        with pytest.raises(DependentSessionsError) as caught:
            store.delete_session(parent.id, reason="r")
        assert set(caught.value.dependents) == {fork.id, sub.id}
        assert fork.id in str(caught.value) and sub.id in str(caught.value)
        assert len(store.sessions(include_subagents=True)) == 3   # nothing was written
        store.delete_session(fork.id, reason="the copy")
        # the fork's own events are erased; its inherited prefix is the parent's
        assert SECRET.format("fork") not in repr(list(fork.events()))
        assert SECRET.format(1) in repr(list(parent.events()))
        with pytest.raises(DependentSessionsError, match=sub.id):
            store.delete_session(parent.id, reason="r")
        store.delete_session(sub.id, reason="the helper")
        store.delete_session(parent.id, reason="now")
        assert store.sessions(include_subagents=True) == []
        assert store.verify().ok


def _pages(path: str) -> tuple[int, int]:
    """(pages in use, free pages) of the SQLite file."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        count = conn.execute("PRAGMA page_count").fetchall()[0][0]
        free = conn.execute("PRAGMA freelist_count").fetchall()[0][0]
    finally:
        conn.close()
    return count - free, free


def test_the_space_is_returned(path):
    with trajlog.open(path, repack=False) as store:
        s = store.create_session()
        _fill(s, 60, 8000)
        rows, raw, stored = store._e.backend.reader().chunk_sizes(_sid(store, s))
        assert stored > 400_000
        store._e.backend.purge()         # (a checkpoint: the WAL into the file)
        before = None if on_postgres() else _pages(path)
        store.delete_session(s.id, reason="space")
        rows_after, raw_after, stored_after = store._e.backend.reader().chunk_sizes(
            _sid(store, s))
        # the same frames, blanked, and the session/deleted row, merged into a few
        # rows whose zeros compress to nothing
        assert rows == 62 and rows_after < 10 and raw_after > raw
        assert stored_after < stored // 50
        if before is None:
            return
        used, free = _pages(path)        # the freed pages: SQLite's free list, zeroed
        assert (before[0] - used) * 4096 > stored * 0.9 and free > before[1]
        size = os.path.getsize(path)
        again = store.create_session()   # the same volume again reuses them
        _fill(again, 60, 8000)
        store._e.backend.purge()
        assert os.path.getsize(path) < size + stored // 10


def test_a_deletion_cut_short_is_finished_by_deleting_again(path):
    with trajlog.open(path) as store:
        s = store.create_session()
        _fill(s, 5, 200)
        _record(store._e, s._ref, "crash", "ops", 1234)   # step 1 only: a crash after it
        with pytest.raises(SessionDeletedError, match="ops"):
            store.session(s.id)
        assert SECRET.format(3) in repr(list(s.events()))   # not erased yet
        done = store.delete_session(s.id, reason="again", actor="ops2")
        assert done.already and done.deleted_ms == 1234 and done.reason == "crash"
        assert done.events_erased == 7
        assert SECRET.format(3) not in repr(list(s.events())) and s.verify().ok


def test_the_asyncio_store_deletes(path):
    async def main() -> None:
        async with await trajlog.aio.open(path) as store:
            s = await store.create_session()
            await s.append("user/message", {"content": SECRET.format("a")})
            report = await store.delete_session(s.id, reason="async", actor="bot")
            assert report.events_erased == 1
            with pytest.raises(SessionDeletedError):
                await store.session(s.id)
    asyncio.run(main())


def test_a_closed_session_is_deleted_and_stays_refused(path):
    # session/deleted is the one event a closed log takes; after it, a write
    # from a handle held since says deleted (not closed)
    with trajlog.open(path) as store, trajlog.open(path) as elsewhere:
        s = store.create_session()
        _fill(s, 2, 100)
        s.close(reason="done")
        held = elsewhere.session(s.id)
        report = store.delete_session(s.id, reason="r", actor="human:bob")
        assert not report.already and s.get(s.last_seq).type == "session/deleted"
        for write in (lambda: s.append("note/x", {}), lambda: held.append("note/x", {})):
            with pytest.raises(SessionDeletedError, match="human:bob"):
                write()
        assert held.verify().ok and store.verify().ok


def test_a_deleted_session_is_gone_from_search(path):
    """Search finds nothing of a deleted session: not its erased events (their
    tombstones removed their documents) and not its deletion record either,
    whether the index caught up before the deletion or only after it."""
    with trajlog.open(path) as store:
        early, late, other = (store.create_session() for _ in range(3))
        for s in (early, late):
            s.append("user/message", {"content": "the zebra password is kangaroo"})
        other.append("user/message", {"content": "a zebra of another session"})
        assert {h.session_id for h in store.search("zebra").hits} == {early.id, late.id,
                                                                      other.id}
        late.append("user/message", {"content": "zebra again, after the catch-up"})
        for s in (early, late):
            store.delete_session(s.id, reason="the user asked: forget kangaroo", actor="alice")
        for words in ("zebra", "kangaroo", "asked forget", "alice"):
            hits = store.search(words).hits
            assert {h.session_id for h in hits} <= {other.id}, (words, hits)
        assert store.rebuild_search_index() >= 1
        assert {h.session_id for h in store.search("zebra kangaroo forget").hits} == set()
        assert [h.session_id for h in store.search("zebra").hits] == [other.id]


def test_verify_reports_a_deletion_row_whose_log_does_not_end_with_its_record(path):
    """A deletion row hides its session from every listing: one written
    around delete_session (forged, or a damaged log) must not hide a live
    session silently -- ``verify()`` checks every row against its log's last
    event, ``session/deleted``."""
    from trajlog.storage.base import DeletionRow

    with trajlog.open(path) as store:
        gone, live = store.create_session(), store.create_session()
        for s in (gone, live):
            _fill(s, n=3, size=50)
        store.delete_session(gone.id, reason="asked", actor="alice")
        assert store.verify().ok and store.verify().deletions == ()
        sid = _sid(store, live)
        with store._e.backend.transaction() as w:   # around the API, as a forger would
            w.insert_deletion(DeletionRow(sid, live.id, "forged", None, 0, live.last_seq))
        assert live.id not in {h.id for h in store.sessions()}
        audit = store.verify()
        assert not audit.ok
        assert len(audit.deletions) == 1 and live.id in audit.deletions[0], audit.deletions
        assert "session/deleted" in audit.deletions[0]


def test_search_finds_nothing_of_a_session_whose_deletion_is_recorded_but_not_purged(path):
    """A crash between the deletion's record and its purge (or a search
    racing the purge) leaves the payloads in place for a moment: the session
    is deleted from the record's commit on, so search finds nothing of it --
    neither what was indexed before nor what a catch-up or a rebuild would
    index now."""
    with trajlog.open(path) as store:
        s, other = store.create_session(), store.create_session()
        s.append("user/message", {"content": "zebrasecret one"})
        other.append("user/message", {"content": "zebrasecret two"})
        assert len(store.search("zebrasecret").hits) == 2
        s.append("user/message", {"content": "zebrasecret three"})
        ref = store._e.reading.ref_by_id(s.id)
        _record(store._e, ref, "asked", "alice", 1)   # the record only: the purge never ran
        assert [h.session_id for h in store.search("zebrasecret").hits] == [other.id]
        store.rebuild_search_index()
        assert [h.session_id for h in store.search("zebrasecret").hits] == [other.id]
