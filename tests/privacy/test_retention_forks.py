"""Retention reaches every log a policy covers: a session is under the latest
``retention/policy`` its history shows -- its own, or one inherited with a
fork's prefix, or for a spawned subagent its parent's history up to the
spawn -- and its own events go under it.  Proven on what the store returns
and on the raw bytes of the database files."""

from __future__ import annotations

from typing import Any

import pytest

import trajlog
from kits.tamper import file_bytes

SQLITE_ERASED = "proves what is gone on the bytes of the SQLite file and its WAL"

DAY = 86_400_000


def _turn(s: Any, text: str) -> None:
    with s.turn():
        s.append("user/message", {"content": text})
        s.append("assistant/message", {"content": f"ok: {text}"})


def _kept(s: Any, seqs: range | list[int]) -> list[int]:
    """The seqs among ``seqs`` whose payload is still there (not erased)."""
    assert seqs, "nothing to look at"
    return [ev.seq for ev in s.events(min(seqs), max(seqs))
            if ev.seq in seqs and not (isinstance(ev.data, dict) and "erased" in ev.data)]


def _own(s: Any) -> list[int]:
    """The seqs of the session's own content events (markers and policies keep
    their payloads)."""
    return [ev.seq for ev in s.events(s.header.seed_length)
            if ev.type in ("user/message", "assistant/message")]


@pytest.fixture
def store(tmp_path):
    with trajlog.open(str(tmp_path / "ret.db")) as s:
        yield s


def _later(*sessions: Any) -> int:
    return max(ev.time for s in sessions for ev in s.events()) + 2 * DAY


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
@pytest.mark.parametrize("kind", ["fork", "fork_subagent"])
def test_a_fork_is_under_the_policy_its_prefix_shows(store, kind):
    s = store.create_session()
    s.append("retention/policy", {"ttl_ms": DAY})
    _turn(s, "PARENTWORDS-1")
    child = s.fork(s.last_seq) if kind == "fork" else s.fork_subagent("go on")
    _turn(child, "FORKWORDS-1")
    assert _own(child) and store.apply_retention().events_erased == ()   # nothing due yet
    report = store.apply_retention(now_ms=_later(s, child))
    erased = set(report.events_erased)
    assert {(child.id, q) for q in _own(child)} <= erased
    assert {(s.id, q) for q in _own(s)} <= erased
    assert _kept(child, _own(child)) == [] and _kept(s, _own(s)) == []
    assert store.apply_retention(now_ms=_later(s, child)).events_erased == ()   # idempotent
    assert child.verify().ok and s.verify().ok
    store.close()
    raw = file_bytes(store.path)
    assert b"FORKWORDS-1" not in raw and b"PARENTWORDS-1" not in raw


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_a_fork_of_a_fork_inherits_through_every_ancestor(store):
    s = store.create_session()
    s.append("retention/policy", {"ttl_ms": DAY})
    _turn(s, "a")
    one = s.fork(s.last_seq)
    _turn(one, "b")
    two = one.fork(one.last_seq)
    _turn(two, "GRANDCHILD-1")
    store.apply_retention(now_ms=_later(s, one, two))
    assert _kept(two, _own(two)) == [] and _kept(one, _own(one)) == []
    store.close()
    assert b"GRANDCHILD-1" not in file_bytes(store.path)


def test_a_forks_own_policy_replaces_the_inherited_one(store):
    s = store.create_session()
    s.append("retention/policy", {"ttl_ms": DAY})
    _turn(s, "a")
    child = s.fork(s.last_seq)
    child.append("retention/policy", {"ttl_ms": 30 * DAY})
    _turn(child, "KEPT-LONGER")
    store.apply_retention(now_ms=_later(s, child))
    assert _kept(s, _own(s)) == []
    assert _kept(child, _own(child)) == _own(child)        # its own, longer policy holds
    store.apply_retention(now_ms=_later(s, child) + 40 * DAY)
    assert _kept(child, _own(child)) == []


def test_a_parents_policy_set_after_the_fork_does_not_reach_it(store):
    s = store.create_session()
    _turn(s, "a")
    child = s.fork(s.last_seq)
    _turn(child, "NOT-UNDER-IT")
    s.append("retention/policy", {"ttl_ms": DAY})
    store.apply_retention(now_ms=_later(s, child))
    assert _kept(child, _own(child)) == _own(child)
    # (the shared prefix is the parent's log: its policy erases it for both)
    assert _kept(child, _own(s)) == []


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
@pytest.mark.parametrize("kind", ["fork", "fork_subagent", "spawn_subagent"])
def test_an_inherited_until_event_policy_waits_for_the_childs_own_event(store, kind):
    s = store.create_session()
    s.append("retention/policy", {"until_event": "session/closed"})
    _turn(s, "a")
    child = (s.fork(s.last_seq) if kind == "fork" else
             getattr(s, kind)("UNTIL-CLOSED-TASK"))
    _turn(child, "UNTIL-CLOSED-1")
    s.append("session/closed", {})
    store.apply_retention()
    assert _kept(s, _own(s)) == []
    assert _kept(child, _own(child)) == _own(child)        # the parent's close is not its own
    child.append("session/closed", {})
    store.apply_retention()
    assert _kept(child, _own(child)) == []
    store.close()
    raw = file_bytes(store.path)
    assert b"UNTIL-CLOSED-1" not in raw and b"UNTIL-CLOSED-TASK" not in raw


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_a_spawned_subagent_is_under_its_parents_policy_as_of_its_spawn(store):
    s = store.create_session()
    s.append("retention/policy", {"ttl_ms": DAY})
    _turn(s, "a")
    sub = s.spawn_subagent("SPAWNED-TASK", call_id="c1")
    _turn(sub, "SPAWNED-WORDS")
    store.apply_retention(now_ms=_later(s, sub))
    assert _kept(sub, _own(sub)) == [] and sub.task() is None
    assert sub.verify().ok
    store.close()
    raw = file_bytes(store.path)
    assert b"SPAWNED-TASK" not in raw and b"SPAWNED-WORDS" not in raw


def test_a_parents_later_policy_does_not_reach_a_subagent_already_made(store):
    s = store.create_session()
    s.append("retention/policy", {"ttl_ms": 30 * DAY})
    _turn(s, "a")
    sub = s.spawn_subagent("task", call_id="c1")
    _turn(sub, "b")
    s.append("retention/policy", {"ttl_ms": DAY})
    store.apply_retention(now_ms=_later(s, sub))
    assert _kept(s, _own(s)) == []
    assert _kept(sub, _own(sub)) == _own(sub)          # still under the 30-day policy
    sub.append("retention/policy", {"ttl_ms": DAY})    # until its own log says otherwise
    store.apply_retention(now_ms=_later(s, sub))
    assert _kept(sub, _own(sub)) == []


def test_a_subagent_of_a_session_without_a_policy_gets_none(store):
    s = store.create_session()
    _turn(s, "a")
    sub = s.spawn_subagent("task", call_id="c1")
    assert "retention/policy" not in {ev.type for ev in sub.events()}
    assert store.apply_retention(now_ms=_later(s, sub)).events_erased == ()


def test_the_plan_names_the_forks_own_events(store):
    s = store.create_session()
    s.append("retention/policy", {"ttl_ms": DAY})
    _turn(s, "a")
    child = s.fork(s.last_seq)
    _turn(child, "b")
    _, events = store.retention_plan(now_ms=_later(s, child))
    plan = {sid: seqs for sid, seqs, _ in events}
    assert plan[child.id] == _own(child) and plan[s.id] == _own(s)


def test_a_malformed_policy_is_a_typed_error_naming_where_and_nothing_is_erased(store):
    good = store.create_session()
    good.append("retention/policy", {"ttl_ms": DAY})
    _turn(good, "a")
    bad = store.create_session()
    bad.append("retention/policy", {"ttl_ms": "soon"})
    _turn(bad, "b")
    child = bad.fork(bad.last_seq)
    _turn(child, "c")
    with pytest.raises(trajlog.errors.InvalidArgumentError, match=f"seq 0 of session {bad.id}"):
        store.apply_retention(now_ms=_later(good, bad, child))
    assert _kept(good, _own(good)) == _own(good)           # refused before any erasure
    bad.append("retention/policy", {"ttl_ms": DAY})        # a valid one replaces it...
    with pytest.raises(trajlog.errors.InvalidArgumentError, match=f"session {child.id} is"):
        store.apply_retention(now_ms=_later(good, bad, child))
    child.append("retention/policy", {"ttl_ms": DAY})      # ...in every history that shows it
    store.apply_retention(now_ms=_later(good, bad, child))
    assert _kept(good, _own(good)) == [] and _kept(child, _own(child)) == []


def test_an_erased_policy_leaves_the_one_before_it_in_force(store):
    s = store.create_session()
    s.append("retention/policy", {"ttl_ms": DAY})
    s.append("retention/policy", {"ttl_ms": 30 * DAY})
    _turn(s, "a")
    child = s.fork(s.last_seq)
    _turn(child, "b")
    store.apply_retention(now_ms=_later(s, child))
    assert _kept(child, _own(child)) == _own(child)
    store.erase(s.id, [1], reason="wrong policy", actor="human:a")
    store.apply_retention(now_ms=_later(s, child))
    assert _kept(child, _own(child)) == [] and _kept(s, _own(s)) == []
