"""The tour's branch step (``trajlog demo``): an investigation branched from
a named event with its start frozen, rebased when the main line moved,
merged once with a gate part missing (reference only) and once through the
whole gate -- and what the main line's next context shows of it."""

from __future__ import annotations

from typing import Any

from ..api import Session
from ..projections.context import build_context

CAUSE = {"subject": "parser.cause", "value": "off-by-one in the lexer's last-line check"}


def demo_branches(s: Session, write: Any) -> None:
    """Record the branch step in the tour's session ``s``."""
    failing = s.append("tool/note", {"subject": "parser.failing",
                                        "value": "test_last_line"}, source="pytest")
    s.start_branch("lexer-hypothesis", from_seq=failing.seq, workspace_revision="git:4a1c2e8",
                   data_samples=["case-7", "case-9"], tool_versions={"pytest": "8.3.2"},
                   permissions=["read:repo", "run:tests"])
    s.append("tool/note", {**CAUSE, "output": "reproduced on case-7 and case-9"},
             source="pytest", branch_id="lexer-hypothesis")
    moved = s.append("user/message", {"content": "the lexer was refactored on main"})
    s.rebase_branch("lexer-hypothesis", onto_seq=moved.seq, reason="the lexer moved on main")
    b = s.branches()["lexer-hypothesis"]
    write(f"branch lexer-hypothesis from seq {b.from_seq} (frozen: revision "
          f"{b.frozen['workspace_revision']}, samples {', '.join(b.frozen['data_samples'])}, "
          f"pytest {b.frozen['tool_versions']['pytest']}); rebased onto seq {b.base}\n")
    gate: dict[str, Any] = {"sample": ["case-7", "case-9"],
                            "check": {"name": "pytest tests/test_parser.py", "result": "pass"},
                            "code_version": "7b3d9f0c2a"}
    findings: dict[str, Any] = {
        "common_facts": [{"subject": "parser.failing", "value": "test_last_line"}],
        "adopted": [CAUSE], "rejected": [{"subject": "parser.suspect",
                                          "value": "a race in the file reader"}],
        "unresolved": ["does the CRLF path drop the last line too?"]}
    ref = s.merge_branch("lexer-hypothesis", **findings, **gate)
    shown = build_context(s, record=False)   # (a look: the tour's builds stay its own)
    write(f"merge at seq {ref.seq} without a human decision: {ref.data['status']} "
          f"(missing {', '.join(ref.data['missing'])}); the cause confirmed on main: "
          f"{_confirmed(shown)}\n")
    full = s.merge_branch("lexer-hypothesis", **findings, **gate,
                          decision={"by": "human:ann", "verdict": "accept"})
    shown = build_context(s, record=False)   # (a look: the tour's builds stay its own)
    write(f"merge at seq {full.seq} through the whole gate: {full.data['status']}; the main "
          "line's next context shows:\n")
    for block in ("confirmed", "failed", "to confirm"):
        for line in shown.summary[block]:
            if "[MERGE-" in line:   # (the tour's other facts are shown above)
                write(f"  {block}: {line}\n")
    write(f"  (the branch's own events stay out: {shown.excluded_counts.get('branch.other', 0)} "
          "excluded as branch.other)\n\n")


def _confirmed(build: Any) -> str:
    """Where the adopted cause stands in a build's summary."""
    for block in ("confirmed", "to confirm"):
        if any(CAUSE["subject"] in line for line in build.summary[block]):
            return "yes" if block == "confirmed" else "no, reference text in 'to confirm'"
    return "no"


__all__ = ["demo_branches"]
