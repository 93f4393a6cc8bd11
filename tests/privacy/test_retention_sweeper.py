"""The background retention sweeper: off by default, a thread the store owns
and stops on close, bounded work per pass (counted), out of the way of
appends (it yields while they come, and adds nothing to their statements)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import trajlog
from kits.costkit import Meter
from trajlog.memory import RetentionRules

NOW = 4_000_000_000_000   # far past every event's time: every TTL has run out


def _sweepers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "trajlog-retention"]


def _results(s: Any, n: int) -> None:
    """``n`` tool calls with results, one turn."""
    with s.turn():
        for i in range(n):
            s.append("assistant/message", {"content": "", "tool_calls": [
                {"id": f"c{i}", "name": "ls", "arguments": {}}]})
            s.append("tool/call", {"call_id": f"c{i}", "name": "ls", "arguments": {}})
            s.append("tool/result", {"call_id": f"c{i}", "output": f"OUT-{i}"})


def _erased(s: Any) -> list[int]:
    return [ev.seq for ev in s.events()
            if isinstance(ev.data, dict) and isinstance(ev.data.get("erased"), dict)]


def _wait(check: Any, what: str) -> None:
    """Wait until ``check()`` (a bound on the wait, never a timing assertion)."""
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_a_pass_reads_and_erases_at_most_per_pass_events(tmp_path):
    rules = RetentionRules.of(tool_outputs=0, per_pass=10)
    with trajlog.open(str(tmp_path / "b.db"), retention=rules) as store:
        a, b = store.create_session(), store.create_session()
        _results(a, 20)   # 62 events: 20 results
        _results(b, 5)    # 17 events: 5 results
        assert not _sweepers()   # off by default: no sweep_seconds, no thread
        backend = store._e.backend
        purge, purges = backend.purge, []

        def counted() -> Any:   # (the real purge, counted)
            purges.append(1)
            return purge()
        backend.purge = counted
        passes = []
        while len(_erased(a)) + len(_erased(b)) < 25:
            before = len(purges)
            report = store.sweep_retention(NOW)
            passes.append(report)
            assert report.read <= 10 and len(report.erased) <= 10
            assert report.transactions <= 2   # one per session and rule it reached
            # one purge a pass (a WAL checkpoint, a VACUUM), after its last erasure
            assert len(purges) - before == (1 if report.erased else 0)
            assert bool(report.purged) == bool(report.erased)
            assert len(passes) < 20, passes
        # 79 events at 10 a pass: no pass read more, and none was wasted
        assert sum(p.read for p in passes) >= 79 and len(passes) <= 9
        assert len({s for p in passes for s in p.erased}) == 25
        after = store.sweep_retention(NOW)
        assert after.erased == () and after.read <= 10
        assert a.verify().ok and b.verify().ok


def test_the_passes_read_on_past_what_is_due_later(tmp_path):
    """Messages kept long ahead of tool outputs due now: the cursor stays at
    the first message, the passes go on to the results after it."""
    rules = RetentionRules.of(tool_outputs=0, messages="90d", per_pass=4)
    with trajlog.open(str(tmp_path / "l.db"), retention=rules) as store:
        s = store.create_session()
        with s.turn():
            for i in range(6):
                s.append("user/message", {"content": f"m{i}"})
        _results(s, 3)
        results = [ev.seq for ev in s.events() if ev.type == "tool/result"]
        now = max(ev.time for ev in s.events()) + 1000   # (the messages are not due)
        for _ in range(10):
            store.sweep_retention(now)
        assert _erased(s) == results
        # caught up: a pass reads nothing until a message is due or the log grows
        assert store.sweep_retention(now).read == 0
        s.append("user/message", {"content": "new"})
        assert store.sweep_retention(now).read == 1   # the new event only
        assert store.sweep_retention(now).read == 0
        later = now + 91 * 86_400_000
        reads = [store.sweep_retention(later).read for _ in range(6)]
        assert reads[-1] == 0   # read again from the cursor, once
        messages = [ev.seq for ev in s.events() if ev.type.endswith("/message")]
        assert _erased(s) == sorted(results + messages)


def test_the_background_sweeper_erases_and_stops_on_close(tmp_path):
    rules = RetentionRules.of(tool_outputs=0, sweep_seconds=0.01, per_pass=5)
    store = trajlog.open(str(tmp_path / "t.db"), retention=rules)
    try:
        assert len(_sweepers()) == 1
        s = store.create_session()
        _results(s, 8)
        _wait(lambda: len(_erased(s)) == 8, "the sweeper erased the results")
        swept = [p for p in store._sweeper.passes if p.erased]
        assert swept and all(p.read <= 5 and len(p.erased) <= 5 for p in swept)
    finally:
        store.close()
    assert not _sweepers()   # joined: no thread outlives its store
    assert not store._sweeper.running


def test_rules_set_on_an_open_store_start_the_sweeper(tmp_path):
    with trajlog.open(str(tmp_path / "s.db")) as store:
        assert not _sweepers()
        store.retention = RetentionRules.of(messages="7d", sweep_seconds=60)
        assert len(_sweepers()) == 1 and store.retention.messages.ttl_ms == 7 * 86_400_000
    assert not _sweepers()


def test_the_sweeper_yields_while_appends_come(tmp_path):
    rules = RetentionRules.of(tool_outputs=0, sweep_seconds=0.01, per_pass=4)
    with trajlog.open(str(tmp_path / "y.db"), retention=rules) as store:
        s = store.create_session()
        _results(s, 6)
        busy = store.create_session()
        stop = threading.Event()

        def append() -> None:
            while not stop.is_set():
                busy.append("user/message", {"content": "busy"})

        writer = threading.Thread(target=append)
        writer.start()
        try:
            _wait(lambda: any(p.yielded for p in store._sweeper.passes),
                  "a pass waited for appends to pause")
        finally:
            stop.set()
            writer.join()
        _wait(lambda: len(_erased(s)) == 6, "the sweeper went on once they paused")


@pytest.mark.sqlite_only(reason="counts what SQLite runs (statements, VM steps, pages, "
                         "compiles)")
def test_an_append_runs_the_same_statements_with_the_sweeper_running(tmp_path):
    def shape(rules: RetentionRules | None) -> list[str]:
        with trajlog.open(str(tmp_path / f"{rules is None}.db"), retention=rules) as store:
            s = store.create_session()
            _results(s, 3)
            s.append("user/message", {"content": "warm"})
            meter = Meter(store)
            with meter.window() as cost:
                for i in range(5):
                    s.append("user/message", {"content": f"m{i}"})
            return sorted(cost.by_sql.elements())
    off = shape(None)
    on = shape(RetentionRules.of(tool_outputs=0, sweep_seconds=0.01, per_pass=2))
    assert on == off and off


def _file_count(path: Any, word: bytes) -> int:
    import glob
    total = 0
    for name in glob.glob(f"{path}*"):
        with open(name, "rb") as f:
            total += f.read().count(word)
    return total


def test_a_pass_that_fails_loses_nothing_it_found_and_still_purges(tmp_path, monkeypatch):
    """A pass's erasure fails half way (a transient error: another process
    holding the lock, the disk): what it erased is purged all the same (no
    erased text left in the file), and what it had not erased yet is found
    again by the next pass of the same store -- a failed pass never leaves
    due events behind for the rest of the process.  A session deleted
    between the plan and the erasure is no failure at all (the deletion
    erased it)."""
    from kits.pgstores import active as on_postgres
    from trajlog.api.forget import Forgetting
    from trajlog.errors import StoreBusyError

    path = tmp_path / "s.db"
    store = trajlog.open(str(path), retention=RetentionRules.of(messages="1s", per_pass=1000))
    ids = []
    for i in range(3):
        s = store.create_session()
        ids.append(s.id)
        with s.turn():
            s.append("user/message", {"content": f"QUOKKA{i} " * 40})
            s.append("assistant/message", {"content": "ok"})
    calls: list[str] = []
    victim: list[str] = []
    real = Forgetting.erase

    def flaky(self: Any, session_id: str, *args: Any, **kw: Any) -> Any:
        calls.append(session_id)
        if len(calls) == 1:   # another one deleted between the plan and its erasure
            victim.append(next(i for i in ids if i != session_id))
            store.delete_session(victim[0], reason="asked")
        elif session_id != victim[0]:   # the third one: the store is busy
            raise StoreBusyError("the store is busy (injected)")
        return real(self, session_id, *args, **kw)

    try:
        monkeypatch.setattr(Forgetting, "erase", flaky)
        with pytest.raises(StoreBusyError):
            store.sweep_retention(now_ms=2**41)
        first = calls[0]
        assert _erased(store.session(first)) == [1, 2]
        if not on_postgres():
            assert _file_count(path, f"QUOKKA{ids.index(first)}".encode()) == 0
        monkeypatch.setattr(Forgetting, "erase", real)
        live = [h.id for h in store.sessions()]
        left = [i for i in live if i != first]
        assert len(left) == 1 and victim[0] not in live
        report = store.sweep_retention(now_ms=2**41)
        assert {sid for sid, _ in report.erased} == set(left)
        assert store.retention_plan(now_ms=2**41)[1] == []
    finally:
        store.close()
