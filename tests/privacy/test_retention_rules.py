"""Store retention rules by kind (``trajlog.open(..., retention=...)``):
each kind's payloads erased under a tombstone whose reason names the rule,
structural markers and kept kinds untouched, "until the session closes"
rules waiting for ``session/closed``, session-scope memory reclaimed when
its session closes unless promoted; the plan writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

import trajlog
from kits.tamper import file_bytes
from trajlog.errors import RetentionRulesError
from trajlog.memory import Identity, RetentionRules, Rule

DAY = 86_400_000
SQLITE_ERASED = "proves what is gone on the bytes of the SQLite file and its WAL"
APPROVAL = {"kind": "human_approval", "by": "human:carol", "note": "reviewed"}
RULES = RetentionRules.of(tool_outputs="7d", messages="90d")


def _record(s: Any, n: int = 1) -> None:
    """``n`` turns: a user message, a call, its result (TOOLOUT-i), an answer."""
    for i in range(n):
        with s.turn():
            s.append("user/message", {"content": f"USERWORDS-{i}"})
            s.append("assistant/message", {"content": "", "tool_calls": [
                {"id": f"c{i}", "name": "ls", "arguments": {}}]})
            s.append("tool/call", {"call_id": f"c{i}", "name": "ls", "arguments": {}})
            s.append("tool/result", {"call_id": f"c{i}", "output": f"TOOLOUT-{i}"})
            s.append("assistant/message", {"content": f"ANSWER-{i}"})


def _erased(s: Any) -> dict[int, str]:
    """seq -> the reason of its tombstone, for every erased event."""
    return {ev.seq: ev.data["erased"]["reason"] for ev in s.events()
            if isinstance(ev.data, dict) and isinstance(ev.data.get("erased"), dict)}


def _types(s: Any, *types: str) -> list[int]:
    return [ev.seq for ev in s.events() if ev.type in types]


def _end(s: Any) -> int:
    return max(ev.time for ev in s.events())


def test_each_kind_goes_after_its_ttl_under_a_tombstone_naming_its_rule(tmp_path):
    with trajlog.open(str(tmp_path / "r.db"), retention=RULES) as store:
        s = store.create_session()
        _record(s, 2)
        s.compact(0, 5, "SUMMARYWORDS")
        end = _end(s)
        assert store.retention_plan(end + DAY) == ([], [])
        items, events = store.retention_plan(end + 8 * DAY)
        results = _types(s, "tool/result")
        assert items == [] and events == [
            (s.id, results, "retention rule tool_outputs: ttl 604800000 ms")]
        assert _erased(s) == {}   # the plan wrote nothing
        report = store.apply_retention(end + 8 * DAY)
        assert sorted(report.events_erased) == [(s.id, q) for q in results]
        assert _erased(s) == {q: "retention rule tool_outputs: ttl 604800000 ms"
                              for q in results}
        assert store.apply_retention(end + 8 * DAY).events_erased == ()   # idempotent
        store.apply_retention(end + 91 * DAY)
        messages = _types(s, "user/message", "assistant/message")
        assert set(_erased(s)) == set(results) | set(messages)
        assert {r for q, r in _erased(s).items() if q in messages} == {
            "retention rule messages: ttl 7776000000 ms"}
        kept = [ev for ev in s.events() if ev.seq not in _erased(s)]
        assert {ev.type for ev in kept} == {"turn/start", "turn/end", "tool/call",
                                             "compaction/apply"}   # markers, kept kinds
        assert s.verify().ok and store.verify().ok


def test_a_store_without_rules_removes_nothing_by_them(tmp_path):
    with trajlog.open(str(tmp_path / "n.db")) as store:
        s = store.create_session()
        _record(s)
        assert store.retention is None
        assert store.apply_retention(_end(s) + 1000 * DAY).events_erased == ()


def test_until_closed_rules_wait_for_session_closed(tmp_path):
    rules = RetentionRules.of(tool_outputs="until_closed", messages={"ttl_ms": 30 * DAY,
                                                                     "until_closed": False})
    with trajlog.open(str(tmp_path / "c.db"), retention=rules) as store:
        s, other = store.create_session(), store.create_session()
        _record(s, 2)
        _record(other)
        assert store.apply_retention(_end(s) + 10 * DAY).events_erased == ()
        s.close("done")
        report = store.apply_retention(_end(s) + 10 * DAY)
        assert sorted(report.events_erased) == [(s.id, q) for q in _types(s, "tool/result")]
        assert set(_erased(s).values()) == {"retention rule tool_outputs: until session/closed"}
        assert _erased(other) == {}   # its session is open


def test_session_memory_is_reclaimed_when_its_session_closes_unless_promoted(tmp_path):
    rules = RetentionRules.of(session_memory="until_closed")
    with trajlog.open(str(tmp_path / "m.db"), retention=rules) as store:
        s, other = store.create_session(), store.create_session()
        mem = store.memory(Identity("acme", user="alice", session=s.id))
        scratch = mem.remember("session", "fact", {"text": "SCRATCHWORDS"})
        kept = mem.remember("session", "episode", {"text": "worth keeping"})
        assert scratch is not None and kept is not None
        promoted = mem.promote(kept.id, to="user", evidence=APPROVAL, actor="human:carol")
        elsewhere = store.memory(Identity("acme", user="alice", session=other.id)).remember(
            "session", "fact", {"text": "open session"})
        assert elsewhere is not None
        assert store.apply_retention().items_revoked == ()
        s.close()
        items, _ = store.retention_plan()
        assert sorted(i for i, _ in items) == sorted([scratch.id, kept.id])
        assert {why for _, why in items} == {
            "retention rule session_memory: until session/closed"}
        report = store.apply_retention()
        assert sorted(report.items_revoked) == sorted([scratch.id, kept.id])
        assert mem.get(promoted.id).state == "active"   # the promoted copy stays
        assert mem.get(scratch.id).state == "revoked"
        view = store.memory(Identity("acme", user="alice", session=other.id))
        assert view.get(elsewhere.id).state == "active"
        assert store.verify_memory().ok


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_what_a_rule_erased_is_gone_from_the_files(tmp_path):
    path = str(tmp_path / "f.db")
    with trajlog.open(path, retention=RULES) as store:
        s = store.create_session()
        _record(s, 3)
        assert b"TOOLOUT-1" in file_bytes(path)
        store.apply_retention(_end(s) + 8 * DAY)
        data = file_bytes(path)
        assert b"TOOLOUT-" not in data and b"USERWORDS-1" in data


def test_rules_are_validated_with_typed_errors_that_name_the_rule():
    assert RetentionRules.of(tool_outputs="7d").tool_outputs == Rule(ttl_ms=7 * DAY)
    assert RetentionRules.of(messages="12h").messages.ttl_ms == 12 * 3_600_000
    assert RetentionRules.of(other=500).other == Rule(ttl_ms=500)
    assert RetentionRules.of(summaries="kept").summaries.kept
    assert RetentionRules.of(RULES.to_dict()) == RULES   # plain values round-trip
    cases = [({"tool_outputs": "7 days"}, "tool_outputs"), ({"nope": "7d"}, "nope"),
             ({"messages": -1}, "messages"), ({"messages": {"ttl": 3}}, "messages"),
             ({"messages": 1.5}, "messages"), ({"session_memory": "forever"}, "session_memory"),
             ({"sweep_seconds": 0}, "sweep_seconds"), ({"per_pass": 0}, "per_pass"),
             ({"tool_calls": {"until_closed": "yes"}}, "tool_calls")]
    for given, rule in cases:
        with pytest.raises(RetentionRulesError) as info:
            RetentionRules.of(given)
        assert info.value.rule == rule and repr(rule) in str(info.value)
    with pytest.raises(RetentionRulesError):
        RetentionRules(messages="7d")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        trajlog.open(":memory:", retention={"messages": "7d"})  # type: ignore[arg-type]


def test_until_closed_waits_for_the_open_forks_that_read_the_log(tmp_path):
    """Closing is final and a fork goes on from a closed session: the events a
    fork reads from its parent's log are its history too, so an
    ``until_closed`` rule erases them only once every session that reads
    them is closed -- the parent's own events past the fork point go at the
    parent's close."""
    from trajlog.projections import model_history

    with trajlog.open(str(tmp_path / "s.db"),
                      retention=RetentionRules.of(messages="until_closed")) as store:
        s = store.create_session()
        with s.turn():
            s.append("user/message", {"content": "my plan is X"})
            s.append("assistant/message", {"content": "ok"})
        with s.turn():
            s.append("user/message", {"content": "after the fork point"})
        s.close("done")
        fork = s.fork(3)
        with fork.turn():
            fork.append("user/message", {"content": "continue"})
        store.apply_retention()
        history = [(m.role, m.content) for m in model_history(store.session(fork.id))]
        assert ("user", "my plan is X") in history and ("assistant", "ok") in history
        assert store.session(s.id).get(5).data.get("erased") is not None   # past the fork
        fork.close("done too")
        store.apply_retention()
        assert store.session(s.id).get(1).data.get("erased") is not None
        assert [m.content for m in model_history(store.session(fork.id))
                if m.role == "user"] == [None, None]
