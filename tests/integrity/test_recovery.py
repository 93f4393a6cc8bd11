"""Recovery: inspect() and load() after a crash at every kind of event, the
refusals (each test fails if its refusal is removed), a Hypothesis state
machine, and the repair of torn frame files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import trajlog
from kits.tamper import (
    append_row,
    delete_frame,
    flip_frame_bits,
    foreign,
    frame_at,
    replace_frame,
    stored_head,
)
from trajlog import codec, errors
from trajlog.recovery import GUIDANCE, RECOVERY_SOURCE, repair_file

SQLITE_CONN = "runs SQL on the SQLite backend's own connections"
SQLITE_APSW = "tampers with the store through an apsw connection of its own"

# The scripted turn; each test case crashes after a prefix of it.
SCRIPT = [
    ("turn/start", {}),                                                           # 0
    ("user/message", {"content": "fix it"}),                                      # 1
    ("step/start", {}),                                                           # 2
    ("assistant/message", {"content": "", "tool_calls": [
        {"id": "c1", "name": "read", "arguments": {}}]}),                         # 3
    ("tool/call", {"call_id": "c1", "name": "read", "arguments": {}}),            # 4
    ("tool/result", {"call_id": "c1", "output": "text", "is_error": False}),      # 5
    ("step/end", {}),                                                             # 6
    ("step/start", {}),                                                           # 7
    ("assistant/message", {"content": "", "tool_calls": [
        {"id": "p1", "name": "grep", "arguments": {}},
        {"id": "p2", "name": "bash", "arguments": {}},
        {"id": "p3", "name": "read", "arguments": {}}]}),                         # 8
    ("tool/call", {"call_id": "p1", "name": "grep", "arguments": {}}),            # 9
    ("tool/call", {"call_id": "p2", "name": "bash", "arguments": {}}),            # 10
    ("tool/result", {"call_id": "p1", "output": "hit", "is_error": False}),       # 11
    ("tool/call", {"call_id": "p3", "name": "read", "arguments": {}}),            # 12
    ("tool/result", {"call_id": "p2", "output": "ok", "is_error": False}),        # 13
    ("tool/result", {"call_id": "p3", "output": "x", "is_error": False}),         # 14
    ("step/end", {}),                                                             # 15
    ("turn/end", {"interrupted": False}),                                         # 16
]
NS, UNK = "TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"
STEP, TURN = ("step/end", None, None), ("turn/end", None, None)

# crash after SCRIPT[:n] -> the closers load() must append, in order
CASES = [
    ("after turn/start", 1, [TURN]),
    ("after the user message", 2, [TURN]),
    ("after step/start", 3, [STEP, TURN]),
    ("after an assistant tool call", 4, [("tool/result", NS, "c1"), STEP, TURN]),
    ("after tool/call", 5, [("tool/result", UNK, "c1"), STEP, TURN]),
    ("mid-step, after the result", 6, [STEP, TURN]),
    ("between steps", 7, [TURN]),
    ("three parallel calls requested", 9, [("tool/result", NS, "p1"), ("tool/result", NS, "p2"),
                                           ("tool/result", NS, "p3"), STEP, TURN]),
    ("three calls: done, running, requested", 12, [("tool/result", UNK, "p2"),
                                                   ("tool/result", NS, "p3"), STEP, TURN]),
    ("three calls: done, running, running", 13, [("tool/result", UNK, "p2"),
                                                 ("tool/result", UNK, "p3"), STEP, TURN]),
    ("after the last step", 16, [TURN]),
    ("after turn/end", 17, []),
]


def crashed(store, n, times=None):
    s = store.create_session(cwd="/r")
    for i, (t, d) in enumerate(SCRIPT[:n]):
        s.append(t, d, time=(times or 1_000_000) + i)
    return s


def shape(ev):
    return (ev.type, ev.data.get("status"), ev.data.get("call_id"))


@pytest.mark.parametrize("name, n, expected", CASES, ids=[c[0] for c in CASES])
def test_recovery_closers_table(store, name, n, expected):
    s = crashed(store, n)
    view, report = s.inspect()
    assert [shape(e) for e in report.closers] == [
        (t, st_, cid) if t == "tool/result" else (t, None, None) for t, st_, cid in expected]
    assert report.outcome == ("repair" if expected else "balanced")
    assert s.last_seq == n - 1  # inspect wrote nothing
    assert [e.seq for e in view.events()] == list(range(n + len(expected)))
    loaded = store.load(s.id)
    events = list(loaded.events())
    assert [(e.type, e.data) for e in events[:n]] == list(SCRIPT[:n])  # every event kept
    closers = events[n:]
    assert [shape(e) for e in closers] == [shape(e) for e in report.closers]
    for ev in closers:
        assert ev.data["synthetic"] is True
        assert ev.time == 1_000_000 + n - 1  # the last real event's time
        assert ev.source == RECOVERY_SOURCE
        if ev.type == "tool/result":
            assert ev.data["output"] == GUIDANCE[ev.data["status"]]
            assert ev.data["is_error"] is True
        if ev.type == "turn/end":
            assert ev.data["interrupted"] is True
    # idempotent: a second load appends nothing, and the log is balanced
    last = loaded.last_seq
    assert store.load(s.id).last_seq == last
    assert s.inspect()[1].outcome == "balanced"
    assert loaded.verify().ok


def test_recovery_outcome_unknown_guidance_says_check_first(store):
    s = crashed(store, 5)
    closer = store.load(s.id).get(5)
    assert closer.data["status"] == UNK
    assert "may have run" in closer.data["output"] and "Check the real state" in closer.data[
        "output"]


def test_recovery_empty_session_is_balanced(store):
    s = store.create_session(cwd="/r")
    assert s.inspect()[1].outcome == "balanced"
    assert store.load(s.id).last_seq == -1


def test_recovery_new_turn_after_load(store):
    s = crashed(store, 5)
    s = store.load(s.id)
    with s.turn():
        s.append("user/message", {"content": "again"})
    assert s.inspect()[1].outcome == "balanced"


# --- refusals: typed, located, nothing written -------------------------------

def assert_refused(store, s, exc_type, seq):
    before = stored_head(store, s._sid)
    with pytest.raises(exc_type) as info:
        store.load(s.id)
    err = info.value
    assert err.session == s.id and err.seq == seq and err.reason
    assert stored_head(store, s._sid) == before  # nothing written
    _, report = s.inspect()
    assert report.outcome == "refused" and isinstance(report.refusal, exc_type)
    return err


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_recovery_refuses_seq_gap(store):
    s = crashed(store, 8)
    delete_frame(store, s._sid, 3)
    err = assert_refused(store, s, errors.SequenceError, 3)
    assert err.offset is not None and err.offset > 0


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_recovery_refuses_checksum_failure(store):
    s = crashed(store, 8)
    flip_frame_bits(store, s._sid, 4, 41, 0x20)
    err = assert_refused(store, s, errors.ChecksumError, 4)
    assert "payload checksum" in str(err)


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_recovery_refuses_chain_failure(store):
    """A frame that checks on its own but was written after another history."""
    s = crashed(store, 8)
    old = frame_at(store, s._sid, 5)
    header = codec.decode_header(old)
    payload = old[40:40 + header.stored_len]
    forged, _ = codec.encode([payload], s._key, trajlog.codec.Cursor(0, 5, 12345),
                             flags=[header.flags], raw_lens=[header.raw_len])
    replace_frame(store, s._sid, 5, forged)
    assert_refused(store, s, errors.ChainError, 5)


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_recovery_refuses_log_shorter_than_head(store):
    s = crashed(store, 8)
    delete_frame(store, s._sid, 7)
    err = assert_refused(store, s, errors.HeadMismatchError, 7)
    assert "ends at seq 6" in str(err)


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_recovery_refuses_rows_beyond_head(store):
    s = crashed(store, 8)
    last = frame_at(store, s._sid, 7)
    append_row(store, s._sid, 8, last, codec.decode_header(last).chain)
    assert_refused(store, s, errors.HeadMismatchError, 8)


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_recovery_refuses_head_chain_mismatch(store):
    s = crashed(store, 8)
    conn = foreign(store)
    conn.execute("UPDATE session_heads SET chain_head = 99 WHERE sid = ?", (s._sid,))
    conn.close()
    assert_refused(store, s, errors.HeadMismatchError, 7)


HOLDER = """
import sys, time, trajlog
from pathlib import Path
with trajlog.open(sys.argv[1]) as st:
    s = st.session(sys.argv[2])
    s.append("turn/start", {})  # a turn left open by a transient writer...
    with s.lease():             # ...and a live writer holding the lease
        s.append("user/message", {"content": "working"})
        Path(sys.argv[3]).write_text("ready")
        time.sleep(600)
"""


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_recovery_refuses_live_writer_then_takes_over_when_it_dies(tmp_path):
    path, flag = str(tmp_path / "live.db"), tmp_path / "flag"
    with trajlog.open(path) as st_:
        s = st_.create_session(cwd="/r")
        s.append("user/message", {"content": "before"})
        child = subprocess.Popen([sys.executable, "-c", HOLDER, path, s.id, str(flag)])
        try:
            deadline = time.monotonic() + 60
            while not flag.exists():
                assert child.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
            err = assert_refused(st_, s, errors.LiveWriterError, 1)
            assert f"pid {child.pid}" in str(err)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        # the writer is dead: its lease is stale, recovery proceeds
        loaded = st_.load(s.id)
        assert [e.type for e in loaded.tail(2)] == ["user/message", "turn/end"]
        assert loaded.get(3).data == {"synthetic": True, "interrupted": True}


def test_recovery_live_writer_with_balanced_log_is_not_refused(tmp_path):
    """Live but balanced: nothing to repair, nothing to refuse."""
    path = str(tmp_path / "bal.db")
    with trajlog.open(path) as st_:
        s = st_.create_session(cwd="/r")
        s.append("user/message", {"content": "hi"})
        with trajlog.open(path) as other, other.session(s.id).lease():
            assert st_.load(s.id).last_seq == 0


# --- Hypothesis: random valid logs cut anywhere ------------------------------

class CrashMachine(RuleBasedStateMachine):
    """Appends random valid agent events; at any point the host 'crashes'
    (stops) and a new process loads the session.  After every load the log is
    balanced: each tool call has exactly one result or closer, steps and turns
    are closed; the load kept every event and a second load is a no-op."""

    def __init__(self) -> None:
        super().__init__()
        self.store = trajlog.open(":memory:")
        self.s = self.store.create_session(cwd="/h")
        self.turn = self.step = False
        self.requested: list[str] = []
        self.started: list[str] = []
        self.n = 0
        self.appended: list[tuple[str, dict]] = []

    def add(self, type_, data):
        self.s.append(type_, data)
        self.appended.append((type_, data))

    @precondition(lambda self: not self.turn)
    @rule()
    def start_turn(self):
        self.add("turn/start", {})
        self.turn = True

    @rule()
    def user_message(self):
        self.add("user/message", {"content": "u"})

    @precondition(lambda self: self.turn and not self.step)
    @rule()
    def start_step(self):
        self.add("step/start", {})
        self.step = True

    @rule(k=st.integers(0, 3))
    def assistant(self, k):
        calls = []
        for _ in range(k):
            self.n += 1
            calls.append({"id": f"c{self.n}", "name": "t", "arguments": {}})
        self.add("assistant/message", {"content": "a", "tool_calls": calls})
        self.requested += [c["id"] for c in calls]

    @precondition(lambda self: self.requested)
    @rule(data=st.data())
    def start_call(self, data):
        cid = data.draw(st.sampled_from(self.requested))
        self.requested.remove(cid)
        self.started.append(cid)
        self.add("tool/call", {"call_id": cid, "name": "t", "arguments": {}})

    @precondition(lambda self: self.started)
    @rule(data=st.data())
    def finish_call(self, data):
        cid = data.draw(st.sampled_from(self.started))
        self.started.remove(cid)
        self.add("tool/result", {"call_id": cid, "output": "o", "is_error": False})

    @precondition(lambda self: self.step)
    @rule()
    def end_step(self):
        self.add("step/end", {})
        self.step = False

    @precondition(lambda self: self.turn and not self.step)
    @rule()
    def end_turn(self):
        self.add("turn/end", {"interrupted": False})
        self.turn = False

    @rule()
    def crash_and_load(self):
        before = self.s.last_seq
        loaded = self.store.load(self.s.id)
        events = list(loaded.events())
        assert [(e.type, e.data) for e in events[: before + 1]] == self.appended
        closers = events[before + 1:]
        expect = len(self.requested) + len(self.started) + self.step + self.turn
        assert len(closers) == expect and all(e.data["synthetic"] for e in closers)
        assert self.store.load(self.s.id).last_seq == loaded.last_seq  # idempotent
        self.appended += [(e.type, e.data) for e in closers]
        self.requested, self.started, self.step, self.turn = [], [], False, False
        self.check_balanced(events)

    def check_balanced(self, events):
        calls: dict[str, int] = {}
        depth_turn = depth_step = 0
        for e in events:
            if e.type == "assistant/message":
                for c in e.data["tool_calls"]:
                    calls[c["id"]] = 0
            elif e.type == "tool/result":
                calls[e.data["call_id"]] += 1
            elif e.type == "turn/start":
                depth_turn += 1
            elif e.type == "turn/end":
                depth_turn -= 1
            elif e.type == "step/start":
                depth_step += 1
            elif e.type == "step/end":
                depth_step -= 1
        assert all(v == 1 for v in calls.values()), calls
        assert depth_turn == 0 and depth_step == 0

    @invariant()
    def log_verifies(self):
        assert self.s.verify().ok

    def teardown(self):
        self.store.close()


TestCrashMachine = CrashMachine.TestCase
TestCrashMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


# --- frame files -----------------------------------------------------------------

def frame_file(tmp_path: Path, n: int = 6) -> tuple[str, int, bytes, list[int]]:
    key = codec.session_key(bytes(range(16)))
    items = [f"event {i} ".encode() * 30 for i in range(n)]
    log, _ = codec.encode(items, key, codec.start_cursor(key))
    offsets, pos = [], 0
    for it in items:
        offsets.append(pos)
        pos += 40 + len(it) + (-len(it) & 7)
    path = str(tmp_path / "log.frames")
    Path(path).write_bytes(log)
    return path, key, log, offsets


def test_recovery_repair_file_cuts_torn_tail_keeping_broken_copy(tmp_path):
    path, key, log, offsets = frame_file(tmp_path)
    Path(path).write_bytes(log[: offsets[-1] + 17])
    report = repair_file(path, key, watermark=4)
    assert report.verdict is codec.Verdict.TORN and report.valid_len == offsets[-1]
    assert Path(path + ".broken").read_bytes() == log[: offsets[-1] + 17]
    assert Path(path).read_bytes() == log[: offsets[-1]]
    assert codec.scan(Path(path).read_bytes(), key).verdict is codec.Verdict.CLEAN


def test_recovery_repair_file_refuses_below_watermark(tmp_path):
    path, key, log, offsets = frame_file(tmp_path)
    Path(path).write_bytes(log[: offsets[-1] + 17])
    with pytest.raises(errors.CorruptionError):
        repair_file(path, key, watermark=5)
    assert Path(path).read_bytes() == log[: offsets[-1] + 17]
    assert not os.path.exists(path + ".broken")


def test_recovery_repair_file_never_repairs_corruption(tmp_path):
    path, key, log, offsets = frame_file(tmp_path)
    damaged = bytearray(log)
    damaged[offsets[2] + 50] ^= 1
    Path(path).write_bytes(bytes(damaged))
    with pytest.raises(errors.ChecksumError) as info:
        repair_file(path, key)
    assert info.value.seq == 2 and info.value.offset == offsets[2]
    assert Path(path).read_bytes() == bytes(damaged)
    assert not os.path.exists(path + ".broken")


def test_recovery_repair_file_clean_is_untouched(tmp_path):
    path, key, log, _ = frame_file(tmp_path)
    assert repair_file(path, key).verdict is codec.Verdict.CLEAN
    assert Path(path).read_bytes() == log and not os.path.exists(path + ".broken")
