"""Branches of investigation, the write side (both backends): a frozen start
from a named main-line event, an explicit rebase, a merge whose status its
gate gives, an abandon -- and every refusal typed, checked inside the
append's transaction, writing nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import trajlog
from trajlog.errors import (
    BranchNotFoundError,
    BranchPointError,
    BranchStateError,
    MergeGateError,
)
from trajlog.projections.branches import GATE_PARTS

GATE: dict[str, Any] = {"sample": ["case-7", "case-9"],
                        "check": {"name": "pytest tests/parser", "result": "pass"},
                        "code_version": "3f2a9c1d", "decision": {"by": "human:ann",
                                                                 "verdict": "accept"}}


def main_line(s: Any) -> Any:
    """A main line with a fact; returns the event a branch starts from."""
    s.append("user/message", {"content": "why does the parser drop the last line?"})
    return s.append("check/result", {"subject": "failing", "value": "test_last_line"},
                    source="pytest")


def started(s: Any, name: str = "try-a") -> Any:
    start = main_line(s)
    s.start_branch(name, from_seq=start.seq, workspace_revision="git:aaaa111",
                   data_samples=["case-7"], tool_versions={"pytest": "8.3"},
                   permissions=["read:repo"])
    return start


def refused(s: Any, error: type[Exception], call: Any) -> Exception:
    """``call`` raises ``error`` and the log is as it was."""
    before = s.last_seq
    with pytest.raises(error) as info:
        call()
    assert s.last_seq == before
    return info.value


def test_a_branch_starts_from_a_named_main_line_event_with_its_start_frozen(store):
    s = store.create_session(cwd="/repo")
    start = started(s)
    ev = s.get(s.last_seq)
    assert ev.type == "branch/started" and ev.branch_id is None
    assert ev.data["from_seq"] == start.seq
    assert ev.data["frozen"] == {"workspace_revision": "git:aaaa111",
                                 "data_samples": ["case-7"], "tool_versions": {"pytest": "8.3"},
                                 "permissions": ["read:repo"]}
    b = s.branches()["try-a"]
    assert (b.from_seq, b.base, b.state, b.started_seq) == (start.seq, start.seq, "open", ev.seq)
    # read back by a fresh handle: it is the log that says so
    assert store.session(s.id).branches()["try-a"].frozen["tool_versions"] == {"pytest": "8.3"}


def test_a_start_that_names_no_main_line_event_is_refused(store):
    s = store.create_session(cwd="/repo")
    started(s)
    own = s.append("note/text", {"text": "on the branch"}, branch_id="try-a")
    e = refused(s, BranchPointError, lambda: s.start_branch("b", from_seq=s.last_seq + 5))
    assert f"branch 'b' of session {s.id} at seq {s.last_seq + 1}" in str(e)
    refused(s, BranchPointError, lambda: s.start_branch("b", from_seq=own.seq))
    refused(s, BranchPointError, lambda: s.start_branch("b", from_seq=-1))
    refused(s, BranchPointError, lambda: s.start_branch("b", from_seq=True))
    refused(s, BranchStateError, lambda: s.start_branch("try-a", from_seq=0))
    refused(s, BranchNotFoundError, lambda: s.start_branch("main", from_seq=0))
    refused(s, BranchPointError, lambda: s.append("branch/started", {
        "name": "c", "from_seq": 0, "frozen": {"data_samples": [1]}}))


def test_a_rebase_is_explicit_and_only_forward_onto_the_main_line(store):
    s = store.create_session(cwd="/repo")
    start = started(s)
    own = s.append("note/text", {"text": "branch work"}, branch_id="try-a")
    # the main line did not move past the start: nothing to rebase onto
    refused(s, BranchPointError, lambda: s.rebase_branch("try-a", onto_seq=start.seq,
                                                         reason="again"))
    refused(s, BranchPointError, lambda: s.rebase_branch("try-a", onto_seq=own.seq,
                                                         reason="onto itself"))
    moved = s.append("user/message", {"content": "the lexer changed on main"})
    refused(s, BranchNotFoundError, lambda: s.rebase_branch("nope", onto_seq=moved.seq,
                                                            reason="x"))
    refused(s, BranchPointError, lambda: s.rebase_branch("try-a", onto_seq=moved.seq,
                                                         reason=""))
    ev = s.rebase_branch("try-a", onto_seq=moved.seq, reason="main moved")
    b = s.branches()["try-a"]
    assert b.base == moved.seq and b.rebases == [(ev.seq, moved.seq, "main moved")]
    refused(s, BranchPointError, lambda: s.rebase_branch("try-a", onto_seq=moved.seq,
                                                         reason="twice"))


@pytest.mark.parametrize("part", GATE_PARTS)
def test_a_merge_missing_a_gate_part_is_reference_only(store, part):
    s = store.create_session(cwd="/repo")
    started(s)
    gate = {k: v for k, v in GATE.items() if k != part}
    ev = s.merge_branch("try-a", adopted=[{"subject": "cause", "value": "off-by-one"}], **gate)
    assert (ev.data["status"], ev.data["missing"]) == ("reference-only", [part])
    b = s.branches()["try-a"]
    assert b.state == "open" and b.merges[-1].status == "reference-only"
    # the same gate, whole: a fact, and the branch is merged
    ev = s.merge_branch("try-a", adopted=[{"subject": "cause", "value": "off-by-one"}], **GATE)
    assert (ev.data["status"], ev.data["missing"]) == ("fact", [])
    assert s.branches()["try-a"].state == "merged"


@pytest.mark.parametrize("gate", [
    {**GATE, "decision": {"by": "human:ann", "verdict": "reject"}},
    {**GATE, "decision": {"by": "model", "verdict": "accept"}},
    {**GATE, "code_version": "v1.2"},
    {**GATE, "sample": []},
    {**GATE, "check": {"name": "pytest"}},
])
def test_a_gate_part_that_does_not_hold_is_missing(store, gate):
    s = store.create_session(cwd="/repo")
    started(s)
    assert s.merge_branch("try-a", **gate).data["status"] == "reference-only"


def test_a_caller_cannot_claim_a_fact_the_gate_does_not_give(store):
    s = store.create_session(cwd="/repo")
    started(s)
    e = refused(s, MergeGateError, lambda: s.append("branch/merged", {
        "name": "try-a", "status": "fact", "adopted": [{"subject": "cause", "value": "x"}],
        "gate": {"sample": {"ids": ["case-7"]}}}))
    assert "check, code_version, decision" in str(e)
    refused(s, MergeGateError, lambda: s.merge_branch("try-a", adopted=[{"value": 1}], **GATE))
    refused(s, MergeGateError, lambda: s.merge_branch("try-a", unresolved=[""], **GATE))


def test_merged_and_abandoned_branches_take_nothing_more(store):
    s = store.create_session(cwd="/repo")
    started(s, "a")
    s.start_branch("b", from_seq=1)
    s.append("note/text", {"text": "a's work"}, branch_id="a")
    s.merge_branch("a", **GATE)
    s.abandon_branch("b", reason="dead end")
    for name in ("a", "b"):
        refused(s, BranchStateError, lambda n=name: s.merge_branch(n, **GATE))
        refused(s, BranchStateError, lambda n=name: s.abandon_branch(n, reason="again"))
        refused(s, BranchStateError, lambda n=name: s.append("note/text", {"text": "more"},
                                                             branch_id=n))
        refused(s, BranchStateError, lambda n=name: s.append_batch(
            [("note/text", {"text": "fine"}), ("note/text", {"text": "more"}, {"branch_id": n})]))
    refused(s, BranchNotFoundError, lambda: s.abandon_branch("c", reason="x"))
    refused(s, BranchNotFoundError, lambda: s.merge_branch("c", **GATE))
    # a branch nobody started is only a filter, as before
    s.append("note/text", {"text": "legacy"}, branch_id="unstarted")
    assert s.branches()["b"].abandoned == (s.last_seq - 1, "dead end")


def test_a_batch_is_checked_event_by_event_and_written_whole_or_not_at_all(store):
    s = store.create_session(cwd="/repo")
    main_line(s)
    s.append_batch([
        ("branch/started", {"name": "x", "from_seq": 1, "frozen": {}}),
        ("note/text", {"text": "x's work"}, {"branch_id": "x"}),
        ("branch/abandoned", {"name": "x", "reason": "no"})])
    assert s.branches()["x"].state == "abandoned" and s.branches()["x"].events == 1
    refused(s, BranchStateError, lambda: s.append_batch([
        ("branch/started", {"name": "y", "from_seq": 1, "frozen": {}}),
        ("branch/abandoned", {"name": "y", "reason": "no"}),
        ("note/text", {"text": "too late"}, {"branch_id": "y"})]))
    assert "y" not in s.branches()


def test_a_fork_inherits_its_parents_branch_states(store):
    s = store.create_session(cwd="/repo")
    started(s)
    s.merge_branch("try-a", **GATE)
    child = s.fork(at_seq=s.last_seq)
    refused(child, BranchStateError, lambda: child.append("note/text", {"text": "x"},
                                                          branch_id="try-a"))
    assert child.branches()["try-a"].state == "merged"


def test_two_writers_racing_to_merge_one_branch_merge_it_once(tmp_path):
    path = str(tmp_path / "race.db")
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/repo")
        started(s)
        sid = s.id
    stores = [trajlog.open(path) for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def merge(st: Any) -> None:
        h = st.session(sid)
        barrier.wait()
        try:
            outcomes.append(h.merge_branch("try-a", **GATE).seq)
        except BranchStateError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=merge, args=(st,)) for st in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for st in stores:
        st.close()
    assert sorted(type(o).__name__ for o in outcomes) == ["BranchStateError", "int"]
    with trajlog.open(path) as store:
        merges = [e for e in store.session(sid).events() if e.type == "branch/merged"]
        assert len(merges) == 1


def test_an_abandoned_branch_stays_in_the_log_and_in_search(store):
    s = store.create_session(cwd="/repo")
    started(s)
    note = s.append("note/text", {"text": "the quokka hypothesis: a race in the reader"},
                    branch_id="try-a")
    s.abandon_branch("try-a", reason="could not reproduce")
    hits = store.search("quokka")
    assert [(h.session_id, h.seq) for h in hits] == [(s.id, note.seq)]
    assert [(h.seq) for h in store.search("quokka", branch="try-a")] == [note.seq]
    assert s.get(note.seq).data["text"].startswith("the quokka")
    assert s.branches()["try-a"].state == "abandoned"


def test_the_async_session_has_the_branch_methods(tmp_path):
    import asyncio

    from trajlog import aio

    async def body() -> None:
        async with await aio.open(str(tmp_path / "a.db")) as st:
            s = await st.create_session(cwd="/repo")
            await s.append("user/message", {"content": "go"})
            await s.start_branch("x", from_seq=0)
            await s.merge_branch("x", **GATE)
            assert (await s.branches())["x"].state == "merged"

    asyncio.run(body())
