"""The seam's per-session concurrency contract, on the real SQLite backend.

A backend with per-session locks cannot tell store-wide whether another
connection committed (``foreign_commit`` stays False); the write engine then
relies on the append's own refusal (``HeadMovedError``, nothing written) to
refresh the one session it concerns, and on group commit to run a transaction
the database ended in a conflict (``TransactionConflictError``) again.  Here
SQLite plays such a backend: its store-wide hint is switched off, and
conflicts are injected at commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

import trajlog
from trajlog.errors import HeadMovedError, TransactionConflictError
from trajlog.storage.base import Head, Writer
from trajlog.storage.commit import ATTEMPTS, GroupCommit, Request
from trajlog.storage.sqlite import SQLiteBackend

SQLITE_BLIND = "plays a per-session backend with a SQLite backend on the store's file"


class Blind(SQLiteBackend):
    """SQLite without its store-wide change signal (as a backend whose
    transactions lock sessions, not the store); ``conflicts``: how many of the
    next transactions the "database" ends in a conflict at commit."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.conflicts = 0
        self.locked: list[list[int]] = []

    @property
    def foreign_commits(self) -> int:   # (never moves: nothing seen store-wide)
        return 0

    @foreign_commits.setter
    def foreign_commits(self, value: int) -> None:
        pass

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:  # type: ignore[override]
        with super().transaction() as tx:
            tx.foreign_commit = False
            real = tx.lock_heads
            def lock_heads(sids: list[int]) -> dict[int, Head]:
                self.locked.append(list(sids))
                return real(sids)
            tx.lock_heads = lock_heads
            try:
                yield tx
            finally:
                del tx.lock_heads
            if self.conflicts:
                self.conflicts -= 1
                raise TransactionConflictError("injected: deadlock detected")


@pytest.mark.sqlite_only(reason=SQLITE_BLIND)
def test_an_append_after_another_writer_moved_the_head_refreshes_that_session(tmp_path):
    path = str(tmp_path / "s.db")
    with trajlog.open(path) as a, trajlog.open(path, backend=Blind(path)) as b:
        sa = a.create_session()
        sb = b.session(sa.id)
        sb.append("note", {"n": 0})          # b caches the head at seq 0
        sa.append("note", {"n": 1})          # a moves it; b is not told
        assert sb.append("note", {"n": 2}).seq == 2   # refused once, refreshed, appended
        assert [e.data["n"] for e in a.session(sa.id).events()] == [0, 1, 2]
        assert a.verify().ok


def test_the_refusal_writes_nothing_and_is_typed(tmp_path):
    path = str(tmp_path / "s.db")
    with trajlog.open(path) as a:
        s = a.create_session()
        s.append("note", {})
        backend = a._e.backend
        with pytest.raises(HeadMovedError), backend.transaction() as tx:
            # a chunk framed for seq 0 again: the head is at 0
            rows = tx.chunks(s._ref.sid, 0, 0)
            tx.append(s._ref.sid, rows, [], [None])
        assert [e.seq for e in s.events()] == [0]


def test_a_transaction_ended_in_a_conflict_runs_again(tmp_path):
    path = str(tmp_path / "s.db")
    backend = Blind(path)
    with trajlog.open(path, backend=backend) as st:
        s = st.create_session()
        backend.conflicts = ATTEMPTS - 1
        assert s.append("note", {"n": 1}).seq == 0
        assert backend.conflicts == 0
        assert [e.data for e in s.events()] == [{"n": 1}]


def test_a_conflict_that_persists_fails_typed_with_nothing_written(tmp_path):
    path = str(tmp_path / "s.db")
    backend = Blind(path)
    with trajlog.open(path, backend=backend) as st:
        s = st.create_session()
        backend.conflicts = ATTEMPTS
        with pytest.raises(TransactionConflictError):
            s.append("note", {})
        assert list(s.events()) == []
        assert s.append("note", {}).seq == 0   # the cache did not run ahead


def test_a_batch_locks_its_sessions_in_sid_order_first(tmp_path):
    backend = Blind(str(tmp_path / "s.db"))
    try:
        commit = GroupCommit(backend, (), lambda key: None)
        seen: list[int] = []
        def apply(tx: Writer) -> None:
            seen.append(len(backend.locked))
        batch = [Request(apply, 7), Request(apply, None, (9, 2)), Request(apply, 4)]
        commit.commit(batch)
        assert [r.error for r in batch] == [None, None, None]
        assert backend.locked[0] == [2, 4, 7, 9]   # before any request ran
        assert seen == [1, 1, 1]
    finally:
        backend.close()


class Verdict(SQLiteBackend):
    """SQLite whose writer liveness is decided by the backend, as a server's
    is (``alive``: its answer for every lease)."""

    alive: bool | None = None

    def lease_alive(self, lease: Any) -> bool | None:
        return self.alive


@pytest.mark.parametrize("alive", [True, False, None])
def test_the_backend_decides_whether_a_lease_holder_lives(tmp_path, alive):
    path = str(tmp_path / "s.db")
    backend = Verdict(path)
    backend.alive = alive
    with trajlog.open(path) as a, trajlog.open(path, backend=backend) as b:
        s = a.create_session()
        with s.lease():   # a live writer (this process, its store open)
            if alive is False:   # the backend says its holder is gone: taken over
                assert b.session(s.id).append("note", {}).seq == 0
            else:   # True, or no verdict and the host+pid rule: refused
                with pytest.raises(trajlog.errors.LeaseHeldError):
                    b.session(s.id).append("note", {})
