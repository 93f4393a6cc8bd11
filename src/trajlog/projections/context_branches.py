"""What branches of investigation change in a context build
(:func:`trajlog.projections.context.build_context` calls :func:`scope`).

* **A build for a started branch** sees the main line only up to the
  branch's start -- its ``from_seq``, or its latest rebase's ``onto_seq`` --
  plus its own events: a later main-line event is excluded
  (``branch.main.after_start``), so that neither its facts nor its
  workspace revision reach the branch.
* **A build for the main line** never sees a branch's history (other
  branches' events are ``branch.other``, as before).  What a merge brought
  back enters through the merge event's reference (``MERGE-<seq>``): a
  ``fact`` merge's common facts and adopted conclusions as claims of the
  deterministic-fact rank (they may stand as *confirmed*); its rejected
  conclusions only in the *failed* block, never as facts; every merge's
  unresolved questions in *to confirm*; a ``reference-only`` merge's
  conclusions at most as reference text in *to confirm*, never as facts.
  A branch's latest merge counts (one merged again through the full gate
  replaces its reference-only merge).  The merge event passes the same
  exclusion checks as every event -- status, data class, source, the target
  model's policy (:meth:`BranchScope.admit`): a merge the build excludes
  brings nothing back, neither facts nor reference text.

The build records what this did (``branches`` in the ``context/injection``)
only when there was something to do, so that a log without branches builds
and records exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..event_types import CONTEXT_STRUCTURAL, CONTEXT_STRUCTURAL_PREFIXES
from ..events import Event
from .branches import FACT, MERGED, PREFIX, Branch, Merge, fold, on_main
from .context_summary import text_of
from .evidence import Claim, Evidence, ref

AFTER_START = "branch.main.after_start"


def merge_ref(merge: Merge) -> str:
    """How a context cites what a merge brought back."""
    return f"MERGE-{merge.seq}"


@dataclass(slots=True)
class BranchScope:
    """One build's view of the branches: the events it may read, what it
    excluded, and the merges whose evidence enters the main line."""

    events: list[Event]
    #: ``(seq, ref, reason)`` of each main-line event a branch build may not see
    excluded: list[tuple[int, str, str]] = field(default_factory=list)
    #: the branch built for, if it is a started one
    branch: Branch | None = None
    #: ``(branch name, merge)`` of each branch's latest merge, for a main-line build
    merges: list[tuple[str, Merge]] = field(default_factory=list)

    def admit(self, why: Callable[[Event], str | None]) -> list[tuple[int, str, str]]:
        """Keep only the merges whose event ``why`` finds no reason to
        exclude; ``(seq, ref, reason)`` of each one dropped."""
        by_seq = {ev.seq: ev for ev in self.events if ev.type == MERGED}
        kept, dropped = [], []
        for name, merge in self.merges:
            ev = by_seq[merge.seq]
            reason = why(ev)
            if reason is None:
                kept.append((name, merge))
            else:
                dropped.append((ev.seq, ref(ev), reason))
        self.merges = kept
        return dropped

    def claim(self, evidence: Evidence) -> None:
        """Add a fact merge's common facts and adopted conclusions as claims
        (cited by the merge's reference; a status event about the merge event
        -- ``rejected`` -- takes them back)."""
        for _, merge in self.merges:
            if merge.status != FACT:
                continue
            for subject, value in (*merge.common_facts, *merge.adopted):
                evidence.claims.setdefault(subject, []).append(
                    Claim(subject, value, merge.seq, "tool", merge_ref(merge)))

    def annotate(self, blocks: dict[str, list[str]], evidence: Evidence) -> None:
        """What a merge adds to the summary beside its facts."""
        for name, merge in self.merges:
            if evidence.status_of(merge.seq) != "active":
                continue
            r = merge_ref(merge)
            for subject, value in merge.rejected:
                blocks["failed"].append(f"{subject} = {text_of(value)} (rejected in branch "
                                        f"{name}) [{r}]")
            if merge.status != FACT:
                for subject, value in (*merge.common_facts, *merge.adopted):
                    blocks["to confirm"].append(
                        f"{subject} = {text_of(value)} (branch {name}, merged as reference "
                        f"only: gate missing {', '.join(merge.missing)}) [{r}]")
            for question in merge.unresolved:
                blocks["to confirm"].append(f"{question} (unresolved in branch {name}) [{r}]")

    def record(self) -> dict[str, Any]:
        """What the injection records of this scope (empty: nothing done)."""
        out: dict[str, Any] = {}
        if self.branch is not None:
            out["base"] = self.branch.base
            out["excluded_main"] = len(self.excluded)
        if self.merges:
            out["merges"] = [{"seq": m.seq, "branch": name, "status": m.status,
                              "facts": [s for s, _ in (*m.common_facts, *m.adopted)]
                              if m.status == FACT else []}
                             for name, m in self.merges]
        return {"branches": out} if out else {}


def scope(events: list[Event], branch: str) -> BranchScope:
    """The branch scope of a build for ``branch`` over ``events`` (in order)."""
    if not any(ev.type.startswith(PREFIX) for ev in events):
        return BranchScope(events)
    branches = fold(events)
    mine = branches.get(branch)
    if mine is None:
        # a branch's latest merge replaces its earlier ones (a reference-only
        # merge taken again through the full gate)
        merges = [(b.name, b.merges[-1]) for b in branches.values() if b.merges]
        return BranchScope(events, merges=sorted(merges, key=lambda nm: nm[1].seq))
    kept: list[Event] = []
    excluded: list[tuple[int, str, str]] = []
    for ev in events:
        if ev.seq > mine.base and on_main(ev) and not ev.type.startswith(PREFIX):
            if not (ev.type in CONTEXT_STRUCTURAL
                    or ev.type.startswith(CONTEXT_STRUCTURAL_PREFIXES)):
                excluded.append((ev.seq, ref(ev), AFTER_START))
            continue
        kept.append(ev)
    return BranchScope(kept, excluded, mine)


__all__ = ["AFTER_START", "BranchScope", "merge_ref", "scope"]
