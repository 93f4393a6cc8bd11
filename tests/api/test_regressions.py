"""Regression tests for the bugs a review of the write path, leases, forks,
subagents, projections and context found (each test failed before its fix)."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

import trajlog
from trajlog import errors, projections
from trajlog.projections import context

SQLITE_INJECT = "injects an apsw error into the SQLite backend's statements"


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "r.db")


@pytest.fixture
def store(path):
    with trajlog.open(path) as s:
        yield s


def _interrupted_turn_with_running_call(s):
    """A turn that an exception interrupted while tool call c1 was running:
    turn() closes the turn but leaves c1 open."""
    with pytest.raises(RuntimeError), s.turn():
        s.append("assistant/message", {"content": "x",
                                       "tool_calls": [{"id": "c1", "name": "read"}]})
        s.append("tool/call", {"call_id": "c1", "name": "read"})
        raise RuntimeError("crash")


def _run_batched(store, fns):
    """Run fns[0] as a group-commit leader held at the write lock, let fns[1:]
    queue behind it, then release: fns[1:] commit together in one transaction."""
    results: list = [None] * len(fns)

    def runner(i):
        try:
            results[i] = ("ok", fns[i]())
        except BaseException as exc:
            results[i] = ("err", exc)

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(len(fns))]
    group = store._e.writer.commit
    write_lock = store._e.backend._lock
    write_lock.acquire()
    try:
        threads[0].start()
        deadline = time.monotonic() + 5
        while not group._leader and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.1)  # the leader has drained the queue and blocks on the lock
        for t in threads[1:]:
            t.start()
        while len(group._queue) < len(fns) - 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(group._queue) == len(fns) - 1
    finally:
        write_lock.release()
    for t in threads:
        t.join(10)
    return results


# --- group commit: one request's failure takes down the whole batch -----------------

def test_batch_key_on_later_row_fails_innocent_requests_in_the_same_group(store):
    bad = store.create_session(cwd="/r")
    innocent = store.create_session(cwd="/r")
    batch = [("a/b", {}), ("c/d", {}, {"idempotency_key": "k"})]
    bad.append_batch(batch)
    results = _run_batched(store, [
        lambda: innocent.append("lead/x", {}),
        lambda: bad.append_batch(batch),            # an idempotent retry
        lambda: innocent.append("note/x", {"n": 1}),
    ])
    assert results[2][0] == "ok", results[2]
    assert results[1][0] == "ok" or isinstance(results[1][1],
                                               errors.IdempotencyConflictError), results[1]


def test_causal_parent_overflow_is_typed(store):
    s = store.create_session(cwd="/r")
    with pytest.raises(errors.ValidationError):
        s.append("x/y", {}, causal_parent=2**63)
    assert s.last_seq == -1


@pytest.mark.sqlite_only(reason=SQLITE_INJECT)
def test_one_failing_request_spares_the_rest_of_its_group_commit(store, monkeypatch):
    """A failure inside one request's inserts (injected: the real insert raises
    a constraint error for one session) rolls back that request alone."""
    import apsw

    from trajlog.storage import statements as storage

    bad = store.create_session(cwd="/r")
    innocent = store.create_session(cwd="/r")
    real, real_one = storage.insert_chunks, storage.insert_chunk

    def failing(conn, rows):
        rows = list(rows)
        if rows and rows[0][0] >> 32 == bad._sid:
            real(conn, rows)               # written, then the request fails
            raise apsw.ConstraintError("injected")
        real(conn, rows)

    monkeypatch.setattr(storage, "insert_chunks", failing)
    monkeypatch.setattr(storage, "insert_chunk", lambda conn, row: failing(conn, [row]))
    results = _run_batched(store, [
        lambda: innocent.append("lead/x", {}),
        lambda: bad.append("x/y", {}),
        lambda: innocent.append("note/x", {"n": 1}),
    ])
    monkeypatch.setattr(storage, "insert_chunks", real)
    monkeypatch.setattr(storage, "insert_chunk", real_one)
    assert results[0][0] == "ok" and results[2][0] == "ok", results
    assert results[1][0] == "err" and isinstance(results[1][1], errors.StoreError)
    assert bad.last_seq == -1 and list(bad.events()) == []
    assert [e.type for e in innocent.events()] == ["lead/x", "note/x"]
    assert bad.append("x/y", {}).seq == 0      # the cached state was not left ahead


# --- idempotency ---------------------------------------------------------------------

def test_idempotent_retry_with_tuple_data_returns_the_original(store):
    s = store.create_session(cwd="/r")
    s.append("x/y", {"args": (1, 2)}, idempotency_key="k")
    again = s.append("x/y", {"args": (1, 2)}, idempotency_key="k")
    assert again == s.get(0) and again.data == {"args": [1, 2]} and s.last_seq == 1
    assert s.get(1).type == "request/retry"
    with pytest.raises(errors.IdempotencyConflictError):
        s.append("x/y", {"args": (1, 3)}, idempotency_key="k")


def test_retried_batch_with_key_on_second_row(store):
    s = store.create_session(cwd="/r")
    batch = [("a/b", {}), ("c/d", {}, {"idempotency_key": "k"})]
    first = s.append_batch(batch)
    try:
        again = s.append_batch(batch)
    except errors.IdempotencyConflictError:
        again = None
    if again is not None:
        assert again == first
    assert s.last_seq == (1 if again is None else 2)   # a retry is recorded once


# --- leases and recovery ---------------------------------------------------------------

def test_lease_released_by_one_handle_while_another_holds_it(path, store):
    sid = store.create_session(cwd="/r").id
    h1, h2 = store.session(sid), store.session(sid)
    with trajlog.open(path) as other, h2.lease():
        with h1.lease():
            pass
        with pytest.raises(errors.LeaseHeldError):
            other.session(sid).append("intruder/x", {})


def test_load_refuses_while_this_store_writes_an_open_turn(store):
    s = store.create_session(cwd="/r")
    with s.turn():
        s.append("user/message", {"content": "hi"})
        with pytest.raises(errors.LiveWriterError):
            store.load(s.id)
    assert [e.type for e in s.events()].count("turn/end") == 1


def test_load_that_raises_because_the_log_moved_wrote_nothing(store):
    s = store.create_session(cwd="/r")
    s.append("turn/start", {})
    s.append("user/message", {"content": "hi"})
    original = store._e.writer.seed

    def racing(ref, tracker, compactions, last_seq):
        store.session(s.id).append("note/x", {})   # a concurrent plain writer
        original(ref, tracker, compactions, last_seq)

    store._e.writer.seed = racing
    try:
        store.load(s.id)
        raised = False
    except errors.InvalidStateError:
        raised = True
    types = [e.type for e in s.events()]
    if raised:
        assert types[-1] == "note/x", types   # a refused load writes nothing
    else:
        assert types[-1] == "turn/end"


# --- forks -------------------------------------------------------------------------------

def test_fork_refuses_reusing_a_call_id_of_its_prefix(store):
    p = store.create_session(cwd="/r")
    _interrupted_turn_with_running_call(p)
    with pytest.raises(errors.ValidationError):
        p.append("assistant/message", {"tool_calls": [{"id": "c1", "name": "read"}]})
    child = p.fork(p.last_seq)
    with pytest.raises(errors.ValidationError):
        child.append("assistant/message", {"tool_calls": [{"id": "c1", "name": "read"}]})


def test_load_of_fork_with_open_prefix_call_after_another_connection_committed(path, store):
    p = store.create_session(cwd="/r")
    _interrupted_turn_with_running_call(p)
    child = p.fork(p.last_seq)
    _, report = child.inspect()
    assert report.outcome == "repair"
    with trajlog.open(path) as other:
        other.create_session(cwd="/elsewhere")   # changes data_version for `store`
    store.load(child.id)
    assert child.inspect()[1].outcome == "balanced"


# --- subagents ------------------------------------------------------------------------------

def test_forked_subagent_policy_cannot_be_overridden_by_metadata(store):
    p = store.create_session(cwd="/r")
    for key in ("approval_policy", "kind", "background", "parent_call_id", "task"):
        with pytest.raises(errors.InvalidArgumentError, match=key):
            p.fork_subagent("t", metadata={key: "ask"})
    with pytest.raises(errors.InvalidArgumentError, match="forked_at"):
        p.fork(-1, metadata={"forked_at": 99})
    assert len(store.sessions(include_subagents=True)) == 1   # nothing was created
    sub = p.fork_subagent("t", metadata={"note": "kept"})
    assert sub.header.metadata["note"] == "kept"
    with pytest.raises(errors.ValidationError):
        sub.append("approval/grant", {"tool": "rm"})


def test_forked_subagent_finish_does_not_report_the_parents_message(store):
    p = store.create_session(cwd="/r")
    with p.turn():
        p.append("assistant/message", {"content": "PARENT SAYS"})
    with p.turn():
        p.append("assistant/message", {"tool_calls": [{"id": "k", "name": "task"}]})
        p.append("tool/call", {"call_id": "k", "name": "task"})
        sub = p.fork_subagent("do it", call_id="k")
        result = sub.finish()
    assert result.data["output"] != "PARENT SAYS"


def test_refused_background_spawn_creates_no_child(store):
    p = store.create_session(cwd="/r")
    before = len(store.sessions(include_subagents=True))
    with pytest.raises(errors.ValidationError):
        p.spawn_subagent("x", call_id="never-requested", background=True)
    assert len(store.sessions(include_subagents=True)) == before


# --- projections ------------------------------------------------------------------------------

def test_goal_view_does_not_share_the_cached_state(store):
    s = store.create_session(cwd="/r")
    s.append("goal/change", {"revision": 1, "goal": {"title": "a"}})
    projections.goal(s).goal["title"] = "HACKED"
    assert projections.goal(s).goal == {"title": "a"}


def test_concurrent_projection_reads_do_not_double_fold(store, monkeypatch):
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "0"})
    projections.model_history(s)                   # cache a state at seq 0
    for i in range(1, 4):
        s.append("user/message", {"content": str(i)})
    barrier = threading.Barrier(2, timeout=2)
    reading = type(store._e.reading)
    real = reading.events

    def synced(self, *args, **kwargs):
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()
        yield from real(self, *args, **kwargs)

    monkeypatch.setattr(reading, "events", synced)
    threads = [threading.Thread(target=projections.model_history, args=(s,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    monkeypatch.setattr(reading, "events", real)
    assert [m.content for m in projections.model_history(s)] == ["0", "1", "2", "3"]


def test_raw_compaction_append_cannot_split_a_tool_call(store):
    s = store.create_session(cwd="/r")
    s.append("assistant/message", {"tool_calls": [{"id": "z", "name": "n"}]})
    s.append("tool/call", {"call_id": "z", "name": "n"})
    s.append("tool/result", {"call_id": "z", "output": "o"})
    with pytest.raises(errors.ValidationError):
        s.compact(0, 1, "s")
    with pytest.raises(errors.ValidationError):
        s.append("compaction/apply", {"op": "surface-replace", "from_seq": 0, "to_seq": 1,
                                      "summary": "s"})


# --- untyped exceptions from public calls -------------------------------------------------

@pytest.mark.parametrize("bad", [123, "not-a-uuid"])
def test_create_session_bad_session_id_is_typed(store, bad):
    with pytest.raises((errors.TrajlogError, TypeError)) as info:
        store.create_session(session_id=bad)
    assert not isinstance(info.value, AttributeError)
    assert isinstance(info.value, (errors.TrajlogError,)) or type(info.value) is TypeError


def test_context_policy_with_unknown_required_field_is_typed(store):
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "hi"})
    with pytest.raises(errors.InvalidArgumentError, match="nope"):
        context.ContextPolicy(require=("nope",), require_for=("conversation.recent",))
    policy = context.ContextPolicy(require=("source",), require_for=("conversation.recent",))
    assert context.build_context(s, policy).injection.type == "context/injection"


def test_context_task_contract_with_scalar_forbidden(store):
    s = store.create_session(cwd="/r")
    s.append("task/contract", {"forbidden": 5})
    build = context.build_context(s)
    assert build.injection.type == "context/injection"


# --- further regressions -----------------------------------------------------------------

def test_verify_of_a_fork_without_own_events_names_the_fork(store):
    p = store.create_session(cwd="/r")
    with p.turn():
        p.append("user/message", {"content": "hi"})
    child = p.fork(p.last_seq)
    report = child.verify()
    assert report.ok and report.session == child.id


def test_raw_compaction_in_a_batch_is_checked_too(store):
    s = store.create_session(cwd="/r")
    s.append("assistant/message", {"tool_calls": [{"id": "z", "name": "n"}]})
    s.append("tool/call", {"call_id": "z", "name": "n"})
    s.append("tool/result", {"call_id": "z", "output": "o"})
    bad = {"op": "surface-replace", "from_seq": 0, "to_seq": 1, "summary": "s"}
    with pytest.raises(errors.ValidationError):
        s.append_batch([("user/message", {"content": "x"}), ("compaction/apply", bad)])
    with pytest.raises(errors.ValidationError):
        s.append("compaction/other", bad)          # model_history applies any compaction/*
    with pytest.raises(errors.ValidationError):
        s.append("compaction/apply", {**bad, "from_seq": "0"})
    assert s.last_seq == 2
    ok = s.append("compaction/apply", {**bad, "to_seq": 2})
    assert [m.role for m in projections.model_history(s)] == ["summary"]
    assert ok.seq == 3


def test_context_task_contract_with_one_forbidden_string(store):
    s = store.create_session(cwd="/r")
    s.append("task/contract", {"forbidden": "rm -rf"})
    forbidden = context.build_context(s).summary["forbidden actions"]
    assert len(forbidden) == 1 and forbidden[0].startswith("rm -rf ["), forbidden


def test_bad_metadata_and_envelope_types_are_typed(store):
    s = store.create_session(cwd="/r")
    with pytest.raises(TypeError, match="metadata"):
        store.create_session(metadata="abc")
    with pytest.raises(TypeError, match="sandbox"):
        s.spawn_subagent("t", sandbox="abc")
    with pytest.raises(TypeError, match="envelope"):
        s.append_batch([("a/b", {}, "ab")])
    assert len(store.sessions(include_subagents=True)) == 1 and s.last_seq == -1


def test_request_config_view_is_the_callers(store):
    s = store.create_session(cwd="/r")
    s.append("request/header", {"model": "m", "tools": [{"name": "t"}],
                                "parameters": {"t": 1}})
    cfg = projections.request_config(s)
    cfg.tools.append("HACK")
    cfg.parameters["t"] = 2
    again = projections.request_config(s)
    assert again.tools == [{"name": "t"}] and again.parameters == {"t": 1}
