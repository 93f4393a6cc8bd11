"""Many writers on many connections, one session: seqs stay contiguous and no
acknowledged event is lost.  Threads of several stores (each its own write
connection) and two processes append to one session at once; a writer whose
cached head is behind is refused with the retryable ``HeadMovedError``
(nothing written) and appends again."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from kits.pgcluster import Cluster, open_store
from trajlog.errors import HeadMovedError, StoreBusyError

CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
from kits.pgcluster import open_store
from trajlog.errors import StoreBusyError
url, schema, sid, per, k = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
retries = 0
with open_store(url, schema, "acme") as st:
    s = st.session(sid)
    for i in range(per):
        while True:
            try:
                print(s.append("note/x", {"content": f"{k}:{i}"}).seq)
                break
            except StoreBusyError:
                retries += 1
print("retries", retries, file=sys.stderr)
"""


def _append(store, sid: str, label: str, per: int, acked: list[int], retries: list[int]) -> None:
    s = store.session(sid)
    for i in range(per):
        while True:
            try:
                acked.append(s.append("note/x", {"content": f"{label}:{i}"}).seq)
                break
            except StoreBusyError:
                retries.append(1)


def test_pg_many_connections_and_two_processes_on_one_session(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as st:
        sid = st.create_session(cwd="/shared").id
    tests = str(Path(__file__).resolve().parents[1])
    procs, per = 2, 150
    children = [subprocess.Popen([sys.executable, "-c", CHILD, tests, pg.app_url, schema, sid,
                                  str(per), f"p{k}"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for k in range(procs)]
    stores = [open_store(pg.app_url, schema, "acme") for _ in range(3)]
    acked: list[int] = []
    retries: list[int] = []
    threads = [threading.Thread(target=_append, args=(stores[k % 3], sid, f"t{k}", per, acked,
                                                      retries)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    for store in stores:
        store.close()
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
        seqs = [int(x) for x in out.split()]
        assert len(seqs) == per and seqs == sorted(seqs)
        acked += seqs
    total = (procs + 6) * per
    assert sorted(acked) == list(range(total))   # contiguous, no duplicate, none lost
    with open_store(pg.app_url, schema, "acme") as st:
        s = st.session(sid)
        report = s.verify()
        assert report.ok and report.events == total
        contents = [e.data["content"] for e in s.events()]
        for label in [f"p{k}" for k in range(procs)] + [f"t{k}" for k in range(6)]:
            mine = [c for c in contents if c.startswith(f"{label}:")]
            assert mine == [f"{label}:{i}" for i in range(per)]


def test_pg_a_stale_append_is_refused_before_writing(pg: Cluster, schema: str):
    """The refusal is typed and retryable, and leaves the transaction usable:
    it writes nothing and the next statement runs."""
    with open_store(pg.app_url, schema, "acme") as a, open_store(pg.app_url, schema, "acme") as b:
        s = a.create_session()
        s.append("note/x", {"n": 0})
        b.session(s.id).append("note/x", {"n": 1})
        backend = a._e.backend
        sid = backend.reader().session_by_id(s.id).sid
        chunk = backend.reader().chunks(sid, 0, 0)[0]
        with backend.transaction() as w:
            try:
                w.append(sid, [chunk], [], [None])
            except HeadMovedError as exc:
                assert exc.sid == sid
            else:
                raise AssertionError("a stale append went through")
            assert w.in_transaction() and w.head(sid).last_seq == 1
        try:   # (store a's cached head is behind: refused, retryable, then refreshed)
            event = s.append("note/x", {"n": 2})
        except HeadMovedError:
            event = s.append("note/x", {"n": 2})
        assert event.seq == 2


def test_pg_two_stores_racing_to_make_one_session(pg: Cluster, schema: str):
    """Both write a session that neither finds: one makes it, the other's
    transaction conflicts on the id and runs again (appending after it)."""
    import uuid

    with open_store(pg.app_url, schema, "acme") as a, open_store(pg.app_url, schema, "acme") as b:
        ids = [str(uuid.uuid4()) for _ in range(20)]
        errors: list[BaseException] = []

        def race(store, label: str) -> None:
            try:
                for sid in ids:
                    store.append_atomic([(sid, [("note/x", {"by": label})], None)],
                                        create={sid: {}})
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=race, args=(st, label))
                   for st, label in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        for sid in ids:
            events = list(a.session(sid).events())
            assert sorted(e.data["by"] for e in events) == ["a", "b"]
