"""Writer liveness on PostgreSQL: the lock a writer's connection holds
(storage/postgres_liveness.py), not its host, pid or clock.

A live writer's lease is refused to another store however old its heartbeat;
once the writer's connection is gone -- its process killed, its backend
terminated by the server -- the lease is taken over at once, long before any
TTL would let it go.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kits.pgcluster import Cluster, open_store
from trajlog.errors import LeaseHeldError

LONG_TTL = 600_000   # (10 minutes: a takeover below happens only by the lock's verdict)


def test_pg_a_live_writers_lease_is_refused_whatever_its_heartbeat(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme", lease_ttl_ms=1) as a, \
            open_store(pg.app_url, schema, "acme", lease_ttl_ms=1) as b:
        s = a.create_session()
        with s.lease():
            time.sleep(0.05)   # (the heartbeat is far older than the 1 ms TTL)
            assert b._e.backend.lease_alive(b._e.backend.reader().head(s._ref.sid).lease)
            with pytest.raises(LeaseHeldError):
                b.session(s.id).append("note", {})


def test_pg_a_terminated_writer_connection_frees_its_lease_at_once(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme", lease_ttl_ms=LONG_TTL) as a, \
            open_store(pg.app_url, schema, "acme", lease_ttl_ms=LONG_TTL) as b:
        s = a.create_session()
        with s.lease():
            lease = b._e.backend.reader().head(s._ref.sid).lease
            assert b._e.backend.lease_alive(lease) is True
            pid = a._e.backend._liveness._conn.info.backend_pid
            with pg.connect() as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            for _ in range(100):   # (the server ends the backend asynchronously)
                if not b._e.backend.lease_alive(lease):
                    break
                time.sleep(0.02)
            assert b._e.backend.lease_alive(lease) is False
            assert b.session(s.id).append("note", {"by": "b"}).seq == 0


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[4])
    from kits.pgcluster import open_store
    store = open_store(sys.argv[1], sys.argv[2], "acme", lease_ttl_ms=600_000)
    s = store.session(sys.argv[3])
    with s.lease():
        s.append("note", {"by": "child"})
        print("held", flush=True)
        time.sleep(600)
""")


def test_pg_a_killed_writer_process_frees_its_lease_at_once(pg: Cluster, schema: str, tmp_path):
    with open_store(pg.app_url, schema, "acme", lease_ttl_ms=LONG_TTL) as b:
        s = b.create_session()
        tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        child = subprocess.Popen([sys.executable, "-c", CHILD, pg.app_url, schema, s.id, tests],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "held"
            with pytest.raises(LeaseHeldError):
                b.session(s.id).append("note", {"by": "b"})
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
            deadline = time.monotonic() + 10
            while True:   # (the server notices the closed socket at once, or nearly)
                try:
                    assert b.session(s.id).append("note", {"by": "b"}).seq == 1
                    break
                except LeaseHeldError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()
