"""A retried idempotent request is recorded, not silently dropped (the
append-only stream records duplicate requests and how they were handled).
The caller still gets the original event back;
the log gains one ``request/retry`` event, in the same transaction.

Each test names the rule it proves; removing the rule fails it."""

from __future__ import annotations

import pytest

import trajlog
from trajlog import errors
from trajlog.api.retries import RETRY, RETRY_SOURCE, next_attempt, retry_key


def _retries(s) -> list:
    return [e for e in s.events() if e.type == RETRY]


def test_a_retry_returns_the_original_and_records_the_request(store):
    """Rule: a deduplicated retry appends one request/retry {idempotency_key,
    original, outcome, attempt}, caused by the original, and returns the
    original event (not the record).  Fails if the record is not written, or
    if the retry returns the record instead of the original."""
    s = store.create_session(cwd="/r")
    s.append("note/x", {"before": True})
    a = s.append("user/message", {"content": "once"}, idempotency_key="req-1")
    b = s.append("user/message", {"content": "once"}, idempotency_key="req-1")
    assert b == a and b.seq == 1
    assert s.last_seq == 2
    rec = s.get(2)
    assert rec.type == RETRY and rec.source == RETRY_SOURCE and rec.causal_parent == a.seq
    assert rec.data == {"idempotency_key": "req-1", "original": 1, "outcome": "deduplicated",
                        "attempt": 2, "synthetic": True}
    assert rec.idempotency_key == retry_key("req-1", 2)
    assert s.verify().ok


def test_attempts_are_counted_per_key(store):
    """Rule: attempt n is the n-th request with that key (2 for the first
    retry), counted per key, from the records already in the log."""
    s = store.create_session(cwd="/r")
    s.append("note/x", {"k": 1}, idempotency_key="k1")
    s.append("note/x", {"k": 2}, idempotency_key="k2")
    for _ in range(3):
        s.append("note/x", {"k": 1}, idempotency_key="k1")
    s.append("note/x", {"k": 2}, idempotency_key="k2")
    got = [(e.data["idempotency_key"], e.data["attempt"], e.data["original"])
           for e in _retries(s)]
    assert got == [("k1", 2, 0), ("k1", 3, 0), ("k1", 4, 0), ("k2", 2, 1)]


@pytest.mark.parametrize("recorded", [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 40])
def test_the_attempt_search_finds_the_first_free_number(store, recorded):
    """Rule: next_attempt's galloping search over the index (no scan) returns
    recorded + 2 for any number of records already made."""
    s = store.create_session(cwd="/r")
    s.append("note/x", {}, idempotency_key="k")
    s.append_batch([("note/x", {"i": i}, {"idempotency_key": retry_key("k", n)})
                    for i, n in enumerate(range(2, 2 + recorded))])
    reader = store._e.backend.reader()
    assert next_attempt(reader, s._sid, "k") == recorded + 2


def test_retries_are_counted_across_store_handles(tmp_path):
    """Rule: the count is read from the log (the index), not from one
    process's memory: three handles retrying one key record attempts 2, 3, 4."""
    path = str(tmp_path / "x.db")
    with trajlog.open(path) as st:
        sid = st.create_session(cwd="/r").id
        st.session(sid).append("user/message", {"content": "once"}, idempotency_key="across")
    for _ in range(3):
        with trajlog.open(path) as st:
            ev = st.session(sid).append("user/message", {"content": "once"},
                                        idempotency_key="across")
            assert ev.seq == 0
    with trajlog.open(path) as st:
        s = st.session(sid)
        assert [e.data["attempt"] for e in _retries(s)] == [2, 3, 4] and s.last_seq == 3


def test_a_conflicting_retry_writes_nothing(store):
    """Rule: a key reused for a different event is still refused, and the
    refusal records nothing (the record is only for a deduplicated request)."""
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "once"}, idempotency_key="req-1")
    with pytest.raises(errors.IdempotencyConflictError):
        s.append("user/message", {"content": "different"}, idempotency_key="req-1")
    assert s.last_seq == 0


def test_a_retried_batch_gets_one_record(store):
    """Rule: a batch retried as a whole returns the originals and appends one
    record, named by its first key, with the original batch's seq range;
    a batch mixing used and new keys is refused and records nothing."""
    s = store.create_session(cwd="/r")
    batch = [("note/x", {"i": 0}), ("note/x", {"i": 1}, {"idempotency_key": "b1"}),
             ("note/x", {"i": 2}, {"idempotency_key": "b2"})]
    first = s.append_batch(batch)
    again = s.append_batch(batch)
    assert again == first and [e.seq for e in again] == [0, 1, 2]
    assert s.last_seq == 3
    assert s.get(3).data == {"idempotency_key": "b1", "original": 1, "outcome": "deduplicated",
                             "attempt": 2, "synthetic": True, "batch": [0, 2]}
    with pytest.raises(errors.IdempotencyConflictError):
        s.append_batch([("note/x", {"i": 1}, {"idempotency_key": "b1"}),
                        ("note/x", {"i": 9}, {"idempotency_key": "new"})])
    assert s.last_seq == 3


def test_a_retry_in_a_paused_session_still_returns_the_original(store):
    """Rule: a redaction pause refuses new content, but a retry of what was
    written before it succeeds as it did, and is recorded (the record is
    trajlog's own, synthetic, event).  Fails if the record is not marked
    synthetic: the pause would then refuse the retry."""
    s = store.create_session(cwd="/r")
    a = s.append("user/message", {"content": "once"}, idempotency_key="req-1")
    s.append("redaction/paused", {"reason": "test"})
    with pytest.raises(errors.RedactionPausedError):
        s.append("user/message", {"content": "new"})
    assert s.append("user/message", {"content": "once"}, idempotency_key="req-1") == a
    assert [e.type for e in s.events()] == ["user/message", "redaction/paused", RETRY]


def test_a_retry_is_recorded_under_a_privacy_mode(tmp_path):
    """Rule: under privacy mode none the record's data is routed like any
    other write (its key text does not reach the log), and attempts are still
    counted -- from the records' derived keys, not from their data."""
    from trajlog.redaction import RedactionPolicy
    st = trajlog.open(str(tmp_path / "p.db"), repack=False)
    try:
        st.redaction = RedactionPolicy(scanners=(), privacy={"acme": "none"})
        s = st.create_session(cwd="/r", metadata={"tenant": "acme"})
        s.append("note/x", {"t": "x"}, idempotency_key="private-key-text")
        for _ in range(2):
            assert s.append("note/x", {"t": "x"},
                            idempotency_key="private-key-text").seq == 0
        recs = _retries(s)
        assert [r.idempotency_key for r in recs] == [retry_key("private-key-text", n)
                                                     for n in (2, 3)]
        assert all("private-key-text" not in str(r.data) for r in recs)
        assert recs[0].data["privacy"]["mode"] == "none"
    finally:
        st.close()


def test_a_retry_in_a_full_log_returns_the_original_without_a_record(store):
    """Rule: when nothing more fits in the session's log, the retry still
    returns the original (the idempotent contract) and records nothing.
    Fails if the guard is removed: the record's append raises 'is full'."""
    s = store.create_session(cwd="/r")
    a = s.append("user/message", {"content": "once"}, idempotency_key="req-1")
    s.append("note/x", {})
    backend = store._e.backend
    limit = backend.max_session_seq
    backend.max_session_seq = s.last_seq           # the log is now full
    try:
        with pytest.raises(errors.InvalidStateError, match="full"):
            s.append("note/x", {})
        assert s.append("user/message", {"content": "once"}, idempotency_key="req-1") == a
        assert s.last_seq == 1
    finally:
        backend.max_session_seq = limit


def test_a_retry_in_a_fork_is_recorded_in_the_fork(store):
    """Rule: a retry of a key of the fork's own log is recorded there, not
    in the parent."""
    s = store.create_session(cwd="/r")
    s.append("note/x", {}, idempotency_key="parent-k")
    fork = s.fork(s.last_seq)
    own = fork.append("note/x", {"f": 1}, idempotency_key="fork-k")
    assert fork.append("note/x", {"f": 1}, idempotency_key="fork-k") == own
    assert [e.data["original"] for e in _retries(fork)] == [own.seq]
    assert _retries(s) == []


def test_a_retry_shows_on_its_turn_in_the_trajectory(tmp_path):
    """The debugger's view names the retried request (fold version 3)."""
    import trajlog
    from trajlog import projections

    with trajlog.open(str(tmp_path / "t.db")) as st:
        s = st.create_session(cwd="/r")
        with s.turn():
            s.append("user/message", {"content": "deploy"}, idempotency_key="req-9")
            s.append("user/message", {"content": "deploy"}, idempotency_key="req-9")
        s.append("user/message", {"content": "deploy"}, idempotency_key="req-9")
        turns = projections.trajectory(s)
        inside = turns[0].retries
        assert [(r.idempotency_key, r.original, r.attempt) for r in inside] == [("req-9", 1, 2)]
        assert [(r.original, r.attempt, r.outcome) for r in turns[-1].retries] == [
            (1, 3, "deduplicated")]
