"""``Session.close()`` ends a log with ``session/closed``: later appends of
any kind are a typed error (also after a reopen, and from another store
object), closing is idempotent and refused while something is open, and a
fork of a closed session is open.  On both backends."""

from __future__ import annotations

import asyncio

import pytest

import trajlog
from trajlog.errors import InvalidStateError, SessionClosedError


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "close.db")


def _turn(s, text):
    with s.turn():
        s.append("user/message", {"content": text})
        s.append("assistant/message", {"content": f"ok: {text}"})


def test_appends_after_close_are_refused_by_every_way_in(path):
    with trajlog.open(path) as store:
        s = store.create_session()
        _turn(s, "one")
        assert not s.closed
        closed = s.close("done")
        assert closed.type == "session/closed" and closed.data == {"reason": "done"}
        assert closed.seq == s.last_seq and s.closed
        assert s.close() == closed   # idempotent: the same event, nothing written
        assert s.last_seq == closed.seq
        with pytest.raises(SessionClosedError) as info:
            s.append("user/message", {"content": "late"})
        assert (info.value.session, info.value.seq, info.value.closed_at) == (
            s.id, closed.seq + 1, closed.seq)
        with pytest.raises(SessionClosedError):
            s.append_batch([("user/message", {"content": "late"})])
        with pytest.raises(SessionClosedError):
            store.append_atomic([(s.id, [("user/message", {"content": "late"})], None)])
        with pytest.raises(SessionClosedError), s.turn():
            pass
        assert s.last_seq == closed.seq and s.verify().ok
    with trajlog.open(path) as again:   # a reopened store reads where the log ended
        s2 = again.session(s.id)
        assert s2.closed
        with pytest.raises(SessionClosedError):
            s2.append("user/message", {"content": "after reopen"})
        fork = s2.fork(3)   # (the turn ends at 3) a fork's own log decides: it is open
        assert not fork.closed
        assert fork.append("user/message", {"content": "goes on"}).seq == 4


def test_a_close_from_another_store_object_is_seen_by_a_writer(path):
    with trajlog.open(path) as a, trajlog.open(path) as b:
        s = a.create_session()
        s.append("user/message", {"content": "x"})   # a's write state is cached
        b.session(s.id).close()
        with pytest.raises(SessionClosedError):
            s.append("user/message", {"content": "y"})
        assert s.close().seq == 1   # the other's close, returned


def test_close_is_refused_while_a_turn_or_a_call_is_open(path):
    with trajlog.open(path) as store:
        s = store.create_session()
        with s.turn(), pytest.raises(InvalidStateError, match="still open"):
            s.close()
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "c1", "name": "ls", "arguments": {}}]})
        with pytest.raises(InvalidStateError, match="still open"):
            s.close()   # (a call requested, no result)
        with pytest.raises(InvalidStateError, match="still open"):   # in one batch too
            s.append_batch([("turn/start", {}), ("session/closed", {})])
        s.append("tool/call", {"call_id": "c1", "name": "ls", "arguments": {}})
        s.append("tool/result", {"call_id": "c1", "output": "ok"})
        assert s.close().seq == s.last_seq


def test_nothing_follows_session_closed_in_a_batch(path):
    with trajlog.open(path) as store:
        s = store.create_session()
        with pytest.raises(SessionClosedError):
            s.append_batch([("session/closed", {}), ("user/message", {"content": "x"})])
        assert s.last_seq == -1   # all or nothing
        events = s.append_batch([("user/message", {"content": "x"}), ("session/closed", {})])
        assert events[-1].type == "session/closed" and s.closed


def test_the_async_session_closes(path):
    async def run():
        store = await trajlog.aio.open(path)
        try:
            s = await store.create_session()
            await s.append("user/message", {"content": "x"})
            assert not await s.closed()
            ev = await s.close("bye")
            assert ev.type == "session/closed" and await s.closed()
            with pytest.raises(SessionClosedError):
                await s.append("user/message", {"content": "y"})
        finally:
            await store.close()
    asyncio.run(run())


def test_close_waits_for_a_background_subagent_to_report(path):
    """A background subagent reports to its parent with a notification when
    it finishes: closing the parent first would lose that result (its
    ``finish`` refused), so ``close`` is refused while one still runs, naming
    it -- and taken once it has reported, or once it was closed itself."""
    from trajlog.errors import InvalidStateError

    with trajlog.open(path) as store:
        parent = store.create_session()
        with parent.turn():
            parent.append("user/message", {"content": "go"})
            parent.append("assistant/message", {"content": "", "tool_calls": [
                {"id": "c1", "name": "agent", "arguments": {}}]})
            parent.append("tool/call", {"call_id": "c1", "name": "agent", "arguments": {}})
            sub = parent.spawn_subagent("a background job", call_id="c1", background=True)
        with pytest.raises(InvalidStateError, match=sub.id):
            parent.close("done")
        assert not parent.closed
        with sub.turn():
            sub.append("assistant/message", {"content": "the result"})
        assert sub.finish("done").type == "subagent/notification"
        assert parent.close("done").type == "session/closed"
        other = store.create_session()
        with other.turn():
            other.append("user/message", {"content": "go"})
            other.append("assistant/message", {"content": "", "tool_calls": [
                {"id": "c2", "name": "agent", "arguments": {}}]})
            other.append("tool/call", {"call_id": "c2", "name": "agent", "arguments": {}})
            gone = other.spawn_subagent("abandoned", call_id="c2", background=True)
        gone.close("abandoned")
        assert other.close().type == "session/closed"
