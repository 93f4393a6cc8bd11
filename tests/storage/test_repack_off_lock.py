"""A repack merges without the write lock.

A merge reads its run in a read snapshot and decompresses, checks, joins and
compresses there; only its short write transaction takes the write lock.  So
an append -- or an erasure -- can commit while a merge works, and the merge
must then find, in its write transaction, the very rows it merged: an
erasure that blanked one of them meanwhile makes it skip the run (writing
its merged row would bring the erased payload back).  (An erasure's purge
then waits for the merge's read snapshot to end before its checkpoint.)

The merge is held inside its snapshot by a ``_join`` that waits (the
module's one place where the merged body is made), so the tests do not
depend on timing: without the change, the append or the erasure waits for
the write lock the merge holds, and the test fails on its timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import apsw
import pytest

import trajlog
import trajlog.api.repack as repack_mod

SQLITE_APSW = "tampers with the store through an apsw connection of its own"

WAIT = 20.0   # seconds: a step that should take milliseconds (a hang fails the test)


@contextmanager
def merge_held(monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]) -> Iterator[list[Any]]:
    """Run ``run`` (a repack) in a thread; yield once its first merge is inside
    its snapshot, holding there until the block ends; then wait for it.  The
    list yielded gets the repack's result (or its error)."""
    original = repack_mod._join
    entered, release = threading.Event(), threading.Event()

    def join(parts: list[Any]) -> bytes:
        entered.set()
        assert release.wait(WAIT), "the test never let the merge go on"
        return original(parts)

    monkeypatch.setattr(repack_mod, "_join", join)
    out: list[Any] = []

    def go() -> None:
        try:
            out.append(run())
        except BaseException as exc:   # handed to the test
            out.append(exc)
    thread = threading.Thread(target=go)
    thread.start()
    try:
        assert entered.wait(WAIT), "the repack never merged"
        yield out
    finally:
        release.set()
        thread.join(WAIT)
    assert not thread.is_alive(), "the repack did not finish"
    monkeypatch.setattr(repack_mod, "_join", original)


def in_time(step: Callable[[], Any]) -> Any:
    """``step()`` in another thread; its result, or a failure if it does not
    finish in time (it waits for the write lock the merge holds)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(step()), daemon=True)
    thread.start()
    thread.join(WAIT / 4)
    assert not thread.is_alive(), "the step waited for the merge: it holds the write lock"
    return out[0]


def committed(path: str, sql: str) -> bool:
    """Poll, on a connection of its own, until ``sql`` counts a row."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        deadline = time.monotonic() + WAIT / 4
        while time.monotonic() < deadline:
            if conn.execute(sql).fetchall()[0][0]:
                return True
            time.sleep(0.01)
        return False
    finally:
        conn.close()


def singles(s: trajlog.Session, n: int) -> None:
    for i in range(n):
        s.append("user/message", {"content": f"message {i} " + "words " * 40})


def test_an_append_commits_while_a_merge_compresses(tmp_path, monkeypatch):
    with trajlog.open(str(tmp_path / "a.db"), repack=False) as store:
        s = store.create_session(cwd="/r")
        singles(s, 40)
        with merge_held(monkeypatch, lambda: store.repack(s.id)) as result:
            ev = in_time(lambda: s.append("user/message", {"content": "meanwhile"}))
            assert ev.seq == 40
        assert isinstance(result[0], int) and result[0] > 0, result
        assert s.verify().ok
        events = list(s.events())
        assert [e.seq for e in events] == list(range(41))
        assert events[-1].data == {"content": "meanwhile"}


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_an_erasure_during_a_merge_is_not_undone_by_it(tmp_path, monkeypatch):
    with trajlog.open(str(tmp_path / "e.db"), repack=False) as store:
        s = store.create_session(cwd="/r")
        singles(s, 40)
        with merge_held(monkeypatch, lambda: store.repack(s.id)) as result:
            erasing = threading.Thread(
                target=lambda: store.erase(s.id, 7, reason="user request"))
            erasing.start()
            # its transaction commits at once (its purge's checkpoint then
            # waits for the merge's snapshot to end: it is let go below)
            assert committed(str(tmp_path / "e.db"), "SELECT count(*) FROM tombstones"), \
                "the erasure waited for the merge: it holds the write lock"
        erasing.join(WAIT)
        assert not erasing.is_alive()
        # the run's rows changed under the merge: it was skipped, not written
        assert result == [0]
        assert s.verify().ok
        assert s.get(7).data["erased"]["reason"] == "user request"
        assert s.get(8).data["content"].startswith("message 8 ")
        # merged afterwards, with the blank payload the erasure left
        assert store.repack(s.id) > 0
        assert s.verify().ok
        assert s.get(7).data["erased"]["reason"] == "user request"
        assert [e.seq for e in s.events()] == list(range(40))
