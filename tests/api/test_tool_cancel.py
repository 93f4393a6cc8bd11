"""``tool/cancel {call_id, reason?}``: a host gives up a tool call it requested
or started.  One entry in ``trajlog.event_types`` makes it a known type; these
tests show what that entry means everywhere: the append and its refusals,
recovery, each view, the index (a fork's cut, a reopened store), erasure and
redaction.  (Both kernels: the suite runs under TRAJLOG_BACKEND=c and =python.)"""

from __future__ import annotations

import re

import pytest

import trajlog
from trajlog import errors
from trajlog.event_types import TOOL_CANCELLED, describe
from trajlog.projections import chat, model_history, status, trajectory
from trajlog.projections.context import build_context
from trajlog.redaction import PatternScanner, RedactionPolicy, Redactor, Rule

CALL = "toolu_01A09q90qw90lq917835lq9"     # a provider's call id


def _requested(s, *ids: str) -> None:
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": i, "name": "bash", "arguments": {"cmd": "make"}} for i in ids]})


def _open_turn(store):
    s = store.create_session()
    s.append("turn/start", {})
    s.append("user/message", {"content": "build it"})
    s.append("step/start", {})
    return s


# -- the append ------------------------------------------------------------------------

def test_a_cancel_closes_a_started_or_a_requested_call(store):
    s = _open_turn(store)
    _requested(s, "a", "b")
    s.append("tool/call", {"call_id": "a", "name": "bash"})
    ev = s.append("tool/cancel", {"call_id": "a", "reason": "user pressed stop"})
    assert ev.type == "tool/cancel" and ev.data["call_id"] == "a"
    s.append("tool/cancel", {"call_id": "b"})          # requested, never started
    st = status(s)
    assert st.tools_running == [] and st.tools_requested == []
    s.append("step/end", {})
    s.append("turn/end", {})
    _, report = s.inspect()
    assert report.outcome == "balanced"


@pytest.mark.parametrize(("late", "data", "why"), [
    ("tool/result", {"call_id": "a", "output": "done"}, "tool/result 'a': the call is "
                                                         "already finished"),
    ("tool/cancel", {"call_id": "a"}, "tool/cancel 'a': the call is already finished"),
    ("tool/call", {"call_id": "a", "name": "bash"}, "tool/call 'a': the call was "
                                                    "already started"),
])
def test_after_a_cancel_the_call_takes_nothing_more(store, late, data, why):
    """A late result is refused like a second result: the model was told the
    call was cancelled, and a log must not answer one call twice."""
    s = _open_turn(store)
    _requested(s, "a")
    s.append("tool/call", {"call_id": "a", "name": "bash"})
    s.append("tool/cancel", {"call_id": "a"})
    with pytest.raises(errors.ValidationError) as info:
        s.append(late, data)
    assert why in str(info.value)
    assert s.last_seq == 5


def test_a_late_result_is_refused_after_a_reopen(tmp_path):
    """The write path's state after a reopen comes from the index marks: the
    cancel is found there as the call's closer, without reading the log."""
    path = str(tmp_path / "s.db")
    with trajlog.open(path) as store:
        s = _open_turn(store)
        _requested(s, "a")
        s.append("tool/call", {"call_id": "a", "name": "bash"})
        s.append("tool/cancel", {"call_id": "a"})
        sid = s.id
    with trajlog.open(path) as store:
        s = store.session(sid)
        with pytest.raises(errors.ValidationError, match="already finished"):
            s.append("tool/result", {"call_id": "a", "output": "late"})
        with pytest.raises(errors.ValidationError, match="already used"):
            _requested(s, "a")


@pytest.mark.parametrize(("data", "why"), [
    ({"call_id": "x"}, "unknown"),
    ({}, "needs a 'call_id' field"),
    ({"call_id": 3}, "field 'call_id' must be str"),
    ({"call_id": "a", "reason": 3}, "field 'reason' must be str"),
    ("stop", "data must be a dict"),
])
def test_a_malformed_or_unknown_cancel_is_refused(store, data, why):
    s = _open_turn(store)
    _requested(s, "a")
    with pytest.raises(errors.ValidationError, match=why):
        s.append("tool/cancel", data)


def test_a_cancel_passes_a_redaction_pause(tmp_path):
    """While a hash finding holds the session, closers may still be appended:
    a cancel is one (a tool result, content, is not)."""
    store = trajlog.open(str(tmp_path / "p.db"), repack=False)
    try:
        s = _open_turn(store)
        _requested(s, "a")
        s.append("tool/call", {"call_id": "a", "name": "bash"})
        s.append("redaction/paused", {"reason": "test"})
        with pytest.raises(errors.RedactionPausedError):
            s.append("tool/result", {"call_id": "a", "output": "x"})
        assert s.append("tool/cancel", {"call_id": "a", "reason": "paused"}).seq == 6
    finally:
        store.close()


# -- recovery ------------------------------------------------------------------------

def _crashed(path: str) -> str:
    with trajlog.open(path) as store:
        s = _open_turn(store)
        _requested(s, "done", "gone", "open")
        s.append("tool/call", {"call_id": "done", "name": "bash"})
        s.append("tool/result", {"call_id": "done", "output": "ok"})
        s.append("tool/call", {"call_id": "gone", "name": "bash"})
        s.append("tool/cancel", {"call_id": "gone", "reason": "timeout"})
        s.append("tool/call", {"call_id": "open", "name": "bash"})
        return s.id              # the store closes with the turn, step and "open" open


def test_recovery_adds_no_closer_for_a_cancelled_call(tmp_path):
    path = str(tmp_path / "c.db")
    sid = _crashed(path)
    with trajlog.open(path) as store:
        _, report = store.session(sid).inspect()
        assert report.outcome == "repair"
        assert [(c.type, c.data.get("call_id"), c.data.get("status"))
                for c in report.closers] == [
            ("tool/result", "open", "TOOL_OUTCOME_UNKNOWN"),   # the usual closer
            ("step/end", None, None), ("turn/end", None, None)]
        s = store.load(sid)
        assert [e.type for e in s.tail(3)] == ["tool/result", "step/end", "turn/end"]
        assert s.inspect()[1].outcome == "balanced"


# -- the views -----------------------------------------------------------------------

def _cancelled_session(store):
    s = _open_turn(store)
    _requested(s, "a")
    s.append("tool/call", {"call_id": "a", "name": "bash"}, time=1000)
    s.append("tool/cancel", {"call_id": "a", "reason": "user pressed stop"}, time=1500)
    return s


def test_model_history_answers_the_cancelled_call(store):
    """Providers require every tool call to be answered: the model is told."""
    s = _cancelled_session(store)
    tool = model_history(s)[-1]
    assert (tool.role, tool.tool_call_id, tool.is_error, tool.status) == (
        "tool", "a", True, TOOL_CANCELLED)
    assert tool.content == "The host cancelled this tool call: user pressed stop"
    assert [m.role for m in model_history(s)] == ["user", "assistant", "tool"]


def test_model_history_without_a_reason(store):
    s = _open_turn(store)
    _requested(s, "a")
    s.append("tool/cancel", {"call_id": "a"})
    assert model_history(s)[-1].content == "The host cancelled this tool call."


def test_chat_shows_a_cancelled_tool_card(store):
    s = _cancelled_session(store)
    card = [n for n in chat(s) if n.kind == "tool"][-1]
    assert (card.call_id, card.status, card.output) == ("a", "cancelled", "user pressed stop")


def test_trajectory_ends_the_span_cancelled(store):
    s = _cancelled_session(store)
    span = trajectory(s)[-1].steps[-1].tools[-1]
    assert (span.call_id, span.status, span.duration_ms, span.result_summary) == (
        "a", "cancelled", 500, "user pressed stop")


def test_the_context_keeps_a_cancel_as_it_keeps_tool_results(store):
    s = store.create_session(metadata={"branch": "main"})
    prov = {"workspace_revision": "git:7d31a9c", "data_class": "internal"}
    _requested(s, "a", "b")
    s.append("tool/call", {"call_id": "a", "name": "bash"}, source="host")
    s.append("tool/call", {"call_id": "b", "name": "bash"}, source="host")
    res = s.append("tool/result", {"call_id": "a", "name": "bash", "output": "ok"},
                   source="bash", **prov)
    cancel = s.append("tool/cancel", {"call_id": "b", "reason": "too slow"}, source="host",
                      **prov)
    build = build_context(s, record=False)
    chosen = {i.seq: i for i in build.selected}
    assert chosen[cancel.seq].category == chosen[res.seq].category == "tool.result.active"
    assert chosen[cancel.seq].role == "tool"
    assert "b (cancelled): too slow" in chosen[cancel.seq].text


# -- the index: a fork's cut ---------------------------------------------------------

def test_a_fork_after_the_cancel_knows_the_call_is_closed(store):
    s = _cancelled_session(store)
    s.append("step/end", {})
    s.append("turn/end", {})
    child = s.fork(s.last_seq)
    with pytest.raises(errors.ValidationError, match="already finished"):
        child.append("tool/result", {"call_id": "a", "output": "late"})
    assert child.inspect()[1].outcome == "balanced"
    assert status(child).tools_running == []
    child.append("turn/start", {})
    with pytest.raises(errors.ValidationError, match="already used"):
        _requested(child, "a")


def test_the_cancel_is_marked_as_the_calls_closer(store):
    """verify() recomputes the marks from the frames and compares."""
    s = _cancelled_session(store)
    assert s.verify().ok
    assert describe("tool/cancel").index == describe("tool/result").index == "mark:closed"


# -- erasure and redaction -------------------------------------------------------------

def test_an_erased_cancel_keeps_its_call_id(store):
    s = _cancelled_session(store)
    seq = s.last_seq
    store.erase(s.id, seq, reason="privacy request")
    ev = s.get(seq)
    assert ev.type == "tool/cancel" and set(ev.data) == {"call_id", "erased"}
    assert ev.data["call_id"] == "a"
    assert model_history(s)[-1].tool_call_id == "a"       # still answered
    with pytest.raises(errors.ValidationError, match="already finished"):
        s.append("tool/result", {"call_id": "a", "output": "late"})


def test_a_cancels_call_id_is_a_machine_field():
    """A scanner that flags provider-style ids leaves the cancel's call_id
    (it pairs the call) and still finds the same text in its reason."""
    flag = PatternScanner([Rule("idish", re.compile(r"\btoolu_[A-Za-z0-9]{20,}\b"))])
    red = Redactor(RedactionPolicy(scanners=(flag,)))
    data = {"call_id": CALL, "reason": f"stuck on {CALL}"}
    out = red.redact("tool/cancel", data, None).data
    assert out["call_id"] == CALL and CALL not in out["reason"]
    assert red.redact("note/x", {"call_id": CALL}, None).data["call_id"] != CALL
