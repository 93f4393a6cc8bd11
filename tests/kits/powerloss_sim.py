"""The power-loss simulation loop shared by ``tests/integrity/test_powerloss.py`` and
``tests/soak/powerloss_soak.py``.

One crash: open a store through :class:`vfs_faults.FaultVFS` with a
:class:`vfs_faults.PowerLoss` plan, create a session, append a scripted agent
session (single appends and small batches, some payloads over 512 bytes so the
zstd path runs) until the power goes at write ``K``; then write the power-loss
image to a fresh directory, open it with the *default* VFS and check it.

The oracle: the events appended, in order (``attempted``), and the seqs whose
append returned (``acked``).  The recovered log must be a prefix of
``attempted`` no longer than what was acknowledged plus the one operation in
flight; under ``durability="full"`` it must hold every acknowledged seq.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

import trajlog
from kits.vfs_faults import FaultVFS, PowerLoss

AUTOCHECKPOINTS = (4, 16, 1000)
GROUPS = 48                 # operations (single appends or batches) per run
VFS_NAME = "crashvfs"

_TEXT = ("The quick brown fox jumps over the lazy dog; def f(x): return x * 2  # "
         "Licensed under the Apache License, Version 2.0 ")


def _content(rng: random.Random, big: bool) -> str:
    n = rng.randint(600, 3000) if big else rng.randint(5, 200)
    start = rng.randrange(len(_TEXT))
    return ((_TEXT * (n // len(_TEXT) + 2))[start:start + n])


def script(rng: random.Random) -> Iterator[tuple[str, dict[str, Any]]]:
    """An endless, valid agent session: turns of steps with tool calls."""
    n = 0
    while True:
        yield "turn/start", {}
        yield "user/message", {"content": _content(rng, rng.random() < 0.4)}
        for _ in range(rng.randint(1, 2)):
            yield "step/start", {}
            calls = [{"id": f"c{n + i}", "name": "read", "arguments": {"i": i}}
                     for i in range(rng.randint(0, 2))]
            n += len(calls)
            yield "assistant/message", {"content": _content(rng, rng.random() < 0.3),
                                        "tool_calls": calls}
            for c in calls:
                yield "tool/call", {"call_id": c["id"], "name": "read", "arguments": {}}
            for c in calls:
                yield "tool/result", {"call_id": c["id"], "is_error": False,
                                      "output": _content(rng, rng.random() < 0.5)}
            yield "step/end", {}
        yield "turn/end", {"interrupted": False}


def groups(seed: int, count: int = GROUPS) -> list[list[tuple[str, dict[str, Any]]]]:
    """``count`` operations: 60% single appends, 40% batches of 2..5."""
    rng = random.Random(seed)
    events = script(rng)
    out = []
    for _ in range(count):
        size = 1 if rng.random() < 0.6 else rng.randint(2, 5)
        out.append([next(events) for _ in range(size)])
    return out


@dataclass
class Outcome:
    """What one crash did and what the image showed."""

    seed: int
    mode: str
    crash_at: int
    autocheckpoint: int
    writes_done: int = 0          # writes before the crash
    crashed_in: str = ""          # "open", "create", "append", "end" (after the workload)
    crash_file: str = ""          # "db", "wal", "journal": the file of the write K
    session_acked: bool = False
    acked: int = 0                # acknowledged events (seqs 0 .. acked-1)
    in_flight: int = 0            # events of the operation the crash interrupted
    recovered: int = 0            # events in the image
    lost: int = 0                 # acknowledged events missing from the image
    session_lost: bool = False    # create_session returned, the image has no session
    integrity: str = "ok"
    verify_ok: bool = True
    load_ok: bool = True
    mismatch: str = ""            # image is not a prefix of what was appended
    errors: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A failure in any mode (loss is judged separately, by mode)."""
        return (self.integrity != "ok" or not self.verify_ok or not self.load_ok
                or bool(self.mismatch) or bool(self.errors))


def _workload(vfs: FaultVFS, plan: PowerLoss, db: Path, mode: str, autocheckpoint: int,
              ops: list[list[tuple[str, dict[str, Any]]]], out: Outcome,
              attempted: list[tuple[str, dict[str, Any]]]) -> str | None:
    """Run until the power goes; returns the session id if create_session returned."""
    store = None
    sid = None
    stage = "open"
    try:
        store = trajlog.open(vfs.uri(db), durability=mode)
        store._e.backend.write_connection.execute(
        f"PRAGMA wal_autocheckpoint={autocheckpoint}").fetchall()
        stage = "create"
        session = store.create_session(cwd="/r")
        sid = session.id
        out.session_acked = True
        stage = "append"
        for group in ops:
            attempted.extend(group)
            out.in_flight = len(group)
            got = ([session.append(*group[0])] if len(group) == 1
                   else session.append_batch(group))
            seqs = [e.seq for e in got]
            if seqs != list(range(out.acked, out.acked + len(group))):
                out.errors.append(f"append returned seqs {seqs}, expected from {out.acked}")
            out.acked += len(group)
            out.in_flight = 0
        stage = "end"
    except Exception as exc:
        if not plan.crashed:
            out.errors.append(f"{stage}: {type(exc).__name__}: {exc}")
        elif not isinstance(exc, trajlog.errors.StoreError) and stage != "open":
            # an apsw exception leaking out of the public API
            out.errors.append(f"{stage}: untyped {type(exc).__module__}.{type(exc).__name__}"
                              f": {exc}")
    finally:
        if store is not None:
            store.close()
    out.crashed_in = stage if plan.crashed else "end"
    return sid


def check_image(path: Path, sid: str | None, attempted: list[tuple[str, dict[str, Any]]],
                out: Outcome) -> None:
    """Open the power-loss image with the default VFS and judge it."""
    conn = apsw.Connection(str(path))
    try:
        out.integrity = "; ".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()
    with trajlog.open(str(path)) as store:
        headers = store.sessions()
        if sid is None or not any(h.id == sid for h in headers):
            if len(headers) > (1 if sid is None else 0):
                out.errors.append(f"unexpected sessions in the image: {len(headers)}")
            if out.session_acked:
                out.session_lost = True
                out.lost = out.acked
            return
        s = store.session(sid)
        got = [(e.seq, e.type, e.data) for e in s.events()]
        out.recovered = len(got)
        for i, (seq, typ, data) in enumerate(got):
            if seq != i:
                out.mismatch = f"seq {seq} at position {i}"
                break
            if i >= len(attempted) or (typ, data) != attempted[i]:
                out.mismatch = f"event {i} differs from what was appended"
                break
        if out.recovered > out.acked + out.in_flight:
            out.mismatch = (f"{out.recovered} events recovered, only {out.acked} acked "
                            f"+ {out.in_flight} in flight")
        out.lost = max(0, out.acked - out.recovered)
        report = s.verify()
        out.verify_ok = report.ok
        if not report.ok:
            out.errors.append(f"verify: {report.scan.reason}")
        try:
            loaded = store.load(sid)
            after = loaded.verify()
            if not after.ok:
                out.load_ok = False
                out.errors.append(f"verify after load: {after.scan.reason}")
            if loaded.inspect()[1].outcome != "balanced":
                out.load_ok = False
                out.errors.append("the log is still open after load()")
            if out.recovered and list(loaded.events(0, out.recovered - 1)) != list(
                    s.events(0, out.recovered - 1)):
                out.load_ok = False
                out.errors.append("load changed committed events")
        except trajlog.errors.TrajlogError as exc:
            out.load_ok = False
            out.errors.append(f"load: {type(exc).__name__}: {exc}")


def run_crash(vfs: FaultVFS, workdir: Path, *, mode: str, seed: int, crash_at: int,
              autocheckpoint: int, keep_image: bool = False,
              lying_sync: bool = False) -> Outcome:
    """One simulated power loss and its verdict."""
    out = Outcome(seed, mode, crash_at, autocheckpoint)
    run_dir, img_dir = workdir / f"run-{seed}", workdir / f"img-{seed}"
    for d in (run_dir, img_dir):
        shutil.rmtree(d, ignore_errors=True)
    run_dir.mkdir(parents=True)
    plan = PowerLoss(crash_at, seed=seed, lying_sync=lying_sync)
    vfs.plan = plan
    attempted: list[tuple[str, dict[str, Any]]] = []
    try:
        sid = _workload(vfs, plan, run_dir / "db.sqlite", mode, autocheckpoint,
                        groups(seed), out, attempted)
        if not plan.crashed:
            plan.crash()       # the power goes after the workload ended
        out.writes_done = plan.writes
        name = plan.crash_file or ""
        out.crash_file = ("wal" if name.endswith("-wal") else "journal"
                          if name.endswith("-journal") else "db" if name else "-")
    finally:
        vfs.plan = PowerLoss(None)
    plan.restore(img_dir)
    try:
        check_image(img_dir / "db.sqlite", sid, attempted, out)
    except Exception as exc:
        out.errors.append(f"image: {type(exc).__name__}: {exc}")
    if not keep_image:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(img_dir, ignore_errors=True)
    return out


def count_writes(vfs: FaultVFS, workdir: Path, mode: str, autocheckpoint: int,
                 seed: int = 0) -> int:
    """xWrite calls of a whole run without a crash (the range K is drawn from)."""
    run_dir = workdir / f"count-{mode}-{autocheckpoint}-{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    plan = PowerLoss(None)
    vfs.plan = plan
    out = Outcome(seed, mode, 0, autocheckpoint)
    try:
        _workload(vfs, plan, run_dir / "db.sqlite", mode, autocheckpoint, groups(seed), out, [])
    finally:
        vfs.plan = PowerLoss(None)
        shutil.rmtree(run_dir, ignore_errors=True)
    if out.errors:
        raise AssertionError(f"the no-crash run failed: {out.errors}")
    return plan.writes


@dataclass
class Summary:
    mode: str
    seed: int
    crashes: int = 0
    acked: int = 0
    lost: int = 0
    crashes_with_loss: int = 0
    integrity_failures: int = 0
    verify_failures: int = 0
    load_failures: int = 0
    other_failures: int = 0
    crashed_in: dict[str, int] = field(default_factory=dict)
    crash_file: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    failures: list[Outcome] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.crashes += 1
        self.acked += o.acked
        self.lost += o.lost
        self.crashes_with_loss += bool(o.lost or o.session_lost)
        self.integrity_failures += o.integrity != "ok"
        self.verify_failures += not o.verify_ok
        self.load_failures += not o.load_ok
        self.other_failures += bool(o.mismatch or (o.errors and o.verify_ok and o.load_ok))
        self.crashed_in[o.crashed_in] = self.crashed_in.get(o.crashed_in, 0) + 1
        self.crash_file[o.crash_file] = self.crash_file.get(o.crash_file, 0) + 1
        if o.failed or (self.mode == "full" and (o.lost or o.session_lost)):
            self.failures.append(o)

    def row(self) -> dict[str, Any]:
        return {"mode": self.mode, "crashes": self.crashes, "acked_events": self.acked,
                "lost_acked": self.lost, "crashes_with_loss": self.crashes_with_loss,
                "integrity_failures": self.integrity_failures,
                "verify_failures": self.verify_failures, "load_failures": self.load_failures,
                "other_failures": self.other_failures, "crashed_in": self.crashed_in,
                "crash_file": self.crash_file,
                "seed": self.seed, "wall_s": round(self.wall_s, 2)}


def simulate(workdir: Path, *, mode: str, crashes: int, seed: int,
             vfs: FaultVFS | None = None, lying_sync: bool = False) -> Summary:
    """``crashes`` power losses: K uniform over the run's write count,
    wal_autocheckpoint drawn from :data:`AUTOCHECKPOINTS`.  ``lying_sync``:
    on a disk that ignores fsync (a harness self-check: FULL must then lose)."""
    t0 = time.perf_counter()
    own = vfs is None
    if vfs is None:
        vfs = FaultVFS(VFS_NAME)
    try:
        totals = {ac: count_writes(vfs, workdir, mode, ac, seed) for ac in AUTOCHECKPOINTS}
        rng = random.Random(seed)
        summary = Summary(mode, seed)
        for i in range(crashes):
            ac = rng.choice(AUTOCHECKPOINTS)
            k = rng.randint(1, totals[ac])
            summary.add(run_crash(vfs, workdir, mode=mode, seed=seed * 1_000_003 + i,
                                  crash_at=k, autocheckpoint=ac, lying_sync=lying_sync))
    finally:
        if own:
            vfs.unregister()
    summary.wall_s = time.perf_counter() - t0
    return summary


