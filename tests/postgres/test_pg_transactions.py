"""The savepoint rule on PostgreSQL, where a failed statement aborts the
whole transaction: inside a savepoint only that part is rolled back (and the
heads it locked are forgotten), outside one the transaction is over
(``in_transaction()`` is False) and nothing of it commits; group commit's
batches (many threads, one store) isolate each request so."""

from __future__ import annotations

import threading

import pytest

from kits.pgcluster import Cluster, open_store
from trajlog.codec.chunks import Chunk
from trajlog.errors import StoreError
from trajlog.storage import postgres_rows as pr


def _gap(sid: int, last: int) -> tuple:
    """A chunk row two seqs past the head: the database's append guard refuses it."""
    return (sid, [Chunk(last + 3, 1, 40, 0, 1, 2, 3, b"x" * 40)], [], [None], ())


def test_pg_a_failure_in_a_savepoint_ends_only_that_part(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as store:
        s = store.create_session()
        s.append("note/x", {"n": 0})
        backend = store._e.backend
        sid = backend.reader().session_by_id(s.id).sid
        with backend.transaction() as w:
            with pytest.raises(StoreError, match="next seq"), w.savepoint():
                w.lock_heads([sid])
                w._run(pr.insert, *_gap(sid, 0))
            assert w.in_transaction() and w._heads == {}   # (the savepoint's locks went)
            w.save_projection_state(sid, "p", 1, 0, 7, b"kept")
        assert backend.reader().projection_state(sid, "p", 1) == (0, 7, b"kept")
        with pytest.raises(StoreError), backend.transaction() as w:
            w.save_projection_state(sid, "q", 1, 0, 7, b"lost")
            with pytest.raises(StoreError):
                w._run(pr.insert, *_gap(sid, 0))
            assert not w.in_transaction()
            w.save_projection_state(sid, "r", 1, 0, 7, b"refused")   # (aborted: raises)
        assert backend.reader().projection_state(sid, "q", 1) is None
        assert s.append("note/x", {"n": 1}).seq == 1 and s.verify().ok


def test_pg_many_threads_one_store_many_sessions(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as store:
        shared = store.create_session()
        own = [store.create_session() for _ in range(6)]
        errors: list[BaseException] = []

        def run(k: int) -> None:
            try:
                for i in range(40):
                    own[k].append("note/x", {"i": i})
                    shared.append("note/x", {"k": k, "i": i})
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert errors == []
        assert all(s.verify().ok and s.verify().events == 40 for s in own)
        report = shared.verify()
        assert report.ok and report.events == 240
        for k in range(6):
            mine = [e.data["i"] for e in shared.events() if e.data["k"] == k]
            assert mine == list(range(40))
