"""Compaction and status checks run inside the write transaction, under the
same lock as the append: two writers cannot both pass a check only one may
pass."""

from __future__ import annotations

import threading
import time

import pytest

from trajlog import errors, projections


def _write_lock(store) -> threading.Lock:
    """The lock that serializes the store's writes."""
    return store._e.backend._lock


def agent_turn(s, n: int) -> None:
    with s.turn():
        s.append("user/message", {"content": f"task {n}"})
        with s.step():
            s.append("assistant/message", {"content": "reading", "tool_calls": [
                {"id": f"c{n}", "name": "read", "arguments": {}}]})
            s.append("tool/call", {"call_id": f"c{n}", "name": "read", "arguments": {}})
            s.append("tool/result", {"call_id": f"c{n}", "output": "...", "is_error": False})


def test_checks_two_overlapping_compactions_from_two_threads_one_is_refused(store):
    """Both threads pass any check made before the write lock and then both
    append -- unless the check runs inside the transaction.  The write lock is
    held while both compactions are submitted, so both are past every check
    that does not take it before either is written."""
    s = store.create_session(cwd="/r")
    for n in range(3):
        agent_turn(s, n)                      # seqs 0-7, 8-15, 16-23
    ranges = [(0, 15), (8, 23)]               # overlapping, neither nested
    results: list = [None, None]

    def compact(i: int) -> None:
        try:
            results[i] = ("ok", s.compact(*ranges[i], f"summary {i}"))
        except errors.TrajlogError as exc:
            results[i] = ("err", exc)

    threads = [threading.Thread(target=compact, args=(i,)) for i in range(2)]
    lock = _write_lock(store)
    lock.acquire()
    try:
        for t in threads:
            t.start()
        time.sleep(0.3)                       # both are now blocked on the write lock
    finally:
        lock.release()
    for t in threads:
        t.join(10)
    outcomes = sorted(r[0] for r in results)
    assert outcomes == ["err", "ok"], results
    refused = next(r[1] for r in results if r[0] == "err")
    assert isinstance(refused, errors.ValidationError) and "partly overlaps" in str(refused)
    summaries = [m for m in projections.model_history(s) if m.role == "summary"]
    assert len(summaries) == 1
    kept = next(r[1] for r in results if r[0] == "ok")
    assert (summaries[0].seq, summaries[0].until) == (kept.data["from_seq"], kept.data["to_seq"])


def test_checks_compactions_in_one_batch_must_nest_with_each_other(store):
    s = store.create_session(cwd="/r")
    for n in range(3):
        agent_turn(s, n)
    op = projections.SURFACE_REPLACE
    with pytest.raises(errors.ValidationError, match="partly overlaps"):
        s.append_batch([
            ("compaction/apply", {"op": op, "from_seq": 0, "to_seq": 15, "summary": "a"}),
            ("compaction/apply", {"op": op, "from_seq": 8, "to_seq": 23, "summary": "b"})])
    assert s.last_seq == 23                   # all or nothing
    s.append_batch([
        ("compaction/apply", {"op": op, "from_seq": 0, "to_seq": 7, "summary": "a"}),
        ("compaction/apply", {"op": op, "from_seq": 0, "to_seq": 15, "summary": "b"})])
    assert [m.role for m in projections.model_history(s)][:1] == ["summary"]


def test_checks_fork_inherits_the_compactions_of_its_prefix(store):
    p = store.create_session(cwd="/r")
    for n in range(3):
        agent_turn(p, n)
    p.compact(0, 15, "first two")
    child = p.fork(24)                        # the compaction event at 24 is inherited
    with pytest.raises(errors.ValidationError, match="partly overlaps"):
        child.compact(8, 23, "straddles the parent's compaction")
    child.compact(0, 23, "contains it")


def test_checks_a_status_event_must_target_an_earlier_event(store):
    s = store.create_session(cwd="/r")
    ev = s.append("plan/update", {"text": "x"})
    with pytest.raises(errors.InvalidArgumentError):
        s.append("event/status", {"target": ev.seq + 1, "status": "rejected", "reason": "r"})
    with pytest.raises(errors.InvalidArgumentError):
        s.mark(ev.seq + 1, "rejected", "not there yet", source="human:a")
    assert s.last_seq == ev.seq
    s.mark(ev.seq, "rejected", "seen", source="human:a")
