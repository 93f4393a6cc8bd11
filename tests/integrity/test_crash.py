"""Crash injection with real processes: kill -9 a writer mid-append, reopen,
recover, verify.

The loop lives in ``tests/kits/crashkit.py`` (shared with ``tests/soak/crash_soak.py``).
``TRAJLOG_CRASH_ITERATIONS`` sets the number of kills (default 200, about
30-45 s here); ``TRAJLOG_CRASH_SEED`` replays a seed (the kill moments are
real time, so a replay repeats the workload, not the exact kill points).  The
summary is printed with ``-s`` and on failure.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys

import pytest

import trajlog
from kits.crash_child import digest, turn_events, user_message
from kits.crashkit import (
    MODES,
    Collected,
    DbModel,
    Harness,
    balance_problem,
    iterations_from_env,
    summary,
)
from kits.tamper import flip_frame_bits

SQLITE_APSW = "tampers with the store through an apsw connection of its own"

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                                reason="needs os.fork on Linux")


def test_crash_kill9_loop(tmp_path):
    """SIGKILL a child appending realistic turns (single appends, batches of
    2-32, several threads on their own sessions) at random moments; after each
    kill: no acknowledged event lost or changed, no phantom event,
    integrity_check ok, verify() clean everywhere (no false corruption verdict),
    load() succeeds, appends only what inspect() announced, is idempotent and
    leaves every session balanced."""
    iterations = iterations_from_env()
    seed = int(os.environ.get("TRAJLOG_CRASH_SEED") or random.randrange(1 << 32))
    harness = Harness(tmp_path, seed)
    stats = harness.run(iterations)
    report = summary(stats)
    print(f"\ncrash injection, {iterations} kills\n{report}")
    assert stats.ok, report
    assert stats.iterations == iterations
    # the loop really exercised what it claims to
    assert all(stats.kills[m] >= iterations // len(MODES) for m in MODES), report
    assert stats.ack_timeouts <= max(2, iterations // 25), report
    if iterations >= 150:   # (expected counts are then far from 0)
        assert stats.acked_events > 10 * iterations, report
        assert stats.kills_with_open_log > 0 and stats.closers_appended > 0, report
        assert stats.child_closers > 0, report          # some kills found a child recovering
        assert stats.killed_before_ready > 0, report


# ---------------------------------------------------------------------------
# The oracle itself: each check must be able to fail.

def _store_with_turns(path: str, turns: int = 2) -> tuple[str, list[tuple[int, str, dict]]]:
    rng = random.Random(7)
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/r")
        items: list[tuple[int, str, dict]] = []
        for _ in range(turns):
            items += turn_events(s.id, len(items), rng)
        s.append_batch([(t, d) for _, t, d in items])
        return s.id, items


def _collected(sid: str, items: list[tuple[int, str, dict]]) -> Collected:
    got = Collected(ready=True)
    for seq, t, d in items:
        got.intents[(sid, seq)] = (t, digest(t, d))
        got.acked[(sid, seq)] = 1
    got.ack_calls = 1
    return got


def test_crash_oracle_accepts_a_clean_store(tmp_path):
    path = str(tmp_path / "o.db")
    sid, items = _store_with_turns(path)
    h = Harness(tmp_path, seed=1)
    h._check(DbModel(path), _collected(sid, items), set(), True, "clean")
    assert h.stats.ok, h.stats.failures
    assert h.stats.acked_events == h.stats.recovered_events == len(items)


def test_crash_oracle_flags_lost_changed_and_phantom_events(tmp_path):
    path = str(tmp_path / "o.db")
    sid, items = _store_with_turns(path)
    got = _collected(sid, items)
    n = len(items)
    got.acked[(sid, n + 3)] = 2                               # acked, never stored
    got.intents[(sid, 1)] = ("user/message", "0" * 16)        # stored content differs
    del got.intents[(sid, 2)]                                 # stored, never announced
    h = Harness(tmp_path, seed=1)
    h._check(DbModel(path), got, set(), True, "bad")
    assert (h.stats.lost_acked, h.stats.content_mismatches, h.stats.phantom_events) == (1, 1, 1)
    assert not h.stats.ok


def test_crash_oracle_flags_a_rewritten_history(tmp_path):
    path = str(tmp_path / "o.db")
    sid, items = _store_with_turns(path)
    db = DbModel(path)
    h = Harness(tmp_path, seed=1)
    h._check(db, _collected(sid, items), set(), True, "first")
    assert h.stats.ok, h.stats.failures
    db.sessions[sid].digests[3] = "f" * 16                    # the model remembers otherwise
    h._check(db, Collected(ready=True), {sid}, True, "second")
    assert h.stats.history_changed == 1


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_crash_oracle_flags_corruption_as_a_corruption_verdict(tmp_path):
    """A byte flipped inside a committed frame (through a foreign connection
    with triggers off, the measured bypass) must count as a corruption verdict:
    the verify() check of the loop is not vacuous."""
    path = str(tmp_path / "o.db")
    sid, items = _store_with_turns(path)
    with trajlog.open(path) as st:                            # inside the payload
        flip_frame_bits(st, st.session(sid)._sid, 4, 45, 0x20)
    h = Harness(tmp_path, seed=1)
    h._check(DbModel(path), _collected(sid, items), set(), True, "corrupt")
    assert h.stats.false_corruption == 1, h.stats.failures


def test_crash_oracle_flags_a_refused_load(tmp_path):
    """A session whose open turn is held by a live writer (this process, through
    another store) is refused by inspect()/load(): counted as a load failure."""
    path = str(tmp_path / "o.db")
    with trajlog.open(path) as live:
        s = live.create_session(cwd="/r")
        with s.turn():
            item = (1, "user/message", user_message(s.id, 1))
            s.append(item[1], item[2])
            h = Harness(tmp_path, seed=1)
            got = _collected(s.id, [(0, "turn/start", {}), item])
            h._check(DbModel(path), got, set(), True, "live")
    assert h.stats.load_failures == 1 and h.stats.lost_acked == 0, h.stats.failures
    assert "LiveWriterError" in h.stats.failures[0], h.stats.failures


def test_crash_balance_oracle():
    rng = random.Random(3)
    items = turn_events("s" * 36, 0, rng)
    while not any(t == "tool/call" for _, t, _ in items):
        items = turn_events("s" * 36, 0, rng)

    class Ev:
        def __init__(self, seq, type_, data):
            self.seq, self.type, self.data = seq, type_, data

    events = [Ev(*it) for it in items]
    assert balance_problem(events) is None
    assert "open at the end" in balance_problem(events[:-1])
    first_call = next(i for i, e in enumerate(events) if e.type == "tool/call")
    assert "was not requested" in balance_problem(events[first_call:])


# ---------------------------------------------------------------------------
# Regression tests for bugs found while building the crash loop (fixed).

_WRITER = """
import os, sys, trajlog
st = trajlog.open(sys.argv[1])
s = st.create_session(cwd="/r")
turn = s.turn()
turn.__enter__()                       # holds the writer lease (host, pid, start time)
s.append("user/message", {"content": "working"})
print(s.id, os.getpid(), flush=True)
os._exit(1)                            # crash mid-turn: no turn/end, lease not released
"""

_RESTARTED = """
import os, sys, trajlog
st = trajlog.open(sys.argv[1])
print("pid", os.getpid())
try:
    st.load(sys.argv[2])
    print("load ok")
except trajlog.errors.TrajlogError as exc:
    print("load", type(exc).__name__)
try:
    with st.session(sys.argv[2]).turn():
        pass
    print("turn ok")
except trajlog.errors.TrajlogError as exc:
    print("turn", type(exc).__name__)
"""


def _in_new_pid_namespace(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run argv as pid 1 of a fresh pid namespace (same host name, same
    files): what a container restart looks like to the store."""
    cmd = ["unshare", "--pid", "--fork", "--kill-child"]
    if os.geteuid() != 0:
        cmd[1:1] = ["--user", "--map-root-user"]
    return subprocess.run([*cmd, *argv], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("successor", ["restarted as pid 1 of a new pid namespace",
                                       "a process of the host namespace, where pid 1 is init"])
def test_crash_restarted_writer_with_the_same_pid_recovers(tmp_path, successor):
    """A writer crashes mid-turn as pid 1 of a pid namespace (a container);
    its successor -- the restarted container, whose writer is pid 1 again, or
    any process of the host, where pid 1 is init -- must see the lease as stale,
    recover the session and write to it.  (Found by this file on 06be5ba:
    liveness was "same host and the pid exists", so load() raised
    LiveWriterError and turn() LeaseHeldError forever.)"""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1)")
    probe = _in_new_pid_namespace(sys.executable, "-c", "import os; print(os.getpid())")
    if probe.returncode != 0 or probe.stdout.strip() != "1":
        pytest.skip(f"cannot create a pid namespace: {probe.stderr.strip()[:200]}")
    path = str(tmp_path / "restart.db")
    crashed = _in_new_pid_namespace(sys.executable, "-c", _WRITER, path)
    if crashed.returncode != 1 or len(crashed.stdout.split()) != 2:
        pytest.fail(f"the writer did not crash as planned: {crashed.stdout!r} "
                    f"{crashed.stderr[-500:]!r}")
    sid, pid = crashed.stdout.split()
    if pid != "1":
        pytest.fail(f"the writer ran as pid {pid}, not 1")
    argv = [sys.executable, "-c", _RESTARTED, path, sid]
    if successor.startswith("restarted"):
        after = _in_new_pid_namespace(*argv)
    else:
        after = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if after.returncode != 0:
        pytest.fail(f"the successor failed: {after.stderr[-800:]}")
    lines = after.stdout.split("\n")
    if successor.startswith("restarted") and lines[0] != "pid 1":
        pytest.fail(f"the successor is not pid 1: {lines[0]}")
    # The crashed writer is gone: its successor must recover the session and
    # go on.  Before the fix: "load LiveWriterError", "turn LeaseHeldError".
    assert lines[1:3] == ["load ok", "turn ok"], after.stdout
