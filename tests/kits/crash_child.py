"""The child side of the crash harness (``tests/kits/crashkit.py`` is the
parent): what a child writes and how it tells the parent.

Event content is a deterministic function of (session id, seq), so the parent
can check what it reads back without keeping a copy: the tag, the sizes and
the text (slices of a fixed corpus; a few payloads are large enough to be
zstd-compressed) are all derived from a hash of the pair.  The child
(:func:`fork_child`, :func:`child_main`) appends agent turns forever in one of
the modes and reports an intent line before each append, an ack line after it,
and its current phase (``OPS`` x ``STAGES``) in a byte shared with the parent.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import random
import signal
import threading
import time
import uuid
from typing import Any

import apsw
import msgspec

import trajlog

TAG = "crash_tag"
TEXT_TYPES = ("user/message", "assistant/message", "tool/call", "tool/result", "model/usage")
CHILD_MAX_SECONDS = 30.0      # a child nobody kills exits by itself
TOOLS = ("read_file", "grep", "bash", "edit_file", "list_dir", "web_fetch", "run_tests")

_ENC = msgspec.msgpack.Encoder()


# ---------------------------------------------------------------------------
# Deterministic content

_WORDS = ("def return import self the file path error test value None True False "
          "class async await yield lambda config session event append commit log "
          "result tool call assistant user message step turn crash recover verify "
          "naïve café 日本語 ✓ → λ {} [] () == != <= >= += -= :: // # 'quoted' \"dq\" "
          "0 1 2 42 1024 3.14 -7 0xff")


def _corpus() -> str:
    words = _WORDS.split()
    rng = random.Random(20240611)
    lines = []
    size = 0
    while size < 1 << 18:
        line = "    " * rng.randrange(4) + " ".join(rng.choice(words)
                                                   for _ in range(rng.randrange(3, 14)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


CORPUS = _corpus()


def _h(*parts: object) -> int:
    text = ":".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def tag(sid: str, seq: int) -> str:
    return f"{sid}:{seq}"


def text(sid: str, seq: int, role: str) -> str:
    """Deterministic text for (session, seq, role): mostly short, some long."""
    h = _h(sid, seq, role)
    r = h % 100
    if r < 70:
        n = 20 + (h >> 8) % 380
    elif r < 96:
        n = 400 + (h >> 8) % 3600
    else:
        n = 4000 + (h >> 8) % 28000
    off = (h >> 24) % (len(CORPUS) - n)
    return f"[{sid[:8]}#{seq}] " + CORPUS[off:off + n]


def digest(type_: str, data: Any) -> str:
    return hashlib.blake2b(_ENC.encode([type_, data]), digest_size=8).hexdigest()


def user_message(sid: str, seq: int) -> dict[str, Any]:
    return {"content": text(sid, seq, "user"), TAG: tag(sid, seq)}


def assistant_message(sid: str, seq: int, ncalls: int) -> dict[str, Any]:
    calls = []
    for i in range(ncalls):
        h = _h(sid, seq, "call", i)
        calls.append({"id": f"call_{seq}_{i}", "name": TOOLS[h % len(TOOLS)],
                      "arguments": {"path": f"src/mod{h % 97}.py", "line": (h >> 8) % 5000,
                                    "pattern": CORPUS[(h >> 20) % 1000:(h >> 20) % 1000 + 12],
                                    "scale": ((h >> 32) % 1000) / 8.0}})
    return {"content": text(sid, seq, "assistant") if ncalls == 0 or seq % 3 else "",
            "tool_calls": calls, TAG: tag(sid, seq)}


def tool_call(sid: str, seq: int, call: dict[str, Any]) -> dict[str, Any]:
    return {"call_id": call["id"], "name": call["name"], "arguments": call["arguments"],
            TAG: tag(sid, seq)}


def tool_result(sid: str, seq: int, call_id: str) -> dict[str, Any]:
    return {"call_id": call_id, "output": text(sid, seq, "tool"),
            "is_error": _h(sid, seq, "err") % 11 == 0, TAG: tag(sid, seq)}


def usage(sid: str, seq: int) -> dict[str, Any]:
    h = _h(sid, seq, "usage")
    return {"input_tokens": h % 200_000, "output_tokens": (h >> 20) % 8000,
            "cached": bool(h >> 40 & 1), TAG: tag(sid, seq)}


Item = tuple[int, str, dict[str, Any]]   # (seq, type, data)


def turn_events(sid: str, seq: int, rng: random.Random) -> list[Item]:
    """One realistic turn starting at ``seq``: user message, steps with tool
    calls (sequential or parallel, results in any order), a final answer."""
    out: list[Item] = []

    def add(type_: str, data: dict[str, Any]) -> None:
        out.append((seq + len(out), type_, data))

    add("turn/start", {})
    add("user/message", user_message(sid, seq + len(out)))
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 5))):
        add("step/start", {})
        ncalls = rng.choice((1, 1, 1, 2, 3, 4))
        msg = assistant_message(sid, seq + len(out), ncalls)
        add("assistant/message", msg)
        if rng.random() < 0.3:
            add("model/usage", usage(sid, seq + len(out)))
        calls = msg["tool_calls"]
        if rng.random() < 0.5:          # one call after the other
            for call in calls:
                add("tool/call", tool_call(sid, seq + len(out), call))
                add("tool/result", tool_result(sid, seq + len(out), call["id"]))
        else:                           # parallel: start all, results in any order
            for call in calls:
                add("tool/call", tool_call(sid, seq + len(out), call))
            for call in rng.sample(calls, len(calls)):
                add("tool/result", tool_result(sid, seq + len(out), call["id"]))
        add("step/end", {})
    add("assistant/message", assistant_message(sid, seq + len(out), 0))
    add("turn/end", {"interrupted": False})
    return out


# ---------------------------------------------------------------------------
# The child

# Kill points: each child thread keeps its current phase in a byte of memory
# shared with the parent, which reads it after the kill.  A phase is an
# operation and a stage: "pre" (the call is running: validation, waiting for
# the group commit or the lease, BEGIN, the inserts), "commit" (SQLite's commit
# hook fired: the WAL append and its fsync, then the return to the caller; the
# ack is the first thing after that).
OPS = ("none", "open", "create", "between", "append", "append_batch", "turn_enter",
       "turn_exit", "step_enter", "step_exit", "load")
STAGES = ("pre", "commit")
PROBE_SLOTS = 8


def phase_name(code: int) -> str:
    op = OPS[code >> 2] if code >> 2 < len(OPS) else f"op{code >> 2}"
    return op if op in ("none", "between") else f"{op}/{STAGES[code & 1]}"


class Reporter:
    """Lines to the parent.  One ``os.write`` per report (a pipe write of at
    most PIPE_BUF bytes is atomic; a lock keeps threads' reports whole).
    Also keeps each thread's phase in the shared probe."""

    def __init__(self, fd: int, probe: Any = None) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.probe = probe
        self.local = threading.local()

    def slot(self, i: int) -> None:
        self.local.slot = i

    def phase(self, op: str) -> None:
        if self.probe is not None:
            self.probe[getattr(self.local, "slot", 0)] = OPS.index(op) << 2

    def commit_hook(self) -> bool:
        """SQLite calls this just before each commit (in the committing thread)."""
        if self.probe is not None:
            i = getattr(self.local, "slot", 0)
            self.probe[i] = self.probe[i] | 1
        return False    # go ahead

    def send(self, line: str) -> None:
        data = line.encode()
        with self.lock:
            while data:
                data = data[os.write(self.fd, data):]

    def intents(self, sid: str, items: list[Item], op: str) -> None:
        self.send("".join(f"I {sid} {seq} {t} {digest(t, d)}\n" for seq, t, d in items))
        self.phase(op)

    def ack(self, sid: str, first: int, count: int) -> None:
        self.send(f"A {sid} {first} {count}\n")
        self.phase("between")

    def error(self, what: str) -> None:
        self.send("E " + what.replace("\n", " | ")[:2000] + "\n")


class Agent:
    """Appends turns to one session, reporting intents and acks."""

    def __init__(self, store: Any, session: Any, rep: Reporter, rng: random.Random) -> None:
        self.store = store
        self.s = session
        self.sid = session.id
        self.rep = rep
        self.rng = rng
        self.next = session.last_seq + 1

    def recover(self) -> None:
        """A session left open by an earlier crash is loaded here, in the
        process that may be killed: the closers ``inspect`` announces are the
        intents, ``load`` is the acknowledged call."""
        _view, report = self.s.inspect()
        if report.outcome == "refused":
            self.rep.error(f"{self.sid}: inspect refused: {report.refusal!r}")
        elif report.outcome == "repair":
            items = [(e.seq, e.type, e.data) for e in report.closers]
            self.rep.intents(self.sid, items, "load")
            self.store.load(self.sid)
            self.rep.ack(self.sid, items[0][0], len(items))
            self.next = items[-1][0] + 1
            self._check(self.s.last_seq, items[-1][0])

    def _check(self, got: int, want: int) -> None:
        if got != want:
            self.rep.error(f"{self.sid}: append returned seq {got}, predicted {want}")

    def single_turn(self) -> None:
        """One ``append`` per event; turns and steps through the context
        managers (which hold the writer lease) or, sometimes, plain appends."""
        items = turn_events(self.sid, self.next, self.rng)
        managed = self.rng.random() < 0.75
        turn_cm: Any = None
        step_cm: Any = None
        for seq, type_, data in items:
            op = {"turn/start": "turn_enter", "turn/end": "turn_exit", "step/start": "step_enter",
                  "step/end": "step_exit"}.get(type_, "append") if managed else "append"
            self.rep.intents(self.sid, [(seq, type_, data)], op)
            if managed and type_ == "turn/start":
                turn_cm = self.s.turn()
                turn_cm.__enter__()
                self.rep.ack(self.sid, seq, 1)
            elif managed and type_ == "turn/end":
                turn_cm.__exit__(None, None, None)
                self.rep.ack(self.sid, seq, 1)
            elif managed and type_ == "step/start":
                step_cm = self.s.step()
                step_cm.__enter__()
                self.rep.ack(self.sid, seq, 1)
            elif managed and type_ == "step/end":
                step_cm.__exit__(None, None, None)
                self.rep.ack(self.sid, seq, 1)
            else:
                ev = self.s.append(type_, data)
                self.rep.ack(self.sid, ev.seq, 1)
                self._check(ev.seq, seq)
            self.next = seq + 1
        if managed:
            self._check(self.s.last_seq, self.next - 1)

    def batch_turns(self) -> None:
        """A few turns appended as ``append_batch`` calls of 2-32 events each,
        cut anywhere (a batch may end mid-turn, mid-step, between a call and
        its result)."""
        items: list[Item] = []
        for _ in range(self.rng.randint(1, 3)):
            items += turn_events(self.sid, self.next + len(items), self.rng)
        i = 0
        while i < len(items):
            n = self.rng.randint(2, 32)
            if len(items) - i - n == 1:                   # never leave a lone event
                n = n + 1 if n < 32 else n - 1
            chunk = items[i:i + n]
            self.rep.intents(self.sid, chunk, "append_batch")
            evs = self.s.append_batch([(t, d) for _, t, d in chunk])
            self.rep.ack(self.sid, evs[0].seq, len(evs))
            self._check(evs[0].seq, chunk[0][0])
            self._check(len(evs), len(chunk))
            i += len(chunk)
            self.next = chunk[-1][0] + 1

    def forever(self, style: str) -> None:
        self.recover()
        while True:
            if style == "single" or (style == "mixed" and self.rng.random() < 0.5):
                self.single_turn()
            else:
                self.batch_turns()


def child_main(wfd: int, path: str, mode: str, resume: list[str], nsessions: int,
               seed: str, probe: Any = None, durability: str = "full") -> None:
    """Runs in the forked child; never returns (the caller ``os._exit``\\ s)."""
    rep = Reporter(wfd, probe)
    rng = random.Random(seed)
    rep.phase("open")
    store = trajlog.open(path, durability=durability)
    conn = getattr(store._e.backend, "write_connection", None)   # (none on PostgreSQL)
    if conn is not None:
        conn.set_commit_hook(rep.commit_hook)   # observes; never vetoes
    rep.phase("create")
    sessions = []
    for i in range(nsessions):
        if i < len(resume):
            sessions.append(store.session(resume[i]))
        else:
            sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            sessions.append(store.create_session(cwd=f"/repo/{sid[:4]}", agent_preset="crash",
                                                 metadata={"seed": seed}, session_id=sid))
            rep.send(f"S {sid}\n")
    rep.send("R\n")
    rep.phase("between")
    agents = [Agent(store, s, rep, random.Random(f"{seed}:{i}"))
              for i, s in enumerate(sessions)]
    if mode != "threads":
        agents[0].forever(mode)
        return
    failures: list[BaseException] = []

    def run(slot: int, agent: Agent) -> None:
        rep.slot(slot)
        rep.phase("between")
        try:
            agent.forever("mixed")
        except BaseException as exc:  # report, then let the process die
            failures.append(exc)
            rep.error(f"thread: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(i + 1, a), daemon=True)
               for i, a in enumerate(agents)]
    for t in threads:
        t.start()
    rep.phase("none")                                  # the main thread only waits
    deadline = time.monotonic() + CHILD_MAX_SECONDS
    while time.monotonic() < deadline and not failures:
        time.sleep(0.05)


def fork_child(path: str, mode: str, resume: list[str], nsessions: int,
               seed: str, probe: Any = None, durability: str = "full") -> tuple[int, int]:
    """Fork a crash child; return (pid, read end of its report pipe).

    The parent must hold no connection to the database at the fork (SQLite
    connections and their POSIX locks do not survive a fork); unreachable
    objects are collected first and the child freezes what it inherits, so no
    inherited connection (of this or another database) is ever finalized in
    the child."""
    gc.collect()
    target = os.path.realpath(path)
    held = [c.filename for c in apsw.connections()
            if c.filename and os.path.realpath(c.filename) == target]
    if held:
        raise RuntimeError(f"the parent holds {len(held)} connection(s) to {path} at fork")
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into the caller's stack
        code = 0
        try:
            gc.freeze()
            os.close(rfd)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            timer = threading.Timer(CHILD_MAX_SECONDS, os._exit, (4,))
            timer.daemon = True
            timer.start()
            child_main(wfd, path, mode, resume, nsessions, seed, probe, durability)
        except BaseException as exc:
            code = 3
            with contextlib.suppress(BaseException):
                Reporter(wfd).error(f"child: {type(exc).__name__}: {exc}")
        finally:
            os._exit(code)
    os.close(wfd)
    return pid, rfd

