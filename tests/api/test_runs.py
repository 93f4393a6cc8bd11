"""Run envelopes and model switches: what
``Session.run`` appends, what ``projections.runs`` folds back from the log
alone, the integrity hash, nesting, the run tree over subagents with cost
per delegation path, and the trajectory showing a switch.

Each test names, in its docstring, the rule whose removal makes it fail."""

from __future__ import annotations

import hashlib

import pytest

import trajlog
from trajlog import errors, projections
from trajlog.api.run_scope import current_run
from trajlog.projections.engine import from_scratch
from trajlog.projections.envelopes import FINALIZED, STARTED, Runs, settle


def one_turn(s, k, tokens=(10, 5)):
    with s.turn():
        s.append("user/message", {"content": f"task {k}"})
        s.append("assistant/message", {
            "content": "reading", "usage": {"input_tokens": tokens[0],
                                            "output_tokens": tokens[1]},
            "tool_calls": [{"id": f"c{k}", "name": "read", "arguments": {}}]})
        s.append("tool/call", {"call_id": f"c{k}", "name": "read", "arguments": {}})
        s.append("tool/result", {"call_id": f"c{k}", "output": "ok", "is_error": False})


def test_started_records_every_field_and_the_envelope_folds_them_back(store):
    """Rule: run/started carries identity, model, params, policy and tool-contract
    versions, static prefix hash, privacy mode, parent run (drop any: fails)."""
    s = store.create_session(cwd="/r", agent_preset="coder-v1",
                             metadata={"tenant": "acme", "user": "alice"})
    prefix = {"system": "you are a coder", "tools": ["read"]}
    with s.run(model="gpt-x", params={"temperature": 0.2}, policy_version="ctx-3",
               tool_contract_version="tools-7", privacy_mode="metadata",
               static_prefix=prefix) as run:
        one_turn(s, 1)
    started = s.get(run.started.seq)
    assert started.type == STARTED
    d = started.data
    assert d["run_id"] == run.id
    assert d["identity"] == {"session": s.id, "agent_preset": "coder-v1", "tenant": "acme",
                             "user": "alice"}
    assert (d["model"], d["params"]) == ("gpt-x", {"temperature": 0.2})
    assert (d["policy_version"], d["tool_contract_version"]) == ("ctx-3", "tools-7")
    assert d["privacy_mode"] == "metadata" and d["parent_run"] is None
    # JSON with sorted keys: the same prefix written in another order hashes equal
    same = {"tools": ["read"], "system": "you are a coder"}
    want = hashlib.sha256(b'{"system":"you are a coder","tools":["read"]}').hexdigest()
    assert d["static_prefix_hash"] == want
    with s.run(model="gpt-x", static_prefix=same) as again:
        pass
    assert s.get(again.started.seq).data["static_prefix_hash"] == want
    with s.run(model="gpt-x", static_prefix="sys text") as text:
        pass
    assert s.get(text.started.seq).data["static_prefix_hash"] == hashlib.sha256(
        b"sys text").hexdigest()

    env = projections.runs(s)[0]
    assert (env.run_id, env.session_id, env.model, env.params) == (
        run.id, s.id, "gpt-x", {"temperature": 0.2})
    assert (env.policy_version, env.tool_contract_version, env.privacy_mode) == (
        "ctx-3", "tools-7", "metadata")
    assert env.static_prefix_hash == want and env.identity["tenant"] == "acme"
    assert (env.started_seq, env.finalized_seq) == (run.started.seq, run.finalized.seq)
    assert env.state == "completed" and env.integrity == "ok" and env.error is None


def test_finalized_costs_four_surfaces_from_the_log_and_add_cost(store):
    """Rule: inference usage is summed from assistant/message usage, tool calls and
    events counted, add_cost amounts added; four surfaces always present."""
    s = store.create_session(cwd="/r")
    with s.run(model="m") as run:
        one_turn(s, 1, (10, 5))
        one_turn(s, 2, (7, 3))
        run.add_cost("inference", 0.25)
        run.add_cost("inference", 0.5)
        run.add_cost("retrieval", 0.01, queries=3)
        run.add_cost("persistence", 0.001, bytes=4096)
    cost = run.finalized.data["cost"]
    assert set(cost) == {"inference", "retrieval", "tools", "persistence"}
    assert cost["inference"] == {"amount": 0.75, "requests": 2, "input_tokens": 17,
                                 "output_tokens": 8}
    assert cost["retrieval"] == {"amount": 0.01, "queries": 3}
    assert cost["tools"] == {"amount": 0.0, "calls": 2}
    # every event from run/started to the one before run/finalized
    assert cost["persistence"] == {"amount": 0.001, "bytes": 4096,
                                   "events": run.finalized.seq - run.started.seq}
    assert projections.runs(s)[0].cost == cost
    integ = run.finalized.data["integrity"]
    assert (integ["first_seq"], integ["last_seq"], integ["events"]) == (
        run.started.seq, run.finalized.seq - 1, run.finalized.seq - run.started.seq)
    with s.run(model="m") as r2:
        for bad in (("gpu", 1.0), ("tools", -1.0), ("tools", float("nan")), ("tools", True)):
            with pytest.raises(errors.ValidationError):
                r2.add_cost(*bad)
    assert r2.finalized.data["cost"]["tools"] == {"amount": 0.0}
    with pytest.raises(errors.InvalidStateError):
        r2.add_cost("tools", 1.0)


def test_failed_and_interrupted_runs_are_finalized_and_reraised(store):
    """Rule: an exception in the block finalizes the run as failed (a
    BaseException as interrupted), records only the exception's type, and
    propagates."""
    s = store.create_session(cwd="/r")
    with pytest.raises(ValueError, match="boom sk-secret"), s.run(model="m"):
        s.append("user/message", {"content": "x"})
        raise ValueError("boom sk-secret")
    with pytest.raises(KeyboardInterrupt), s.run(model="m"):
        raise KeyboardInterrupt
    failed, interrupted = projections.runs(s)
    assert (failed.state, failed.error) == ("failed", "ValueError")
    assert (interrupted.state, interrupted.error) == ("interrupted", "KeyboardInterrupt")
    assert failed.integrity == interrupted.integrity == "ok"
    assert all("sk-secret" not in repr(e.data) for e in s.events())
    assert current_run(s.id) is None   # the context forgot both


def test_an_open_run_is_reported_open(store):
    """Rule: a run/started with no run/finalized (a crash) is open, its usage
    tallied from the log so far."""
    s = store.create_session(cwd="/r")
    s.append(STARTED, {"run_id": "r-crashed", "model": "m", "identity": {"session": s.id}})
    one_turn(s, 1, (4, 2))
    (env,) = projections.runs(s)
    assert (env.state, env.integrity, env.finalized_seq) == ("open", "open", None)
    assert env.cost["inference"]["input_tokens"] == 4
    assert env.cost["tools"]["calls"] == 1


def test_nested_runs_name_their_parent_and_cost_only_their_own_events(store):
    """Rules: a run opened inside another of the same session defaults its
    parent_run to it; each event's usage goes to the innermost open run; the
    tree sums the child into the parent's path total."""
    s = store.create_session(cwd="/r")
    with s.run(model="planner") as outer:
        one_turn(s, 1, (100, 10))
        with s.run(model="worker") as inner:
            one_turn(s, 2, (1, 1))
            inner.add_cost("tools", 2.0)
        outer.add_cost("tools", 1.0)
    assert inner.started.data["parent_run"] == outer.id
    envs = {e.run_id: e for e in projections.runs(s)}
    assert envs[outer.id].cost["inference"]["input_tokens"] == 100
    assert envs[inner.id].cost["inference"]["input_tokens"] == 1
    assert envs[outer.id].integrity == envs[inner.id].integrity == "ok"
    (root,) = projections.run_tree(s)
    assert root.run.run_id == outer.id and root.children[0].path == (outer.id, inner.id)
    assert root.total["inference"]["input_tokens"] == 101
    assert root.total["tools"]["amount"] == 3.0
    # an explicit parent wins over the enclosing run
    with s.run(model="m") as a, s.run(model="m", parent_run="elsewhere") as b:
        pass
    assert b.started.data["parent_run"] == "elsewhere" and a.id != b.id


def test_run_tree_sums_cost_per_delegation_path_over_subagents(store):
    """Rule: run_tree walks the session tree (subagents and forks), links runs by
    parent_run and sums each path; a fork's inherited runs count once."""
    s = store.create_session(cwd="/r")
    with s.run(model="lead") as lead:
        s.append("user/message", {"content": "go"})
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "t1", "name": "task", "arguments": {}},
            {"id": "t2", "name": "task", "arguments": {}}]})
        s.append("tool/call", {"call_id": "t1", "name": "task", "arguments": {}})
        s.append("tool/call", {"call_id": "t2", "name": "task", "arguments": {}})
        a = s.spawn_subagent("review", call_id="t1")
        b = s.spawn_subagent("test", call_id="t2")
        with a.run(model="small", parent_run=lead.id) as ra:
            ra.add_cost("inference", 0.10)
            aa = a.spawn_subagent("deeper")
            with aa.run(model="tiny", parent_run=ra.id) as raa:
                raa.add_cost("inference", 0.01)
        with b.run(model="small", parent_run=lead.id) as rb:
            rb.add_cost("inference", 0.20)
        a.finish()
        b.finish()
        lead.add_cost("inference", 1.0)
    s.fork(at_seq=s.last_seq)   # inherits lead's run: must not count twice
    (root,) = projections.run_tree(s)
    nodes = {n.path: n for n in root.walk()}
    assert set(nodes) == {(lead.id,), (lead.id, ra.id), (lead.id, ra.id, raa.id),
                          (lead.id, rb.id)}
    assert nodes[(lead.id, ra.id, raa.id)].total["inference"]["amount"] == 0.01
    assert nodes[(lead.id, ra.id)].total["inference"]["amount"] == pytest.approx(0.11)
    assert nodes[(lead.id, rb.id)].total["inference"]["amount"] == pytest.approx(0.20)
    assert root.total["inference"]["amount"] == pytest.approx(1.31)
    assert nodes[(lead.id, ra.id)].run.session_id == a.id


def _copy(src, dst, change=None):
    """Write src's events into dst with the same times (a log rewritten and
    re-chained: its frame checks all pass), changing the event at ``change``."""
    items = []
    for ev in src.events():
        data = ev.data
        if ev.seq == change:
            data = {**data, "content": "rewritten"}
        items.append((ev.type, data, {"time": ev.time, **ev.envelope}))
    dst.append_batch(items)


def test_integrity_detects_a_rewritten_log_but_not_an_exported_copy(store, tmp_path):
    """Rule: runs() binds the recorded digest to the log's frame chain at the
    run's last seq (remove the comparison: the rewritten log reads ok).  An
    export / import keeps the frames and their chain: the copy reads ok."""
    s = store.create_session(cwd="/r")
    with s.run(model="m"):
        one_turn(s, 1)
    assert projections.runs(s)[0].integrity == "ok"
    store.export(s.id, tmp_path / "s.tlog")
    with trajlog.open(str(tmp_path / "other.db")) as other:
        other.import_path(tmp_path / "s.tlog")
        assert projections.runs(other.session(s.id))[0].integrity == "ok"
    changed, copied = store.create_session(cwd="/r"), store.create_session(cwd="/r")
    _copy(s, changed, change=2)   # the user message inside the run
    _copy(s, copied)              # the same events re-chained in another log
    assert changed.verify().ok    # its frames verify: they were re-chained
    for log in (changed, copied):   # a run is bound to the log it was finalized in
        env = projections.runs(log)[0]
        assert env.integrity == "mismatch" and "frame chain" in env.integrity_detail


def test_integrity_flags_a_finalized_record_that_does_not_match(store):
    """Rules: a digest, algorithm or first seq that the log does not give is a
    mismatch; a recorded range ending before the event preceding run/finalized
    is unverified (another writer appended in between)."""
    s = store.create_session(cwd="/r")
    for rid, integ in (("r1", {"digest": "00" * 32}), ("r2", {"algorithm": "md5"}),
                       ("r3", {"first_seq": 0}), ("r4", {"last_seq": -5})):
        start = s.append(STARTED, {"run_id": rid, "model": "m"})
        s.append("user/message", {"content": "x"})
        good = {"algorithm": "sha256-chain/1", "first_seq": start.seq,
                "last_seq": start.seq + 1, "events": 2}
        from trajlog.projections.envelopes import digest_add, digest_start
        digest = digest_start(rid)
        for ev in s.events(start.seq, start.seq + 1):
            digest = digest_add(digest, ev)
        good["digest"] = digest.hex()
        if rid == "r4":
            integ = {"last_seq": start.seq}
        s.append(FINALIZED, {"run_id": rid, "state": "completed",
                             "integrity": {**good, **integ}})
    envs = {e.run_id: e for e in projections.runs(s)}
    assert [envs[r].integrity for r in ("r1", "r2", "r3", "r4")] == [
        "mismatch", "mismatch", "mismatch", "unverified"]
    # the same record with nothing changed is ok (the control)
    start = s.append(STARTED, {"run_id": "r5", "model": "m"})
    digest = digest_add(digest_start("r5"), start)
    s.append(FINALIZED, {"run_id": "r5", "state": "completed", "integrity": {
        "algorithm": "sha256-chain/1", "first_seq": start.seq, "last_seq": start.seq,
        "events": 1, "digest": digest.hex()}})
    assert projections.runs(s)[-1].integrity == "ok"


def test_an_erased_event_inside_a_run_is_reported_erased_not_tampered(store):
    """Decision: erasure (store.erase, a tombstone) legitimately removes content,
    so the digest cannot be recomputed; the run says ``erased`` and names the
    seqs, while s.verify() still proves the frames (rule: erased seqs are
    checked before the digest -- remove it and this reads mismatch)."""
    s = store.create_session(cwd="/r")
    with s.run(model="m"), s.turn():
        secret = s.append("user/message", {"content": "my key is sk-abc"})
    store.erase(s.id, secret.seq, reason="gdpr", actor="human:alice")
    env = projections.runs(s)[0]
    assert env.integrity == "erased" and str(secret.seq) in env.integrity_detail
    assert s.verify().ok


def test_incremental_fold_equals_from_scratch(store):
    """Rule: the runs fold is a pure fold (cached states resume correctly)."""
    s = store.create_session(cwd="/r")
    with s.run(model="m"):
        one_turn(s, 1)
    projections.runs(s)      # cache a state mid-log
    with s.run(model="m"), s.run(model="m2"):
        one_turn(s, 2)
    assert projections.runs(s) == settle(from_scratch(s.events(), Runs()), s._chain_at)


def test_model_switch_is_an_event_and_the_trajectory_shows_it(store):
    """Rules: switch_model appends model/switch {old, new, reason, context_version,
    run_id}; the trajectory shows a switch inside its turn, one between turns on
    the next turn, and one no turn followed on a trailing turn with no steps."""
    s = store.create_session(cwd="/r")
    with s.run(model="a") as run:
        with s.turn():
            s.append("user/message", {"content": "x"})
            sw = s.switch_model(old="a", new="b", reason="context too long",
                                context_version="ctx-2")
        between = s.switch_model(old="b", new="c", reason="cost")
        with s.turn():
            s.append("user/message", {"content": "y"})
    last = s.switch_model(old="c", new="a", reason="back")
    assert sw.type == "model/switch" and sw.data == {
        "old": "a", "new": "b", "reason": "context too long", "context_version": "ctx-2",
        "run_id": run.id}
    assert last.data["run_id"] is None
    t1, t2, tail = projections.trajectory(s)
    assert [(x.seq, x.new, x.reason, x.context_version) for x in t1.switches] == [
        (sw.seq, "b", "context too long", "ctx-2")]
    assert [x.seq for x in t2.switches] == [between.seq] and between.seq < t2.start_seq
    assert tail.steps == [] and tail.start_seq is None and [x.new for x in tail.switches] == [
        "a"]
    assert [x["new"] for x in projections.runs(s)[0].switches] == ["b", "c"]
    with pytest.raises(TypeError):
        s.switch_model(old="a", new="", reason="x")


def test_bad_run_arguments_write_nothing(store):
    """Rule: model, privacy mode, params and ids are checked before any write."""
    s = store.create_session(cwd="/r")
    for kwargs in ({"model": ""}, {"model": "m", "privacy_mode": "secret"},
                   {"model": "m", "params": [1]}, {"model": "m", "parent_run": 3}):
        with pytest.raises((TypeError, errors.ValidationError)), s.run(**kwargs):
            pass
    assert s.last_seq == -1


def test_pinned_artifacts_are_recorded_and_on_the_envelope(store):
    """Rules: run(..., artifacts={name: id}) records them in run/started as
    ``artifacts`` and the envelope exposes them (drop either: fails); anything
    but a mapping of non-empty str to non-empty str is InvalidArgumentError
    before any write (drop the check: the bad ones are written)."""
    s = store.create_session(cwd="/r")
    pinned = {"a.py": "sha256:" + "ab" * 32, "dataset": "ds-2024-07", "tools": "doc-7"}
    with s.run(model="m", artifacts=pinned) as run:
        one_turn(s, 1)
    assert s.get(run.started.seq).data["artifacts"] == pinned
    with s.run(model="m") as plain:   # none given: an empty mapping
        pass
    assert plain.started.data["artifacts"] == {}
    envs = {e.run_id: e for e in projections.runs(s)}
    assert envs[run.id].artifacts == pinned and envs[plain.id].artifacts == {}
    assert envs[run.id].integrity == "ok"
    last = s.last_seq
    for bad in (["sha256:x"], "sha256:x", {"a": 1}, {1: "x"}, {"a": None}, {"": "x"},
                {"a": ""}, {"a": b"x"}):
        with pytest.raises(errors.InvalidArgumentError), s.run(model="m", artifacts=bad):
            pass
    assert s.last_seq == last
    # an envelope folds only str -> str from a hand-written run/started
    s.append(STARTED, {"run_id": "r-odd", "model": "m", "artifacts": {"ok": "id", "n": 3}})
    assert projections.runs(s)[-1].artifacts == {"ok": "id"}


def test_a_long_run_folds_in_chunks_and_counts_every_event(store, monkeypatch):
    """Rule: the events a run collects are folded every _FOLD_EVERY events and
    at finalize, each once and in order (lose or repeat a chunk: the digest
    reads mismatch and the counts are off), with a nested run's usage kept out
    across a chunk boundary."""
    from trajlog.api import run_scope as api_runs
    monkeypatch.setattr(api_runs, "_FOLD_EVERY", 4)
    s = store.create_session(cwd="/r")
    with s.run(model="outer") as outer:
        one_turn(s, 1, (100, 10))
        with s.run(model="inner") as inner:
            one_turn(s, 2, (1, 1))
            one_turn(s, 3, (2, 2))
        one_turn(s, 4, (1000, 0))
        assert len(outer._seen) < 4   # folded as it went: bounded memory
    envs = {e.run_id: e for e in projections.runs(s)}
    assert envs[outer.id].integrity == envs[inner.id].integrity == "ok"
    integ = outer.finalized.data["integrity"]
    assert integ["events"] == outer.finalized.seq - outer.started.seq
    assert outer.finalized.data["cost"]["inference"]["input_tokens"] == 1100
    assert inner.finalized.data["cost"]["inference"]["input_tokens"] == 3
    # the outer run's events: its own and the inner run/finalized, as the fold counts
    own = integ["events"] - (inner.finalized.seq - inner.started.seq)
    assert outer.finalized.data["cost"]["persistence"]["events"] == own


def test_events_another_handle_appended_are_read_back_at_finalize(store):
    """Rule: a run that missed events (appended from another thread, which
    does not see the run: a gap, or after its last own append) reads them
    back before run/finalized, so its digest and usage cover them (skip the
    read-back, or its last batch: unverified, usage short)."""
    import threading

    s = store.create_session(cwd="/r")

    def elsewhere(k, tokens):
        t = threading.Thread(target=one_turn, args=(store.session(s.id), k, tokens))
        t.start()
        t.join()

    with s.run(model="m") as run:
        one_turn(s, 1, (5, 1))
        elsewhere(2, (7, 1))        # a gap for the run's next own append
        s.append("user/message", {"content": "mine"})
        elsewhere(3, (11, 1))       # after the run's last own append
        assert run._observing is False
    (env,) = projections.runs(s)
    assert env.integrity == "ok"
    assert run.finalized.data["cost"]["inference"]["input_tokens"] == 23
    assert run.finalized.data["integrity"]["events"] == run.finalized.seq - run.started.seq
    # events of the same session appended in this context by another handle
    # are seen as they return: no gap
    with s.run(model="m") as seen:
        one_turn(store.session(s.id), 4)
        assert seen._observing is True and len(seen._seen) == 7
    assert projections.runs(s)[-1].integrity == "ok"
