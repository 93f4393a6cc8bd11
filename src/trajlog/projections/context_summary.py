"""The six-block summary of a context build -- confirmed, failed, conflicts,
to confirm, forbidden actions, next step -- derived from structured fields,
never from free text (:func:`trajlog.projections.context.build_context`)."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..events import Event
from .evidence import Evidence, ref

BLOCKS = ("confirmed", "failed", "conflicts", "to confirm", "forbidden actions", "next step")


def text_of(value: Any) -> str:
    """A JSON value as text (a str as it is; None as the empty str)."""
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode() if value is not None else ""


def summary_blocks(events: list[Event], evidence: Evidence,
             orphans: list[Event]) -> dict[str, list[str]]:
    confirmed, conflicts, unconfirmed = evidence.resolve()
    blocks: dict[str, list[str]] = {b: [] for b in BLOCKS}
    for ev in orphans:
        blocks["to confirm"].append(f"tool result [{ref(ev)}] names no command (causal "
                                    f"parent seq {ev.causal_parent}): its origin is unknown")
    for subject, claim in sorted(confirmed.items()):
        blocks["confirmed"].append(f"{subject} = {text_of(claim.value)} [{claim.ref}]")
    for c in conflicts:
        refs = ", ".join(x.ref for x in c.claims)
        blocks["conflicts"].append(f"{c.subject}: {c.note} [{refs}]")
    for claim in unconfirmed:
        blocks["to confirm"].append(f"{claim.subject} = {text_of(claim.value)} "
                                    f"(model interpretation) [{claim.ref}]")
    plan = None
    for ev in events:
        d = ev.data if isinstance(ev.data, dict) else {}
        if evidence.status_of(ev.seq) != "active":
            continue
        if ev.type == "tool/result":
            if d.get("status") == "TOOL_OUTCOME_UNKNOWN":
                blocks["to confirm"].append(f"outcome of tool call {d.get('call_id')} is "
                                            f"unknown: check before retrying [{ref(ev)}]")
            elif d.get("is_error") and not d.get("synthetic"):
                blocks["failed"].append(f"{d.get('name') or d.get('call_id')}: "
                                        f"{text_of(d.get('output'))[:160]} [{ref(ev)}]")
        elif ev.type == "approval/deny":
            blocks["failed"].append(f"denied: {text_of(d.get('tool', d))} [{ref(ev)}]")
            blocks["forbidden actions"].append(f"{text_of(d.get('tool', d))} [{ref(ev)}]")
        elif ev.type == "task/contract":
            forbidden = d.get("forbidden")
            if isinstance(forbidden, str):
                forbidden = [forbidden]
            for action in forbidden if isinstance(forbidden, list) else ():
                blocks["forbidden actions"].append(f"{text_of(action)} [{ref(ev)}]")
        elif ev.type == "plan/update":
            plan = ev
    if plan is not None:
        d = plan.data if isinstance(plan.data, dict) else {}
        blocks["next step"].append(f"{text_of(d.get('next', d.get('text', '')))} [{ref(plan)}]")
    return blocks


def summary_text(blocks: dict[str, list[str]]) -> str:
    """The six blocks as text; an empty block says so."""
    lines = []
    for name in BLOCKS:
        lines.append(f"{name.upper()}:")
        lines += [f"- {x}" for x in blocks[name]] or ["- (none)"]
    return "\n".join(lines)


_CITED = re.compile(r"\[((?:[A-Z][A-Z0-9_]*-\d+(?:, )?)+)\]")


def cited_seqs(blocks: dict[str, list[str]]) -> set[int]:
    """The seqs the summary's lines cite (``[TEST-31]``, ``[A-1, B-2]``):
    the events whose content the summary sends.  A value quoting such a
    reference adds a seq: it over-reports, never under-reports."""
    return {int(r.rsplit("-", 1)[1]) for lines in blocks.values() for line in lines
            for group in _CITED.findall(line) for r in group.split(", ")}


__all__ = ["BLOCKS", "cited_seqs", "summary_blocks", "summary_text", "text_of"]
