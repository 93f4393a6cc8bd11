"""A merge is evidence like any other event: it passes the build's data-class,
source and model-policy checks before its claims enter the main line, a
``fact`` needs a merge written by a source that may decide and a check that
passed, and the write path and a read of the log agree on the status."""

from __future__ import annotations

from typing import Any

import pytest

from trajlog.errors import MergeGateError
from trajlog.projections.branches import fold
from trajlog.projections.context import build_context

from .test_branch_context import text
from .test_branch_rules import GATE, refused, started

SECRET = "RESTRICTED-hunter2"


def wire_merge(s: Any, status: str, gate: dict[str, Any], **envelope: Any) -> Any:
    """A ``branch/merged`` written straight to the log (as an import would)."""
    return s.append("branch/merged", {
        "name": "try-a", "common_facts": [{"subject": "key", "value": SECRET}],
        "adopted": [], "rejected": [], "unresolved": ["is the key rotated?"], "gate": gate,
        "status": status, "missing": []}, **envelope)


WIRE_GATE = {"sample": {"ids": ["case-7"]}, "check": {"name": "pytest", "result": "pass"},
             "code_version": "3f2a9c1d", "decision": {"by": "human:ann", "verdict": "accept"}}


def test_a_restricted_merge_brings_nothing_to_a_default_build(store):
    s = store.create_session(cwd="/repo")
    started(s)
    merged = wire_merge(s, "fact", WIRE_GATE, data_class="restricted")
    build = build_context(s)
    assert SECRET not in text(build) and "is the key rotated" not in text(build)
    assert (merged.seq, "data_class.restricted") in {(x.seq, x.reason) for x in build.excluded}


def test_a_merge_takes_the_highest_data_class_of_its_branch(store):
    s = store.create_session(cwd="/repo")
    s.append("model/policy", {"model": "ext-llm", "allowed_data_classes": ["public", "internal"]})
    started(s)
    s.append("check/result", {"subject": "key", "value": SECRET}, source="pytest",
             branch_id="try-a", data_class="restricted")
    merged = s.merge_branch("try-a", common_facts=[{"subject": "key", "value": SECRET}], **GATE)
    assert merged.data_class == "restricted"
    assert SECRET not in text(build_context(s, target_model="ext-llm"))
    assert SECRET not in text(build_context(s))
    # stated by the caller, the data class is the caller's
    s2 = store.create_session(cwd="/repo")
    started(s2)
    s2.append("check/result", {"subject": "k", "value": 1}, source="pytest",
              branch_id="try-a", data_class="internal")
    s2.append("check/result", {"subject": "k", "value": 2}, source="pytest", branch_id="try-a")
    assert s2.merge_branch("try-a", unresolved=["why?"]).data_class == "internal"
    assert s2.merge_branch("try-a", data_class="public", **GATE).data_class == "public"


@pytest.mark.parametrize("source", ["web:evil.example", "external:feed", "model", "assistant",
                                    "user", "some-tool"])
def test_a_merge_from_a_source_that_may_not_decide_is_reference_only(store, source):
    s = store.create_session(cwd="/repo")
    started(s)
    ev = s.merge_branch("try-a", adopted=[{"subject": "cause", "value": "MODEL-GUESS"}],
                        source=source, **GATE)
    assert (ev.data["status"], ev.data["missing"]) == ("reference-only", ["decision"])
    assert s.branches()["try-a"].state == "open"
    assert not any("MODEL-GUESS" in line for line in build_context(s).summary["confirmed"])
    # a caller cannot claim the fact the source does not give
    refused(s, MergeGateError, lambda: wire_merge(s, "fact", WIRE_GATE, source=source))


@pytest.mark.parametrize("source", ["human:ann", "reviewer:bob", "system"])
def test_a_merge_recorded_by_a_person_or_the_host_can_be_a_fact(store, source):
    s = store.create_session(cwd="/repo")
    started(s)
    ev = s.merge_branch("try-a", adopted=[{"subject": "cause", "value": "off-by-one"}],
                        source=source, **GATE)
    assert ev.data["status"] == "fact"
    assert any("off-by-one" in line for line in build_context(s).summary["confirmed"])


@pytest.mark.parametrize("result", ["fail", "failed", False, 0, "", {"passed": 0, "failed": 12},
                                    "error", None])
def test_a_check_that_did_not_pass_is_missing(store, result):
    s = store.create_session(cwd="/repo")
    started(s)
    ev = s.merge_branch("try-a", adopted=[{"subject": "cause", "value": "UNVERIFIED"}],
                        **{**GATE, "check": {"name": "pytest", "result": result}})
    assert (ev.data["status"], ev.data["missing"]) == ("reference-only", ["check"])
    assert not any("UNVERIFIED" in line for line in build_context(s).summary["confirmed"])


@pytest.mark.parametrize("result", ["pass", "passed", "PASS", "ok", True])
def test_a_check_that_passed_holds(store, result):
    s = store.create_session(cwd="/repo")
    started(s)
    ev = s.merge_branch("try-a", **{**GATE, "check": {"name": "pytest", "result": result}})
    assert ev.data["status"] == "fact"


def test_a_read_gives_the_status_the_write_path_would(store):
    """A log imported from elsewhere: the read fold applies the same rules."""
    s = store.create_session(cwd="/repo")
    started(s)
    s.append("branch/merged", {"name": "try-a", "adopted": [], "common_facts": [],
                               "rejected": [], "unresolved": [], "gate": WIRE_GATE,
                               "status": "reference-only", "missing": ["decision"]},
             source="web:evil.example")
    merge = fold(s.events())["try-a"].merges[-1]
    assert (merge.status, merge.missing) == ("reference-only", ("decision",))
