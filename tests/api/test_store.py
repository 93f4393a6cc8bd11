"""The session API (docs/sessions.md) on real SQLite files: appends, reads,
turns and steps, envelopes, idempotency, validation, bad input, verify()."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

import trajlog
from kits.tamper import write_conn
from trajlog import errors
from trajlog.codec import Status
from trajlog.events import Event

SQLITE_BYTES = "reads or damages the SQLite file's bytes"
SQLITE_CONN = "runs SQL on the SQLite backend's own connections"


@pytest.fixture
def session(store):
    return store.create_session(cwd="/repo", agent_preset="coder-v1",
                                metadata={"title": "login bug"})


def record_turn(s):
    with s.turn():
        s.append("user/message", {"content": "fix the login bug"})
        with s.step():
            s.append("assistant/message", {"content": "reading it", "tool_calls": [
                {"id": "c1", "name": "read", "arguments": {"path": "login.ts"}}]})
            s.append("tool/call", {"call_id": "c1", "name": "read",
                                   "arguments": {"path": "login.ts"}})
            s.append("tool/result", {"call_id": "c1", "output": "x" * 3000, "is_error": False})


TURN_TYPES = ["turn/start", "user/message", "step/start", "assistant/message", "tool/call",
              "tool/result", "step/end", "turn/end"]


# --- sessions and headers ----------------------------------------------------

def test_store_session_header_is_immutable(store, session):
    h = session.header
    assert (h.cwd, h.agent_preset, h.parent_session, h.seed_length, h.origin,
            h.delegation_depth) == ("/repo", "coder-v1", None, 0, None, 0)
    assert h.metadata["title"] == "login bug"
    with pytest.raises(AttributeError):
        h.cwd = "/x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        h.metadata["title"] = "x"  # type: ignore[index]
    again = store.session(session.id)
    assert again.header == h


def test_store_sessions_lists_headers(store):
    ids = [store.create_session(cwd=f"/r{i}").id for i in range(3)]
    assert [h.id for h in store.sessions()] == ids


def test_store_reopen_keeps_everything(tmp_path):
    path = str(tmp_path / "r.db")
    with trajlog.open(path) as st:
        s = st.create_session(cwd="/repo")
        record_turn(s)
        sid = s.id
    with trajlog.open(path) as st:
        s = st.session(sid)
        assert [e.type for e in s.events()] == TURN_TYPES
        assert s.verify().ok
        # validation state is rebuilt from the log: c1 is finished
        with pytest.raises(errors.ValidationError):
            s.append("tool/result", {"call_id": "c1", "output": "again"})


# --- appends and reads ---------------------------------------------------------

def test_store_turn_and_step_record_their_events(session):
    record_turn(session)
    events = list(session.events())
    assert [e.type for e in events] == TURN_TYPES
    assert [e.seq for e in events] == list(range(8))
    assert events[-1].data == {"interrupted": False}
    assert events[5].data["output"] == "x" * 3000  # compressed on disk, whole here


def test_store_turn_interrupted_by_exception(session):
    with pytest.raises(RuntimeError), session.turn():
        session.append("user/message", {"content": "go"})
        with session.step():
            raise RuntimeError("host crashed")
    types = [(e.type, e.data) for e in session.events()]
    assert types[-2:] == [("step/end", {"interrupted": True}), ("turn/end", {"interrupted": True})]


def test_store_turn_nesting_rules(session):
    with pytest.raises(errors.InvalidStateError), session.step():
        pass
    with session.turn(), pytest.raises(errors.InvalidStateError), session.turn():
        pass


def test_store_get_tail_and_ranges(session):
    session.append_batch([("user/message", {"content": str(i)}) for i in range(120)])
    assert session.get(7).data == {"content": "7"}
    assert [e.seq for e in session.tail(50)] == list(range(70, 120))
    assert [e.seq for e in session.events(100, 104)] == [100, 101, 102, 103, 104]
    assert session.tail(0) == []
    assert session.last_seq == 119
    with pytest.raises(errors.InvalidArgumentError):
        session.get(500)


def test_store_events_are_immutable_values(session):
    ev = session.append("user/message", {"content": "hi", "tags": ["a"]})
    assert isinstance(ev, Event) and ev.seq == 0
    with pytest.raises(AttributeError):
        ev.seq = 3  # type: ignore[misc]
    got = session.get(0)
    got.data["content"] = "changed"
    got.data["tags"].append("b")
    assert session.get(0).data == {"content": "hi", "tags": ["a"]}
    assert hash(session.get(0).type) == hash("user/message")


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_store_envelope_round_trip_and_columns(store, session):
    ev = session.append("tool/note", {"text": "ok"}, source="pytest", causal_parent=0,
                        workspace_revision="git:7d31a9c", data_class="internal",
                        idempotency_key="k-1", time=1_700_000_000_000)
    got = session.get(ev.seq)
    assert got == ev
    assert got.envelope == {"source": "pytest", "causal_parent": 0,
                            "workspace_revision": "git:7d31a9c", "data_class": "internal",
                            "idempotency_key": "k-1"}
    row = write_conn(store).execute(
        "SELECT type, time_ms, source, causal_parent, workspace_revision, data_class, "
        "idempotency_key FROM event_index WHERE sid = ? AND seq = ?", (session._sid, ev.seq)
    ).fetchall()[0]
    assert row == ("tool/note", 1_700_000_000_000, "pytest", 0, "git:7d31a9c", "internal",
                   "k-1")


def test_store_unknown_types_are_carried(session):
    session.append("vendor/custom-thing", {"anything": [1, 2.5, None, True]})
    assert session.get(0).data == {"anything": [1, 2.5, None, True]}


def test_store_batch_is_all_or_nothing(session):
    session.append("user/message", {"content": "first"})
    with pytest.raises(errors.SerializationError):
        session.append_batch([("user/message", {"content": "ok"}),
                              ("user/message", {"content": math.nan})])
    with pytest.raises(errors.ValidationError):
        session.append_batch([("user/message", {"content": "ok"}),
                              ("tool/result", {"call_id": "nope", "output": ""})])
    assert session.last_seq == 0


# --- idempotency -------------------------------------------------------------------

def test_store_idempotent_retry_returns_original(session):
    a = session.append("user/message", {"content": "once"}, idempotency_key="req-1")
    b = session.append("user/message", {"content": "once"}, idempotency_key="req-1")
    # the retry is recorded (duplicate requests are logged, not dropped)
    assert a.seq == b.seq == 0 and session.last_seq == 1
    assert session.get(1).type == "request/retry" and session.get(1).data["original"] == 0
    with pytest.raises(errors.IdempotencyConflictError):
        session.append("user/message", {"content": "different"}, idempotency_key="req-1")
    batch = [("user/message", {"content": "x"}, {"idempotency_key": "b1"}),
             ("user/message", {"content": "y"}, {"idempotency_key": "b2"})]
    first = session.append_batch(batch)
    again = session.append_batch(batch)
    assert [e.seq for e in first] == [e.seq for e in again] == [2, 3]
    assert session.last_seq == 4 and session.get(4).type == "request/retry"
    with pytest.raises(errors.IdempotencyConflictError):
        session.append_batch([("user/message", {"content": "a"}, {"idempotency_key": "d"}),
                              ("user/message", {"content": "b"}, {"idempotency_key": "d"})])


RETRY_CHILD = """
import sys, trajlog
with trajlog.open(sys.argv[1]) as st:
    s = st.session(sys.argv[2])
    ev = s.append("user/message", {"content": "once"}, idempotency_key="across")
    print(ev.seq)
"""


def test_store_idempotency_across_processes(tmp_path):
    path = str(tmp_path / "i.db")
    with trajlog.open(path) as st:
        s = st.create_session(cwd="/r")
        s.append("user/message", {"content": "before"})
        sid = s.id
    seqs = [subprocess.run([sys.executable, "-c", RETRY_CHILD, path, sid], check=True,
                           capture_output=True, text=True).stdout.strip() for _ in range(3)]
    assert seqs == ["1", "1", "1"]
    with trajlog.open(path) as st:
        s = st.session(sid)
        assert s.last_seq == 3     # the event, then one request/retry per retry
        assert [e.data["attempt"] for e in s.events(2)] == [2, 3]


# --- validation of the known types ---------------------------------------------

@pytest.mark.parametrize("events, message", [
    ([("tool/call", {"call_id": "c9", "name": "read"})], "never requested"),
    ([("assistant/message", {"tool_calls": [{"id": "c1", "name": "read"}]}),
      ("tool/call", {"call_id": "c1", "name": "read"}),
      ("tool/call", {"call_id": "c1", "name": "read"})], "already started"),
    ([("tool/result", {"call_id": "c1", "output": ""})], "unknown"),
    ([("assistant/message", {"tool_calls": [{"id": "c1", "name": "read"}]}),
      ("tool/result", {"call_id": "c1", "output": ""})], "never started"),
    ([("assistant/message", {"tool_calls": [{"id": "c1", "name": "read"}]}),
      ("tool/call", {"call_id": "c1", "name": "read"}),
      ("tool/result", {"call_id": "c1", "output": ""}),
      ("tool/result", {"call_id": "c1", "output": ""})], "already finished"),
    ([("assistant/message", {"tool_calls": [{"id": "c1", "name": "a"}]}),
      ("assistant/message", {"tool_calls": [{"id": "c1", "name": "b"}]})], "already used"),
    ([("assistant/message", {"tool_calls": [{"id": "c1", "name": "a"},
                                            {"id": "c1", "name": "b"}]})], "twice"),
    ([("tool/call", {"name": "read"})], "call_id"),
    ([("user/message", {"text": "no content"})], "content"),
    ([("tool/result", {"call_id": "c1", "is_error": "yes"})], "is_error"),
    ([("turn/end", {"interrupted": "no"})], "interrupted"),
    ([("assistant/message", {"tool_calls": "c1"})], "tool_calls"),
])
def test_store_validation_refuses_and_writes_nothing(session, events, message):
    *ok, bad = events
    for type_, data in ok:
        session.append(type_, data)
    before = session.last_seq
    with pytest.raises(errors.ValidationError, match=message):
        session.append(*bad)
    assert session.last_seq == before


def test_store_parallel_tool_calls_in_one_step(session):
    calls = [{"id": f"p{i}", "name": "grep", "arguments": {}} for i in range(3)]
    session.append("assistant/message", {"content": "", "tool_calls": calls})
    for c in calls:
        session.append("tool/call", {"call_id": c["id"], "name": "grep"})
    for c in reversed(calls):
        session.append("tool/result", {"call_id": c["id"], "output": "hit", "is_error": False})
    assert session.last_seq == 6


# --- bad input: a typed error and nothing written --------------------------------

class Opaque:
    pass


@pytest.mark.parametrize("type_, data, kwargs, exc", [
    ("user/message", {"content": Opaque()}, {}, errors.SerializationError),
    ("user/message", {"content": b"bytes"}, {}, errors.SerializationError),
    ("user/message", {"content": {1, 2}}, {}, errors.SerializationError),
    ("user/message", {1: "int key"}, {}, errors.SerializationError),
    ("user/message", {"content": math.nan}, {}, errors.SerializationError),
    ("user/message", {"content": math.inf}, {}, errors.SerializationError),
    ("user/message", {"content": -math.inf}, {}, errors.SerializationError),
    ("user/message", {"content": "lone \ud800 surrogate"}, {}, errors.SerializationError),
    ("user/message", {"content": 2**64}, {}, errors.SerializationError),
    ("user/message", {"content": "x" * (16 * 1024 * 1024 + 1)}, {},
     errors.PayloadTooLargeError),
    (42, {}, {}, TypeError),
    ("Not A Type", {}, {}, errors.ValidationError),
    ("user/message", "not a dict", {}, errors.ValidationError),
    ("user/message", {"content": "x"}, {"time": -1}, errors.InvalidArgumentError),
    ("user/message", {"content": "x"}, {"time": 1.5}, errors.InvalidArgumentError),
    ("user/message", {"content": "x"}, {"source": 7}, TypeError),
    ("user/message", {"content": "x"}, {"data_class": "secret"}, errors.ValidationError),
    ("user/message", {"content": "x"}, {"causal_parent": -2}, errors.ValidationError),
    ("user/message", {"content": "x"}, {"idempotency_key": ""}, errors.ValidationError),
])
def test_store_bad_input_is_typed_and_writes_nothing(session, type_, data, kwargs, exc):
    session.append("user/message", {"content": "before"})
    with pytest.raises(exc):
        session.append(type_, data, **kwargs)
    assert session.last_seq == 0
    assert [e.data["content"] for e in session.events()] == ["before"]


def test_store_deep_nesting_is_refused(session):
    data: dict = {}
    node = data
    for _ in range(70):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(errors.SerializationError, match="nesting"):
        session.append("user/message", {"content": "x", "deep": data})


def test_store_closed_store_and_unknown_session(tmp_path):
    st = trajlog.open(str(tmp_path / "c.db"))
    s = st.create_session(cwd="/r")
    with pytest.raises(errors.SessionNotFoundError):
        st.session("00000000-0000-0000-0000-000000000000")
    with pytest.raises(TypeError):
        st.session(12)  # type: ignore[arg-type]
    st.close()
    st.close()  # idempotent
    with pytest.raises(errors.StoreClosedError):
        s.append("user/message", {"content": "late"})
    with pytest.raises(errors.StoreClosedError):
        st.create_session(cwd="/r")
    with pytest.raises(errors.StoreClosedError):
        list(s.events())


def test_store_wrong_argument_types(store, tmp_path):
    with pytest.raises(TypeError):
        trajlog.open(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.create_session(cwd=None)  # type: ignore[arg-type]
    with pytest.raises(errors.SerializationError):
        store.create_session(cwd="/r", metadata={"x": math.nan})
    s = store.create_session(cwd="/r")
    with pytest.raises(TypeError):
        s.append_batch(["user/message"])
    with pytest.raises(TypeError):
        s.append("user/message", {"content": "x"}, colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        s.get("1")  # type: ignore[arg-type]
    assert s.last_seq == -1


# --- verify ----------------------------------------------------------------------

def test_store_verify_clean(session):
    record_turn(session)
    report = session.verify()
    assert report.ok and report.events == 8 and report.last_seq == 7


@pytest.mark.sqlite_only(reason=SQLITE_BYTES)
def test_store_verify_finds_a_byte_edited_in_the_closed_file(tmp_path):
    path = str(tmp_path / "edit.db")
    with trajlog.open(path) as st:
        s = st.create_session(cwd="/repo")
        for i in range(40):
            s.append("user/message", {"content": f"message number {i:04d} MARKER"})
        sid = s.id
    assert not os.path.exists(path + "-wal") or os.path.getsize(path + "-wal") == 0
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    # SQLite leaves stale copies of moved cells in unused page space: edit every
    # copy, so the live one is certainly among them.
    target = raw.find(b"message number 0023 MARKER")
    assert target > 0
    while target >= 0:
        raw[target + 15] ^= 0x01   # "0023" -> "1023": still valid text, wrong bytes
        target = raw.find(b"message number 0023 MARKER", target + 1)
    with open(path, "wb") as f:
        f.write(raw)
    with trajlog.open(path) as st:
        s = st.session(sid)
        report = s.verify()
        assert not report.ok
        assert report.scan.cursor.next_seq == 23
        assert report.scan.status == Status.BAD_PAYLOAD
        assert report.scan.valid_len > 0
        with pytest.raises(errors.ChecksumError) as info:
            report.scan.raise_for(s.id)
        assert info.value.seq == 23 and info.value.session == sid
        with pytest.raises(errors.ChecksumError):
            s.get(23)
        assert s.get(22).data["content"].startswith("message number 0022")
