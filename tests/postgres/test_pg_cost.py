"""The shape of the PostgreSQL backend's costs, in round trips (libpq's
protocol trace: a round trip is a burst of the client's messages answered by
the server's) -- never wall-clock."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator

from psycopg import pq

from kits.pgcluster import Cluster, open_store


@contextlib.contextmanager
def _round_trips(conn) -> Iterator[list[int]]:
    """Count the round trips ``conn`` makes in the block (into the list)."""
    out: list[int] = []
    with tempfile.TemporaryFile() as f:
        conn.pgconn.trace(f.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield out
        finally:
            conn.pgconn.untrace()
            f.seek(0)
            sides = [line.split("\t")[0] for line in f.read().decode(errors="replace")
                     .splitlines() if line[:2] in ("F\t", "B\t")]
            out.append(sum(1 for i, side in enumerate(sides)
                           if side == "F" and (i == 0 or sides[i - 1] == "B")))


def test_pg_round_trips_of_an_append_a_read_and_a_ranged_read(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme", repack=False) as store:
        backend = store._e.backend
        backend._pool.resize(1, 1)   # (one pooled connection: the one traced)
        s = store.create_session()
        for i in range(3):
            s.append("note/x", {"i": i})
        s.append_batch([("note/y", {"i": i}) for i in range(2000)])
        with _round_trips(backend._wconn) as append:
            s.append("note/x", {"i": 3})          # BEGIN + tenant, the row, COMMIT
        sid = backend.reader().session_by_id(s.id).sid
        conn = backend._pool.getconn()
        backend._pool.putconn(conn)
        with _round_trips(conn) as read:
            backend.reader().head(sid)            # BEGIN + tenant + the read, COMMIT
        with _round_trips(conn) as ranged:
            got = backend.reader().log_range(sid, 0, 1 << 40)
        assert len(got.chunks) >= 4
        loads = []
        for rows in (5, 50):   # single appends: one row each
            other = store.create_session()
            for i in range(rows):
                other.append("note/x", {"i": i})
            with _round_trips(conn) as loaded:
                assert store.load(other.id).verify().ok
            loads += loaded
    assert append == [3] and read == [2] and ranged == [2], (append, read, ranged)
    # a load's round trips do not grow with its rows (10x the rows: measured +1)
    assert loads[1] - loads[0] <= 2 and loads[1] < 50, loads
