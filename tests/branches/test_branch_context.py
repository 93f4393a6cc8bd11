"""The context builder honours branches (both backends): a branch's build
sees the main line up to its start or latest rebase plus its own events; the
main line's build never sees a branch's history, only what a gated merge
brought back -- facts through the full gate, reference text otherwise --
and the injection records what it did."""

from __future__ import annotations

from typing import Any

from trajlog.projections.context import build_context

from .test_branch_rules import GATE


def text(build: Any) -> str:
    return "\n".join(m["content"] for m in build.messages)


def investigation(s: Any) -> dict[str, Any]:
    """Main line, a branch from its fact, main-line work after the start,
    branch work; the seqs by name."""
    s.append("workspace/revision", {"revision": "git:aaaa111"})
    s.append("user/message", {"content": "why does the parser drop the last line?"})
    start = s.append("check/result", {"subject": "failing", "value": "test_last_line"},
                     source="pytest")
    s.start_branch("try-a", from_seq=start.seq, workspace_revision="git:aaaa111")
    own = s.append("check/result", {"subject": "cause", "value": "off-by-one in the lexer",
                                    "output": "BRANCH-HISTORY-MARKER"},
                   source="pytest", branch_id="try-a")
    s.append("workspace/revision", {"revision": "git:bbbb222"})
    later = s.append("user/message", {"content": "MAIN-AFTER-START-MARKER"})
    return {"start": start.seq, "own": own.seq, "later": later.seq}


def test_a_branch_sees_the_main_line_only_up_to_its_start(store):
    s = store.create_session(cwd="/repo")
    seqs = investigation(s)
    build = build_context(s, branch="try-a")
    assert "MAIN-AFTER-START-MARKER" not in text(build)
    assert "cause = off-by-one in the lexer" in build.summary_text
    assert "failing = test_last_line" in build.summary_text     # the main line before it
    assert {x.seq: x.reason for x in build.excluded}[seqs["later"]] == "branch.main.after_start"
    # the main line's later revision is not the branch's
    assert build.workspace_revision == "git:aaaa111"
    data = build.injection.data
    assert data["excluded"]["branch.main.after_start"] == 1
    assert data["branches"] == {"base": seqs["start"], "excluded_main": 1}
    # the main line's own build sees it all, and not the branch
    main = build_context(s, record=False)
    assert "MAIN-AFTER-START-MARKER" in text(main)
    assert "off-by-one" not in text(main) and main.workspace_revision == "git:bbbb222"


def test_after_a_rebase_the_branch_sees_the_main_line_up_to_the_new_point(store):
    s = store.create_session(cwd="/repo")
    seqs = investigation(s)
    s.rebase_branch("try-a", onto_seq=seqs["later"], reason="main moved")
    build = build_context(s, branch="try-a", record=False)
    assert "MAIN-AFTER-START-MARKER" in text(build)
    assert build.workspace_revision == "git:bbbb222"
    after = s.append("user/message", {"content": "AFTER-REBASE-MARKER"})
    build = build_context(s, branch="try-a", record=False)
    assert "AFTER-REBASE-MARKER" not in text(build)
    assert {x.seq: x.reason for x in build.excluded}[after.seq] == "branch.main.after_start"
    # built as of before the rebase: the old start holds
    old = build_context(s, branch="try-a", record=False, upto=seqs["later"] + 1)
    assert "MAIN-AFTER-START-MARKER" not in text(old)


def test_a_gated_merge_brings_evidence_not_history_to_the_main_line(store):
    s = store.create_session(cwd="/repo")
    investigation(s)
    merge = s.merge_branch(
        "try-a", common_facts=[{"subject": "failing", "value": "test_last_line"}],
        adopted=[{"subject": "cause", "value": "off-by-one in the lexer"}],
        rejected=[{"subject": "suspect", "value": "a race in the reader"}],
        unresolved=["does the CRLF path drop it too?"], **GATE)
    build = build_context(s)
    confirmed = build.summary["confirmed"]
    r = f"MERGE-{merge.seq}"
    assert f"cause = off-by-one in the lexer [{r}]" in confirmed
    assert not any("race" in line for line in confirmed)
    assert any("race" in line and r in line for line in build.summary["failed"])
    assert any("CRLF" in line and r in line for line in build.summary["to confirm"])
    assert "BRANCH-HISTORY-MARKER" not in text(build)          # never the branch's history
    assert build.injection.data["branches"] == {"merges": [
        {"seq": merge.seq, "branch": "try-a", "status": "fact", "facts": ["failing", "cause"]}]}


def test_a_reference_only_merge_never_becomes_a_fact(store):
    s = store.create_session(cwd="/repo")
    investigation(s)
    gate = {k: v for k, v in GATE.items() if k != "decision"}
    merge = s.merge_branch("try-a", adopted=[{"subject": "cause", "value": "off-by-one"}],
                           **gate)
    build = build_context(s)
    assert not any("off-by-one" in line for line in build.summary["confirmed"])
    [line] = [x for x in build.summary["to confirm"] if "off-by-one" in x]
    assert "reference only" in line and "decision" in line and f"MERGE-{merge.seq}" in line
    assert build.injection.data["branches"]["merges"][0]["status"] == "reference-only"
    # taken again through the whole gate: now it is a fact
    s.merge_branch("try-a", adopted=[{"subject": "cause", "value": "off-by-one"}], **GATE)
    build = build_context(s, record=False)
    assert any("off-by-one" in line for line in build.summary["confirmed"])
    assert not any("off-by-one" in line for line in build.summary["to confirm"])


def test_a_merge_a_person_rejected_brings_no_fact(store):
    s = store.create_session(cwd="/repo")
    investigation(s)
    merge = s.merge_branch("try-a", adopted=[{"subject": "cause", "value": "off-by-one"}],
                           **GATE)
    s.mark(merge.seq, "rejected", "the sample was wrong", source="human:ann")
    build = build_context(s, record=False)
    assert not any("off-by-one" in line for line in build.summary["confirmed"])


def test_a_log_without_branches_records_its_builds_as_before(store):
    s = store.create_session(cwd="/repo")
    s.append("user/message", {"content": "hi"}, branch_id="legacy")
    build = build_context(s, branch="legacy")
    assert "branches" not in build.injection.data
    assert "branch.main.after_start" not in build.excluded_counts
