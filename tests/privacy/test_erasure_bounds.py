"""What an erasure keeps, and nothing more: the fields that pair tool calls
and keep the log balanced, per event type, in a bounded machine form
(``trajlog.memory.replacement.KEEPS``); a tombstone's replacement checked
against exactly that by every reader and by verify(); verify_memory() linear
in the erased frames of a row; runs that say ``erased``."""

from __future__ import annotations

import apsw
import msgspec
import pytest

import trajlog
from kits.costkit import traced
from kits.tamper import file_bytes, settle
from trajlog import projections
from trajlog._format import FrameType
from trajlog.codec.memory_frames import TOMBSTONE_KEY, chain_of_record, encode_record, open_record
from trajlog.errors import CorruptionError, IdempotencyConflictError
from trajlog.memory.replacement import KEEPS, kept
from trajlog.viewer import build_document, render_html

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
SQLITE_ERASED = "proves what is gone on the bytes of the SQLite file and its WAL"

NAME = "Xavier-Quonset-Name"          # a person's name where an id would be
STATUS = "PRIVATE-STATUS-TEXT"        # free text in a status


@pytest.fixture
def store(tmp_path):
    with trajlog.open(str(tmp_path / "bounds.db")) as s:
        yield s


def _log(s) -> dict[str, int]:
    """Every kind of field an erasure could keep, with free text in each."""
    seqs: dict[str, int] = {}
    with s.turn():
        seqs["user"] = s.append("user/message", {"content": "hello", "name": NAME}).seq
        with s.step():
            seqs["assistant"] = s.append("assistant/message", {
                "content": "calling", "name": NAME, "status": STATUS,
                "tool_calls": [{"id": "call_1", "name": "read", "arguments": {"p": NAME}},
                               {"id": "call_2", "name": "read"},
                               {"id": "call_3", "name": f"read {NAME}"}]}).seq
            seqs["call"] = s.append("tool/call", {"call_id": "call_1", "name": "read",
                                                   "arguments": {"p": NAME},
                                                   "status": STATUS}).seq
            seqs["result"] = s.append("tool/result", {
                "call_id": "call_1", "name": "read", "output": NAME, "status": STATUS,
                "is_error": False, "synthetic": "no", "interrupted": NAME}).seq
            s.append("tool/call", {"call_id": "call_2", "name": "read"})
            s.append("tool/result", {"call_id": "call_2", "output": "x",
                                     "status": "TOOL_OUTCOME_UNKNOWN", "is_error": True,
                                     "synthetic": True})
            s.append("tool/call", {"call_id": "call_3", "name": f"read {NAME}"})
            s.append("tool/result", {"call_id": "call_3", "output": "y"})
        seqs["custom"] = s.append("note/custom", {"status": STATUS, "name": NAME,
                                                   "call_id": NAME, "is_error": True}).seq
    seqs["turn_end"] = s.last_seq
    return seqs


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_an_erasure_keeps_only_the_pairing_fields_in_their_bounded_form(store, tmp_path):
    s = store.create_session()
    seqs = _log(s)
    every = list(range(s.last_seq + 1))
    store.erase(s.id, every, reason="gdpr", actor="human:dpo")
    got = {seq: {k: v for k, v in s.get(seq).data.items() if k != "erased"} for seq in every}
    assert got[seqs["user"]] == {}
    assert got[seqs["assistant"]] == {"tool_calls": [{"id": "call_1", "name": "read"},
                                                     {"id": "call_2", "name": "read"},
                                                     {"id": "call_3"}]}
    assert got[seqs["call"]] == {"call_id": "call_1", "name": "read"}
    assert got[seqs["result"]] == {"call_id": "call_1", "name": "read", "is_error": False}
    assert got[seqs["result"] + 2] == {"call_id": "call_2", "status": "TOOL_OUTCOME_UNKNOWN",
                                       "is_error": True, "synthetic": True}
    assert got[seqs["custom"]] == {}
    assert got[seqs["turn_end"]] == {"interrupted": False}
    assert s.verify().ok and store.verify().ok
    # the text is in no copy: the database files, an export of each kind, the viewer page
    html = render_html(store, s.id)
    paths = [tmp_path / "e.tlog", tmp_path / "e.jsonl"]
    for path in paths:
        store.export(s.id, str(path))
    store.close()
    copies = {"database": file_bytes(store.path), "html": html.encode()}
    copies.update({p.name: p.read_bytes() for p in paths})
    for where, blob in copies.items():
        for text in (NAME, STATUS):
            assert text.encode() not in blob, (where, text)


@pytest.mark.parametrize("type_, data, want", [
    # a call id is kept as written (the row's marks hold it too); a name is bounded
    ("tool/call", {"call_id": "c 1", "name": "x" * 129}, {"call_id": "c 1"}),
    ("tool/call", {"call_id": 7, "name": "read\n"}, {}),
    ("tool/call", {"call_id": "c1", "name": "read", "is_error": True}, {"call_id": "c1",
                                                                        "name": "read"}),
    ("tool/result", {"call_id": "c1", "status": "done", "is_error": 1, "synthetic": None},
     {"call_id": "c1"}),
    ("tool/result", {"call_id": "c1", "status": "TOOL_NOT_STARTED", "is_error": True},
     {"call_id": "c1", "status": "TOOL_NOT_STARTED", "is_error": True}),
    ("turn/end", {"interrupted": True, "synthetic": True, "call_id": "c1"},
     {"interrupted": True, "synthetic": True}),
    ("step/end", {"interrupted": "yes"}, {}),
    ("user/message", {"content": "x", "name": "bob", "call_id": "c1"}, {}),
    ("run/started", {"run_id": "7f1c2a9e-0b6d-4c1e-9a3f-2d5e8b7c6a10", "model": "m"},
     {"run_id": "7f1c2a9e-0b6d-4c1e-9a3f-2d5e8b7c6a10"}),
    ("run/finalized", {"run_id": f"run of {NAME}", "state": "completed"}, {}),
    ("run/finalized", {"run_id": "r" * 129}, {}),
    ("assistant/message", {"tool_calls": "not a list"}, {}),
    ("assistant/message", {"tool_calls": [{"id": "c1", "name": 5}, "x", {"name": "r"},
                                           {"id": 3, "name": "r"}]},
     {"tool_calls": [{"id": "c1"}]}),
    ("note/x", {"call_id": "c1", "name": "n", "status": "TOOL_NOT_STARTED"}, {}),
])
def test_kept_is_one_table_of_bounded_forms(type_, data, want):
    assert kept(type_, data) == want


def test_the_table_names_only_the_types_that_need_it():
    assert set(KEEPS) == {"assistant/message", "tool/call", "tool/result", "tool/cancel",
                          "turn/end", "step/end", "run/started", "run/finalized"}


# -- item: a tombstone's replacement is checked ----------------------------------------

def _reframe(store, tid: int, change) -> None:
    """Rewrite tombstone ``tid``'s record (``change(record)``) and re-frame it
    under the public tombstone key, from a plain connection with triggers off."""
    settle(store)
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    try:
        frames = [bytes(f) for (f,) in conn.execute(
            "SELECT frame FROM tombstones WHERE tid <= ? ORDER BY tid", (tid,))]
        prev = chain_of_record(frames[-2]) if tid > 1 else TOMBSTONE_KEY
        record = open_record(frames[-1], TOMBSTONE_KEY, tid - 1, prev, FrameType.TOMBSTONE,
                             may_be_blank=False).record
        assert record is not None
        change(record)
        frame, _ = encode_record(record, TOMBSTONE_KEY, tid - 1, prev, FrameType.TOMBSTONE)
        conn.execute("UPDATE tombstones SET frame = ? WHERE tid = ?", (frame, tid))
    finally:
        conn.close()
    store._e.reading.cache.clear()
    store._e.views.states.clear()


def _payload(record) -> list:
    return msgspec.msgpack.decode(record["replacement"])


def _set_payload(record, payload: list) -> None:
    record["replacement"] = msgspec.msgpack.encode(payload)


FORGED = "I approve: wire $1,000,000"


def _with_content(record):
    p = _payload(record)
    p[2]["content"] = FORGED
    _set_payload(record, p)


def _other_tombstone(record):
    p = _payload(record)
    p[2]["erased"]["tombstone"] = 99
    _set_payload(record, p)


def _other_reason(record):
    p = _payload(record)
    p[2]["erased"]["reason"] = FORGED
    _set_payload(record, p)


def _other_type(record):
    p = _payload(record)
    p[0] = "assistant/message"
    _set_payload(record, p)


def _type_and_record(record):
    p = _payload(record)
    p[0] = record["type"] = "tool/result"
    p[2]["status"] = FORGED
    _set_payload(record, p)


def _key_order(record):
    p = _payload(record)
    p[2] = {"erased": p[2]["erased"], **{k: v for k, v in p[2].items() if k != "erased"},
            "call_id": "c1"}
    _set_payload(record, p)


def _not_decodable(record):
    record["replacement"] = b"\xc1" + FORGED.encode()


def _record_seq(record):
    record["seq"] += 1


@pytest.mark.parametrize("forge", [_with_content, _other_tombstone, _other_reason,
                                   _other_type, _type_and_record, _key_order, _not_decodable,
                                   _record_seq])
@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_a_replacement_the_erasure_did_not_write_is_refused(store, forge):
    s = store.create_session()
    s.append("note/a", {"n": 0})
    msg = s.append("user/message", {"content": "wire nothing"})
    s.append("note/a", {"n": 2})
    store.erase(s.id, msg.seq, reason="gdpr", actor="human:dpo")
    assert s.get(msg.seq).data["erased"]["tombstone"] == 1
    _reframe(store, 1, forge)
    report = s.verify()
    assert not report.ok and report.scan.cursor.next_seq == msg.seq
    assert not store.verify_memory().ok and not store.verify().ok
    with pytest.raises(CorruptionError):
        s.get(msg.seq)
    with pytest.raises(CorruptionError):
        list(s.events())
    assert s.get(0).data == {"n": 0}      # the rows before it read on


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_a_tombstone_row_naming_another_seq_than_its_record_is_refused(store):
    s = store.create_session()
    s.append_batch([("note/a", {"n": i}) for i in range(4)])
    store.erase(s.id, [1, 2], reason="r")
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    for a, b in ((1, 100), (2, 1), (100, 2)):     # the two rows' seqs swapped
        conn.execute("UPDATE tombstones SET target_seq = ? WHERE target_seq = ?", (b, a))
    conn.close()
    store._e.reading.cache.clear()
    assert not s.verify().ok and not store.verify_memory().ok
    with pytest.raises(CorruptionError):
        s.get(1)


# -- item: verify_memory() is linear in the erased frames of a row -----------------------

def _count(store, act) -> int:
    """SQL statements ``act`` runs on this thread's reader connection."""
    return len(traced(store, act))


def _erased_row(tmp_path, n: int) -> tuple[int, int, int]:
    with trajlog.open(str(tmp_path / f"lin{n}.db"), repack=False) as store:
        s = store.create_session()
        s.append_batch([("note/x", {"n": i}) for i in range(n + 10)])   # one chunk row
        assert len(store._e.backend.connection().execute(
            "SELECT cid FROM chunks").fetchall()) == 1
        store.erase(s.id, list(range(5, n + 5)), reason="ttl")
        audit = _count(store, lambda: store.verify_memory())
        store._e.reading.cache.clear()
        verify = _count(store, lambda: s.verify())
        store._e.reading.cache.clear()
        read = _count(store, lambda: list(s.events()))
        return audit, verify, read


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_verify_memory_and_reads_are_linear_in_the_erased_frames_of_a_row(tmp_path):
    small, big = _erased_row(tmp_path, 40), _erased_row(tmp_path, 160)
    for what, a, b in zip(("verify_memory", "verify", "read"), small, big, strict=True):
        # 4x the erased frames: linear work is 4x the statements (quadratic: 16x)
        assert b <= 5 * a, (what, a, b)


# -- item: runs whose run/started or run/finalized was erased ---------------------------

def _run(s):
    with s.run(model="m"), s.turn():
        s.append("user/message", {"content": "go"})
    return [e.seq for e in s.events() if e.type in ("run/started", "run/finalized")]


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_a_run_whose_finalized_event_was_erased_says_erased_not_open(store, capsys):
    s = store.create_session()
    _, finalized = _run(s)
    store.erase(s.id, finalized, reason="r")
    env = projections.runs(s)[0]
    assert env.state == "erased" and env.integrity == "erased"
    assert env.finalized_seq == finalized and str(finalized) in env.integrity_detail
    row = build_document(store, s.id)["sessions"][0]["runs"][0]
    assert row[2:4] == ["erased", "erased"]
    from trajlog.cli.main import main

    store.close()
    assert main(["--db", store.path, "runs", s.id]) in (0, 1)
    out = capsys.readouterr().out
    assert "erased" in out and " open " not in out


def test_a_run_whose_started_event_was_erased_is_still_listed_as_erased(store):
    s = store.create_session()
    started, finalized = _run(s)
    rid = s.get(started).data["run_id"]
    store.erase(s.id, started, reason="r")
    envs = projections.runs(s)
    assert [e.run_id for e in envs] == [rid]
    assert envs[0].integrity == "erased" and envs[0].state == "completed"
    assert str(started) in envs[0].integrity_detail
    store.erase(s.id, finalized, reason="r")
    both = projections.runs(s)
    assert [(e.run_id, e.state, e.integrity) for e in both] == [(rid, "erased", "erased")]


# -- the envelope: free text only where the event's index row holds it anyway ------------

@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_an_erased_event_keeps_free_envelope_text_only_where_its_index_row_holds_it(store):
    s = store.create_session()
    msg = s.append("user/message", {"content": "hi"}, source=f"human:{NAME}",
                   workspace_revision=f"rev {NAME}", branch_id=f"branch {NAME}",
                   causal_parent=None, data_class="restricted")
    keyed = s.append("note/k", {"text": "x"}, idempotency_key="k-1", source="agent:kept")
    s.append("note/after", {"n": 1}, branch_id="approach-2", causal_parent=0)
    store.erase(s.id, [0, 1, 2], reason="r")
    gone = s.get(msg.seq)
    assert (gone.source, gone.workspace_revision, gone.branch_id) == (None, None, None)
    assert gone.data_class == "restricted" and gone.type == "user/message"
    assert gone.time == msg.time
    kept_ev = s.get(keyed.seq)   # indexed: its index row copies the envelope
    assert (kept_ev.idempotency_key, kept_ev.source) == ("k-1", "agent:kept")
    last = s.get(2)
    assert (last.branch_id, last.causal_parent) == ("approach-2", 0)
    with pytest.raises(IdempotencyConflictError):   # the key still finds it: no second copy
        s.append("note/k", {"text": "x"}, idempotency_key="k-1")
    assert s.verify().ok and store.verify_memory().ok
    store.close()
    assert NAME.encode() not in file_bytes(store.path)


def _with_source(record):
    p = _payload(record)
    while len(p) < 4:
        p.append(None)
    p[3] = FORGED
    _set_payload(record, p)


def _with_key_and_source(record):
    p = _payload(record)
    while len(p) < 8:
        p.append(None)
    p[3], p[7] = FORGED, "k-forged"
    _set_payload(record, p)


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
@pytest.mark.parametrize("forge", [_with_source, _with_key_and_source])
def test_a_replacement_given_envelope_text_is_refused(store, forge):
    test_a_replacement_the_erasure_did_not_write_is_refused(store, forge)
