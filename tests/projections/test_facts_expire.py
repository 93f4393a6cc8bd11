"""Facts that expire: workspace revisions, incomplete tool
results, ``supersedes`` and ``branch_id``.

Each test plants a fact that must not reach a built context and checks both
that its marker text is in no message (the summary included) and that the
``context/injection`` event records its exclusion with the guarding reason --
so removing the rule from trajlog.projections.context / evidence fails it.
Each also has a control: the current fact still gets through."""

from __future__ import annotations

import pytest

from trajlog import errors
from trajlog.projections.context import build_context
from trajlog.projections.evidence import collect

A, B = "git:aaaaaaa", "git:bbbbbbb"


def request(s, call_id, name="run_tests"):
    """The assistant message requesting ``call_id`` and its tool/call: (msg, call)."""
    msg = s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": call_id, "name": name, "arguments": {}}]}, source="model")
    call = s.append("tool/call", {"call_id": call_id, "name": name, "arguments": {}},
                    source="host")
    return msg, call


def result(s, call_id, output, *, rev=A, name="run_tests", parent="call", **data):
    """A tool result for a fresh call; ``parent``: "call" (its tool/call), "msg"
    (the requesting message), None (no causal_parent) or an explicit seq."""
    msg, call = request(s, call_id, name)
    cause = {"call": call.seq, "msg": msg.seq, None: None}.get(parent, parent)
    return s.append("tool/result", {"call_id": call_id, "name": name, "output": output,
                                    "is_error": False, **data},
                    source=name, workspace_revision=rev, data_class="internal",
                    causal_parent=cause)


def session(store, **meta):
    s = store.create_session(cwd="/repo", metadata=meta)
    s.append("task/contract", {"text": "Fix login."}, source="human:alice",
             workspace_revision=A, data_class="internal")
    return s


def text(build) -> str:
    return "\n".join(m["content"] for m in build.messages) + build.summary_text


def reasons(build) -> dict[int, str]:
    return {x.seq: x.reason for x in build.excluded}


def recorded(build, seq: int, reason: str) -> bool:
    """The injection event's excluded_seqs runs hold ``seq`` under ``reason``."""
    return any(a <= seq <= b for a, b in build.injection.data["excluded_seqs"].get(reason, []))


# --- workspace revision ---------------------------------------------------------------

def test_tool_result_of_an_old_revision_expires(store):
    """Rule: tool.result.stale (a tool result at another revision than the
    latest workspace/revision event is not admitted, nor its claim)."""
    s = session(store)
    old = result(s, "c1", "OLD-RESULT 3 failed", subject="tests", value="OLD-FAILED")
    s.append("workspace/revision", {"revision": B}, source="host")
    new = result(s, "c2", "NEW-RESULT 42 passed", rev=B)
    build = build_context(s)
    assert "OLD-RESULT" not in text(build) and "OLD-FAILED" not in text(build)
    assert "NEW-RESULT 42 passed" in text(build)
    assert reasons(build)[old.seq] == "tool.result.stale"
    assert recorded(build, old.seq, "tool.result.stale")
    assert build.injection.data["excluded"]["tool.result.stale"] == 1
    assert new.seq in build.injection.data["selected"]
    assert build.injection.data["workspace_revision"] == B == build.workspace_revision


def test_workspace_revision_event_expires_file_snapshots(store):
    """Rule: the workspace/revision event sets the current revision -- without
    it the latest envelope (the snapshot's own, A) would be current."""
    s = session(store)
    snap = s.append("file/snapshot", {"path": "src/login.ts", "content": "OLD-SNIPPET"},
                    source="workspace", workspace_revision=A, data_class="internal")
    assert snap.seq in build_context(s).injection.data["selected"]   # control: A is current
    s.append("workspace/revision", {}, source="host", workspace_revision=B)  # via envelope
    build = build_context(s)
    assert "OLD-SNIPPET" not in text(build)
    assert reasons(build)[snap.seq] == "file.snapshot.stale"
    assert recorded(build, snap.seq, "file.snapshot.stale")


def test_a_late_result_of_the_old_revision_does_not_revive_it(store):
    """Rule: the declared revision wins over envelopes -- a background job's
    result arriving after the change, still at A, leaves B current."""
    s = session(store)
    s.append("workspace/revision", {"revision": B}, source="host")
    current = result(s, "c1", "CURRENT-RESULT", rev=B)
    late = result(s, "c2", "LATE-RESULT of the old tree", rev=A)
    build = build_context(s)
    assert "LATE-RESULT" not in text(build) and "CURRENT-RESULT" in text(build)
    assert reasons(build)[late.seq] == "tool.result.stale"
    assert current.seq in build.injection.data["selected"]


def test_without_revision_events_the_latest_envelope_is_current(store):
    """Rule (fallback): a log with no workspace/revision event takes the latest
    revision an envelope states."""
    s = session(store)
    old = result(s, "c1", "OLD-RESULT", rev=A)
    result(s, "c2", "NEW-RESULT", rev=B)
    build = build_context(s)
    assert "OLD-RESULT" not in text(build) and "NEW-RESULT" in text(build)
    assert reasons(build)[old.seq] == "tool.result.stale"


def test_the_argument_overrides_the_log(store):
    """Rule: build_context(workspace_revision=...) is the current revision."""
    s = session(store)
    a = result(s, "c1", "RESULT-AT-A", rev=A)
    s.append("workspace/revision", {"revision": B}, source="host")
    b = result(s, "c2", "RESULT-AT-B", rev=B)
    build = build_context(s, workspace_revision=A)
    assert "RESULT-AT-A" in text(build) and "RESULT-AT-B" not in text(build)
    assert reasons(build)[b.seq] == "tool.result.stale" and a.seq not in reasons(build)
    assert build.injection.data["workspace_revision"] == A
    for bad in ("", 7):
        with pytest.raises(errors.InvalidArgumentError):
            build_context(s, workspace_revision=bad)


@pytest.mark.parametrize("version", [2, 1])
def test_a_revision_event_of_another_branch_changes_nothing_here(store, version):
    """Rule: workspace/revision events are branch-scoped too -- by the
    envelope's branch_id (schema version 2), or, in an older log (version 1),
    by data.branch_id (docs/event-schemas.md)."""
    s = session(store)
    a = result(s, "c1", "RESULT-AT-A", rev=A)
    if version == 2:
        s.append("workspace/revision", {"revision": B}, source="host", branch_id="exp")
    else:
        s.append_batch([("workspace/revision", {"revision": B, "branch_id": "exp"},
                         {"source": "host", "schema_version": 1})])
    assert a.seq in build_context(s).injection.data["selected"]
    assert reasons(build_context(s, branch="exp"))[a.seq] == "tool.result.stale"


# --- incomplete results ---------------------------------------------------------------

@pytest.mark.parametrize("parent", ["user message", "other call", "missing", "itself"])
def test_a_result_whose_causal_parent_names_no_command_is_incomplete(store, parent):
    """Rule: tool.result.incomplete -- excluded, and named (not quoted) in the
    summary's to-confirm block."""
    s = session(store)
    user = s.append("user/message", {"content": "run the tests"}, source="user")
    _, other_call = request(s, "c0")
    s.append("tool/result", {"call_id": "c0", "output": "c0 done", "is_error": False},
             source="run_tests", workspace_revision=A, data_class="internal")
    seq = {"user message": user.seq, "other call": other_call.seq, "missing": 999,
           "itself": s.last_seq + 3}[parent]
    orphan = result(s, "c1", "ORPHAN-OUTPUT", parent=seq)
    build = build_context(s)
    assert "ORPHAN-OUTPUT" not in text(build)
    assert reasons(build)[orphan.seq] == "tool.result.incomplete"
    assert recorded(build, orphan.seq, "tool.result.incomplete")
    todo = "\n".join(build.summary["to confirm"])
    assert f"TEST-{orphan.seq}" in todo and "names no command" in todo
    assert "c0 done" in text(build)          # a result without causal_parent is not flagged


@pytest.mark.parametrize("parent", ["call", "msg"])
def test_a_result_naming_its_command_is_complete(store, parent):
    s = session(store)
    ok = result(s, "c1", "COMPLETE-OUTPUT", parent=parent)
    build = build_context(s)
    assert "COMPLETE-OUTPUT" in text(build) and ok.seq not in reasons(build)
    assert build.summary["to confirm"] == []


# --- supersedes -----------------------------------------------------------------------

def test_supersedes_marks_the_target_superseded(store):
    """Rule: data.supersedes retires the earlier event like event/status would;
    an active status of enough authority restores it."""
    s = session(store)
    first = result(s, "c1", "FIRST-RUN flaky", subject="tests", value="FIRST-VALUE")
    second = result(s, "c2", "SECOND-RUN 42 passed", subject="tests", value="passed",
                    supersedes=first.seq)
    assert collect(s.events()).status_of(first.seq) == "superseded"
    build = build_context(s)
    assert "FIRST-RUN" not in text(build) and "FIRST-VALUE" not in text(build)
    assert "SECOND-RUN" in text(build)
    assert reasons(build)[first.seq] == "event.status.superseded"
    assert recorded(build, first.seq, "event.status.superseded")
    assert f"tests = passed [TEST-{second.seq}]" in build.summary["confirmed"]
    s.mark(first.seq, "active", "the second run was on the wrong machine", source="human:bo")
    assert "FIRST-RUN" in text(build_context(s))


def test_supersedes_follows_the_authority_rules(store):
    """Rule: an untrusted source supersedes nothing, a model never a human's
    event, and only an earlier event can be superseded."""
    s = session(store)
    fact = result(s, "c1", "KEPT-FACT")
    decision = s.append("human/decision", {"text": "KEPT-DECISION use cookies"},
                        source="human:alice", workspace_revision=A, data_class="internal")
    s.append("note", {"text": "x", "supersedes": fact.seq}, source="web:evil.example")
    s.append("note", {"text": "y", "supersedes": decision.seq}, source="model")
    ahead = s.last_seq + 4          # the note, then the next result's message, call, result
    s.append("note", {"text": "z", "supersedes": ahead}, source="human:alice")
    future = result(s, "c2", "FUTURE-FACT")
    assert future.seq == ahead
    evidence = collect(s.events())
    for ev in (fact, decision, future):
        assert evidence.status_of(ev.seq) == "active"
    built = text(build_context(s))
    assert "KEPT-FACT" in built and "KEPT-DECISION" in built and "FUTURE-FACT" in built
    # control: a human does supersede the human decision
    s.append("human/decision", {"text": "use tokens", "supersedes": decision.seq},
             source="human:alice", workspace_revision=A, data_class="internal")
    assert "KEPT-DECISION" not in text(build_context(s))


# --- branch_id --------------------------------------------------------------------------

def test_branch_id_scopes_facts(store):
    """Rule: data.branch_id -- facts of another branch than the build's are
    excluded as branch.other; branch= picks the branch; branch_id wins over
    the older data.branch."""
    s = session(store, branch="main")
    mine = result(s, "c1", "MAIN-FACT", branch_id="main")
    exp = result(s, "c2", "EXP-FACT", branch_id="exp", branch="main")
    shared = result(s, "c3", "SHARED-FACT")
    build = build_context(s)
    assert "EXP-FACT" not in text(build) and "MAIN-FACT" in text(build)
    assert reasons(build)[exp.seq] == "branch.other"
    assert recorded(build, exp.seq, "branch.other")
    other = build_context(s, branch="exp")
    assert "EXP-FACT" in text(other) and "MAIN-FACT" not in text(other)
    assert reasons(other)[mine.seq] == "branch.other"
    assert other.injection.data["branch"] == "exp" and build.injection.data["branch"] == "main"
    assert shared.seq in build.injection.data["selected"] and \
        shared.seq in other.injection.data["selected"]


def test_supersedes_of_another_branch_does_not_reach_this_one(store):
    """Rule: a superseding event counts only on its own branch."""
    s = session(store)
    fact = result(s, "c1", "MAIN-FACT")
    result(s, "c2", "EXP-FACT", branch_id="exp", supersedes=fact.seq)
    assert "MAIN-FACT" in text(build_context(s))
    exp = build_context(s, branch="exp")
    assert "MAIN-FACT" not in text(exp)
    assert reasons(exp)[fact.seq] == "event.status.superseded"
