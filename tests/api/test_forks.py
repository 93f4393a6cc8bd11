"""Forks and subagents: where a fork cuts, what a child inherits and never
inherits, results flowing back, lineage, prefix sharing without copies."""

from __future__ import annotations

import threading

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trajlog
from kits.tamper import flip_frame_bits, foreign, raw
from trajlog import errors
from trajlog.codec import Status

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
SQLITE_CONN = "runs SQL on the SQLite backend's own connections"


def turns(s, n, start=0):
    """n complete turns of 3 events; returns the seq of each turn/end."""
    ends = []
    for i in range(start, start + n):
        with s.turn():
            s.append("user/message", {"content": f"q{i}"})
        ends.append(s.last_seq)
    return ends


def own_rows(store, s) -> int:
    return raw(store).execute("SELECT coalesce(sum(n), 0) FROM chunks WHERE sid = ?",
                              (s._sid,)).fetchall()[0][0]


# --- where a fork cuts ---------------------------------------------------------

def test_fork_cuts_at_the_end_of_the_turn(store):
    p = store.create_session(cwd="/repo", agent_preset="coder-v1")
    ends = turns(p, 3)                      # seqs 0..8, turn ends at 2, 5, 8
    for at, seed in [(0, 3), (1, 3), (2, 3), (3, 6), (4, 6), (5, 6), (8, 9)]:
        child = p.fork(at)
        assert child.header.seed_length == seed, at
        assert [e.seq for e in child.events()] == list(range(seed))
    assert ends == [2, 5, 8]


def test_fork_outside_any_turn_cuts_right_there(store):
    p = store.create_session(cwd="/r")
    p.append("user/message", {"content": "no turns here"})
    p.append("user/message", {"content": "still none"})
    assert p.fork(0).header.seed_length == 1


def test_fork_of_open_turn_is_unavailable_never_an_earlier_turn(store):
    p = store.create_session(cwd="/r")
    turns(p, 2)
    p.append("turn/start", {})
    p.append("user/message", {"content": "in progress"})
    with pytest.raises(errors.ForkUnavailableError, match="still open"):
        p.fork(p.last_seq)
    with pytest.raises(errors.ForkUnavailableError):
        p.fork(6)                           # the open turn's own turn/start
    assert p.fork(5).header.seed_length == 6
    with pytest.raises(errors.InvalidArgumentError):
        p.fork(99)
    with pytest.raises(TypeError):
        p.fork("3")  # type: ignore[arg-type]


def test_fork_takes_a_chosen_id_once(store):
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "a"})
    chosen = "6f1c1c0e-8a4e-4c56-9a51-0e1f2a3b4c5d"
    f = s.fork(0, session_id=chosen)
    assert f.id == chosen and store.session(chosen).parent().id == s.id
    with pytest.raises(errors.TrajlogError):
        s.fork(0, session_id=chosen)
    with pytest.raises(errors.InvalidArgumentError):
        s.fork(0, session_id="not-a-uuid")
    assert [c.id for c in s.children()] == [chosen]


def test_fork_header(store):
    p = store.create_session(cwd="/repo", agent_preset="coder-v1",
                             metadata={"identity": "alice", "tenant": "acme", "title": "t"})
    turns(p, 1)
    c = p.fork(0)
    h = c.header
    assert (h.parent_session, h.seed_length, h.cwd, h.agent_preset, h.origin,
            h.delegation_depth) == (p.id, 3, "/repo", "coder-v1", None, 0)
    assert h.metadata["identity"] == "alice" and h.metadata["tenant"] == "acme"
    assert "title" not in h.metadata
    assert c.parent().id == p.id


# --- prefix sharing --------------------------------------------------------------

@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_fork_copies_nothing_and_costs_the_same(store):
    p = store.create_session(cwd="/r")
    turns(p, 50)
    c = p.fork(100)
    assert c.header.seed_length == 102
    assert own_rows(store, c) == 0
    c.append("user/message", {"content": "mine"})
    assert own_rows(store, c) == 1
    events = list(c.events())
    assert [e.seq for e in events] == list(range(103))
    assert events[-1].data == {"content": "mine"} and c.verify().ok


def test_fork_never_sees_later_parent_appends(store):
    p = store.create_session(cwd="/r")
    turns(p, 2)
    c = p.fork(2)
    turns(p, 2, start=10)
    c.append("user/message", {"content": "child"})
    assert [e.data.get("content") for e in c.events()] == [None, "q0", None, "child"]
    assert c.verify().ok and p.verify().ok


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_fork_verify_fails_when_the_shared_prefix_is_damaged(store):
    p = store.create_session(cwd="/r")
    turns(p, 3)
    c = p.fork(4)
    c.append("user/message", {"content": "x"})
    flip_frame_bits(store, p._sid, 1, 42, 1)
    report = c.verify()
    assert not report.ok and report.session == p.id and report.scan.cursor.next_seq == 1
    with pytest.raises(errors.ChecksumError):
        list(c.events())
    with pytest.raises(errors.ChecksumError):
        store.load(c.id)


def test_fork_chain_binds_child_to_parent_history(store):
    """The child's first own frame continues the parent's chain at seed - 1."""
    p = store.create_session(cwd="/r")
    turns(p, 2)
    c = p.fork(2)
    c.append("user/message", {"content": "x"})
    first = c.get(3)
    assert first.seq == 3
    assert c._chain_at(2) == p._chain_at(2)


def test_forks_of_forks(store):
    s = store.create_session(cwd="/r")
    turns(s, 1)
    chain = [s]
    for depth in range(5):
        child = chain[-1].fork(chain[-1].last_seq)
        turns(child, 1, start=100 * (depth + 1))
        chain.append(child)
    last = chain[-1]
    contents = [e.data.get("content") for e in last.events() if e.type == "user/message"]
    assert contents == ["q0", "q100", "q200", "q300", "q400", "q500"]
    assert last.verify().ok
    reopened = store.session(last.id)
    assert [e.seq for e in reopened.events()] == list(range(18))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_fork_reads_as_prefix_plus_own_hypothesis(data):
    with trajlog.open(":memory:") as store:
        expected: dict[str, list[tuple[str, object]]] = {}
        root = store.create_session(cwd="/r")
        turns(root, data.draw(st.integers(1, 4)))
        expected[root.id] = [(e.type, e.data) for e in root.events()]
        current = root
        for depth in range(data.draw(st.integers(1, 5))):
            log = expected[current.id]
            ends = [i for i, (t, _) in enumerate(log) if t == "turn/end"]
            at = data.draw(st.integers(0, ends[-1]))
            child = current.fork(at)
            seed = child.header.seed_length
            assert seed - 1 in ends and (seed - 1 >= at)
            own = data.draw(st.integers(1, 3))
            turns(child, own, start=1000 * (depth + 1))
            turns(current, 1, start=99_000 + depth)  # after the fork: never in the child
            expected[current.id] = [(e.type, e.data) for e in current.events()]
            expected[child.id] = log[:seed] + [(e.type, e.data)
                                               for e in child.events(seed)]
            assert [(e.type, e.data) for e in child.events()] == expected[child.id]
            assert [e.seq for e in child.events()] == list(range(len(expected[child.id])))
            assert child.verify().ok
            current = child


# --- subagents ---------------------------------------------------------------------

def test_spawn_subagent(store):
    p = store.create_session(cwd="/repo", agent_preset="coder-v1", metadata={"user": "bob"})
    turns(p, 2)
    sub = p.spawn_subagent("review auth.ts", agent_preset="reviewer")
    h = sub.header
    assert (h.origin, h.seed_length, h.delegation_depth, h.cwd, h.agent_preset,
            h.parent_session) == ("subagent", 0, 1, "/repo", "reviewer", p.id)
    assert h.metadata["user"] == "bob"
    events = list(sub.events())
    assert [(e.type, e.data) for e in events] == [("user/message",
                                                    {"content": "review auth.ts"})]
    assert events[0].source == f"session:{p.id}"
    assert p.spawn_subagent("x").header.agent_preset == "coder-v1"


def test_delegation_depth_limit(tmp_path):
    with trajlog.open(str(tmp_path / "d.db"), max_delegation_depth=2) as store:
        p = store.create_session(cwd="/r")
        a = p.spawn_subagent("a")
        b = a.spawn_subagent("b")
        assert b.header.delegation_depth == 2
        with pytest.raises(errors.DelegationLimitError):
            b.spawn_subagent("c")
        with pytest.raises(errors.DelegationLimitError):
            b.fork_subagent("c")
    with pytest.raises(errors.InvalidArgumentError):
        trajlog.open(str(tmp_path / "e.db"), max_delegation_depth=-1)


def test_fork_subagent_seed_excludes_the_turn_in_progress(store):
    p = store.create_session(cwd="/r")
    turns(p, 2)                                              # ends at 5
    with p.turn(), p.step():
        p.append("assistant/message", {"content": "delegating", "tool_calls": [
            {"id": "spawn1", "name": "task", "arguments": {}}]})
        p.append("tool/call", {"call_id": "spawn1", "name": "task", "arguments": {}})
        sub = p.fork_subagent("try cookies", call_id="spawn1")
        assert sub.header.seed_length == 6
        inherited = [e.type for e in sub.events(0, 5)]
        assert "tool/call" not in inherited
        own = [(e.type, e.data) for e in sub.events(6)]
        assert own[0] == ("approval/policy", {"policy": "never", "fixed": True})
        assert own[-1] == ("user/message", {"content": "try cookies"})
        sub.append("assistant/message", {"content": "cookies work", "tool_calls": []})
        result = sub.finish()
        assert result.data["call_id"] == "spawn1" and result.data["output"] == "cookies work"
    assert sub.verify().ok


def test_fork_subagent_with_no_completed_turn_has_no_seed(store):
    p = store.create_session(cwd="/r")
    p.append("turn/start", {})
    assert p.fork_subagent("t").header.seed_length == 0


# --- inheritance rules -----------------------------------------------------------

def test_one_time_approvals_are_never_inherited(store):
    p = store.create_session(cwd="/r")
    with p.turn():
        p.append("approval/grant", {"tool": "bash", "scope": "once"})
        p.append("approval/grant", {"tool": "read", "scope": "session"})
    assert [e.data["tool"] for e in p.approvals()] == ["bash", "read"]
    c = p.fork(0)
    assert [e.data["tool"] for e in c.approvals()] == ["read"]
    c.append("approval/grant", {"tool": "edit", "scope": "once"})  # its own counts
    assert [e.data["tool"] for e in c.approvals()] == ["read", "edit"]


def test_forked_subagent_approval_policy_is_fixed_to_never(store):
    p = store.create_session(cwd="/r")
    with p.turn():
        p.append("approval/grant", {"tool": "read", "scope": "session"})
    sub = p.fork_subagent("t")
    assert sub.header.metadata["approval_policy"] == "never"
    assert sub.approvals() == []
    before = sub.last_seq
    with pytest.raises(errors.ValidationError, match="fixed to never"):
        sub.append("approval/grant", {"tool": "bash", "scope": "session"})
    with pytest.raises(errors.ValidationError):
        sub.append_batch([("user/message", {"content": "x"}),
                          ("approval/policy", {"policy": "always"})])
    assert sub.last_seq == before
    # a spawned (unseeded) subagent is not fixed
    spawned = p.spawn_subagent("t2")
    spawned.append("approval/grant", {"tool": "bash", "scope": "session"})


def test_sandbox_settings_are_snapshotted_into_the_subagent(store):
    p = store.create_session(cwd="/r")
    p.append("sandbox/mode", {"mode": "read-only", "network": False})
    p.append("sandbox/mode", {"mode": "workspace-write", "network": False})
    sub = p.spawn_subagent("t")
    snap = next(e for e in sub.events() if e.type == "sandbox/mode")
    assert snap.data["mode"] == "workspace-write"
    assert snap.data["snapshot_of"] == {"session": p.id, "seq": 1}
    p.append("sandbox/mode", {"mode": "danger-full-access", "network": True})
    assert [e.data["mode"] for e in sub.events() if e.type == "sandbox/mode"] == [
        "workspace-write"]
    explicit = p.spawn_subagent("t", sandbox={"mode": "read-only"})
    modes = [e.data for e in explicit.events() if e.type == "sandbox/mode"]
    assert modes == [{"mode": "read-only", "snapshot_of": {"session": p.id,
                                                            "explicit": True}}]
    plain = store.create_session(cwd="/r2").spawn_subagent("t")
    assert [e.type for e in plain.events()] == ["user/message"]


# --- results flow back -----------------------------------------------------------

def spawning_turn(p, call_id):
    p.append("turn/start", {})
    p.append("assistant/message", {"content": "", "tool_calls": [
        {"id": call_id, "name": "task", "arguments": {}}]})
    p.append("tool/call", {"call_id": call_id, "name": "task", "arguments": {}})


def test_foreground_subagent_result_exactly_once(store):
    p = store.create_session(cwd="/r")
    spawning_turn(p, "t1")
    sub = p.spawn_subagent("summarize", call_id="t1")
    sub.append("assistant/message", {"content": "summary done", "tool_calls": []})
    first = sub.finish()
    again = sub.finish()
    assert first.seq == again.seq
    results = [e for e in p.events() if e.type == "tool/result"]
    assert len(results) == 1
    assert results[0].data == {"call_id": "t1", "output": "summary done",
                               "child_session": sub.id, "status": "done", "is_error": False}
    assert p.inspect()[1].closers[0].type == "turn/end"  # the call is answered


def test_background_subagent_job_id_then_notification(store):
    p = store.create_session(cwd="/r")
    spawning_turn(p, "bg1")
    sub = p.spawn_subagent("long job", call_id="bg1", background=True)
    ack = p.tail(1)[0]
    assert ack.type == "tool/result" and ack.data["job_id"] == sub.id
    assert ack.data["status"] == "running"
    p.append("turn/end", {"interrupted": False})
    with sub.turn():
        sub.append("assistant/message", {"content": "finished the job", "tool_calls": []})
    assert [c.id for c in p.missed_notifications()] == [sub.id]
    note = sub.finish()
    assert note.type == "subagent/notification" and note.data["output"] == "finished the job"
    assert sub.finish().seq == note.seq
    assert p.missed_notifications() == []


def test_finish_requires_a_subagent_and_a_call(store):
    p = store.create_session(cwd="/r")
    with pytest.raises(errors.InvalidStateError):
        p.finish()
    with pytest.raises(errors.InvalidStateError):
        p.spawn_subagent("no call").finish()


# --- lineage and dependents --------------------------------------------------------

def test_lineage_tree_and_listing(store):
    p = store.create_session(cwd="/r")
    turns(p, 1)
    f = p.fork(0)
    sub = p.spawn_subagent("s")
    subsub = sub.spawn_subagent("s2")
    assert [c.id for c in p.children()] == [f.id, sub.id]
    assert [c.id for c in p.children(include_subagents=False)] == [f.id]
    walk = [(d, h.id) for d, h in p.tree().walk()]
    assert walk == [(0, p.id), (1, f.id), (1, sub.id), (2, subsub.id)]
    assert {h.id for h in store.sessions()} == {p.id, f.id}
    assert {h.id for h in store.sessions(include_subagents=True)} == {p.id, f.id, sub.id,
                                                                       subsub.id}
    assert subsub.parent().parent().id == p.id


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_parent_with_dependents_cannot_be_purged(store):
    p = store.create_session(cwd="/r")
    turns(p, 1)
    f = p.fork(0)
    spawned = p.spawn_subagent("s")
    assert [h.id for h in store.dependents(p.id)] == [f.id]   # only seeded children
    assert store.dependents(spawned.id) == []
    conn = apsw.Connection(store.path)
    conn.execute("PRAGMA foreign_keys=ON").fetchall()
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)       # even without the triggers
    with pytest.raises(apsw.ConstraintError):
        conn.execute("DELETE FROM sessions WHERE sid = ?", (p._sid,))
    conn.close()
    assert f.verify().ok


# --- recovery and concurrency --------------------------------------------------------

def test_load_repairs_a_crashed_child_without_touching_the_parent(store):
    p = store.create_session(cwd="/r")
    turns(p, 2)
    c = p.fork(2)
    c.append("turn/start", {})
    c.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "k", "name": "bash", "arguments": {}}]})
    c.append("tool/call", {"call_id": "k", "name": "bash", "arguments": {}})
    parent_before = (p.last_seq, p.verify().chain_head)
    loaded = store.load(c.id)
    assert [e.type for e in loaded.tail(2)] == ["tool/result", "turn/end"]
    assert (p.last_seq, p.verify().chain_head) == parent_before
    assert loaded.verify().ok and store.load(c.id).last_seq == loaded.last_seq


def test_concurrent_appends_to_parent_and_children(store):
    p = store.create_session(cwd="/r")
    turns(p, 2)
    kids = [p.fork(5) for _ in range(3)] + [p.spawn_subagent(f"s{i}") for i in range(2)]
    failures: list[BaseException] = []

    def work(s, tag):
        try:
            for i in range(40):
                s.append("user/message", {"content": f"{tag}{i}"})
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(s, f"t{k}-")) for k, s in
               enumerate([p, *kids])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    for k, s in enumerate([p, *kids]):
        mine = [e.data["content"] for e in s.events(s.header.seed_length)
                if e.type == "user/message" and e.data["content"].startswith(f"t{k}-")]
        assert mine == [f"t{k}-{i}" for i in range(40)]
        assert s.verify().ok


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_fork_seed_chain_must_match_the_parent_frame(store):
    """A child records the parent's chain at seed - 1; reading and verifying the
    child both check that the parent's log still carries it."""
    p = store.create_session(cwd="/r")
    turns(p, 2)
    c = p.fork(2)
    c.append("user/message", {"content": "x"})
    conn = foreign(store)
    conn.execute("UPDATE sessions SET seed_chain = seed_chain + 1 WHERE sid = ?", (c._sid,))
    conn.close()
    forged = store.session(c.id)
    with pytest.raises(errors.HeadMismatchError):
        list(forged.events())
    report = forged.verify()
    # the parent's log is intact: the defect is the fork's record of it
    assert p.verify().ok
    assert not report.ok and report.session == c.id
    assert report.scan.status == Status.BAD_CHAIN
