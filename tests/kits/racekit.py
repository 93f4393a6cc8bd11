"""Writers and readers racing on one store, for ``tests/integrity/test_integrity_concurrency.py``.

The same code runs in the test's process (threads) and in child processes
(``python -c``, see :func:`child_command`): a child gets its parameters as JSON
on argv and leaves its :class:`Tally` as JSON in a file.

A *writer* owns one root session and the forks it makes of it (one writer per
lineage, so turns never interleave): single appends, batches (some of several
64 KiB chunk rows), turns with steps and tool calls (the lease held, the turn
kept open a little so readers meet it), raw turns in one batch, forks (of the
root or of a fork) that it then writes into as well, and, past a length, a
fresh root.  Every acknowledged event is remembered (seq -> digest).

A *reader* picks a session of the store and one read: ``verify``, ``inspect``,
``load``, ``events`` (whole, from a seq, a range, lazy), ``tail``, ``get`` or a
view.  What it saw is remembered the same way, so that the test can compare
every observation with the log as finally written.  A refusal that is
legitimate while a writer is live (``LiveWriterError`` / ``LeaseHeldError``
from ``load``, a refused ``inspect`` naming a live writer) is counted, not
failed; anything else a read raises, a verify report that is not clean, and a
read that contradicts what the same reader read before (another event at a
seq, a log shorter than a head it already saw) is a failure, with its
traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

import trajlog
from trajlog import errors, projections
from trajlog.events import LazyEvent
from trajlog.recovery import RECOVERY_SOURCE

HERE = Path(__file__).resolve().parent

READ_KINDS = ("verify", "inspect", "load", "events", "tail", "get", "model_history",
              "chat", "trajectory", "status", "goal", "checkpoint")
READ_WEIGHTS = (14, 10, 8, 16, 14, 16, 6, 4, 4, 4, 4, 2)

# what a model_history message is made of, by role
_ROLE_TYPES = {"user": "user/message", "assistant": "assistant/message", "tool": "tool/result"}


def digest(ev: Any) -> str:
    """A stable digest of an event (every field, seq included), the same in
    every process."""
    if isinstance(ev, LazyEvent):
        ev = ev.event()
    return hashlib.blake2b(msgspec.msgpack.encode(ev), digest_size=10).hexdigest()


def message_digest(role: str, content: Any) -> str:
    return hashlib.blake2b(msgspec.msgpack.encode([role, content]),
                           digest_size=10).hexdigest()


def message_of(ev: Any) -> str | None:
    """The digest model_history would give the message of ``ev`` (None: no message)."""
    d = ev.data
    if not isinstance(d, dict):
        return None
    if ev.type == "user/message":
        return message_digest("user", d.get("content"))
    if ev.type == "assistant/message":
        return message_digest("assistant", d.get("content"))
    if ev.type == "tool/result":
        return message_digest("tool", d.get("output"))
    return None


@dataclass
class Tally:
    """What one writer or reader did and saw."""

    who: str = ""
    reads: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    appends: int = 0          # events acknowledged
    submits: int = 0          # append / append_batch calls: rows written before any repack
    forks: int = 0
    roots: int = 0
    failures: list[str] = field(default_factory=list)
    # session id -> seq -> digest of the event seen there
    seen: dict[str, dict[int, str]] = field(default_factory=dict)
    # session id -> "seq:what" -> what a view said of the event at seq
    views: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: float = 0.0

    def fail(self, what: str) -> None:
        self.failures.append(f"[{self.who}] {what}")

    def observe(self, sid: str, events: Iterable[Any], what: str) -> None:
        seen = self.seen.setdefault(sid, {})
        for ev in events:
            d = digest(ev)
            before = seen.setdefault(ev.seq, d)
            if before != d:
                self.fail(f"{what}: session {sid} seq {ev.seq} read as {d}, read before as "
                          f"{before}: {ev!r}")

    def observe_view(self, sid: str, seq: int, what: str, value: str) -> None:
        views = self.views.setdefault(sid, {})
        key = f"{seq}:{what}"
        before = views.setdefault(key, value)
        if before != value:
            self.fail(f"view: session {sid} seq {seq} {what} read as {value}, before as "
                      f"{before}")

    def to_json(self) -> dict[str, Any]:
        return {"who": self.who, "reads": dict(self.reads), "refusals": dict(self.refusals),
                "appends": self.appends, "submits": self.submits,
                "forks": self.forks, "roots": self.roots, "failures": self.failures,
                "seen": {sid: {str(k): v for k, v in m.items()} for sid, m in self.seen.items()},
                "views": self.views, "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tally:
        return cls(data["who"], Counter(data["reads"]), Counter(data["refusals"]),
                   data["appends"], data["submits"], data["forks"],
                   data["roots"], list(data["failures"]),
                   {sid: {int(k): v for k, v in m.items()} for sid, m in data["seen"].items()},
                   data["views"], data["seconds"])


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return rng.randbytes(rng.randint(lo, hi) // 2 + 1).hex()


class Writer:
    """One lineage's writer: a root session, its forks, and later roots."""

    def __init__(self, store: trajlog.Store, rng: random.Random, tally: Tally, tag: str, *,
                 max_len: int, max_forks: int, pace: float, root: str | None = None) -> None:
        self.store = store
        self.rng = rng
        self.tally = tally
        self.tag = tag
        self.max_len = max_len
        self.max_forks = max_forks
        self.pace = pace
        self.calls = 0
        self.root = store.session(root) if root is not None else self._new_root()
        self.forks: list[trajlog.Session] = []

    def _new_root(self) -> trajlog.Session:
        self.tally.roots += 1
        return self.store.create_session(cwd=f"/race/{self.tag}/{self.tally.roots}",
                                         metadata={"writer": self.tag})

    def _acked(self, s: trajlog.Session, events: list[Any], submits: int = 1) -> None:
        self.tally.submits += submits
        self.tally.appends += len(events)
        self.tally.observe(s.id, events, "append")

    # -- operations ---------------------------------------------------------

    def single(self, s: trajlog.Session) -> None:
        kind = self.rng.choice(["user/message", "assistant/message", "agent/note"])
        ev = s.append(kind, {"content": _text(self.rng, 8, 400)},
                      source=self.rng.choice([None, "human:race", "model"]))
        self._acked(s, [ev])

    def batch(self, s: trajlog.Session, lo: int = 2, hi: int = 30) -> None:
        items = [(self.rng.choice(["user/message", "assistant/message", "agent/note"]),
                  {"content": _text(self.rng, 8, 600), "i": i})
                 for i in range(self.rng.randint(lo, hi))]
        self._acked(s, s.append_batch(items))

    def large_batch(self, s: trajlog.Session) -> None:
        # 60..140 events of 1.2..2.8 KB: 72..390 KB of frames, several 64 KiB rows
        items = [("tool/output-chunk" if i % 3 else "assistant/message",
                  {"content": _text(self.rng, 1200, 2800), "part": i})
                 for i in range(self.rng.randint(60, 140))]
        self._acked(s, s.append_batch(items))

    def turn(self, s: trajlog.Session) -> None:
        rng = self.rng
        with s.turn():
            self.tally.submits += 2   # turn/start, turn/end
            self._acked(s, [s.append("user/message", {"content": _text(rng, 10, 200)})])
            for _ in range(rng.randint(1, 2)):
                with s.step():
                    self.tally.submits += 2   # step/start, step/end
                    calls = []
                    for _ in range(rng.randint(1, 3)):
                        self.calls += 1
                        calls.append({"id": f"{self.tag}-c{self.calls}", "name": "read",
                                      "arguments": {"path": f"f{self.calls}.py"}})
                    self._acked(s, [s.append("assistant/message", {
                        "content": _text(rng, 10, 200), "tool_calls": calls})])
                    started = [("tool/call", {"call_id": c["id"], "name": c["name"],
                                              "arguments": c["arguments"]}) for c in calls]
                    if rng.random() < 0.5:
                        self._acked(s, s.append_batch(started))
                    else:
                        for item in started:
                            self._acked(s, [s.append(*item)])
                    time.sleep(rng.uniform(0, 4 * self.pace))  # the turn stays open a while
                    for c in calls:
                        self._acked(s, [s.append("tool/result", {
                            "call_id": c["id"], "output": _text(rng, 10, 3000),
                            "is_error": rng.random() < 0.1}, source="read")])
            self._acked(s, [s.append("assistant/message", {"content": _text(rng, 10, 300)})])

    def raw_turn(self, s: trajlog.Session) -> None:
        """A whole turn in one batch (markers given as events)."""
        self._acked(s, s.append_batch([
            ("turn/start", {}), ("user/message", {"content": _text(self.rng, 10, 100)}),
            ("assistant/message", {"content": _text(self.rng, 10, 100)}),
            ("turn/end", {"interrupted": False})]))

    def fork(self) -> None:
        parent = self.rng.choice([self.root, *self.forks])
        last = parent.last_seq
        if last < 0:
            return
        child = parent.fork(self.rng.randint(0, last), metadata={"writer": self.tag})
        self.forks.append(child)
        self.tally.forks += 1

    def step(self) -> None:
        """One random operation."""
        rng = self.rng
        if self.root.last_seq >= self.max_len:
            self.root, self.forks = self._new_root(), []
        s = self.root if not self.forks or rng.random() < 0.55 else rng.choice(self.forks)
        r = rng.random()
        if r < 0.30:
            self.single(s)
        elif r < 0.52:
            self.batch(s)
        elif r < 0.58:
            self.large_batch(s)
        elif r < 0.86:
            self.turn(s)
        elif r < 0.93:
            self.raw_turn(s)
        elif len(self.forks) < self.max_forks:
            self.fork()
        else:
            self.single(s)

    def warm_up(self, prefill: int = 0) -> None:
        """A history of ``prefill`` events (whole turns, in batches of 400) and
        then something of every kind, before the readers start."""
        done = 0
        while done < prefill:
            items: list[tuple[str, Any]] = []
            while len(items) < 400:
                items += [("turn/start", {}),
                          ("user/message", {"content": _text(self.rng, 10, 200)}),
                          ("assistant/message", {"content": _text(self.rng, 10, 400)}),
                          ("turn/end", {"interrupted": False})]
            self._acked(self.root, self.root.append_batch(items))
            done += len(items)
        self.turn(self.root)
        self.large_batch(self.root)
        self.single(self.root)
        self.batch(self.root)
        self.raw_turn(self.root)
        self.fork()
        self.turn(self.forks[-1])

    def run(self, stop: Callable[[], bool]) -> None:
        started = time.monotonic()
        while not stop():
            try:
                self.step()
            except Exception:
                self.tally.fail(f"writer op failed:\n{traceback.format_exc()}")
                time.sleep(0.05)
            time.sleep(self.rng.uniform(0, self.pace))
        self.tally.seconds = time.monotonic() - started


class Reader:
    """Random reads of a store's sessions, checked as they come."""

    def __init__(self, store: trajlog.Store, rng: random.Random, tally: Tally) -> None:
        self.store = store
        self.rng = rng
        self.tally = tally
        self.ids: list[str] = []
        self.heads: dict[str, int] = {}   # the highest head this reader saw, per session
        self.sizes: dict[tuple[str, str], int] = {}
        self.msg_max: dict[str, int] = {}  # model_history: messages recorded up to this seq

    def _pick(self) -> str:
        # mostly the newest sessions (the ones being written), sometimes any
        ids = self.ids
        if len(ids) > 6 and self.rng.random() < 0.75:
            return self.rng.choice(ids[-6:])
        return self.rng.choice(ids)

    def run(self, quota: int) -> None:
        started = time.monotonic()
        for i in range(quota):
            if i % 10 == 0 or not self.ids:
                self.ids = [h.id for h in self.store.sessions()]
            kind = self.rng.choices(READ_KINDS, READ_WEIGHTS)[0]
            sid = self._pick()
            try:
                self.read(kind, sid)
            except (errors.LiveWriterError, errors.LeaseHeldError) as exc:
                if kind == "load":
                    self.tally.refusals["load:" + type(exc).__name__] += 1
                else:
                    self.tally.fail(f"{kind} {sid}: refused:\n{traceback.format_exc()}")
            except Exception:
                self.tally.fail(f"{kind} {sid}:\n{traceback.format_exc()}")
            self.tally.reads[kind] += 1
        self.tally.seconds = time.monotonic() - started

    def _head(self, sid: str, s: trajlog.Session) -> int:
        head = s.last_seq
        before = self.heads.get(sid, -1)
        if head < before:
            self.tally.fail(f"head of {sid} went back: {head} after {before}")
        self.heads[sid] = max(before, head)
        return head

    def _contiguous(self, what: str, sid: str, events: list[Any], first: int,
                    at_least: int | None, exact: int | None = None) -> None:
        seqs = [ev.seq for ev in events]
        if seqs != list(range(first, first + len(seqs))):
            self.tally.fail(f"{what} {sid}: seqs not contiguous from {first}: "
                            f"{seqs[:5]}..{seqs[-5:]}")
        last = seqs[-1] if seqs else first - 1
        if at_least is not None and last < at_least:
            self.tally.fail(f"{what} {sid}: read up to seq {last}, but the head was already "
                            f"at {at_least}")
        if exact is not None and last != exact:
            self.tally.fail(f"{what} {sid}: read up to seq {last}, asked for {exact}")

    def _grows(self, sid: str, view: str, size: int) -> None:
        before = self.sizes.get((sid, view), 0)
        if size < before:
            self.tally.fail(f"{view} of {sid} shrank: {size} after {before}")
        self.sizes[(sid, view)] = max(before, size)

    def read(self, kind: str, sid: str) -> None:
        rng, tally = self.rng, self.tally
        s = self.store.session(sid)
        head = self._head(sid, s)
        if kind == "verify":
            report = s.verify()
            if not report.ok:
                scan = report.scan
                tally.fail(f"verify {sid}: not ok in session {report.session}: "
                           f"{scan.verdict} {scan.status!r} at seq {scan.cursor.next_seq} "
                           f"offset {scan.offset}: {scan.reason}")
            elif report.last_seq < head:
                tally.fail(f"verify {sid}: reported head {report.last_seq} < {head}")
        elif kind == "inspect":
            view, report = s.inspect()
            if report.refusal is not None:
                if isinstance(report.refusal, errors.LiveWriterError):
                    tally.refusals["inspect:LiveWriterError"] += 1
                else:
                    tally.fail(f"inspect {sid}: refused: {report.refusal!r}")
                return
            if report.last_seq < head:
                tally.fail(f"inspect {sid}: analysed up to {report.last_seq} < head {head}")
            if report.outcome == "repair":
                # No writer here ever dies or lets its lease expire, so a log
                # found open always had a live writer: the answer must be the
                # refusal (LiveWriterError), never closers for seqs the live
                # writer is about to fill.
                tally.fail(f"inspect {sid}: outcome 'repair' for a log whose writer is live: "
                           f"closers {[(e.seq, e.type) for e in report.closers]} after seq "
                           f"{report.last_seq}")
            if rng.random() < 0.3:
                got = [ev for ev in view if ev.seq <= view.last_seq]
                self._contiguous("inspect view", sid, got, 0, None, view.last_seq)
                tally.observe(sid, got, "inspect view")
        elif kind == "load":
            loaded = self.store.load(sid)
            self._head(sid, loaded)
        elif kind == "events":
            variant = rng.randrange(5)
            if variant == 0 or head < 0:
                got = list(s.events())
                self._contiguous("events()", sid, got, 0, head)
                first = 0
            elif variant == 1:
                first = rng.randint(0, head)
                got = list(s.events(first))
                self._contiguous("events(from)", sid, got, first, head)
            elif variant == 2:
                first = rng.randint(0, head)
                to = rng.randint(first, head)
                got = list(s.events(first, to))
                self._contiguous("events(from, to)", sid, got, first, to, to)
            elif variant == 3:
                got = list(s.events(lazy=True))
                self._contiguous("events(lazy)", sid, got, 0, head)
                first = 0
            else:
                # a slow consumer: the iterator stays open while rows are appended
                # and merged, and other reads run on this thread in between
                got = []
                for ev in s.events():
                    got.append(ev)
                    if len(got) % 64 == 0:
                        time.sleep(0.001)
                        other = s.get(rng.randint(0, ev.seq))
                        tally.observe(sid, [other], "get (inside events)")
                self._contiguous("events(slow)", sid, got, 0, head)
                first = 0
            tally.observe(sid, got, "events")
        elif kind == "tail":
            n = rng.randint(1, 80)
            got = s.tail(n)
            if head >= 0:
                self._contiguous("tail", sid, got, got[0].seq if got else 0, head)
                if got and len(got) != min(n, got[-1].seq + 1):
                    tally.fail(f"tail({n}) {sid}: {len(got)} events, seqs {got[0].seq}.."
                               f"{got[-1].seq} (the head was at {head} just before)")
            tally.observe(sid, got, "tail")
        elif kind == "get":
            if head < 0:
                return
            seq = rng.choice([head, rng.randint(0, head), rng.randint(max(0, head - 40), head)])
            ev = s.get(seq)
            if ev.seq != seq:
                tally.fail(f"get({seq}) {sid}: an event with seq {ev.seq}")
            tally.observe(sid, [ev], "get")
        else:
            self.view(kind, sid, s, head)

    def view(self, kind: str, sid: str, s: trajlog.Session, head: int) -> None:
        tally = self.tally
        if kind == "model_history":
            msgs = projections.model_history(s)
            self._grows(sid, kind, len(msgs))
            seqs = [m.seq for m in msgs]
            if seqs != sorted(set(seqs)):
                tally.fail(f"model_history {sid}: seqs out of order")
            # every message once (those past the ones recorded), and a few again
            done = self.msg_max.get(sid, -1)
            for m in [m for m in msgs if m.seq > done] + self.rng.sample(msgs,
                                                                          min(10, len(msgs))):
                tally.observe_view(sid, m.seq, "msg", message_digest(m.role, m.content))
            if msgs:
                self.msg_max[sid] = max(done, msgs[-1].seq)
        elif kind == "chat":
            self._grows(sid, kind, len(projections.chat(s)))
        elif kind == "trajectory":
            turns = projections.trajectory(s)
            self._grows(sid, kind, len(turns))
            for t in turns:
                if t.start_seq is not None:
                    tally.observe_view(sid, t.start_seq, "type", "turn/start")
                if t.end_seq is not None:
                    tally.observe_view(sid, t.end_seq, "type", "turn/end")
        elif kind == "status":
            st = projections.status(s)
            if st.last_seq < head:
                tally.fail(f"status {sid}: last_seq {st.last_seq} < head {head}")
            if st.turn_open_since is not None:
                tally.observe_view(sid, st.turn_open_since, "type", "turn/start")
            if st.step_open_since is not None:
                tally.observe_view(sid, st.step_open_since, "type", "step/start")
        elif kind == "goal":
            projections.goal(s)
        elif kind == "checkpoint":
            # every view computed and its state saved (a write of derived state,
            # which other stores then resume from, chain-checked)
            projections.checkpoint(s)


def check_against_final(store: trajlog.Store, tallies: list[Tally]) -> tuple[int, list[str]]:
    """Compare every observation with the log as finally stored; returns
    (observations checked, failures).  Also: every session verifies, and no
    recovery closer was written (no load closed a live writer's log)."""
    failures: list[str] = []
    final: dict[str, dict[int, Any]] = {}
    for header in store.sessions(include_subagents=True):
        s = store.session(header.id)
        report = s.verify()
        if not report.ok:
            failures.append(f"final verify {header.id}: {report.scan.reason}")
        final[header.id] = {ev.seq: ev for ev in s.events()}
        closers = [ev.seq for ev in final[header.id].values() if ev.source == RECOVERY_SOURCE]
        if closers:
            failures.append(f"session {header.id}: recovery closers at seqs {closers[:10]} "
                            "(a load closed the log of a live writer)")
    checked = 0
    for t in tallies:
        for sid, seen in t.seen.items():
            log = final.get(sid)
            if log is None:
                failures.append(f"[{t.who}] read session {sid}, which the store does not list")
                continue
            for seq, d in seen.items():
                checked += 1
                ev = log.get(seq)
                if ev is None or digest(ev) != d:
                    failures.append(f"[{t.who}] session {sid} seq {seq}: read {d}, finally "
                                    f"{None if ev is None else digest(ev)} ({ev!r})")
        for sid, views in t.views.items():
            log = final.get(sid, {})
            # model_history: no message missing below the last one a view showed
            shown = {int(k.split(":")[0]) for k in views if k.endswith(":msg")}
            if shown:
                upto = max(shown)
                missing = sorted(seq for seq, ev in log.items()
                                 if seq <= upto and seq not in shown and message_of(ev))
                if missing:
                    failures.append(f"[{t.who}] model_history of {sid} showed messages up to "
                                    f"seq {upto} but none at seqs {missing[:10]}")
            for key, value in views.items():
                checked += 1
                seq_s, what = key.split(":")
                ev = log.get(int(seq_s))
                want = None if ev is None else (ev.type if what == "type" else message_of(ev))
                if want != value:
                    failures.append(f"[{t.who}] session {sid} seq {seq_s}: a view said "
                                    f"{what}={value}, the log has {want} ({ev!r})")
    return checked, failures


# -- child processes ------------------------------------------------------------

def child_command(role: str, params: dict[str, Any]) -> list[str]:
    code = (f"import sys; sys.path.insert(0, {str(HERE.parent)!r}); from kits import racekit; "
            f"racekit.child_main()")
    return [sys.executable, "-c", code, role, json.dumps(params)]


def child_main() -> None:
    role, params = sys.argv[1], json.loads(sys.argv[2])
    tally = Tally(params["who"])
    rng = random.Random(params["seed"])
    with trajlog.open(params["path"]) as store:
        if role == "reader":
            Reader(store, rng, tally).run(params["quota"])
        else:
            stop_file, ready = Path(params["stop"]), Path(params["ready"])
            writer = Writer(store, rng, tally, params["tag"], max_len=params["max_len"],
                            max_forks=params["max_forks"], pace=params["pace"],
                            root=params["root"])
            writer.warm_up(params["prefill"])
            ready.write_text("ready")
            writer.run(stop_file.exists)
    tmp = params["out"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(tally.to_json(), f)
    os.replace(tmp, params["out"])


def thread(target: Callable[[], None], tally: Tally) -> threading.Thread:
    """A thread whose escaping exception becomes a failure of ``tally``."""
    def body() -> None:
        try:
            target()
        except BaseException:
            tally.fail(f"thread died:\n{traceback.format_exc()}")

    return threading.Thread(target=body, name=tally.who, daemon=True)
