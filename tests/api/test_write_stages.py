"""The stages of an append (trajlog.api.write_stages), each fed a small input
alone: plain values where the stage needs nothing more, a real store's
transaction where it reads the log.  The end-to-end behaviour of an append
is tested elsewhere (test_store, test_retries, test_checks, ...); these tests
pin what each stage does by itself, so that a stage can be changed -- or a
new one added -- with its own test beside it."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from trajlog import errors
from trajlog._format import Cursor
from trajlog.api import write_stages as ws
from trajlog.api.logstate import LogState
from trajlog.api.writer import WriteEngine
from trajlog.codec.chunks import CAP, Chunk, ChunkCompressor
from trajlog.codec.records import encode_chunks, fresh_events
from trajlog.events import Event, encode_event
from trajlog.lifecycle import Tracker
from trajlog.redaction import PAUSED, RedactionPolicy, Redactor

SRC = Path(ws.__file__).resolve().parents[1]


def _row(type_: str, data: object = None, **envelope: object) -> ws.Row:
    return ws.remake(Event(type_, 1, {} if data is None else data, **envelope))


@pytest.fixture
def session(store):
    return store.create_session(cwd="/stages")


def _tx(store):
    return store._e.writer.transaction()


# -- the list itself -----------------------------------------------------------------

def test_apply_runs_the_stages_in_the_order_the_module_lists_them():
    """The module docstring is the walk of an append: every stage it names
    by function exists, and WriteEngine.apply calls them in that order."""
    listed = re.findall(r":func:`(\w+)`", ws.__doc__ or "")
    assert len(listed) >= 10
    for name in listed:
        assert callable(getattr(ws, name)), name
    body = inspect.getsource(WriteEngine.apply)
    called = [m.group(1) for m in re.finditer(r"\b(\w+)\(", body) if m.group(1) in listed]
    assert list(dict.fromkeys(called)) == listed


def test_the_write_side_imports_nothing_from_projections():
    """No write-side module borrows a rule from the projections (what the
    write path checks is declared below it, in the event-type registry)."""
    for name in ("writer.py", "write_stages.py", "logstate.py", "retries.py", "leases.py",
                 "checks.py"):
        tree = ast.parse((SRC / "api" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = "." * node.level + (node.module or "")
                assert "projections" not in mod, (name, mod)
            elif isinstance(node, ast.Import):
                assert not any("projections" in a.name for a in node.names), name


# -- rows ----------------------------------------------------------------------------

def test_remake_serializes_again_and_flags_what_is_checked_in_the_transaction():
    plain = _row("user/message", {"content": "hi"})
    assert plain.payload == encode_event(plain.event) and not plain.check
    assert _row("compaction/applied", {"op": "surface-replace"}).check
    assert _row("event/status", {"target": 0}).check
    assert _row("note/x", supersedes=0).check
    pause = (("email", "$.content"),)
    assert ws.remake(plain.event, pause).pause == pause


def test_turn_marker_is_the_last_turn_marker_of_the_rows():
    rows = [_row("turn/start"), _row("user/message", {"content": "x"}), _row("turn/end")]
    assert ws.turn_marker(rows) == "turn/end"
    assert ws.turn_marker(rows[:2]) == "turn/start"
    assert ws.turn_marker([_row("note/x")]) is None
    # one row (a single append's branch)
    assert [ws.turn_marker([r]) for r in rows] == ["turn/start", None, "turn/end"]


# -- 3. privacy ----------------------------------------------------------------------

def test_route_private_keeps_what_the_identitys_mode_stores(store):
    redactor = Redactor(RedactionPolicy(privacy={"acme": "metadata"}))
    private = store.create_session(cwd="/p", metadata={"tenant": "acme"})._ref
    public = store.create_session(cwd="/p", metadata={"tenant": "other"})._ref
    rows = [_row("user/message", {"content": "secret"})]
    assert ws.route_private(redactor, public, rows) is rows      # full: untouched
    (routed,) = ws.route_private(redactor, private, rows)
    assert routed.event.data["content"] == "" and routed.event.data["privacy"]["mode"] == \
        "metadata"
    assert routed.payload == encode_event(routed.event)


# -- 4. expected head ----------------------------------------------------------------

def test_check_expected_head_refuses_a_log_that_moved(session):
    ws.check_expected_head(session._ref, 4, 4)
    with pytest.raises(errors.LogMovedError, match="moved to seq 5; expected it at 4"):
        ws.check_expected_head(session._ref, 5, 4)


# -- 5. idempotent retry -------------------------------------------------------------

def test_keyed_lists_the_positions_of_the_keys():
    rows = [_row("note/a"), _row("note/b", idempotency_key="k1"),
            _row("note/c", idempotency_key="k2")]
    assert ws.keyed(rows) == [(1, "k1"), (2, "k2")]


def test_find_retry_returns_the_stored_originals_and_the_records_key(store, session):
    original = session.append("note/x", {"n": 1}, idempotency_key="k")
    reading = store._e.reading
    with _tx(store) as tx:
        found = ws.find_retry(reading, tx, session._ref,
                              [_row("note/x", {"n": 1}, idempotency_key="k")])
        assert found is not None
        (stored,), key = found
        assert stored.seq == original.seq and stored.data == {"n": 1} and key == "k"
        assert ws.find_retry(reading, tx, session._ref,
                             [_row("note/x", {"n": 1}, idempotency_key="new")]) is None
        assert ws.find_retry(reading, tx, session._ref, [_row("note/x", {"n": 1})]) is None
        with pytest.raises(errors.IdempotencyConflictError, match="mixes"):
            ws.find_retry(reading, tx, session._ref,
                          [_row("note/x", {"n": 1}, idempotency_key="k"),
                           _row("note/y", idempotency_key="fresh")])
        with pytest.raises(errors.IdempotencyConflictError, match="different event"):
            ws.find_retry(reading, tx, session._ref,
                          [_row("note/x", {"n": 2}, idempotency_key="k")])


# -- 6. redaction pause ----------------------------------------------------------------

def test_pauses_is_false_for_a_plain_append():
    rows = [_row("user/message", {"content": "hi"})]
    events = [r.event for r in rows]
    assert not ws.pauses(False, rows, events, private=True)
    assert ws.pauses(True, rows, events, private=False)
    assert ws.pauses(False, [_row(PAUSED)], [Event(PAUSED, 1, {})], private=False)
    found = [ws.remake(rows[0].event, (("email", "$.content"),))]
    assert ws.pauses(False, found, events, private=True)
    assert not ws.pauses(False, found, events, private=False)


def test_hold_pause_adds_the_pause_a_finding_calls_for_and_refuses_content_after(session):
    found = ws.remake(Event("user/message", 1, {"content": "x"}), (("email", "$.content"),))
    rows, paused = ws.hold_pause(session._ref, False, 7, [found])
    assert paused and [r.event.type for r in rows] == ["user/message", PAUSED]
    assert rows[1].event.data["events"] == [{"seq": 7, "findings": [["email", "$.content"]]}]
    with pytest.raises(errors.RedactionPausedError):
        ws.hold_pause(session._ref, True, 8, [_row("user/message", {"content": "y"})])
    rows, paused = ws.hold_pause(session._ref, True, 8, [_row("turn/end")])
    assert paused and len(rows) == 1


# -- 8. rules checked against the log --------------------------------------------------

def test_checked_is_true_when_a_row_needs_the_rules():
    assert not ws.checked([_row("note/x"), _row("user/message", {"content": "x"})])
    assert ws.checked([_row("note/x"), _row("event/status", {"target": 0})])
    # one row (a single append's branch)
    assert not ws.checked([_row("note/x")])
    assert ws.checked([_row("event/status", {"target": 0})])
    assert ws.checked([_row("note/x", supersedes=0)])


def test_check_supersedes_refuses_a_seq_that_is_not_earlier():
    ws.check_supersedes("s", [Event("note/x", 1, {}, supersedes=4)], 5)
    with pytest.raises(errors.ValidationError, match=r"seq 6 .* supersedes seq 6"):
        ws.check_supersedes("s", [Event("note/x", 1, {}), Event("note/y", 1, {}, supersedes=6)],
                            5)


def test_check_rules_refuses_what_the_log_does_not_allow(store, session):
    session.append("user/message", {"content": "a"})
    session.append("assistant/message", {"content": "", "tool_calls": [{"id": "c1",
                                                                          "name": "ls"}]})
    reading, ref = store._e.reading, session._ref
    with _tx(store) as tx:
        def rules(*events: Event) -> list[tuple[int, int]]:
            return ws.check_rules(reading, tx, ref, list(events), 2, [])

        with pytest.raises(errors.ValidationError, match="not an earlier event"):
            rules(Event("note/x", 1, {}, supersedes=2))
        with pytest.raises(errors.ValidationError, match="untrusted source"):
            rules(Event("event/status", 1, {"target": 0}, source="web:page"))
        with pytest.raises(errors.InvalidArgumentError, match="no event 5"):
            rules(Event("event/status", 1, {"target": 5}))
        with pytest.raises(errors.ValidationError, match="split tool calls"):
            rules(Event("compaction/applied", 1, {"op": "surface-replace", "from_seq": 0,
                                                  "to_seq": 1}))
        assert rules(Event("compaction/applied", 1, {"op": "surface-replace", "from_seq": 0,
                                                     "to_seq": 0})) == [(0, 0)]
        with pytest.raises(errors.ValidationError, match="partly overlaps"):
            ws.check_rules(reading, tx, ref, [Event("compaction/applied", 1, {
                "op": "surface-replace", "from_seq": 0, "to_seq": 0})], 2, [(0, 0), (0, 1)])


# -- 9. room -----------------------------------------------------------------------------

def test_check_room_refuses_what_the_log_cannot_hold(session):
    ws.check_room(session._ref, 8, 2, 9)
    with pytest.raises(errors.InvalidStateError, match="at most 10 events"):
        ws.check_room(session._ref, 8, 3, 9)


# -- 10. frames ----------------------------------------------------------------------------

def test_frame_chains_from_the_head_and_cuts_chunk_rows(session):
    ref, compressor = session._ref, ChunkCompressor()
    rows = [_row("note/x", {"n": i}) for i in range(3)]
    chunks, end = ws.frame(ref, rows, 5, 1234, compressor)
    assert (chunks[0].first_seq, chunks[-1].last_seq, end.next_seq) == (5, 7, 8)
    assert chunks[0].seed_chain == 1234 and end.chain == chunks[-1].last_chain
    # framing in two steps continues the same chain
    _, mid = ws.frame(ref, rows[:1], 5, 1234, compressor)
    _, end2 = ws.frame(ref, rows[1:], 6, mid.chain, compressor)
    assert (end2.next_seq, end2.chain) == (end.next_seq, end.chain)
    assert fresh_events([r.payload for r in rows], 5) == [
        Event("note/x", 1, {"n": i}, seq=5 + i) for i in range(3)]
    big = [_row("note/x", {"blob": "x" * (CAP // 2)}) for _ in range(3)]
    chunks, _ = ws.frame(ref, big, 0, ref.key, compressor)
    assert len(chunks) > 1


def test_frame_refuses_a_payload_the_json_rules_refuse_with_the_path(session):
    """Whatever made a row, the C core checks its bytes while it frames them;
    a refusal names where, as prepare's check would (nothing is framed)."""
    ref, compressor = session._ref, ChunkCompressor()
    bad = _row("note/x", {"a": [1, {"b": float("nan")}]})
    with pytest.raises(errors.SerializationError) as info:
        ws.frame(ref, [_row("note/x", {"n": 1}), bad], 5, 1234, compressor)
    assert info.value.path == "data.a[1].b" and "NaN" in str(info.value)
    with pytest.raises(errors.SerializationError, match="not a str"):
        ws.frame(ref, [_row("note/x", {7: "int key"})], 0, 1234, compressor)


# -- 11. index rows and marks ----------------------------------------------------------------

def test_index_entries_index_the_markers_and_list_the_requested_calls(session):
    events = [Event("turn/start", 1, {}), Event("note/x", 1, {}),
              Event("assistant/message", 1, {"tool_calls": [{"id": "c1", "name": "ls"}]})]
    chunks, _ = encode_chunks(session._ref.key, [encode_event(e) for e in events],
                              Cursor(0, 10, 0), ChunkCompressor())
    index, marks, calls = ws.index_entries(events, 10, chunks)
    assert [r.seq for r in index if r.type == "turn/start"] == [10]
    assert 11 not in [r.seq for r in index]            # an unindexed type
    assert list(calls) == [("c1", 12)] and len(marks) == len(chunks) == 1
    assert ws.index_entries([Event("note/x", 1, {})], 0, chunks[:1])[2] == ()


# -- 14. state, 15. repack accounting --------------------------------------------------------

def test_advance_moves_the_state_to_what_was_written():
    state = LogState(4, 99, tracker=Tracker())
    events = [Event("turn/start", 1, {})]
    plan = state.tracker.plan(events, 5, check=True)
    end = Cursor(0, 6, 1234)
    ws.advance(state, plan, [(0, 2)], end, True)
    assert (state.synced_seq, state.chain, state.paused) == (5, 1234, True)
    assert state.compactions == [(0, 2)] and state.tracker.turn_start == 5


def test_count_small_rows_counts_rows_a_repack_merges_and_notes_a_turns_end(session):
    state = LogState(-1, 0)
    events = [Event("turn/end", 1, {})]
    chunks, _ = encode_chunks(session._ref.key, [encode_event(e) for e in events],
                              Cursor(0, 0, 0), ChunkCompressor())
    plan = Tracker().plan([], 0, check=False)
    ws.count_small_rows(state, chunks, plan, events)
    assert state.small_rows == 1 and not state.turn_ended   # one row: nothing to merge
    ws.count_small_rows(state, chunks, plan, events)
    assert state.small_rows == 2 and state.turn_ended


def test_count_small_rows_counts_the_runs_raw_bytes_and_a_big_row_completes_it(session):
    """A run asks for a repack by its raw bytes (at the cap: full size), or
    when a big row ends it (it can grow no more)."""
    state = LogState(-1, 0)
    plan = Tracker().plan([], 0, check=False)
    small = [Event("note/x", 1, {"t": "x" * 100})]
    rows, _ = encode_chunks(session._ref.key, [encode_event(e) for e in small],
                            Cursor(0, 0, 0), ChunkCompressor())
    ws.count_small_rows(state, rows, plan, small)
    ws.count_small_rows(state, rows, plan, small)
    assert state.small_bytes == 2 * rows[0].raw_len < CAP
    big = Chunk(2, 1, CAP // 2, 0, 0, 0, 0, b"")
    ws.count_small_rows(state, [big], plan, small)
    assert state.small_bytes >= CAP and state.small_rows == 2


# -- 16. what the caller gets ----------------------------------------------------------------

def test_returned_hands_back_fresh_copies_or_the_originals():
    rows = [_row("note/x", {"n": [1]}), _row("note/y")]
    written = ws.with_seqs([r.event for r in rows], 3)
    assert [e.seq for e in written] == [3, 4]
    out = ws.returned(rows, written)
    assert out == written and out[0] is not written[0]
    assert out[0].data is not rows[0].event.data                 # the caller's data: not shared
    originals = [Event("note/x", 1, {"n": [1]}, seq=0), Event(PAUSED, 1, {}, seq=1)]
    assert ws.returned(rows[:1], originals) == originals[:1]    # (not a pause it added)


def test_returned_hands_back_copies_taken_when_queued_without_decoding():
    """A flat dict (str keys, immutable scalars) is copied when the rows are
    queued (``owned``), in the caller's thread: the event handed back holds
    that copy -- no second decode of the payload -- so it is what was
    serialized even if the caller changes its dict while the append commits.
    Other data is decoded afresh.  Fails if the copy is taken later or the
    payload decoded again."""
    rows = [_row("note/x", {"a": "b", "n": 1, "f": 0.5, "t": True, "z": None}),
            _row("note/y", {"n": [1]}), _row("note/z", {"k": ("t",)})]
    copies = ws.owned(rows)
    assert copies is not None and copies[1] is None and copies[2] is None
    assert copies[0] == rows[0].event.data and copies[0] is not rows[0].event.data
    rows[0].event.data["a"] = "changed"        # the caller's dict, changed after queueing
    written = ws.with_seqs([r.event for r in rows], 3)
    out = ws.returned(rows, written, copies)
    assert [e.seq for e in out] == [3, 4, 5]
    assert out[0].data is copies[0] and out[0].data["a"] == "b"   # the copy: no decode
    assert out[1].data == {"n": [1]} and out[1].data is not rows[1].event.data
    assert out[2].data == {"k": ["t"]}         # decoded: what is stored (a tuple is a list)
    assert ws.owned([_row("note/y", {"n": [1]})]) is None


def test_a_store_append_walks_the_stages(store):
    """The stages together, as the engine runs them: a turn with a call."""
    s = store.create_session(cwd="/walk")
    s.append("turn/start")
    s.append("assistant/message", {"content": "", "tool_calls": [{"id": "c", "name": "ls"}]})
    s.append("tool/call", {"call_id": "c", "name": "ls"})
    s.append("tool/result", {"call_id": "c", "output": "."})
    s.append("turn/end")
    assert [e.type for e in s.events()] == ["turn/start", "assistant/message", "tool/call",
                                           "tool/result", "turn/end"]
    assert s.verify().ok
