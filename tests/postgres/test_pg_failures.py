"""Failures surface as trajlog's typed errors: a lock held past the lock
timeout is a StoreBusyError, a deadlock a TransactionConflictError (both
retryable), a lost connection a StoreError naming the store without its
password -- and the store goes on with new connections (reads again, the
next transaction reconnects)."""

from __future__ import annotations

import threading

import pytest

from kits.pgcluster import CLIENT, Cluster, open_store
from trajlog.errors import (
    HeadMovedError,
    StoreBusyError,
    StoreError,
    TransactionConflictError,
)


def _sid(store, session_id: str) -> int:
    return int(store._e.backend.reader().session_by_id(session_id).sid)


def test_pg_a_lock_past_the_timeout_is_busy(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as a, open_store(
            pg.app_url, schema, "acme", lock_timeout_ms=200) as b:
        s = a.create_session()
        s.append("note/x", {"n": 0})
        other = b.session(s.id)
        with a._e.backend.transaction() as w:
            assert list(w.lock_heads([_sid(a, s.id)])) == [_sid(a, s.id)]
            with pytest.raises(StoreBusyError) as caught:
                other.append("note/x", {"n": 1})
            assert not isinstance(caught.value, HeadMovedError)
        assert other.append("note/x", {"n": 1}).seq == 1   # (the lock went with a's commit)


def test_pg_a_deadlock_is_a_transaction_conflict(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as a, open_store(pg.app_url, schema, "acme") as b:
        one, two = _sid(a, a.create_session().id), _sid(a, a.create_session().id)
        both = threading.Barrier(2)
        errors: list[BaseException] = []

        def cross(store, first: int, second: int) -> None:
            try:
                with store._e.backend.transaction() as w:
                    w.head(first)   # (locks it: a head read in a writer is FOR UPDATE)
                    both.wait(10)
                    w.head(second)
            except StoreError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=cross, args=(a, one, two)),
                   threading.Thread(target=cross, args=(b, two, one))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(errors) == 1 and isinstance(errors[0], TransactionConflictError), errors
        assert isinstance(errors[0], StoreBusyError)   # (retryable)


def _terminate(pg: Cluster) -> int:
    with pg.connect() as conn:
        rows = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE usename = %s", (CLIENT,)).fetchall()
    return len(rows)


def test_pg_lost_connections_are_replaced(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as store:
        s = store.create_session()
        s.append("note/x", {"n": 0})
        assert len(list(s.events())) == 1
        assert _terminate(pg) >= 2   # the write connection and the pool's
        assert [e.seq for e in s.events()] == [0]          # a read on a fresh connection
        assert s.append("note/x", {"n": 1}).seq == 1       # the next transaction reconnects
        backend = store._e.backend
        with pytest.raises(StoreError) as caught, backend.transaction() as w:
            w.head(_sid(store, s.id))
            _terminate(pg)
            w.head(_sid(store, s.id) + 1000)   # (the transaction's connection is gone)
        message = str(caught.value)
        assert "connection" in message and store.path in message
        assert "client-secret" not in message and "client-secret" not in repr(caught.value)
        assert s.append("note/x", {"n": 2}).seq == 2
