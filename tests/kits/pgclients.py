"""Appending clients for the PostgreSQL failure tests (kill -9, a server
restart, a failover) and the checks made after them.

A client reports every event the moment ``append`` returns it, one line on
its stdout, flushed (a pipe keeps what was written before a SIGKILL)::

    L <session id> <ms>                   loaded (recovered) after <ms> refused as live
    I <session id> <key>                  about to append the event keyed <key>
    A <session id> <seq> <key> <ms>       acknowledged: stored at <seq>
    E <ms> <error type>                   an append failed (retried with its key)
    H <session id>                        holding its turn open (to be killed)
    X <message>                           the client gave up (a test failure)

Every keyed event is ``note/x {"k": key}`` with ``idempotency_key=key``, so
a retry is the same event.  Run as a process: ``python -m kits.pgclients
<mode> <json arguments>`` (``tests/`` and ``src/`` on PYTHONPATH).

Modes:

* ``turns`` -- the client loads its own session (recovering what a killed
  predecessor left open: its lease must not block that; a ``host`` argument
  makes the writer's leases name another host, so that only their heartbeat
  and the TTL say it died, unless the backend decides), then runs turns of
  keyed notes on it, a keyed note to a shared session after each, until
  killed.  Errors are not retried (none is expected).
* ``retry`` -- keyed notes round-robin over the sessions, each retried with
  its key until it is acknowledged, until ``stop`` (a file) exists.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"


def now_ms() -> int:
    return int(time.time() * 1000)


def _open(args: dict[str, Any]) -> Any:
    import trajlog
    from trajlog.api import leases
    from trajlog.storage.postgres import PostgresBackend

    if args.get("host"):   # a writer "on another host": its lease is judged by its heartbeat
        leases.HOST = args["host"]

    backend = PostgresBackend(args["url"], schema=args["schema"], tenant=args["tenant"],
                              durability="full", lock_timeout_ms=args.get("lock_ms", 10_000))
    return trajlog.open(backend=backend, lease_ttl_ms=args.get("ttl_ms", 1000))


def _say(out: IO[str], line: str) -> None:
    out.write(line + "\n")
    out.flush()


def keyed(session: Any, key: str) -> Any:
    """The keyed event of the failure tests (a retry is the same event)."""
    return session.append("note/x", {"k": key}, idempotency_key=key)


def load(store: Any, session_id: str, ttl_ms: int) -> tuple[Any, int]:
    """``store.load`` -- which closes what a killed writer left open -- and
    the ms it was refused because that writer's lease still looked live
    (at most 5 TTLs: a dead writer's lease must not block recovery longer)."""
    from trajlog.errors import LiveWriterError

    began = attempt = now_ms()
    while True:
        try:
            return store.load(session_id), attempt - began
        except LiveWriterError:
            if now_ms() - began > 5 * ttl_ms:
                raise
            time.sleep(0.02)
            attempt = now_ms()


def turns(args: dict[str, Any], out: IO[str]) -> None:
    """Turns on this client's own session, a shared note after each."""
    label, rng = args["label"], random.Random(args["label"])
    store = _open(args)
    own, waited = load(store, args["own"], args.get("ttl_ms", 1000))
    _say(out, f"L {own.id} {waited}")
    shared = [store.session(s) for s in args["shared"]]
    i, hold = 0, args.get("hold")
    wait = 5 * args.get("ttl_ms", 1000) / 1000   # (a dead remote writer's lease: its TTL)
    while True:
        with own.turn(wait=wait):
            for _ in range(rng.randint(1, 4)):
                key = f"{label}:{i}"
                i += 1
                _say(out, f"I {own.id} {key}")
                ev = keyed(own, key)
                _say(out, f"A {own.id} {ev.seq} {key} {now_ms()}")
                if hold is not None and i >= hold:   # wait, in the turn, to be killed
                    _say(out, f"H {own.id}")
                    time.sleep(3600)
        target = rng.choice(shared)
        key = f"{label}:{i}"
        i += 1
        _say(out, f"I {target.id} {key}")
        ev = keyed(target, key)
        _say(out, f"A {target.id} {ev.seq} {key} {now_ms()}")


def retry(args: dict[str, Any], out: IO[str], store: Any = None,
          stop: threading.Event | None = None) -> None:
    """Keyed notes round-robin over the sessions; a failed append is retried
    with the same key (a new connection each time: the backend's) until
    acknowledged; until ``args["stop"]`` exists or ``stop`` is set."""
    from trajlog.errors import StoreError

    label = args["label"]
    store = store if store is not None else _open(args)
    sessions = [store.session(s) for s in args["sessions"]]
    stop_file = Path(args["stop"]) if args.get("stop") else None
    i = 0
    while not (stop is not None and stop.is_set()) and not (stop_file and stop_file.exists()):
        session = sessions[i % len(sessions)]
        key = f"{label}:{i}"
        i += 1
        _say(out, f"I {session.id} {key}")
        while True:
            try:
                ev = keyed(session, key)
            except StoreError as exc:
                _say(out, f"E {now_ms()} {type(exc).__name__}")
                time.sleep(0.05)
                continue
            _say(out, f"A {session.id} {ev.seq} {key} {now_ms()}")
            break
        time.sleep(args.get("pause", 0.0))


def main(argv: list[str]) -> None:
    mode, args = argv[0], json.loads(argv[1])
    try:
        {"turns": turns, "retry": retry}[mode](args, sys.stdout)
    except Exception as exc:   # (the parent asserts there is none)
        _say(sys.stdout, f"X {type(exc).__name__}: {exc}")
        raise


# -- the parent's side ------------------------------------------------------------


@dataclass
class Client:
    """One client process and what it reported (read by a thread as it comes)."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def acks(self) -> int:
        return sum(1 for line in list(self.lines) if line.startswith("A "))

    def kill(self) -> None:
        """SIGKILL, reap (its pid is then gone), and read what it wrote."""
        self.proc.kill()
        self.proc.wait(30)
        self.join()

    def join(self) -> None:
        if self.reader is not None:
            self.reader.join(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def spawn(mode: str, args: dict[str, Any]) -> Client:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(SRC), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, "-u", "-m", "kits.pgclients", mode, json.dumps(args)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env, cwd=str(TESTS))
    client = Client(proc)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            client.lines.append(line.rstrip("\n"))

    client.reader = threading.Thread(target=read, daemon=True)
    client.reader.start()
    return client


class LineSink:
    """A file-like sink for an in-process client (a thread): the same lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._part = ""

    def write(self, text: str) -> int:
        self._part += text
        *done, self._part = self._part.split("\n")
        self.lines.extend(done)
        return len(text)

    def flush(self) -> None:
        pass


@dataclass
class Ledger:
    """What the clients reported, put together."""

    acked: dict[str, tuple[str, int]] = field(default_factory=dict)   # key -> (session, seq)
    intents: dict[str, str] = field(default_factory=dict)             # key -> session
    errors: list[tuple[int, str]] = field(default_factory=list)       # (ms, type)
    gave_up: list[str] = field(default_factory=list)
    load_waits: list[int] = field(default_factory=list)               # ms refused as live
    ack_ms: list[int] = field(default_factory=list)

    def read(self, lines: list[str]) -> None:
        for line in lines:
            kind, _, rest = line.partition(" ")
            parts = rest.split()
            if kind == "I" and len(parts) == 2:
                self.intents[parts[1]] = parts[0]
            elif kind == "A" and len(parts) == 4:
                self.acked[parts[2]] = (parts[0], int(parts[1]))
                self.ack_ms.append(int(parts[3]))
            elif kind == "E" and len(parts) == 2:
                self.errors.append((int(parts[0]), parts[1]))
            elif kind == "L" and len(parts) == 2:
                self.load_waits.append(int(parts[1]))
            elif kind == "X":
                self.gave_up.append(rest)

    def unacknowledged(self) -> dict[str, str]:
        """key -> session of the appends sent and never acknowledged."""
        return {k: s for k, s in self.intents.items() if k not in self.acked}


@dataclass
class Audit:
    """The store as found afterwards, against a ledger."""

    stored: int = 0
    lost: list[str] = field(default_factory=list)         # acknowledged, not where acked
    duplicates: list[str] = field(default_factory=list)   # a key stored more than once
    gaps: list[str] = field(default_factory=list)         # sessions whose seqs are not 0..n-1
    verify_ok: bool = False
    keyed_by_session: dict[str, dict[str, int]] = field(default_factory=dict)


def audit(store: Any, sessions: list[str], ledger: Ledger) -> Audit:
    """Every acknowledged event at its seq, each key once, seqs contiguous,
    the store's own verification."""
    found = Audit()
    for sid in sessions:
        events = list(store.session(sid).events())
        found.stored += len(events)
        if [e.seq for e in events] != list(range(len(events))):
            found.gaps.append(sid)
        keys = Counter(e.idempotency_key for e in events
                       if e.type == "note/x" and e.idempotency_key is not None)
        found.duplicates += [k for k, n in keys.items() if n > 1]
        found.keyed_by_session[sid] = {e.idempotency_key: e.seq for e in events
                                       if e.type == "note/x" and e.idempotency_key}
        for e in events:
            if e.type == "note/x" and e.data != {"k": e.idempotency_key}:
                found.lost.append(f"{sid}@{e.seq}: {e.data!r} under {e.idempotency_key!r}")
    for key, (sid, seq) in ledger.acked.items():
        if found.keyed_by_session.get(sid, {}).get(key) != seq:
            found.lost.append(f"{key} acknowledged at {sid}@{seq}")
    found.verify_ok = bool(store.verify().ok)
    return found


def outage_ms(ledger: Ledger) -> int:
    """How long appends failed: from the first error to the first
    acknowledgement after the last error (0 when none failed)."""
    if not ledger.errors:
        return 0
    first, last = min(t for t, _ in ledger.errors), max(t for t, _ in ledger.errors)
    after = [t for t in ledger.ack_ms if t >= last]
    return (min(after) if after else last) - first


if __name__ == "__main__":
    main(sys.argv[1:])
