"""The gates every memory write and promotion passes.

* Global scope is written at deploy time only: a run-time write fails.
* Policy comes only from approved tenant artifacts: never from user content
  or tool output (instruction poisoning), never from an episode (precedent
  poisoning), never by promotion.
* Session -> user: preferences, facts, the user's own episodes.
  Session -> tenant: only verified facts (a human approval, a record system,
  or independent corroboration) and approved episodes.  Anything -> global,
  user -> tenant, tenant -> anything: never (cross-scope contamination).

Each rule raises its own :class:`~trajlog.errors.PromotionRefusedError`
subclass, so a host can tell which gate held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import (
    CrossScopeError,
    GlobalScopeReadOnlyError,
    InstructionPoisoningError,
    InvalidArgumentError,
    PrecedentPoisoningError,
    PromotionRefusedError,
    UnverifiedFactError,
)
from ..event_types import INPUT
from .model import EVIDENCE_KINDS, MemoryItem

# Event types whose content is input, never instruction: what a user, a tool,
# a model or a subagent said (the registry's ``input`` column).
INPUT_EVENTS = INPUT
# What a session item may be promoted to user scope as.
USER_TYPES = frozenset({"preference", "fact", "episode"})
# A subagent's result (docs/delegation.md): written to session scope only.
DELEGATED = "subagent/result"


def check_evidence(evidence: Any) -> dict[str, Any] | None:
    """The evidence of a decision, checked for shape: ``{"kind": ..., ...}``
    with ``kind`` one of :data:`~trajlog.memory.model.EVIDENCE_KINDS`;
    a human approval names its approver (``"by": "human:<name>"``);
    corroboration lists at least two independent ``sources``."""
    if evidence is None:
        return None
    if not isinstance(evidence, Mapping) or evidence.get("kind") not in EVIDENCE_KINDS:
        raise InvalidArgumentError(f"evidence must be a mapping with kind one of "
                                   f"{EVIDENCE_KINDS}, not {evidence!r}")
    ev = dict(evidence)
    if ev["kind"] == "human_approval" and not (
            isinstance(ev.get("by"), str) and ev["by"].startswith("human:")):
        raise InvalidArgumentError("a human approval names its approver as by='human:<name>'")
    if ev["kind"] == "record_system" and not isinstance(ev.get("system"), str):
        raise InvalidArgumentError("a record-system confirmation names its system")
    if ev["kind"] == "corroboration":
        sources = ev.get("sources")
        if not isinstance(sources, list) or len({str(s) for s in sources}) < 2:
            raise InvalidArgumentError("corroboration lists at least two independent sources")
    return ev


def _approved(evidence: dict[str, Any] | None) -> bool:
    return evidence is not None and evidence["kind"] == "human_approval"


def _tenant_gate(type_: str, evidence: dict[str, Any] | None, source_type: str | None,
                 what: str) -> None:
    if type_ == "policy":
        if source_type in INPUT_EVENTS:
            raise InstructionPoisoningError(f"{what}: policy from a {source_type} event -- "
                                            "user content and tool output are input, never "
                                            "policy")
        if not _approved(evidence):
            raise InstructionPoisoningError(f"{what}: tenant policy needs a human approval")
    elif type_ == "fact":
        if evidence is None:
            raise UnverifiedFactError(f"{what}: a tenant fact needs verification evidence "
                                      "(human approval, record system or corroboration)")
    elif type_ == "episode":
        if not _approved(evidence):
            raise PrecedentPoisoningError(f"{what}: an episode reaches tenant scope only "
                                          "with a human approval")
    elif type_ == "preference":
        if not _approved(evidence):
            raise PromotionRefusedError(f"{what}: a tenant preference needs a human approval")
    else:
        raise PromotionRefusedError(f"{what}: a {type_} stays in session or user scope")


def check_write(scope: str, type_: str, evidence: dict[str, Any] | None,
                source_type: str | None) -> None:
    """The gate of a direct write (``remember``) into ``scope``."""
    what = f"writing a {type_} to {scope} scope"
    if source_type == DELEGATED and scope != "session":
        raise CrossScopeError(f"{what}: a subagent's result enters memory in the session "
                              "scope it was reported to, and goes further only by promotion")
    if scope == "global":
        raise GlobalScopeReadOnlyError(f"{what}: global scope is written at deploy time and "
                                       "read-only at run time")
    if scope == "tenant":
        _tenant_gate(type_, evidence, source_type, what)
    elif type_ == "policy":
        raise InstructionPoisoningError(f"{what}: policy lives in tenant or global scope, "
                                        "from approved artifacts")
    # (every other type may live in user or session scope)



def check_promotion(item: MemoryItem, to: str, as_type: str | None,
                    evidence: dict[str, Any] | None, source_type: str | None) -> None:
    """The gate of a promotion of ``item`` to scope ``to``."""
    what = f"promoting {item.type} {item.id} from {item.scope} to {to} scope"
    if as_type is not None and as_type != item.type:
        if as_type == "policy":
            if item.type == "episode":
                raise PrecedentPoisoningError(f"{what}: an episode never becomes policy")
            raise InstructionPoisoningError(f"{what}: nothing becomes policy at run time")
        raise PromotionRefusedError(f"{what}: a promotion keeps the item's type")
    if item.scope != "session":
        raise CrossScopeError(f"{what}: only session items are promoted (a {item.scope} item "
                              "never lifts itself)")
    if to == "user":
        # (no session item is a policy: check_write refuses them)
        if item.type not in USER_TYPES:
            raise PromotionRefusedError(f"{what}: only preferences, facts and episodes go to "
                                        "user scope")
    elif to == "tenant":
        _tenant_gate(item.type, evidence, source_type, what)
    else:
        raise CrossScopeError(f"{what}: a promotion goes to user or tenant scope (global "
                              "scope is never written at run time)")


__all__ = ["INPUT_EVENTS", "check_evidence", "check_promotion", "check_write"]
