"""Failover under appending clients (``TRAJLOG_HA=1``; ``make ha``): two
PostgreSQL nodes under Patroni + etcd with synchronous replication
(:mod:`kits.pgha`); client processes append keyed events through a
multi-host URL (``target_session_attrs=read-write``) and retry a failed
append with its key; the leader's postmaster and Patroni are SIGKILLed
mid-stream.  Afterwards, on the new leader: every acknowledged event is
stored at its seq (0 lost), no key twice (0 duplicates), seqs contiguous,
verify ok; the time appends took to resume is measured.

The figures go to ``benchmarks/results-ha.md`` (``TRAJLOG_HA_RESULTS``
names another file).
"""

from __future__ import annotations

import json
import os
import platform
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kits import pgclients

pytestmark = pytest.mark.skipif(
    os.environ.get("TRAJLOG_HA") != "1",
    reason="the Patroni + etcd failover test starts etcd and two Patroni nodes (about a "
           "minute): run it with TRAJLOG_HA=1 (make ha)")

CLIENTS = 3
RESULTS = Path(os.environ.get("TRAJLOG_HA_RESULTS") or
               Path(__file__).resolve().parents[2] / "benchmarks" / "results-ha.md")


@pytest.fixture(scope="module")
def ha() -> Iterator[object]:
    from kits import pgha

    cluster = pgha.start()   # (raises when it cannot start: with TRAJLOG_HA=1, never a skip)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def results() -> Iterator[dict[str, dict[str, object]]]:
    """Each scenario's figures, written to RESULTS once all have run."""
    found: dict[str, dict[str, object]] = {}
    yield found
    if found:
        _write(found)


def _store(url: str, schema: str) -> object:
    from kits.pgcluster import open_store
    return open_store(url, schema, "acme")


# (first the postmaster and its Patroni: the synchronous standby must take over;
# then, on the promoted node -- no standby left -- its postmaster alone: its
# Patroni, alive, brings it back)
@pytest.mark.parametrize("killed_what", ["postmaster+patroni", "postmaster"])
def test_pg_leader_sigkill_mid_stream(ha, results, killed_what: str, tmp_path: Path):
    from kits.pgha import HaError
    from trajlog.storage.postgres import PostgresBackend

    deadline = time.monotonic() + 120   # (a leader -- streaming to a synchronous standby,
    while ha.leader() is None or (     # for a failover)
            killed_what == "postmaster+patroni" and not ha.sync_streaming()):
        if time.monotonic() > deadline:
            raise HaError(f"no leader streaming to a synchronous standby\n{ha.logs()}")
        time.sleep(0.2)
    sync = ha.sync_streaming()

    schema = f"ha_{uuid.uuid4().hex[:8]}"
    PostgresBackend(ha.owner_url, schema=schema).close()
    with _store(ha.app_url, schema) as st:
        sessions = [st.create_session(cwd=f"/s{k}").id for k in range(CLIENTS)]
    stop_file = tmp_path / "stop"
    clients = [pgclients.spawn("retry", {
        "url": ha.app_url, "schema": schema, "tenant": "acme", "sessions": sessions,
        "label": f"c{k}", "stop": str(stop_file), "pause": 0.01, "lock_ms": 5000})
        for k in range(CLIENTS)]

    def wait_for(counts: list[int], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while any(c.acks() < n for c, n in zip(clients, counts, strict=True)):
            assert time.monotonic() < deadline, (
                f"stalled at {[c.acks() for c in clients]} (wanted {counts}); the clients' "
                f"last lines: {[c.lines[-2:] for c in clients]}\n{ha.logs()}")
            time.sleep(0.02)

    try:
        wait_for([20] * CLIENTS, 60)
        old = ha.leader()
        kill_ms = pgclients.now_ms()
        killed = ha.kill_leader(patroni=killed_what == "postmaster+patroni")
        wait_for([c.acks() + 20 for c in clients], 90)
        new = ha.leader()
    finally:
        stop_file.touch()
        for c in clients:
            try:
                c.proc.wait(60)
            except Exception:
                c.proc.kill()
                c.proc.wait(10)
            c.join()
    assert old is killed and new is not None
    assert new is not killed or killed_what == "postmaster"
    ledgers = []
    for c in clients:
        ledger = pgclients.Ledger()
        ledger.read(c.lines)
        ledgers.append(ledger)
    everything = pgclients.Ledger()
    for c in clients:
        everything.read(c.lines)
    assert not everything.gave_up and all(c.proc.returncode == 0 for c in clients)
    assert not everything.unacknowledged()
    with _store(ha.app_url, schema) as st:
        found = pgclients.audit(st, sessions, everything)
        retried = [e.data for s in sessions for e in st.session(s).events()
                   if e.type == "request/retry"]
    # resumed: the first acknowledgement after a client's last failed attempt
    # (orphaned backends of a killed postmaster may still commit for a moment)
    resume, failing = [], []
    for ledger in ledgers:
        errors = [t for t, _ in ledger.errors if t >= kill_ms]
        back = min(t for t in ledger.ack_ms if t > (max(errors) if errors else kill_ms))
        resume.append(back - kill_ms)
        failing.append(back - min(errors) if errors else 0)
    acked_before = sum(1 for t in everything.ack_ms if t <= kill_ms)
    figures = {
        "clients": CLIENTS, "acknowledged": len(everything.acked),
        "acknowledged_before_kill": acked_before,
        "stored_keyed_events": sum(len(k) for k in found.keyed_by_session.values()),
        "stored_events": found.stored, "lost": len(found.lost),
        "duplicates": len(found.duplicates), "gaps": len(found.gaps),
        "verify_ok": found.verify_ok, "failed_attempts": len(everything.errors),
        "retries_already_stored": len(retried),
        "resume_ms_per_client": resume, "resume_ms_max": max(resume),
        "failing_ms_per_client": failing,
        "killed": f"{killed_what} of {killed.name}", "leader_after": new.name,
        "sync_standby_streaming_at_kill": sync,
        "patroni": {"ttl": 10, "loop_wait": 2, "retry_timeout": 5, "synchronous_mode": True},
    }
    results[killed_what] = figures
    print(f"\n{killed_what}: " + json.dumps(figures))
    assert not found.lost and not found.duplicates and not found.gaps, found
    assert found.verify_ok
    assert figures["stored_keyed_events"] == len(everything.acked)


def _write(found: dict[str, dict[str, object]]) -> None:
    """Each scenario's figures as a markdown table, and the JSON they came from."""
    rows = [("acknowledged appends", "acknowledged"),
            ("  of them before the kill", "acknowledged_before_kill"),
            ("keyed events stored", "stored_keyed_events"),
            ("acknowledged but lost", "lost"),
            ("keys stored twice (duplicates)", "duplicates"),
            ("sessions with a seq gap", "gaps"),
            ("store verifies", "verify_ok"),
            ("failed append attempts (each retried with its key)", "failed_attempts"),
            ("  of them already stored (request/retry recorded)", "retries_already_stored"),
            ("appends resumed, ms after the kill (per client)", "resume_ms_per_client"),
            ("appends resumed, ms after the kill (max)", "resume_ms_max"),
            ("appends failed for, ms (per client)", "failing_ms_per_client"),
            ("a synchronous standby streaming at the kill", "sync_standby_streaming_at_kill"),
            ("leader afterwards", "leader_after")]
    names = list(found)
    table = ("| SIGKILL of the leader's | " + " | ".join(names) + " |\n|---|"
             + "---|" * len(names) + "\n"
             + "".join(f"| {label} | " + " | ".join(str(found[n][key]) for n in names) + " |\n"
                       for label, key in rows))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        "# Failover under appending clients (tests/postgres/test_pg_ha.py, `make ha`)\n\n"
        f"{CLIENTS} client processes append keyed events to {CLIENTS} sessions through a "
        "multi-host URL (`target_session_attrs=read-write`) and retry a failed append with "
        "its key; the leader's postmaster and its Patroni are SIGKILLed mid-stream (the "
        "synchronous standby takes over), then the new leader's postmaster alone (no standby "
        "left: its Patroni restarts it).  Two PostgreSQL 15 nodes under Patroni 3.0.2 + etcd 3.4 "
        "(ttl 10 s, loop_wait 2 s, retry_timeout 5 s, `synchronous_mode: true`), on "
        f"loopback.  Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{platform.node()} ({os.cpu_count()} cores).\n\n" + table
        + "\n```json\n" + json.dumps(found, indent=1) + "\n```\n", encoding="utf-8")
