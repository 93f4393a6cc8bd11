"""Crash injection with real processes: the shared harness of
``tests/integrity/test_crash.py`` (CI) and ``tests/soak/crash_soak.py`` (long runs).

Modelled on RocksDB's
blackbox ``db_crashtest.py`` (an expected-state oracle) and SQLite's crash
child.  Each iteration:

1. The parent forks a child (``os.fork``; the parent holds no connection to the
   database at that moment -- checked).  The child opens the store (durability
   "full", or "normal" for a share of iterations: both must survive a process
   crash), creates or resumes sessions, recovers (``inspect`` + ``load``) any
   resumed session an earlier crash left open, writes ``R`` (ready) to a pipe
   and appends realistic agent turns forever in one of three modes: ``single``
   (one ``append`` per event; turns and steps through ``Session.turn()`` /
   ``Session.step()`` or plain appends), ``batch`` (``append_batch`` of 2-32
   events, cutting turns anywhere) and ``threads`` (2-4 threads, each on its own
   session, mixing both styles).
2. Before each append the child writes an *intent* line per event (session,
   predicted seq, type, digest of type+data); as soon as the call returns it
   writes an *ack* line, before doing anything else.  Lines go out with
   ``os.write`` on an unbuffered pipe (nothing to flush, nothing buffered).
   Each child thread also keeps its current phase in a shared byte, so the
   parent can tell where the kill landed (``OPS`` x ``STAGES``).
3. The parent kills the child with SIGKILL after a random number of acks or a
   random delay after ``R`` (or, for a few iterations, a random delay after the
   fork, which can land in open/migrate/create), reaps it and reads the pipe to
   its end.
4. The parent reopens the store and checks, against its expected-state model:
   ``PRAGMA integrity_check`` and ``foreign_key_check``; every session's
   ``verify()`` (a CORRUPT verdict on a store that only saw a crash is a false
   corruption verdict); every acknowledged seq present with the content its
   intent announced; every other new event announced by an intent (no phantom
   or garbled event); each text-bearing event carrying the tag of its own
   (session, seq); events of earlier iterations unchanged; then, for every
   session, ``inspect()`` does not refuse, ``load()`` succeeds, appends exactly
   the ``trajlog.recovery`` closers inspect announced, is idempotent (a second
   load appends nothing) and leaves the session ``balanced`` by inspect and by
   an independent walker (``balance_problem``).  Half of the checks load the
   store itself; the other half load a copy and leave the store open, so the
   next child does the recovery and may be killed while doing it.

Event content is a deterministic function of (session id, seq): the tag, the
sizes and the text (slices of a fixed corpus; a few payloads are large enough
to be zstd-compressed) are all derived from a hash of the pair.

This module is the parent (steps 3 and 4); the child, its workload and its
reports (steps 1 and 2) are in ``tests/kits/crash_child.py``.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import random
import select
import shutil
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

import trajlog
from kits import pgstores
from kits.crash_child import (
    PROBE_SLOTS,
    TAG,
    TEXT_TYPES,
    digest,
    fork_child,
    phase_name,
    tag,
)
from trajlog.errors import CorruptionError, TrajlogError
from trajlog.recovery import RECOVERY_SOURCE

MODES = ("single", "batch", "threads")
TIMINGS = ("acks", "delay", "early")
TIMING_WEIGHTS = (45, 45, 10)
# the longest the parent waits for its ack target; an ASan build (make
# sanitize) runs the children several times slower, on a shared CI machine more
ACK_WAIT_SECONDS = 20.0 if "asan" in os.environ.get("LD_PRELOAD", "") else 5.0


# ---------------------------------------------------------------------------
# The parent: kill, then check against the model

@dataclass
class Stats:
    seed: int = 0
    iterations: int = 0
    kills: Counter[str] = field(default_factory=Counter)         # by mode
    timings: Counter[str] = field(default_factory=Counter)       # by kill timing
    durability: Counter[str] = field(default_factory=Counter)    # the child's durability
    kill_points: Counter[str] = field(default_factory=Counter)   # phase of each child thread
    kill_points_by_mode: dict[str, Counter[str]] = field(
        default_factory=lambda: {m: Counter() for m in MODES})
    killed_before_ready: int = 0
    recovery_in_place: int = 0                # the parent loaded the store itself
    child_closers: int = 0                    # closers a child's load() committed
    killed_after_commit_before_ack: int = 0   # kills that left committed, unacked events
    kills_with_open_log: int = 0              # kills after which load appended closers
    acked_events: int = 0
    acked_batches: int = 0
    recovered_events: int = 0                 # this iteration's events found after the crash
    committed_unacked: int = 0
    lost_acked: int = 0
    content_mismatches: int = 0
    phantom_events: int = 0
    history_changed: int = 0
    integrity_failures: int = 0
    false_corruption: int = 0                 # verify()/read/inspect said corrupt
    load_failures: int = 0
    load_not_idempotent: int = 0
    unbalanced_after_load: int = 0
    closers_appended: int = 0
    child_errors: int = 0
    child_exits: int = 0                      # the child died before the kill
    ack_timeouts: int = 0
    sessions_checked: int = 0
    events_in_stores: int = 0
    wall_time: float = 0.0
    failures: list[str] = field(default_factory=list)

    FAILURE_FIELDS = ("lost_acked", "content_mismatches", "phantom_events", "history_changed",
                      "integrity_failures", "false_corruption", "load_failures",
                      "load_not_idempotent", "unbalanced_after_load", "child_errors",
                      "child_exits")

    def fail(self, counter: str, message: str, n: int = 1) -> None:
        setattr(self, counter, getattr(self, counter) + n)
        if len(self.failures) < 50:
            self.failures.append(f"[iteration {self.iterations}] {counter}: {message}")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, f) for f in self.FAILURE_FIELDS)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "iterations": self.iterations,
            "kills_by_mode": {m: self.kills[m] for m in MODES},
            "kills_by_timing": {t: self.timings[t] for t in TIMINGS},
            "kills_by_durability": {d: self.durability[d] for d in ("full", "normal")},
            "kill_points": dict(self.kill_points.most_common()),
            "kill_points_by_mode": {m: dict(c.most_common())
                                    for m, c in self.kill_points_by_mode.items()},
            "killed_before_ready": self.killed_before_ready,
            "killed_after_commit_before_ack": self.killed_after_commit_before_ack,
            "kills_with_open_log": self.kills_with_open_log,
            "recovery_by_parent_in_place": self.recovery_in_place,
            "recovery_by_parent_on_copy": self.iterations - self.recovery_in_place,
            "closers_committed_by_children": self.child_closers,
            "acknowledged_events": self.acked_events,
            "acknowledged_appends": self.acked_batches,
            "recovered_events": self.recovered_events,
            "committed_unacknowledged_events": self.committed_unacked,
            "lost_acknowledged_events": self.lost_acked,
            "content_mismatches": self.content_mismatches,
            "phantom_events": self.phantom_events,
            "history_changed": self.history_changed,
            "integrity_check_failures": self.integrity_failures,
            "false_corruption_verdicts": self.false_corruption,
            "load_failures": self.load_failures,
            "load_not_idempotent": self.load_not_idempotent,
            "unbalanced_after_load": self.unbalanced_after_load,
            "closers_appended_by_load": self.closers_appended,
            "child_errors": self.child_errors,
            "child_exits_before_kill": self.child_exits,
            "ack_wait_timeouts": self.ack_timeouts,
            "session_checks": self.sessions_checked,
            "events_in_stores_checked": self.events_in_stores,
            "wall_time_s": round(self.wall_time, 2),
            "seed": self.seed,
            "ok": self.ok,
        }
        return out

    def table(self) -> str:
        rows = [("iterations (kills)", self.iterations)]
        rows += [(f"  kills, mode {m}", self.kills[m]) for m in MODES]
        rows += [(f"  kills, timing {t}", self.timings[t]) for t in TIMINGS]
        rows += [(f"  kills, child durability={d}", self.durability[d])
                 for d in ("full", "normal")]
        rows += [
            ("  killed before ready", self.killed_before_ready),
            ("  killed between commit and ack", self.killed_after_commit_before_ack),
            ("  killed with the log open", self.kills_with_open_log),
            ("parent load in place / on a copy",
             f"{self.recovery_in_place}/{self.iterations - self.recovery_in_place}"),
            ("closers committed by children's load", self.child_closers),
            ("acknowledged events", self.acked_events),
            ("acknowledged append calls", self.acked_batches),
            ("recovered events (this iteration's)", self.recovered_events),
            ("committed, unacknowledged events", self.committed_unacked),
            ("LOST acknowledged events (must be 0)", self.lost_acked),
            ("content mismatches (must be 0)", self.content_mismatches),
            ("phantom events (must be 0)", self.phantom_events),
            ("earlier history changed (must be 0)", self.history_changed),
            ("integrity_check failures (must be 0)", self.integrity_failures),
            ("verify failures = false corruption verdicts (must be 0)", self.false_corruption),
            ("load failures (must be 0)", self.load_failures),
            ("load not idempotent (must be 0)", self.load_not_idempotent),
            ("unbalanced after load (must be 0)", self.unbalanced_after_load),
            ("closers appended by load", self.closers_appended),
            ("child errors (must be 0)", self.child_errors),
            ("child exits before kill (must be 0)", self.child_exits),
            ("ack-wait timeouts", self.ack_timeouts),
            ("session checks", self.sessions_checked),
            ("events read back (all checks)", self.events_in_stores),
            ("wall time (s)", f"{self.wall_time:.1f}"),
            ("seed", self.seed),
        ]
        width = max(len(r[0]) for r in rows)
        lines = [f"{name:<{width}}  {value:>10}" for name, value in rows]
        lines.append("kill points (phase of each child thread at the kill):")
        lines.append(f"  {'phase':<22}" + "".join(f"{m:>9}" for m in MODES) + f"{'all':>9}")
        for name, total in self.kill_points.most_common():
            lines.append(f"  {name:<22}" + "".join(
                f"{self.kill_points_by_mode[m][name]:>9}" for m in MODES) + f"{total:>9}")
        if self.failures:
            lines.append("first failures:")
            lines += [f"  {f}" for f in self.failures[:20]]
        return "\n".join(lines)


@dataclass
class Collected:
    """What one child reported."""

    ready: bool = False
    created: list[str] = field(default_factory=list)
    intents: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)
    acked: dict[tuple[str, int], int] = field(default_factory=dict)   # -> ack line number
    ack_calls: int = 0
    errors: list[str] = field(default_factory=list)

    def feed(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "I":
            sid, seq, type_, dig = rest.split(" ")
            self.intents[(sid, int(seq))] = (type_, dig)
        elif kind == "A":
            sid, first, count = rest.split(" ")
            self.ack_calls += 1
            for seq in range(int(first), int(first) + int(count)):
                self.acked[(sid, seq)] = self.ack_calls
        elif kind == "S":
            self.created.append(rest)
        elif kind == "R":
            self.ready = True
        elif kind == "E":
            self.errors.append(rest)
        else:
            self.errors.append(f"unparsable report line {line!r}")


@dataclass
class SessionModel:
    digests: list[str]          # of every stored event, seq 0..last
    chain_head: int


@dataclass
class DbModel:
    path: str
    sessions: dict[str, SessionModel] = field(default_factory=dict)


class Harness:
    """The crash loop.  ``rotate``: iterations per database file (the model
    and the checks grow with the file; a fresh file also exercises the first
    open/migrate under kills)."""

    def __init__(self, workdir: str | os.PathLike[str], seed: int, rotate: int = 8,
                 copy_share: float = 0.5, normal_share: float = 0.2,
                 log: Callable[[str], None] | None = None) -> None:
        self.workdir = Path(workdir)
        self.seed = seed
        self.rotate = rotate
        self.copy_share = copy_share
        self.normal_share = normal_share
        self.stats = Stats(seed=seed)
        self.db: DbModel | None = None
        self.log = log
        self._ndb = 0

    # -- one iteration ----------------------------------------------------------

    def run(self, iterations: int, *, stop_on_failure: bool = False) -> Stats:
        t0 = time.monotonic()
        try:
            for i in range(iterations):
                self.iteration(i)
                if stop_on_failure and not self.stats.ok:
                    break
                if self.log and (i + 1) % 250 == 0:
                    self.log(f"{i + 1}/{iterations} iterations, {self.stats.acked_events} acked, "
                             f"{time.monotonic() - t0:.0f} s, ok={self.stats.ok}")
        finally:
            self.stats.wall_time = time.monotonic() - t0
            if self.db is not None:
                self._drop(self.db.path)
        return self.stats

    def _drop(self, path: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path + suffix)

    def iteration(self, i: int) -> None:
        st = self.stats
        rng = random.Random(f"{self.seed}:{i}")
        if self.db is None or i % self.rotate == 0:
            if self.db is not None:
                self._drop(self.db.path)
            self._ndb += 1
            self.db = DbModel(str(self.workdir / f"crash-{self.seed}-{self._ndb}.db"))
        db = self.db
        mode = MODES[i % len(MODES)]
        timing = rng.choices(TIMINGS, TIMING_WEIGHTS)[0]
        nsessions = rng.randint(2, 4) if mode == "threads" else 1
        known = sorted(db.sessions)
        resume = [sid for sid in rng.sample(known, min(len(known), nsessions))
                  if rng.random() < 0.6]
        st.iterations += 1
        st.kills[mode] += 1
        st.timings[timing] += 1

        in_place = rng.random() >= self.copy_share
        durability = "normal" if rng.random() < self.normal_share else "full"
        st.durability[durability] += 1
        st.recovery_in_place += in_place
        probe = mmap.mmap(-1, PROBE_SLOTS)          # anonymous and shared with the child
        try:
            pid, rfd = fork_child(db.path, mode, resume, nsessions, f"{self.seed}:{i}:child",
                                  probe, durability)
            try:
                collected, exited = self._kill_at_random(pid, rfd, timing, rng)
            except BaseException:       # never leave a writer behind
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                raise
            phases = [phase_name(b) for b in probe[:] if b]
        finally:
            probe.close()
        st.kill_points.update(phases or ["before open"])
        st.kill_points_by_mode[mode].update(phases or ["before open"])
        if exited:
            st.fail("child_exits", f"the {mode} child exited on its own ({exited})")
        if not collected.ready:
            st.killed_before_ready += 1
        for err in collected.errors:
            st.fail("child_errors", err)
        self._check(db, collected, set(resume), in_place,
                    f"[seed {self.seed} iteration {i} mode {mode} timing {timing}]")

    def _kill_at_random(self, pid: int, rfd: int, timing: str,
                        rng: random.Random) -> tuple[Collected, str]:
        """Read reports until the kill moment, SIGKILL, reap, read to EOF.

        ``acks``: kill once the child has acknowledged a log-uniform 0..599
        append calls after ready; ``delay``: 0-40 ms after ready; ``early``:
        0-12 ms after the fork (may land in open, migrate, create_session)."""
        collected = Collected()
        pending = bytearray()
        t_fork = time.monotonic()
        target = int(math.exp(rng.uniform(0, math.log(600)))) - 1
        delay = rng.uniform(0, 0.040) if timing == "delay" else rng.uniform(0, 0.012)
        ready_at: float | None = None
        eof = False

        def pump(timeout: float) -> None:
            nonlocal eof
            r, _, _ = select.select([rfd], [], [], max(0.0, timeout))
            if not r:
                return
            chunk = os.read(rfd, 1 << 16)
            if not chunk:
                eof = True
                return
            pending.extend(chunk)
            end = pending.rfind(b"\n")
            if end >= 0:
                for line in pending[:end].decode().split("\n"):
                    collected.feed(line)
                del pending[:end + 1]

        while not eof:
            now = time.monotonic()
            if timing == "early":
                if now >= t_fork + delay:
                    break
                pump(t_fork + delay - now)
                continue
            if ready_at is None:
                if collected.ready:
                    ready_at = now
                    continue
                if now - t_fork > ACK_WAIT_SECONDS:
                    self.stats.ack_timeouts += 1
                    break
                pump(0.05)
            elif timing == "delay":
                if now >= ready_at + delay:
                    break
                pump(ready_at + delay - now)
            else:
                if collected.ack_calls >= target:
                    break
                if now - ready_at > ACK_WAIT_SECONDS:
                    self.stats.ack_timeouts += 1
                    break
                pump(0.05)
        exited = ""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            exited = (f"exit code {os.WEXITSTATUS(status)}" if os.WIFEXITED(status)
                      else f"status {status}")
        while True:
            chunk = os.read(rfd, 1 << 16)
            if not chunk:
                break
            pending.extend(chunk)
        os.close(rfd)
        complete, _, _torn = bytes(pending).rpartition(b"\n")  # a report cut by the kill
        for line in complete.decode().split("\n") if complete else ():
            collected.feed(line)
        return collected, exited

    # -- the oracle -------------------------------------------------------------

    def _check(self, db: DbModel, got: Collected, resumed: set[str], in_place: bool,
               where: str) -> None:
        """Check the store after a kill.  ``in_place``: recovery (load) runs on
        the store itself; otherwise on a copy, leaving the real store open for
        the next child to recover (and be killed while doing so)."""
        st = self.stats
        acked_by_sid: dict[str, list[int]] = {}
        for asid, seq in got.acked:
            acked_by_sid.setdefault(asid, []).append(seq)
        st.acked_events += len(got.acked)
        st.acked_batches += got.ack_calls
        if not os.path.exists(db.path):
            # killed before the database file was created: nothing may be acked
            if got.acked:
                st.fail("lost_acked", f"{where}: database missing, {len(got.acked)} acked",
                        len(got.acked))
            return
        self._integrity(db.path, where)
        if not in_place and pgstores.marker(db.path) is not None:
            # a store on PostgreSQL (the suite's PostgreSQL run) has no file to copy: in place
            in_place = True
            st.recovery_in_place += 1
        announced = {s for s, _ in got.intents}
        found_new = found_acked = 0
        logs: dict[str, SessionModel] = {}
        touched: set[str] = set()
        with trajlog.open(db.path) as store:
            headers = store.sessions(include_subagents=True)
            present = {h.id for h in headers}
            for sid in sorted(set(acked_by_sid) - present):
                n = len(acked_by_sid[sid])
                st.fail("lost_acked", f"{where}: session {sid} with {n} acked events is "
                        "missing", n)
            for sid in sorted(set(db.sessions) - present):
                st.fail("history_changed", f"{where}: session {sid} disappeared")
            for h in headers:
                sid = h.id
                st.sessions_checked += 1
                session = store.session(sid)
                old = db.sessions.get(sid)
                report = session.verify()
                if not report.ok:
                    st.fail("false_corruption", f"{where}: verify({sid}) after the crash: "
                            f"{report.scan.verdict.name} {report.scan.reason} at seq "
                            f"{report.scan.cursor.next_seq}")
                    continue
                if old is None or sid in resumed or sid in announced:
                    touched.add(sid)
                else:
                    # untouched by this child: the head must not have moved
                    if (report.last_seq, report.chain_head) != (len(old.digests) - 1,
                                                                 old.chain_head):
                        st.fail("history_changed", f"{where}: untouched session {sid} moved "
                                f"from seq {len(old.digests) - 1} to {report.last_seq}")
                    logs[sid] = old
                    continue
                try:
                    events = list(session.events())
                except TrajlogError as exc:
                    st.fail("false_corruption", f"{where}: events({sid}): "
                            f"{type(exc).__name__}: {exc}")
                    continue
                st.events_in_stores += len(events)
                digests = [digest(e.type, e.data) for e in events]
                prior = old.digests if old is not None else []
                if digests[:len(prior)] != prior:
                    bad = next((i for i, (a, b) in enumerate(zip(digests, prior, strict=False))
                                if a != b), len(digests))
                    st.fail("history_changed", f"{where}: {sid} differs from the previous "
                            f"check at seq {bad}")
                for ev, dig in zip(events[len(prior):], digests[len(prior):], strict=True):
                    key = (sid, ev.seq)
                    intent = got.intents.get(key)
                    if intent is None:
                        st.fail("phantom_events", f"{where}: {ev.type} (source {ev.source}) "
                                f"at {sid}:{ev.seq} was never announced")
                    elif intent != (ev.type, dig):
                        st.fail("content_mismatches", f"{where}: {sid}:{ev.seq} holds "
                                f"{ev.type}/{dig}, announced {intent}")
                    elif ev.source != RECOVERY_SOURCE and ev.type in TEXT_TYPES and (
                            not isinstance(ev.data, dict)
                            or ev.data.get(TAG) != tag(sid, ev.seq)):
                        st.fail("content_mismatches", f"{where}: {sid}:{ev.seq} is tagged "
                                f"{ev.data.get(TAG) if isinstance(ev.data, dict) else None}")
                    else:
                        found_new += 1
                        found_acked += key in got.acked
                        st.child_closers += ev.source == RECOVERY_SOURCE
                for seq in acked_by_sid.get(sid, ()):
                    if seq >= len(digests):
                        st.fail("lost_acked", f"{where}: acked {sid}:{seq} is missing (the "
                                f"log ends at seq {len(digests) - 1})")
                    elif seq < len(prior):
                        st.fail("content_mismatches", f"{where}: acked {sid}:{seq} lies in "
                                "the history of earlier iterations")
                logs[sid] = SessionModel(digests, report.chain_head)
        st.recovered_events += found_new
        st.committed_unacked += found_new - found_acked
        if found_new > found_acked:
            st.killed_after_commit_before_ack += 1
        if in_place:
            closed = self._recover_all(db.path, logs, touched, where)
            db.sessions = logs
        else:
            scratch = db.path + ".copy"
            self._drop(scratch)
            shutil.copyfile(db.path, scratch)   # every connection is closed: no -wal
            try:
                closed = self._recover_all(scratch, {k: SessionModel(list(v.digests),
                                                                      v.chain_head)
                                                     for k, v in logs.items()}, touched,
                                             where)
            finally:
                self._drop(scratch)
            db.sessions = logs
        if closed:
            st.kills_with_open_log += 1

    def _recover_all(self, path: str, logs: dict[str, SessionModel], touched: set[str],
                     where: str) -> int:
        """Load every session of the store at ``path``; update ``logs`` with the
        closers; return how many were appended."""
        st = self.stats
        closed = 0
        with trajlog.open(path) as store:
            for sid, model in logs.items():
                session = store.session(sid)
                added = self._recover(session, store, sid, where)
                if added is None:
                    continue
                closed += len(added)
                final = session.verify()
                if not final.ok:
                    st.fail("false_corruption", f"{where}: verify({sid}) after load: "
                            f"{final.scan.reason}")
                    continue
                model.digests += [digest(e.type, e.data) for e in added]
                model.chain_head = final.chain_head
                if final.last_seq != len(model.digests) - 1:
                    st.fail("load_failures", f"{where}: {sid} ends at {final.last_seq} after "
                            f"load, expected {len(model.digests) - 1}")
                if added or sid in touched:
                    problem = balance_problem(list(session.events()))
                    if problem:
                        st.fail("unbalanced_after_load", f"{where}: {sid}: {problem}")
        return closed

    def _recover(self, session: Any, store: Any, sid: str, where: str) -> list[Any] | None:
        """inspect, load, load again, inspect: recovery must not refuse a
        crashed log, must append exactly the closers inspect announced (and
        nothing else), must be idempotent and must leave the log balanced.
        Returns the closers appended (None: a failure was recorded)."""
        st = self.stats
        _view, before = session.inspect()
        if before.outcome == "refused":
            exc = before.refusal
            counter = ("false_corruption" if isinstance(exc, CorruptionError)
                       else "load_failures")
            st.fail(counter, f"{where}: inspect({sid}) refused: {type(exc).__name__}: {exc}")
            return None
        seq0 = session.last_seq
        try:
            store.load(sid)
        except TrajlogError as exc:
            counter = ("false_corruption" if isinstance(exc, CorruptionError)
                       else "load_failures")
            st.fail(counter, f"{where}: load({sid}): {type(exc).__name__}: {exc}")
            return None
        seq1 = session.last_seq
        added = list(session.events(seq0 + 1)) if seq1 > seq0 else []
        st.closers_appended += len(added)
        want = [(e.type, e.data) for e in before.closers]
        if [(e.type, e.data) for e in added] != want or any(
                e.source != RECOVERY_SOURCE for e in added):
            st.fail("load_failures", f"{where}: load({sid}) appended "
                    f"{[e.type for e in added]}, inspect announced {[t for t, _ in want]}")
        try:
            store.load(sid)
        except TrajlogError as exc:
            st.fail("load_failures", f"{where}: second load({sid}): {type(exc).__name__}: {exc}")
            return None
        if session.last_seq != seq1:
            st.fail("load_not_idempotent", f"{where}: second load({sid}) appended "
                    f"{session.last_seq - seq1} events")
        _view, after = session.inspect()
        if after.outcome != "balanced":
            st.fail("unbalanced_after_load", f"{where}: {sid} is {after.outcome} after load")
        return added

    def _integrity(self, path: str, where: str) -> None:
        if pgstores.marker(path) is not None:
            return   # the suite's PostgreSQL run: no SQLite file to check (the server's own)
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            fk = conn.execute("PRAGMA foreign_key_check").fetchall()
        finally:
            conn.close()
        if rows != [("ok",)] or fk:
            self.stats.fail("integrity_failures", f"{where}: integrity_check {rows[:5]}, "
                            f"foreign_key_check {fk[:5]}")


def balance_problem(events: list[Any]) -> str | None:
    """An oracle independent of trajlog.recovery: the first way ``events``
    fail to be a balanced log (turns and steps properly nested and closed,
    every requested tool call started at most once and finished exactly once),
    or None."""
    turn = step = False
    calls: dict[str, str] = {}
    for ev in events:
        t, d = ev.type, ev.data if isinstance(ev.data, dict) else {}
        where = f"seq {ev.seq} {t}"
        if t == "turn/start":
            if turn:
                return f"{where}: a turn is already open"
            turn = True
        elif t == "turn/end":
            if not turn or step:
                return f"{where}: no open turn, or a step still open"
            turn = False
        elif t == "step/start":
            if not turn or step:
                return f"{where}: outside a turn or inside a step"
            step = True
        elif t == "step/end":
            if not step:
                return f"{where}: no open step"
            step = False
        elif t == "assistant/message":
            for call in d.get("tool_calls") or ():
                if call["id"] in calls:
                    return f"{where}: call id {call['id']} reused"
                calls[call["id"]] = "requested"
        elif t == "tool/call":
            if calls.get(d.get("call_id")) != "requested":
                return f"{where}: {d.get('call_id')} was not requested"
            calls[d["call_id"]] = "started"
        elif t == "tool/result":
            state = calls.get(d.get("call_id"))
            if state != "started" and not (state == "requested" and d.get("synthetic")):
                return f"{where}: {d.get('call_id')} is {state}"
            calls[d["call_id"]] = "finished"
    open_calls = [c for c, s in calls.items() if s != "finished"]
    if turn or step or open_calls:
        return f"open at the end: turn={turn} step={step} calls={open_calls[:5]}"
    return None


def iterations_from_env(default: int = 200) -> int:
    return int(os.environ.get("TRAJLOG_CRASH_ITERATIONS", default))


def summary(stats: Stats) -> str:
    return stats.table() + "\n" + json.dumps(stats.as_json(), sort_keys=False)

