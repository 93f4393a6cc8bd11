"""I/O-error injection: every write API under a VFS that fails its I/O.

For each public write API, the fault VFS of ``tests/kits/vfs_faults.py`` fails I/O
operation number K of that API's run (``xWrite`` / ``xSync`` with
``SQLITE_IOERR_*``, or ``xWrite`` with ``SQLITE_FULL``), once or from K on,
for K = 1, 2, ... until the API runs without meeting the fault.  Each time:

* the API raises a typed :class:`trajlog.errors.StoreError` (an apsw exception
  leaking out is a bug), or, if it returns, its events are all durable;
* the log is a prefix: the API's events are all there or none (turns: one of
  the outcomes the turn protocol allows), and every event acknowledged before
  is still there;
* while a "forever" fault lasts, a further append fails typed too; once the
  disk recovers the store is usable (an append succeeds, ``verify()`` is ok)
  or says it is closed (:class:`StoreClosedError`);
* reopened with the default VFS, ``verify()`` is clean and ``load()`` works.

A fault in the auto-checkpoint that runs after a commit is ignored by SQLite
(the commit stands), but apsw re-raises the Python VFS exception from the
COMMIT call, so the API reports a failure for a commit that happened.  With
SQLite's own C VFS that does not happen.  The checks below therefore accept an
API that raised and whose events are nonetheless all present (never a part).

Plus the fsync rules: an append whose COMMIT fsync failed is not reported as a
success (and is not retried inside the call); and, with the kernel dropping the
pages of a failed fsync ("fsyncgate"), appends acknowledged after the failure
survive a later power loss.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import trajlog
from kits.vfs_faults import FaultVFS, Faulty, IOFaults, Plan, PowerLoss
from trajlog.errors import LiveWriterError, StoreClosedError, StoreError

SQLITE_VFS = "the power-loss and I/O-fault VFS is a SQLite VFS"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_VFS)

BIG = "lorem ipsum dolor sit amet, " * 80           # > 512 bytes: the zstd path
PRIOR = [("user/message", {"content": f"m{i}"}) for i in range(3)]
U = ("user/message", {"content": BIG})
T = ("turn/start", {})
END_OK = ("turn/end", {"interrupted": False})
END_INT = ("turn/end", {"interrupted": True})
DURING = ("user/message", {"content": "during the fault"})
AFTER = ("user/message", {"content": "after the fault"})
Ev = tuple[str, Any]


@pytest.fixture(scope="module")
def vfs() -> Any:
    with FaultVFS("iofaultvfs") as v:
        yield v


# ---------------------------------------------------------------------------
# The APIs under test.  Each runs against (store, session) and names the tails
# the log may have after it: every event it could have added, in order.

@dataclass
class Api:
    name: str
    run: Callable[[trajlog.Store, trajlog.Session], Any]
    outcomes: list[list[Ev]]             # allowed new events; the last is full success
    new_session: bool = False


def _append(store: trajlog.Store, s: trajlog.Session) -> Any:
    return s.append(*U)


def _batch(store: trajlog.Store, s: trajlog.Session) -> Any:
    return s.append_batch([("user/message", {"content": "a"}), U,
                           ("assistant/message", {"content": BIG[:300]})])


def _create(store: trajlog.Store, s: trajlog.Session) -> Any:
    return store.create_session(cwd="/new")


def _lease(store: trajlog.Store, s: trajlog.Session) -> Any:
    with s.lease():
        s.append(*U)


def _turn(store: trajlog.Store, s: trajlog.Session) -> Any:
    with s.turn():
        s.append(*U)


APIS = {
    "append": Api("append", _append, [[], [U]]),
    "append_batch": Api("append_batch", _batch, [[], [("user/message", {"content": "a"}), U,
                                                      ("assistant/message",
                                                       {"content": BIG[:300]})]]),
    "create_session": Api("create_session", _create, [[]], new_session=True),
    "lease": Api("lease", _lease, [[], [U]]),
    # turn/start fails; the body fails (interrupted end written or not);
    # turn/end fails; success.  [T, U, END_INT]: the body's append committed
    # but its auto-checkpoint failed, which apsw reports as a failed append
    # (see the module docstring), so the turn ends interrupted.
    "turn": Api("turn", _turn, [[], [T], [T, END_INT], [T, U], [T, U, END_INT],
                                [T, U, END_OK]]),
}


# ---------------------------------------------------------------------------

@dataclass
class Trial:
    k: int
    fired: list[tuple[int, str, str | None]]
    raised: BaseException | None
    closed_after: bool = False
    tail: list[Ev] = field(default_factory=list)


def _setup(vfs: FaultVFS, d: Path, durability: str,
           autocheckpoint: int) -> tuple[trajlog.Store, trajlog.Session]:
    d.mkdir(parents=True)
    vfs.plan = Plan()
    store = trajlog.open(vfs.uri(d / "db.sqlite"), durability=durability)
    store._e.backend.write_connection.execute(
        f"PRAGMA wal_autocheckpoint={autocheckpoint}").fetchall()
    s = store.create_session(cwd="/r")
    acked = s.append_batch(PRIOR[:1])
    acked += [s.append(*e) for e in PRIOR[1:]]
    assert [e.seq for e in acked] == [0, 1, 2]
    return store, s


def _log(s: trajlog.Session) -> list[Ev]:
    return [(e.type, e.data) for e in s.events()]


def _strip(tail: list[Ev], ev: Ev) -> tuple[list[Ev], bool]:
    if tail and tail[-1] == ev:
        return tail[:-1], True
    return tail, False


def one_trial(vfs: FaultVFS, d: Path, api: Api, k: int, *, forever: bool, error: str,
              kinds: tuple[str, ...], durability: str = "full",
              autocheckpoint: int = 1000) -> Trial:
    store, s = _setup(vfs, d, durability, autocheckpoint)
    writer_id, sid = store.writer_id, s.id
    plan = IOFaults(k, kinds=kinds, error=error, forever=forever)
    vfs.plan = plan
    raised: BaseException | None = None
    try:
        api.run(store, s)
    except BaseException as exc:
        raised = exc
    trial = Trial(k, list(plan.fired), raised)
    where = f"{api.name} K={k} forever={forever} error={error} kinds={kinds} fired={plan.fired}"
    if raised is not None:
        assert isinstance(raised, StoreError), (
            f"{where}: untyped {type(raised).__module__}.{type(raised).__name__}: {raised!r}")
        assert plan.fired, f"{where}: raised without a fault: {raised!r}"

    during_ok = False
    if forever and plan.fired:
        # The disk is still failing: a further append must fail, typed.
        try:
            s.append(*DURING)
            during_ok = True
        except StoreError:
            pass
        except BaseException as exc:
            pytest.fail(f"{where}: append during the fault raised untyped {exc!r}")
        assert not during_ok or "sync" not in kinds or durability == "normal", (
            f"{where}: an append succeeded while every fsync fails")
    plan.enabled = False

    # The disk is back: usable, or clearly closed.
    after_ok = False
    try:
        after = s.append(*AFTER)
        after_ok = True
        assert s.verify().ok, f"{where}: verify() not ok after the fault"
        assert after.seq == s.last_seq
    except StoreClosedError:
        trial.closed_after = True
    store.close()
    vfs.plan = Plan()

    # Reopen with SQLite's own VFS.
    with trajlog.open(str(d / "db.sqlite")) as again:
        headers = again.sessions()
        assert headers[0].id == sid
        s2 = again.session(sid)
        report = s2.verify()
        assert report.ok, f"{where}: verify after reopen: {report.scan.reason}"
        log = _log(s2)
        assert log[:len(PRIOR)] == PRIOR, f"{where}: an acknowledged event was lost"
        tail = log[len(PRIOR):]
        tail, after_present = _strip(tail, AFTER)
        assert after_present == after_ok, f"{where}: the append after the fault " + (
            "is missing" if after_ok else "raised but is present")
        tail, during_present = _strip(tail, DURING)
        assert not during_ok or during_present, f"{where}: acknowledged append lost"
        trial.tail = tail
        assert tail in api.outcomes, f"{where}: not an allowed outcome: {tail}"
        if raised is None:
            assert tail == api.outcomes[-1], f"{where}: success reported, events missing"
        elif tail == api.outcomes[-1] and api.name in ("append", "append_batch"):
            # Reported failed, but committed: only a fault after the COMMIT's
            # own WAL write (+ fsync under FULL), i.e. in the auto-checkpoint.
            n, kind, path = plan.fired[0]
            on_db = path is not None and not path.endswith(("-wal", "-journal"))
            wal_synced = any(k == "sync" and (p or "").endswith("-wal")
                             for k, p in plan.log[:n - 1])
            assert on_db or (kind == "sync" and (wal_synced or durability == "normal")), (
                f"{where}: a failed append is present though its commit never synced")
        if api.new_session:
            assert len(headers) in (1, 2), headers
            if raised is None:
                assert len(headers) == 2, f"{where}: create_session returned, session lost"
            for h in headers[1:]:
                assert again.session(h.id).verify().ok
                assert list(again.session(h.id).events()) == []
        else:
            assert len(headers) == 1
        try:
            again.load(sid)
        except LiveWriterError as exc:
            # The lease the faulted store failed to release is still held by this
            # (live) process.  That is the documented refusal; as the same writer,
            # load() must then work.
            lease_owner = exc.reason
            assert writer_id in lease_owner, f"{where}: {exc}"
            again.writer_id = writer_id
            again.load(sid)
        assert again.session(sid).verify().ok
    return trial


def fault_loop(vfs: FaultVFS, tmp: Path, api: Api, **kw: Any) -> list[Trial]:
    """K = 1, 2, ... until the API completes without meeting the fault."""
    trials = []
    for k in itertools.count(1):
        trial = one_trial(vfs, tmp / f"k{k}", api, k, **kw)
        trials.append(trial)
        if not trial.fired:
            assert trial.raised is None
            assert trial.tail == api.outcomes[-1]
            break
        assert k < 200, "the loop does not end"
    assert len(trials) > 1, "the first fault point was never reached"
    return trials


@pytest.mark.parametrize("forever", [False, True], ids=["once", "forever"])
@pytest.mark.parametrize("error,kinds", [("ioerr", ("write", "sync")), ("full", ("write",))],
                         ids=["ioerr", "full"])
@pytest.mark.parametrize("api", list(APIS))
def test_fault_loop(vfs: FaultVFS, tmp_path: Path, api: str, error: str,
                    kinds: tuple[str, ...], forever: bool) -> None:
    trials = fault_loop(vfs, tmp_path, APIS[api], forever=forever, error=error, kinds=kinds,
                        autocheckpoint=1)
    # Every fault point was met by a typed failure.
    assert all(t.raised is not None for t in trials if t.fired)


@pytest.mark.parametrize("durability", ["full", "normal"])
@pytest.mark.parametrize("autocheckpoint", [4, 1000])
def test_fault_loop_append_variants(vfs: FaultVFS, tmp_path: Path, durability: str,
                                    autocheckpoint: int) -> None:
    for forever in (False, True):
        fault_loop(vfs, tmp_path / f"f{forever}", APIS["append"], forever=forever,
                   error="ioerr", kinds=("write", "sync"), durability=durability,
                   autocheckpoint=autocheckpoint)


# ---------------------------------------------------------------------------
# fsync

def test_failed_commit_fsync_is_not_acknowledged(vfs: FaultVFS, tmp_path: Path) -> None:
    """The COMMIT's fsync of the WAL fails: the append raises, is not retried
    inside the call, and is not visible; the next append takes its seq."""
    store, s = _setup(vfs, tmp_path / "db", "full", 1000)
    plan = IOFaults(1, kinds=("sync",))
    vfs.plan = plan
    with pytest.raises(StoreError) as info:
        s.append(*U)
    assert plan.fired == [(1, "sync", str(tmp_path / "db" / "db.sqlite-wal"))]
    assert plan.ops == 1, "the failed commit was retried inside the call"
    assert "IOError" in str(info.value)
    plan.enabled = False
    assert s.last_seq == 2
    assert _log(s) == PRIOR
    ev = s.append(*AFTER)
    assert ev.seq == 3
    store.close()
    vfs.plan = Plan()
    with trajlog.open(str(tmp_path / "db" / "db.sqlite")) as again:
        assert _log(again.session(s.id)) == [*PRIOR, AFTER]


@pytest.mark.parametrize("autocheckpoint", [1, 4, 1000])
def test_fsync_failure_dropping_pages_loses_no_later_ack(vfs: FaultVFS, tmp_path: Path,
                                                         autocheckpoint: int) -> None:
    """"fsyncgate": a failed fsync leaves its pages clean but not on disk, and
    a later successful fsync does not write them.  For each sync K of a run of
    appends: fail it once, keep appending, then lose power with every unsynced
    write lost.  Every append acknowledged (before or after the failure) must
    be in the image."""
    n_appends = 8
    for k in itertools.count(1):
        d = tmp_path / f"k{k}"
        store, s = _setup(vfs, d, "full", autocheckpoint)
        faults = IOFaults(k, kinds=("sync",))
        power = PowerLoss(None, seed=k, keep=0.0, restore=1.0, sync_failure_drops=True)
        vfs.plan = Faulty(faults, power)
        attempted: list[tuple[Ev, bool]] = [(e, True) for e in PRIOR]   # (event, acked)
        failed = 0
        for i in range(n_appends):
            ev = ("user/message", {"content": f"{i} " + BIG})
            try:
                s.append(*ev)
                attempted.append((ev, True))
            except StoreError:
                attempted.append((ev, False))
                failed += 1
        power.crash()
        store.close()
        vfs.plan = Plan()
        power.restore(tmp_path / f"img{k}")
        with trajlog.open(str(tmp_path / f"img{k}" / "db.sqlite")) as again:
            s2 = again.session(s.id)
            assert s2.verify().ok
            log = _log(s2)
        # The image: what was appended, in order, with every acknowledged event;
        # a failed one may be there (its commit may have stood, see the docstring).
        acked = [e for e, ok in attempted if ok]
        expected = [e for e, ok in attempted if ok or (log and e in log)]
        assert log == expected, (
            f"K={k} fired={faults.fired}: {len(acked)} acknowledged, {len(log)} in the image, "
            f"missing {[e[1]['content'][:2] for e in acked if e not in log]}")
        if not faults.fired:
            assert failed == 0
            break
        assert failed == 1, f"K={k}: {failed} appends failed for one failed fsync"
        assert k < 100


# ---------------------------------------------------------------------------
# Found by the loop above: the lease that a failed release leaves behind.

def test_failed_lease_release_does_not_leak_the_lease(vfs: FaultVFS, tmp_path: Path) -> None:
    store, s = _setup(vfs, tmp_path / "db", "full", 1000)
    # The first I/O after the append is the release's: fail it.
    plan = IOFaults(1)
    appended = False
    with pytest.raises(StoreError), s.lease():
        s.append(*U)
        appended = True
        vfs.plan = plan
    assert appended and plan.fired, "the fault did not hit the release"
    plan.enabled = False
    store.close()                      # the writer is done with the session
    vfs.plan = Plan()
    with trajlog.open(str(tmp_path / "db" / "db.sqlite")) as other:
        other.session(s.id).append(*AFTER)   # LeaseHeldError today
