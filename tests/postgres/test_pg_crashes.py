"""Crashes around a PostgreSQL store: appending clients killed with SIGKILL,
and the server restarted under appending clients (``pg_ctl restart``, fast
and immediate).  Real processes, a real server, real signals.

Each client reports every event as soon as ``append`` returns it
(:mod:`kits.pgclients`); afterwards every acknowledged event is stored at
its seq, no idempotency key is stored twice, each session's seqs run 0..n-1,
the store verifies, and ``load`` closes what the killed writers left open
-- their leases (host + pid, a short TTL) do not block it.  An append that
was sent and never acknowledged, retried with its key, is stored exactly
once.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from kits import pgclients
from kits.pgcluster import PGBIN, Cluster, open_store

ROUNDS = 3
WRITERS = 4
# A killed writer's lease must not block recovery: on this host its pid is
# gone at once; a backend that decides by a lock its connection held, or by
# the heartbeat, may take up to a TTL -- load is retried for 5 TTLs at most.
TTL_MS = 1000
# writer 0 "runs on another host" (a new one each round): the pid rule cannot
# judge its lease, only its heartbeat against the TTL (or the backend)
REMOTE = [lambda r: f"elsewhere-{r}"] + [lambda r: ""] * (WRITERS - 1)


def _turn_open(events: list) -> bool:
    marks = [e.type for e in events if e.type in ("turn/start", "turn/end")]
    return bool(marks) and marks[-1] == "turn/start"


def test_pg_kill9_of_appending_clients(pg: Cluster, schema: str):
    rng = random.Random(28)
    with open_store(pg.app_url, schema, "acme") as st:
        own = [st.create_session(cwd=f"/w{k}").id for k in range(WRITERS)]
        shared = [st.create_session(cwd="/shared").id for _ in range(2)]
    ledger = pgclients.Ledger()
    open_at_kill, remote_wait = 0, -1
    base = {"url": pg.app_url, "schema": schema, "tenant": "acme", "ttl_ms": TTL_MS}
    for r in range(ROUNDS):
        last = r == ROUNDS - 1   # (then writer 0 is killed holding its turn open)
        clients = [pgclients.spawn("turns", {
            **base, "label": f"r{r}w{k}", "own": own[k], "shared": shared,
            "host": REMOTE[k](r), "hold": rng.randint(3, 10) if last and k == 0 else None})
            for k in range(WRITERS)]
        deadline = time.monotonic() + 60
        while not all(c.acks() >= 1 or c.proc.poll() is not None for c in clients):
            assert time.monotonic() < deadline, "the clients never appended"
            time.sleep(0.02)
        order = rng.sample(clients, len(clients))   # at random moments, in random order
        if last:
            while not any(x.startswith("H ") for x in list(clients[0].lines)):
                assert time.monotonic() < deadline and clients[0].proc.poll() is None
                time.sleep(0.01)
            order.remove(clients[0])
            with open_store(pg.app_url, schema, "acme", lease_ttl_ms=TTL_MS) as st:
                clients[0].kill()   # (then at once: its heartbeat is still young)
                assert _turn_open(list(st.session(own[0]).events()))
                open_at_kill += 1
                remote_wait = pgclients.load(st, own[0], TTL_MS)[1]
        for c in order:
            time.sleep(rng.uniform(0.02, 0.4))
            c.kill()
        for c in clients:
            assert c.proc.returncode == -9, c.lines[-3:]   # (killed, never exited)
            ledger.read(c.lines)
        assert not ledger.gave_up, ledger.gave_up
        with open_store(pg.app_url, schema, "acme") as st:
            open_at_kill += sum(_turn_open(list(st.session(s).events())) for s in own)
    assert len(ledger.acked) > WRITERS * ROUNDS and open_at_kill > 0
    assert 0 <= remote_wait <= 5 * TTL_MS

    with open_store(pg.app_url, schema, "acme", lease_ttl_ms=TTL_MS) as st:
        for s in own:   # the last round's open turns: their writers' leases are dead
            ledger.load_waits.append(pgclients.load(st, s, TTL_MS)[1])
            events = list(st.session(s).events())
            assert not _turn_open(events)
            assert len(list(st.load(s).events())) == len(events)   # (balanced: writes nothing)
        assert len(ledger.load_waits) == (ROUNDS + 1) * WRITERS   # (every writer loaded)
        closers = [e for s in own for e in st.session(s).events()
                   if e.type == "turn/end" and e.source == "trajlog.recovery"]
        assert len(closers) == open_at_kill and all(e.data["interrupted"] for e in closers)

        # sent, never acknowledged: retried with the same key, stored exactly once
        pending = ledger.unacknowledged()
        outcomes = {"already stored": 0, "stored by the retry": 0}
        for key, sid in pending.items():
            before = {e.idempotency_key: e.seq for e in st.session(sid).events()}
            event = pgclients.keyed(st.session(sid), key)
            outcomes["already stored" if key in before else "stored by the retry"] += 1
            assert key not in before or before[key] == event.seq
            ledger.acked[key] = (sid, event.seq)
        found = pgclients.audit(st, own + shared, ledger)
    assert not found.lost and not found.duplicates and not found.gaps, found
    assert found.verify_ok
    print(f"\nkill -9: {ROUNDS * WRITERS} writers killed, {len(ledger.acked)} acknowledged, "
          f"0 lost; {open_at_kill} open turns closed by load; unacknowledged retried: "
          f"{outcomes}; load refused as live for {ledger.load_waits} ms; the lease of a "
          f"writer on another host killed in its turn: {remote_wait} ms (TTL {TTL_MS} ms)")


# -- a server restart mid-stream ------------------------------------------------------


def _restart(pg: Cluster, mode: str) -> None:
    """``pg_ctl restart -m <mode>`` of the test cluster (same port, same data)."""
    import subprocess

    assert pg.datadir is not None and pg.tmp is not None
    runner = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
    done = subprocess.run([*runner, str(PGBIN / "pg_ctl"), "-D", str(pg.datadir), "-l",
                           str(pg.tmp / "log"), "-w", "-t", "60", "restart", "-m", mode],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _postmaster(pg: Cluster) -> int:
    assert pg.datadir is not None
    return int((pg.datadir / "postmaster.pid").read_text().split()[0])


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_pg_server_restart_mid_stream(pg: Cluster, schema: str, mode: str, tmp_path: Path):
    if pg.datadir is None:
        pytest.skip("TRAJLOG_PG_URL names a server these tests do not own: not restarted")
    with open_store(pg.app_url, schema, "acme") as st:
        sessions = [st.create_session(cwd=f"/s{k}").id for k in range(3)]
    base = {"url": pg.app_url, "schema": schema, "tenant": "acme", "sessions": sessions,
            "lock_ms": 5000}
    stop_file = tmp_path / "stop"
    procs = [pgclients.spawn("retry", {**base, "label": f"p{k}", "stop": str(stop_file),
                                       "pause": 0.005}) for k in range(2)]
    stop = threading.Event()
    sinks = [pgclients.LineSink() for _ in range(2)]
    store = open_store(pg.app_url, schema, "acme")   # (two threads share one store)
    threads = [threading.Thread(target=pgclients.retry, args=(
        {**base, "label": f"t{k}", "pause": 0.005}, sinks[k], store, stop)) for k in range(2)]
    for t in threads:
        t.start()

    def acks() -> list[int]:
        return [c.acks() for c in procs] + [sum(x.startswith("A ") for x in list(s.lines))
                                           for s in sinks]

    def wait_for(counts: list[int]) -> None:
        deadline = time.monotonic() + 60
        while any(a < n for a, n in zip(acks(), counts, strict=True)):
            assert time.monotonic() < deadline, f"stalled at {acks()} (wanted {counts})"
            time.sleep(0.02)

    try:
        wait_for([5] * 4)
        before = _postmaster(pg)
        _restart(pg, mode)
        assert _postmaster(pg) != before
        wait_for([n + 10 for n in acks()])   # every client appends again
    finally:
        stop.set()
        stop_file.touch()
        for t in threads:
            t.join(60)
        store.close()
        for c in procs:
            c.proc.wait(60)
            c.join()
    ledger = pgclients.Ledger()
    for lines in [c.lines for c in procs] + [s.lines for s in sinks]:
        ledger.read(lines)
    assert not ledger.gave_up and all(c.proc.returncode == 0 for c in procs)
    assert not ledger.unacknowledged()   # (each client retried until acknowledged)
    with open_store(pg.app_url, schema, "acme") as st:
        found = pgclients.audit(st, sessions, ledger)
        retries = sum(1 for s in sessions for e in st.session(s).events()
                      if e.type == "request/retry")
    assert not found.lost and not found.duplicates and not found.gaps, found
    assert found.verify_ok
    print(f"\nrestart -m {mode}: {len(ledger.acked)} acknowledged, 0 lost, 0 duplicates; "
          f"{len(ledger.errors)} failed appends retried ({retries} were already stored), "
          f"appends failed for {pgclients.outage_ms(ledger)} ms")


def test_pg_a_live_writers_lease_survives_a_server_restart(pg: Cluster, schema: str):
    """A writer idle in its turn across a server restart is still alive: a
    second store's load must refuse to close its turn (LiveWriterError), past
    the TTL too, and the writer goes on in its turn afterwards."""
    from trajlog.errors import LiveWriterError, StoreError

    if pg.datadir is None:
        pytest.skip("TRAJLOG_PG_URL names a server these tests do not own: not restarted")
    with open_store(pg.app_url, schema, "acme", lease_ttl_ms=TTL_MS) as a, \
            open_store(pg.app_url, schema, "acme", lease_ttl_ms=TTL_MS) as b:
        s = a.create_session()
        with s.turn():
            s.append("note/x", {"n": 0})
            _restart(pg, "fast")
            time.sleep(2 * TTL_MS / 1000)   # (its heartbeat alone would now say: dead)
            for _ in range(100):   # (b's pooled connections died with the server: retry)
                try:
                    with pytest.raises(LiveWriterError):
                        b.load(s.id)
                    break
                except StoreError as exc:
                    if isinstance(exc, LiveWriterError):
                        raise
                    time.sleep(0.05)
            s.append("note/x", {"n": 1})
        assert [e.type for e in s.events()] == ["turn/start", "note/x", "note/x", "turn/end"]
