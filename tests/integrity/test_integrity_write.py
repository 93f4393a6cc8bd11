"""What an adversarial review found on the write path, in leases and recovery,
in hostile values and in typed errors.  Each test failed before its
fix (commit ad986d4)."""

from __future__ import annotations

import collections
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import apsw
import msgspec
import pytest

import trajlog
from trajlog import codec, errors
from trajlog._format import Cursor
from trajlog.codec.chunks import body_seed
from trajlog.events import Event, encode_event
from trajlog.projections import evidence
from trajlog.projections.context import ContextPolicy, build_context
from trajlog.recovery import repair_file
from trajlog.storage import statements as storage
from trajlog.storage.event_index import marks_of, pack_marks
from trajlog.storage.statements import i64, rid

SQLITE_APSW = "tampers with the store through an apsw connection of its own"


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "w.db")


def _foreign_append(path: str, sid: int, key: int, types: list[str]) -> None:
    """Append events the way a foreign writer (an older trajlog) could: well
    framed, checksummed and chained, through a default connection (the
    triggers hold), but without trajlog's write-path rules."""
    conn = apsw.Connection(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        last, chain = conn.execute("SELECT last_seq, chain_head FROM session_heads WHERE sid = ?",
                                   (sid,)).fetchall()[0]
        chain = storage.u64(chain)
        for t in types:
            seq = last + 1
            frame, end = codec.encode([encode_event(Event(t, 1, {}))], key,
                                      Cursor(0, seq, chain))
            marks = pack_marks(marks_of([Event(t, 1, {})], seq))
            conn.execute(storage.CHUNK_INSERT, (rid(sid, seq), 1, len(frame), 0,
                                                i64(codec.checksum(frame, body_seed(key, seq))),
                                                i64(chain), i64(end.chain), frame, marks))
            if t in ("turn/start", "turn/end"):
                conn.execute("INSERT INTO event_index(rid, type, time_ms) VALUES (?, ?, 1)",
                             (rid(sid, seq), t))
            last, chain = seq, end.chain
        conn.execute("COMMIT")
    finally:
        conn.close()


# -- E: a zombie writer's lease ------------------------------------------------------------

ZOMBIE = """
import sys, trajlog
st = trajlog.open(sys.argv[1])
s = st.session(sys.argv[2])
held = s.lease()
held.__enter__()   # and never left
s.append("turn/start", {})
s.append("user/message", {"content": "then killed, never reaped"})
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_e_a_zombie_writer_does_not_keep_its_lease(path):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/z")
        with subprocess.Popen([sys.executable, "-c", ZOMBIE, path, s.id],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as child:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            os.kill(child.pid, 9)
            deadline = time.monotonic() + 10
            while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] \
                    != "Z":
                assert time.monotonic() < deadline, "the child did not become a zombie"
                time.sleep(0.01)
            # the writer is dead but not reaped: its pid still answers kill(pid, 0)
            loaded = store.load(s.id)
            assert [e.type for e in loaded.events()][-1] == "turn/end"


# -- F: turn and step boundaries ----------------------------------------------------------

def test_f_two_handles_cannot_nest_turns(path):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/t")
        other = store.session(s.id)
        with s.turn():
            with pytest.raises(errors.ValidationError, match="turns do not nest"), other.turn():
                pass
            s.append("user/message", {"content": "still one turn"})
            assert trajlog.projections.status(s).turn_open_since == 0
        assert trajlog.projections.status(s).turn_open_since is None
        _, report = s.inspect()
        assert report.outcome == "balanced"


@pytest.mark.parametrize("types,message", [
    (["step/start"], "a step belongs inside a turn"),
    (["turn/end"], "no turn is open"),
    (["turn/start", "turn/start"], "turns do not nest"),
    (["step/end"], "no step is open"),
    (["turn/start", "step/start", "step/start"], "a step is already open"),
])
def test_f_the_write_path_refuses_markers_that_do_not_nest(path, types, message):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/t")
        before = s.last_seq
        with pytest.raises(errors.ValidationError, match=message):
            s.append_batch([(t, {}) for t in types])
        assert s.last_seq == before    # all or nothing


@pytest.mark.parametrize("types,seq", [
    (["step/start"], 0),
    (["turn/end"], 0),
    (["turn/start", "turn/start", "turn/end"], 1),
    (["turn/start", "step/end"], 1),
])
@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_f_recovery_refuses_a_log_whose_markers_do_not_nest(path, types, seq):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/t")
        sid, key = s._sid, s._key
    _foreign_append(path, sid, key, types)
    with trajlog.open(path) as store:
        s = store.session(s.id)
        assert s.verify().ok                      # the frames are fine
        with pytest.raises(errors.UnbalancedLogError) as exc:
            store.load(s.id)
        assert exc.value.seq == seq and exc.value.session == s.id
        assert s.last_seq == len(types) - 1       # nothing appended
        assert [e.type for e in s.events()] == types  # still readable


def test_f_a_raw_turn_start_takes_the_lease_from_other_stores(path):
    with trajlog.open(path) as a, trajlog.open(path) as b:
        s = a.create_session(cwd="/t")
        s.append("turn/start", {})                 # no turn(), no lease()
        s.append("user/message", {"content": "working"})
        with pytest.raises(errors.LiveWriterError):
            b.load(s.id)                           # would close a live writer's turn
        with pytest.raises(errors.LeaseHeldError):
            b.session(s.id).append("user/message", {"content": "intruder"})
        s.append("turn/end", {})                   # the turn's end gives the lease back
        assert b.load(s.id).last_seq == 2
        b.session(s.id).append("user/message", {"content": "now b may write"})


# -- G: the busy timeout is formatted into a PRAGMA ----------------------------------------

@pytest.mark.sqlite_only(reason=SQLITE_APSW)
@pytest.mark.parametrize("value", ["10000; DROP TRIGGER chunks_append", 1.5, True, -1, "5"])
def test_g_busy_timeout_must_be_an_int(path, value):
    trajlog.open(path).close()
    with pytest.raises(errors.InvalidArgumentError):
        trajlog.open(path, busy_timeout_ms=value)
    conn = apsw.Connection(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'")}
    conn.close()
    assert "chunks_append" in names
    trajlog.open(path).close()


@pytest.mark.parametrize("kwargs", [{"lease_ttl_ms": "1"}, {"lease_ttl_ms": math.nan},
                                    {"max_delegation_depth": 2.0}])
def test_g_other_numeric_options_are_checked(path, kwargs):
    with pytest.raises(errors.InvalidArgumentError):
        trajlog.open(path, **kwargs)


# -- H: untrusted sources and status decisions ---------------------------------------------

def test_h_an_untrusted_source_cannot_set_a_status(path):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/h")
        s.append("user/message", {"content": "hello"})
        for source in ("web:evil.example", "external:feed"):
            with pytest.raises(errors.ValidationError, match="untrusted source"):
                s.mark(0, "rejected", "said so", source=source)
        with pytest.raises(errors.ValidationError, match="untrusted source"):
            s.append("event/status", {"target": 0, "status": "active", "reason": "x",
                                      "trust": "untrusted"}, source="tool")


def _ev(seq, t, data, source=None):
    return msgspec.structs.replace(Event(t, 1, data, source), seq=seq)


def test_h_status_decisions_rank_by_source():
    log = [
        _ev(0, "tool/result", {"call_id": "c", "output": "secret"}, "bash"),
        _ev(1, "human/decision", {"subject": "deploy", "value": "no"}, "human:ada"),
        _ev(2, "event/status", {"target": 0, "status": "rejected", "reason": "r"}, "human"),
        # an old log may hold these (written before the write path refused them):
        _ev(3, "event/status", {"target": 0, "status": "active", "reason": "r"}, "web:x"),
        _ev(4, "event/status", {"target": 0, "status": "active", "reason": "r"}, "model"),
        _ev(5, "event/status", {"target": 1, "status": "audit-only", "reason": "r"}, "model"),
        _ev(6, "event/status", {"target": 1, "status": "audit-only", "reason": "r"}, "tool"),
    ]
    got = evidence.collect(log)
    assert got.status_of(0) == "rejected"   # neither the web nor the model re-activates it
    assert got.status_of(1) == "active"     # a human's decision is not demoted by a non-human
    humans = evidence.collect([*log, _ev(7, "event/status", {"target": 0, "status": "active",
                                                              "reason": "r"}, "reviewer")])
    assert humans.status_of(0) == "active"  # another person may


def test_h_a_model_cannot_bring_back_what_a_person_rejected_into_the_context(path):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/h")
        s.append("task/contract", {"goal": "fix the bug"})
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "x", "name": "search", "arguments": {}}]})
        s.append("tool/call", {"call_id": "x", "name": "search"})
        bad = s.append("tool/result", {"call_id": "x", "output": "rm -rf advice",
                                       "name": "search"}, source="search",
                       workspace_revision="r1", data_class="public")
        s.mark(bad.seq, "rejected", "wrong", source="human")
        s.mark(bad.seq, "active", "I like it", source="model")
        built = build_context(s)
        assert bad.seq not in [item.seq for item in built.selected]
        assert "rm -rf advice" not in str(built.messages)


# -- I: hostile values ------------------------------------------------------------------

class LyingDict(dict):
    """A dict whose methods hide what it really holds."""

    def keys(self):
        return []

    def __iter__(self):
        return iter([])

    def items(self):
        return []


@pytest.mark.parametrize("hidden", [b"bytes", math.nan, {1: "int key"}])
def test_i_a_lying_dict_cannot_smuggle_values_past_the_json_check(path, hidden):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/i")
        value = LyingDict()
        dict.__setitem__(value, "x", hidden)
        with pytest.raises(errors.SerializationError):
            s.append("note", {"v": value})
        with pytest.raises(errors.SerializationError):
            store.create_session(cwd="/i", metadata={"v": value})
        assert s.last_seq == -1
        assert s.verify().ok


def test_i_subclasses_are_stored_as_plain_values(path):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/i")
        data = collections.OrderedDict(a=collections.OrderedDict(b=[1, 2]), t=(1, 2))
        ev = s.append("note", data)
        assert type(ev.data) is dict and ev.data == {"a": {"b": [1, 2]}, "t": [1, 2]}
        assert s.get(ev.seq).data == ev.data


def test_i_the_returned_event_does_not_share_the_callers_data(path):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/i")
        data = {"content": "original", "list": [1]}
        one = s.append("note", data)
        batch = s.append_batch([("note", data)])
        data["content"] = "changed after the append"
        data["list"].append(2)
        for ev in (one, batch[0]):
            assert ev.data == {"content": "original", "list": [1]}
            assert ev.data == s.get(ev.seq).data


def test_i_a_reentrant_append_from_a_values_method_does_not_deadlock(path):
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/i")

        class Reentrant(dict):
            def get(self, key, default=None):
                s.append("note", {"from": "inside get"})
                return dict.get(self, key, default)

            def __getitem__(self, key):
                s.append("note", {"from": "inside getitem"})
                return dict.__getitem__(self, key)

        done: list[object] = []

        def work():
            try:
                done.append(s.append("tool/call", Reentrant(call_id="c", name="x")))
            except Exception as exc:  # a refusal is fine; a hang is not
                done.append(exc)

        t = threading.Thread(target=work, daemon=True)
        t.start()
        t.join(20)
        assert not t.is_alive(), "the store deadlocked"
        # the store still works
        s.append("note", {"after": True})
        assert s.verify().ok


@pytest.mark.parametrize("field", ["cwd", "agent_preset"])
def test_i_lone_surrogates_in_header_fields_are_a_serialization_error(path, field):
    with trajlog.open(path) as store:
        with pytest.raises(errors.SerializationError):
            store.create_session(**{"cwd": "/ok", field: "bad \ud800 text"})
        with pytest.raises(errors.SerializationError):
            store.create_session(cwd="/ok", metadata={"k": "bad \udfff"})
        assert store.sessions() == []


# -- K: typed errors ----------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {"budget_chars": math.nan}, {"reserved_chars": math.inf}, {"max_events": -1},
    {"max_tool_output_chars": 1.5}, {"layer_shares": (("evidence", math.nan),)},
    {"layer_shares": (("evidence", 0.9), ("plan", 0.9))}, {"recent_messages": True},
])
def test_k_context_policy_refuses_budgets_that_are_no_budgets(kwargs):
    with pytest.raises(errors.InvalidArgumentError):
        ContextPolicy(**kwargs)


@pytest.mark.parametrize("cursor", [(-1, 0, 7), (0, -1, 7), (0, 0, -1), (0, 2**64, 7),
                                    (0, 0, 2**64), (10**6, 0, 7)])
def test_k_both_kernels_refuse_an_out_of_range_cursor_alike(kernel, cursor):
    key = 7
    buf, _ = codec.encode([b"abc"], key, codec.start_cursor(key), kernel=kernel)
    for call in (lambda: codec.scan(buf, key, Cursor(*cursor), kernel=kernel),
                 lambda: list(codec.iter_frames(buf, key, Cursor(*cursor), kernel=kernel))):
        with pytest.raises(errors.InvalidArgumentError):
            call()
    if cursor[0] < 10**6:
        with pytest.raises(errors.InvalidArgumentError):
            codec.encode([b"x"], key, Cursor(*cursor), kernel=kernel)


def _torn_file(tmp_path) -> tuple[str, int]:
    key = 11
    buf, _ = codec.encode([b"one", b"two"], key, codec.start_cursor(key))
    target = tmp_path / "log.bin"
    target.write_bytes(buf + b"\xa7\xf1torn")
    return str(target), key


def test_k_repair_file_never_overwrites_earlier_evidence(tmp_path):
    target, key = _torn_file(tmp_path)
    first = target + ".broken"
    Path(first).write_bytes(b"evidence of an earlier repair")
    repair_file(target, key)
    assert Path(first).read_bytes() == b"evidence of an earlier repair"
    assert Path(target + ".broken.1").read_bytes().endswith(b"torn")


def test_k_repair_file_does_not_follow_a_symlink(tmp_path):
    target, key = _torn_file(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"do not touch")
    os.symlink(victim, target + ".broken")
    repair_file(target, key)
    assert victim.read_bytes() == b"do not touch"
    assert Path(target + ".broken.1").read_bytes().endswith(b"torn")
