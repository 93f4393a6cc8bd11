"""Projections: each view on hand-built logs, compaction, forks, and the
incremental engine (incremental equals from-scratch; saved states are
versioned, validated against the chain, and never authoritative)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trajlog
from kits.tamper import raw, views, write_txn
from trajlog import errors, projections
from trajlog.projections import FOLDS, from_scratch
from trajlog.storage import projection_rows as storage

SQLITE_CONN = "runs SQL on the SQLite backend's own connections"


def agent_turn(s, k, *, error=False, crash=False):
    """One agent turn, 12 events; ``crash`` stops it right after the tool started
    (no context managers: they would close the turn on the way out)."""
    s.append("turn/start", {})
    s.append("user/message", {"content": f"task {k}"})
    s.append("step/start", {})
    s.append("request/header", {"model": "m-1", "system_prompt": f"sys {k}",
                                "tools": [{"name": "read"}], "parameters": {"t": k}},
             time=1000 * k)
    s.append("assistant/message", {
        "content": f"reading {k}", "reasoning": [{"text": "think"}],
        "tool_calls": [{"id": f"c{k}", "name": "read", "arguments": {"p": k}}],
        "usage": {"input_tokens": 100 + k, "output_tokens": 7}}, time=1000 * k + 250)
    s.append("tool/call", {"call_id": f"c{k}", "name": "read", "arguments": {"p": k}},
             time=1000 * k + 300)
    if crash:
        return
    s.append("tool/result", {"call_id": f"c{k}", "output": f"out {k}", "is_error": error},
             time=1000 * k + 420)
    s.append("step/end", {})
    s.append("step/start", {})
    s.append("assistant/message", {"content": f"done {k}", "tool_calls": []})
    s.append("step/end", {})
    s.append("turn/end", {"interrupted": False})


def test_model_history_keeps_only_model_messages(store):
    s = store.create_session(cwd="/r")
    agent_turn(s, 1)
    hist = projections.model_history(s)
    assert [(m.role, m.content) for m in hist] == [
        ("user", "task 1"), ("assistant", "reading 1"), ("tool", "out 1"),
        ("assistant", "done 1")]
    assert hist[1].tool_calls == [{"id": "c1", "name": "read", "arguments": {"p": 1}}]
    assert hist[1].reasoning == [{"text": "think"}]
    assert hist[2].tool_call_id == "c1" and hist[2].is_error is False


def test_model_history_compaction_hides_range_behind_summary(store):
    s = store.create_session(cwd="/r")
    agent_turn(s, 1)                              # seqs 0..11
    agent_turn(s, 2)                              # seqs 12..23
    first_turn = list(s.events(0, 11))
    s.compact(1, 7, "asked for task 1; read it; finished")
    hist = projections.model_history(s)
    assert hist[0].role == "summary" and (hist[0].seq, hist[0].until) == (1, 7)
    assert hist[0].content == "asked for task 1; read it; finished"
    assert [m.content for m in hist[1:]] == ["done 1", "task 2", "reading 2", "out 2",
                                             "done 2"]
    assert list(s.events(0, 11)) == first_turn   # nothing deleted
    # a later, wider compaction covers the earlier summary
    s.compact(0, 20, "two tasks done")
    assert [(m.role, m.content) for m in projections.model_history(s)][:1] == [
        ("summary", "two tasks done")]


def test_compaction_refuses_to_split_tool_calls_or_overlap(store):
    s = store.create_session(cwd="/r")
    agent_turn(s, 1)
    agent_turn(s, 2)
    with pytest.raises(errors.ValidationError, match="split tool calls"):
        s.compact(1, 5, "half a call")
    s.compact(1, 7, "turn one")
    with pytest.raises(errors.ValidationError, match="partly overlaps"):
        s.compact(7, 19, "overlap")
    with pytest.raises(errors.InvalidArgumentError):
        s.compact(3, 999, "too far")
    with pytest.raises(TypeError):
        s.compact(1, 2, "")


def test_request_config_from_last_header(store):
    s = store.create_session(cwd="/r")
    assert projections.request_config(s) is None
    agent_turn(s, 1)
    agent_turn(s, 2)
    cfg = projections.request_config(s)
    assert (cfg.model, cfg.system_prompt, cfg.tools, cfg.parameters) == (
        "m-1", "sys 2", [{"name": "read"}], {"t": 2})


def test_chat_cards_move_from_running_to_done_error_unknown(store):
    s = store.create_session(cwd="/r")
    agent_turn(s, 1)
    agent_turn(s, 2, error=True)
    s2 = store.create_session(cwd="/r2")
    agent_turn(s2, 3, crash=True)
    cards = [n for n in projections.chat(s2) if n.kind == "tool"]
    assert [c.status for c in cards] == ["running"]
    store.load(s2.id)
    cards = [n for n in projections.chat(s2) if n.kind == "tool"]
    assert [c.status for c in cards] == ["unknown"]
    statuses = [n.status for n in projections.chat(s) if n.kind == "tool"]
    assert statuses == ["done", "error"]
    bubbles = [(n.role, n.text) for n in projections.chat(s) if n.kind == "message"]
    assert bubbles[0] == ("user", "task 1") and ("assistant", "done 2") in bubbles


def test_chat_not_started_card(store):
    s = store.create_session(cwd="/r")
    s.append("turn/start", {})
    s.append("assistant/message", {"content": "x", "tool_calls": [
        {"id": "n1", "name": "bash", "arguments": {}}]})
    assert [n.status for n in projections.chat(s) if n.kind == "tool"] == ["requested"]
    store.load(s.id)
    assert [n.status for n in projections.chat(s) if n.kind == "tool"] == ["not_started"]


def test_trajectory_tree(store):
    s = store.create_session(cwd="/r")
    agent_turn(s, 1)
    (turn,) = projections.trajectory(s)
    assert (turn.start_seq, turn.end_seq, turn.interrupted) == (0, 11, False)
    first, second = turn.steps
    (req,) = first.requests
    assert (req.model, req.latency_ms, req.tokens_in, req.tokens_out, req.tool_calls) == (
        "m-1", 250, 101, 7, 1)
    (tool,) = first.tools
    assert (tool.call_id, tool.name, tool.arguments, tool.duration_ms, tool.error,
            tool.status, tool.result_summary) == ("c1", "read", {"p": 1}, 120, False, "done",
                                                  "out 1")
    assert second.tools == [] and len(second.requests) == 1


def test_goal_snapshots_clearing_and_malformed(store):
    s = store.create_session(cwd="/r")
    s.append("goal/change", {"revision": 1, "goal": {"text": "fix login"}})
    s.append("goal/change", {"revision": 2, "goal": "not an object"})
    s.append("goal/change", {"goal": {"text": "no revision"}})
    s.append("goal/change", {"revision": 3, "goal": {"text": "fix login and tests"}})
    g = projections.goal(s)
    assert (g.goal, g.revision, g.seq, g.cleared) == ({"text": "fix login and tests"}, 3, 3,
                                                      False)
    assert [x["seq"] for x in g.skipped] == [1, 2]
    s.append("goal/change", {"revision": 4, "cleared": True})
    g = projections.goal(s)
    assert (g.goal, g.cleared, g.revision) == (None, True, 4)
    s.append("goal/change", {"revision": 4, "goal": {"text": "stale"}})
    assert projections.goal(s).goal is None and len(projections.goal(s).skipped) == 3


def test_status_view(store):
    s = store.create_session(cwd="/r")
    agent_turn(s, 1, crash=True)
    v = projections.status(s)
    assert (v.turn_open_since, v.step_open_since, v.tools_running) == (0, 2, ["c1"])
    store.load(s.id)
    v = projections.status(s)
    assert (v.turn_open_since, v.step_open_since, v.tools_running) == (None, None, [])


def test_projections_read_through_forks(store):
    p = store.create_session(cwd="/r")
    agent_turn(p, 1)
    c = p.fork(3)
    agent_turn(c, 2)
    assert [m.content for m in projections.model_history(c)][:4] == [
        "task 1", "reading 1", "out 1", "done 1"]
    assert len(projections.trajectory(c)) == 2


# --- the incremental engine ---------------------------------------------------------

@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_incremental_uses_saved_state_and_rebuilds_on_version_change(store, monkeypatch):
    s = store.create_session(cwd="/r")
    for k in range(4):
        agent_turn(s, k)
    full = projections.model_history(s)
    assert storage.projection_state(raw(store), s._sid, "model_history",
                                    FOLDS["model_history"].version) is None
    assert "model_history" in projections.checkpoint(s)
    saved = storage.projection_state(raw(store), s._sid, "model_history",
                                    FOLDS["model_history"].version)
    assert saved is not None and saved[0] == s.last_seq
    # a new process: no memory cache, resume from the derived table
    views(store).clear()
    agent_turn(s, 9)
    folded: list[int] = []
    original = FOLDS["model_history"].step

    def counting(state, ev):
        folded.append(ev.seq)
        return original(state, ev)

    monkeypatch.setattr(FOLDS["model_history"], "step", counting)
    monkeypatch.setattr(FOLDS["model_history"], "step_many", None)  # fold event by event
    again = projections.model_history(s)
    wants = FOLDS["model_history"].wants
    relevant = [e.seq for e in s.events() if wants(e.type)]
    # only the new events (and of those, only the types the fold reads)
    assert folded == [q for q in relevant if q > saved[0]]
    assert again[: len(full)] == full
    # a version bump invalidates the saved state: everything is folded again
    views(store).clear()
    folded.clear()
    monkeypatch.setattr(type(FOLDS["model_history"]), "version",
                        FOLDS["model_history"].version + 1)
    assert projections.model_history(s) == again
    assert folded == relevant


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_saved_state_is_never_authoritative(store, monkeypatch):
    s = store.create_session(cwd="/r")
    agent_turn(s, 1)
    other = store.create_session(cwd="/other")
    agent_turn(other, 7)
    projections.checkpoint(s)
    projections.checkpoint(other)
    views(store).clear()
    with write_txn(store) as conn:   # another log's state planted in this session's slot
        conn.execute("UPDATE projection_states SET state = (SELECT state FROM "
                     "projection_states WHERE sid = ? AND name = 'model_history'), chain = "
                     "(SELECT chain FROM projection_states WHERE sid = ? AND name = "
                     "'model_history') WHERE sid = ? AND name = 'model_history'",
                     (other._sid, other._sid, s._sid))
    expected = from_scratch(s.events(), FOLDS["model_history"])
    assert projections.model_history(s) == expected
    assert next(m.content for m in expected) == "task 1"
    views(store).clear()
    with write_txn(store) as conn:   # and one that does not even decode
        conn.execute("UPDATE projection_states SET state = x'c1c1c1' WHERE sid = ?",
                     (s._sid,))
    assert projections.model_history(s) == expected
    projections.rebuild(s)
    assert storage.projection_state(raw(store), s._sid, "model_history",
                                    FOLDS["model_history"].version) is None


EVENT_CHOICES = ["turn", "user", "call", "result", "error", "goal", "bad_goal", "header",
                 "compact"]


@settings(max_examples=30, deadline=None)
@given(script=st.lists(st.sampled_from(EVENT_CHOICES), min_size=1, max_size=40),
       cuts=st.lists(st.integers(0, 60), max_size=4))
@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_incremental_equals_scratch_hypothesis(script, cuts):
    """Random logs, projections evaluated at random resume points along the way
    (memory cache and saved states), always equal a from-scratch fold."""
    with trajlog.open(":memory:") as store:
        s = store.create_session(cwd="/h")
        open_calls: list[str] = []
        n = 0
        checkpoints = set(cuts)
        for i, op in enumerate(script):
            if op == "turn":
                s.append("turn/start", {})
                s.append("turn/end", {"interrupted": False})
            elif op == "user":
                s.append("user/message", {"content": f"u{i}"})
            elif op == "call":
                n += 1
                s.append("assistant/message", {"content": "a", "tool_calls": [
                    {"id": f"c{n}", "name": "t", "arguments": {}}]})
                s.append("tool/call", {"call_id": f"c{n}", "name": "t", "arguments": {}})
                open_calls.append(f"c{n}")
            elif op in ("result", "error") and open_calls:
                s.append("tool/result", {"call_id": open_calls.pop(0), "output": f"o{i}",
                                         "is_error": op == "error"})
            elif op == "goal":
                s.append("goal/change", {"revision": i, "goal": {"g": i}})
            elif op == "bad_goal":
                s.append("goal/change", {"revision": "x"})
            elif op == "header":
                s.append("request/header", {"model": f"m{i}", "tools": []})
            elif op == "compact" and s.last_seq >= 0 and not open_calls:
                with contextlib.suppress(errors.ValidationError):
                    s.compact(0, s.last_seq, f"summary {i}")
            if i in checkpoints:
                if i % 2:
                    views(store).clear()  # resume from the saved states instead
                for name in FOLDS:
                    projections.project(s, FOLDS[name])
                    key = s.fold_source().cache_key
                    with write_txn(store) as conn:
                        hit = views(store)[(key, name)]
                        import msgspec
                        storage.save_projection_state(conn, s._sid, name, FOLDS[name].version,
                                                      hit.seq, hit.chain,
                                                      msgspec.msgpack.encode(hit.state))
        for name, fold in FOLDS.items():
            assert projections.project(s, fold) == from_scratch(s.events(), fold), name
