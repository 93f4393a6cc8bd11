"""Power-loss simulation: the loop of ``tests/kits/powerloss_sim.py`` on real
files, and tests of the harness itself -- a crash harness that does not drop
unsynced writes, or that lets the workload run on after the crash, passes every
check while testing nothing.

CI: 200 crashes per durability mode.  ``TRAJLOG_SLOW_TESTS=1``: 1,000 per mode
(``TRAJLOG_POWERLOSS_CRASHES`` overrides both; ``TRAJLOG_POWERLOSS_SEED`` sets
the seed, printed in the summary line).  The same run outside pytest:
``python tests/soak/powerloss_soak.py --crashes 200 --mode full --seed 20240611``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

import trajlog
from kits import powerloss_sim as sim
from kits.vfs_faults import Crash, FaultVFS, Faulty, IOFaults, PowerLoss
from trajlog.errors import StoreError
from trajlog.storage import statements as storage
from trajlog.storage.sqlite import open_connection

SQLITE_VFS = "the power-loss and I/O-fault VFS is a SQLite VFS"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_VFS)

SLOW = os.environ.get("TRAJLOG_SLOW_TESTS") == "1"
CRASHES = int(os.environ.get("TRAJLOG_POWERLOSS_CRASHES", 1000 if SLOW else 200))
SEED = int(os.environ.get("TRAJLOG_POWERLOSS_SEED", 20240611))


@pytest.fixture(scope="module")
def vfs() -> Any:
    with FaultVFS(sim.VFS_NAME) as v:
        yield v


def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if not p.name.endswith("-shm")}


# ---------------------------------------------------------------------------
# The harness


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_wal_writes_go_through_the_shim(vfs: FaultVFS, tmp_path: Path,
                                        durability: str) -> None:
    """Appendix B bug 1: the -wal file arrives as str, not URIFilename; a shim
    that only understood URIFilename tracked no WAL write at all."""
    vfs.opened.clear()
    plan = PowerLoss(None)
    vfs.plan = plan
    db = tmp_path / "db.sqlite"
    with trajlog.open(vfs.uri(db), durability=durability) as store:
        s = store.create_session(cwd="/r")
        before = plan.writes
        s.append("user/message", {"content": "x" * 2000})
        assert plan.writes > before
        wal = str(db) + "-wal"
        assert ("URIFilename", str(db)) in vfs.opened
        assert ("str", wal) in vfs.opened
        assert wal in plan.paths
        if durability == "full":
            assert plan.pending[wal] == []       # COMMIT synced the WAL
        else:
            assert plan.pending[wal], "NORMAL: the commit's WAL writes are unsynced"
    vfs.plan = PowerLoss(None)


def test_workload_stops_at_the_crash_point(vfs: FaultVFS, tmp_path: Path) -> None:
    """Appendix B bug 2: after the crash nothing may reach the files, and the
    store must fail every later write (typed), so nothing counts as acked."""
    db = tmp_path / "db.sqlite"
    plan = PowerLoss(None)
    vfs.plan = plan
    store = trajlog.open(vfs.uri(db))
    s = store.create_session(cwd="/r")
    start = plan.writes
    s.append("user/message", {"content": "one"})
    per_append = plan.writes - start
    assert per_append >= 2
    plan.crash_at = plan.writes + per_append // 2 + 1   # inside the next append
    with pytest.raises(StoreError) as info:
        s.append("user/message", {"content": "two"})
    assert isinstance(info.value.__cause__, Crash)
    assert plan.crashed and plan.writes == plan.crash_at
    on_disk = _digest(db.parent)
    with pytest.raises(StoreError):
        s.append("user/message", {"content": "three"})
    with pytest.raises(StoreError):
        store.create_session(cwd="/other")
    store.close()
    assert plan.writes == plan.crash_at, "a write was counted after the crash"
    assert _digest(db.parent) == on_disk, "a file changed after the power loss"
    vfs.plan = PowerLoss(None)


def _baseline(path: Path) -> None:
    """A WAL database with one row, durable, made without the shim."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("CREATE TABLE t(x BLOB)")
    conn.execute("INSERT INTO t VALUES (zeroblob(100))")
    conn.close()


def _rows(path: Path) -> tuple[int, str]:
    conn = apsw.Connection(str(path))
    try:
        check = conn.execute("PRAGMA integrity_check").fetchall()[0][0]
        return conn.execute("SELECT count(*) FROM t").fetchall()[0][0], check
    finally:
        conn.close()


def _unsynced_inserts(vfs: FaultVFS, db: Path, plan: Any, n: int = 20) -> apsw.Connection:
    """Inserts that are never synced; the connection is returned open (closing
    it would checkpoint)."""
    vfs.plan = plan
    conn = apsw.Connection(vfs.uri(db), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI)
    conn.execute("PRAGMA synchronous=OFF").fetchall()      # no xSync at all
    conn.execute("PRAGMA wal_autocheckpoint=0").fetchall()
    for _ in range(n):
        conn.execute("INSERT INTO t VALUES (randomblob(700))")
    return conn


@pytest.mark.parametrize("keep,restore,expect", [(1.0, 0.0, 21), (0.0, 1.0, 1)])
def test_crash_keeps_or_drops_unsynced_writes(vfs: FaultVFS, tmp_path: Path, keep: float,
                                              restore: float, expect: int) -> None:
    """With every sector kept the image has every commit; with every sector
    restored it has none of the unsynced ones -- the pre-images are right."""
    db = tmp_path / "db.sqlite"
    _baseline(db)
    plan = PowerLoss(None, keep=keep, restore=restore)
    conn = _unsynced_inserts(vfs, db, plan)
    plan.crash()
    assert plan.report is not None and plan.report.unsynced_writes >= 20
    image = plan.restore(tmp_path / "img")
    assert _rows(image / "db.sqlite") == (expect, "ok")
    with contextlib.suppress(Crash):   # closing would checkpoint: the disk is dead
        conn.close()
    vfs.plan = PowerLoss(None)


@pytest.mark.parametrize("drops", [False, True])
def test_failed_fsync_drop_model(vfs: FaultVFS, tmp_path: Path, drops: bool) -> None:
    """``sync_failure_drops``: a commit whose WAL fsync failed is lost on power
    loss even if every unsynced sector would have been kept.  Without it the
    frames were written, and WAL recovery finds the commit (a failed COMMIT
    can come back after a crash: unacknowledged, not lost)."""
    db = tmp_path / "db.sqlite"
    _baseline(db)
    vfs.plan = PowerLoss(None)
    conn = apsw.Connection(vfs.uri(db), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI)
    conn.execute("PRAGMA synchronous=FULL").fetchall()
    conn.execute("INSERT INTO t VALUES (randomblob(700))")     # WAL header written, synced
    faults = IOFaults(1, kinds=("sync",))
    power = PowerLoss(None, keep=1.0, restore=0.0, sync_failure_drops=drops)
    vfs.plan = Faulty(faults, power)
    with pytest.raises(apsw.IOError):
        conn.execute("INSERT INTO t VALUES (randomblob(700))")  # its COMMIT fsync fails
    assert faults.fired == [(1, "sync", str(db) + "-wal")]
    power.crash()
    assert power.report is not None
    assert (power.report.dropped_bytes > 0) == drops
    image = power.restore(tmp_path / "img")
    assert _rows(image / "db.sqlite") == (2 if drops else 3, "ok")
    with contextlib.suppress(Crash):   # closing would checkpoint: the disk is dead
        conn.close()
    vfs.plan = PowerLoss(None)


# ---------------------------------------------------------------------------
# The simulation


def _report(summary: sim.Summary) -> None:
    print(json.dumps(summary.row()))
    for o in summary.failures[:10]:
        print("FAILURE", o)


def test_powerloss_full(vfs: FaultVFS, tmp_path: Path) -> None:
    """FULL: 0 acknowledged events lost, every image intact and loadable."""
    summary = sim.simulate(tmp_path, mode="full", crashes=CRASHES, seed=SEED, vfs=vfs)
    _report(summary)
    assert summary.crashes == CRASHES
    assert summary.acked > CRASHES * 5, "the workload hardly ran"
    assert summary.crashed_in.get("append", 0) > CRASHES // 2
    assert summary.lost == 0 and summary.crashes_with_loss == 0, summary.failures[:3]
    assert summary.integrity_failures == 0, summary.failures[:3]
    assert summary.verify_failures == 0 and summary.load_failures == 0, summary.failures[:3]
    assert not summary.failures, summary.failures[:3]


def test_powerloss_normal(vfs: FaultVFS, tmp_path: Path) -> None:
    """NORMAL: images intact and loadable; acknowledged commits may be lost --
    and must be in some crashes, or the harness is not dropping unsynced
    writes (the sanity rule of Appendix B)."""
    summary = sim.simulate(tmp_path, mode="normal", crashes=CRASHES, seed=SEED, vfs=vfs)
    _report(summary)
    assert summary.integrity_failures == 0, summary.failures[:3]
    assert summary.verify_failures == 0 and summary.load_failures == 0, summary.failures[:3]
    assert not summary.failures, summary.failures[:3]
    assert CRASHES < 200 or summary.crashes_with_loss > 0, (
        "harness broken: NORMAL lost no acknowledged commit in "
        f"{summary.crashes} crashes")


def test_harness_sees_loss_when_fsync_lies(vfs: FaultVFS, tmp_path: Path) -> None:
    """Harness self-check: on a disk that acknowledges fsync without making
    anything durable, FULL must lose acknowledged events too -- so FULL's zero
    above comes from trajlog's syncs, not from a harness that drops nothing."""
    summary = sim.simulate(tmp_path, mode="full", crashes=60, seed=SEED, vfs=vfs,
                           lying_sync=True)
    print(json.dumps(summary.row()))
    assert summary.crashes_with_loss > 0


def test_lease_of_a_writer_lost_in_a_power_loss_does_not_block_recovery(
        tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with trajlog.open(str(db)) as store:
        s = store.create_session(cwd="/r")
        s.append("turn/start", {})
        s.append("user/message", {"content": "hi"})
        sid, internal = s.id, s._sid
    # After the reboot, the writer's pid belongs to a process started after the
    # lease was taken (here: a child started now, the lease an hour old).
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        conn = open_connection(str(db))
        taken = storage.now_ms() - 3_600_000
        storage.set_lease(conn, internal, "writer-before-the-reboot", socket.gethostname(),
                          child.pid, taken, taken)
        conn.close()
        with trajlog.open(str(db)) as store:
            loaded = store.load(sid)          # LiveWriterError today
            assert [e.type for e in loaded.events()][-1] == "turn/end"
    finally:
        child.kill()
        child.wait()


def test_open_of_a_zeroed_image_raises_a_typed_error(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    db.write_bytes(bytes(8192))
    with pytest.raises(StoreError):
        trajlog.open(str(db))
