"""Writer liveness on PostgreSQL is the server's answer: a writer holding a
lease holds an advisory lock on its write connection, and the server drops
it with the connection -- a killed process, a lost connection -- so another
writer takes the lease over at once, without waiting for the TTL and
without comparing hosts, pids or clocks."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kits.pgcluster import Cluster, open_store
from trajlog.errors import LeaseHeldError

HOLDER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from kits.pgcluster import open_store
url, schema, sid = sys.argv[2], sys.argv[3], sys.argv[4]
st = open_store(url, schema, "acme")
s = st.session(sid)
with s.lease():
    s.append("user/message", {"content": "holding"})
    print("held", flush=True)
    time.sleep(600)
"""


def test_pg_a_live_lease_is_refused_and_a_lost_connection_leaves_it_to_the_pid(pg: Cluster,
                                                                              schema: str):
    ttl = 3_600_000   # (an hour: only the server's answer can free the lease here)
    with open_store(pg.app_url, schema, "acme", lease_ttl_ms=ttl) as a, open_store(
            pg.app_url, schema, "acme", lease_ttl_ms=ttl) as b:
        s = a.create_session()
        other = b.session(s.id)
        with s.lease():
            s.append("note/x", {"n": 0})
            with pytest.raises(LeaseHeldError):
                other.append("note/x", {"n": 1})
            lease = a._e.backend.reader().head(
                a._e.backend.reader().session_by_id(s.id).sid).lease
            assert b._e.backend.lease_alive(lease) is True
            with pg.connect() as conn:   # a's write connection dies (as with its host)
                conn.execute("SELECT pg_terminate_backend(%s)",
                             (a._e.backend._wconn.info.backend_pid,))
            time.sleep(0.2)
            # the token went with the connection: the lease is no longer known live by it,
            # and the writer -- this very process, its store open -- is live by its pid
            assert b._e.backend.lease_alive(lease) is None
            with pytest.raises(LeaseHeldError):
                other.append("note/x", {"n": 1})
            s.append("note/x", {"n": 1})   # the writer writes on: its token taken again
            assert b._e.backend.lease_alive(lease) is True


def test_pg_a_killed_holder_frees_its_lease_at_once(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme", lease_ttl_ms=3_600_000) as store:
        s = store.create_session()
        tests = str(Path(__file__).resolve().parents[1])
        with subprocess.Popen([sys.executable, "-c", HOLDER, tests, pg.app_url, schema, s.id],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
            try:
                assert child.stdout is not None and child.stdout.readline().strip() == "held"
                with pytest.raises(LeaseHeldError):
                    s.append("note/x", {"n": 1})
            finally:
                child.kill()   # (SIGKILL: no goodbye to the server)
                child.communicate(timeout=30)
        deadline = time.monotonic() + 10   # (the server notices the closed socket)
        while True:
            try:
                assert s.append("note/x", {"n": 1}).seq == 1
                break
            except LeaseHeldError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
