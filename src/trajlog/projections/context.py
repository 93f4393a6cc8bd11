"""The context builder: what the model sees next, chosen by a versioned policy,
with a record of what was chosen, what was left out and why.

A build runs the four stages of the seed article, in order:

1. **branch and task** -- events of another branch (the envelope's
   ``branch_id``, in older logs ``data.branch_id`` or ``data.branch``,
   differing from the build's branch: the ``branch=`` argument, else the
   session's ``branch`` metadata, default ``"main"``) are excluded
   (``branch.other``); a started branch also leaves out the main line after
   its start or rebase, and the main line reads a merged branch's evidence
   only through its gate (:mod:`.context_branches`);
2. **status** -- superseded (``event/status``, or a later event's envelope
   ``supersedes``; in older logs ``data.supersedes``), rejected, expired and
   audit-only events are excluded,
   and so are events of a data class the ``target_model`` may not receive
   (its recorded ``model/policy``: ``data_class.not_allowed_for_model``,
   :mod:`.reader_views`), restricted data classes, untrusted sources (``external:*``,
   ``web:*``: data, never instructions) and permissions (``approval/grant``,
   ``lease/grant``) whose ``expires_at`` / ``ttl_ms`` has passed at the
   build's ``now`` (``permission.expired``: an approval that lapsed must not
   read to the model as one still in force);
   **facts that expire** -- a tool result or file snapshot whose envelope
   ``workspace_revision`` is not the current revision is not admitted
   (``tool.result.stale``, ``file.snapshot.stale``; the latter also for a
   snapshot a newer one of the same path replaced).  The current revision is
   the ``workspace_revision=`` argument; else the latest ``workspace/revision``
   event of the branch (``data.revision``, else its envelope); else, in a log
   with no such event, the latest revision any envelope states.  The explicit
   event wins over envelopes so that a late result of a background job, still
   carrying the old revision, cannot make the old facts current again.
   A tool result whose ``causal_parent`` names no command -- no ``tool/call``
   of its call id, nor an ``assistant/message`` requesting it, at an earlier
   seq -- is incomplete: where it came from is unknown, so it is excluded
   (``tool.result.incomplete``) and the summary's *to confirm* block names it
   (by reference, never its output).  A result without ``causal_parent``
   claims no parent and is not flagged;
3. **evidence rank** -- the *core* layer (task contract, human decisions) is
   placed first within a reserved quota that session noise cannot crowd out;
   then the evidence layer (active tool results, current file snapshots),
   the plan layer (the latest plan) and the conversation layer (recent
   messages) fill their budgets, newest first;
4. **compression** -- long tool output is cut to ``max_tool_output_chars``
   (keeping its source reference), and the six-block summary -- confirmed,
   failed, conflicts, to confirm, forbidden actions, next step -- is derived
   from structured fields, never from free text; an empty block says so.

If the core does not fit the whole budget, the build refuses
(:class:`ContextBudgetError`) rather than compress core facts away.  Every build
appends a ``context/injection`` event: policy name and version, the selected
seqs, excluded reasons and counts, the summary's SHA-256, the target model,
the workspace revision and branch the build was made for.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from ..errors import ArgumentTypeError, ContextBudgetError, InvalidArgumentError
from ..event_types import (
    CANCELS_CALL,
    CONTEXT_STRUCTURAL,
    CONTEXT_STRUCTURAL_PREFIXES,
    CONTEXT_TOOL_RESULTS,
    MESSAGES,
)
from ..events import Event, SessionHeader, check_text, now_ms
from . import schemas
from .context_branches import scope as branch_scope
from .context_memory import MemoryLayers, memory_layers
from .context_policy import STRICT_REQUIRE, ContextPolicy
from .context_summary import BLOCKS, cited_seqs, summary_blocks, summary_text
from .context_summary import text_of as _str
from .evidence import GRANTS, Evidence, branch_of, expires_at, ref, source_class
from .reader_views import mask_text, model_exclusion, recorded_policy


class Session(Protocol):
    """What the builder needs of a session (a :class:`trajlog.Session`)."""

    @property
    def id(self) -> str: ...

    header: SessionHeader

    def events(self, from_seq: int = 0, to_seq: int | None = None) -> Iterator[Event]: ...

    def append(self, type: str, data: Any = None, *, source: str | None = None) -> Event: ...

CORE = ("task.contract", "human.decision")
STRUCTURAL = CONTEXT_STRUCTURAL   # never shown to the model (the registry's context column)
# Exclusions that keep an event out of the messages but not out of the summary
# (it is admissible evidence, just not shown in full).
_SUMMARY_OK = ("not.included.", "model.plan.stale")
@dataclass(frozen=True, slots=True)
class Item:
    """One selected event: its source reference, layer and rendered text."""

    seq: int
    ref: str
    category: str
    layer: str
    role: str
    text: str
    #: the event itself: what a provider request takes its structure from
    #: (tool calls, call ids, content blocks)
    event: Event | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Excluded:
    seq: int
    ref: str
    reason: str


@dataclass(frozen=True, slots=True)
class ContextBuild:
    """What :func:`build_context` produced."""

    messages: list[dict[str, Any]]
    selected: list[Item]
    excluded: list[Excluded]
    summary: dict[str, list[str]]
    summary_text: str
    #: the ``context/injection`` event the build appended (None: ``record=False``)
    injection: Event | None
    chars: int = 0
    excluded_counts: dict[str, int] = field(default_factory=dict)
    #: the revision facts were checked against (None: none known) and the branch
    workspace_revision: str | None = None
    branch: str = "main"
    #: the memory layers read (None: built without ``memory=``)
    memory: MemoryLayers | None = None
    #: every event whose content the build sends: selected, or cited by its
    #: summary (a claim can come from an event no layer selects)
    read: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class _Scope:
    """What makes a fact current for one build."""

    branch: str
    revision: str | None
    latest_file: dict[str, int]
    #: seq of each command -> the call ids it requests or starts
    commands: dict[int, frozenset[str]]
    #: the time permissions are checked against (epoch ms)
    now: int


def _category(ev: Event, latest_plan: int | None) -> str | None:
    t, cls = ev.type, source_class(ev)
    if t == "task/contract":
        return "task.contract"
    if cls == "human" and t not in STRUCTURAL:
        return "human.decision"
    if t in CONTEXT_TOOL_RESULTS:
        return "tool.result.active"
    if t == "file/snapshot":
        return "file.snapshot.current"
    if t == "plan/update":
        return "model.plan.latest" if ev.seq == latest_plan else "model.plan.stale"
    if t in MESSAGES:
        return "conversation.recent"
    return None


def _layer(category: str) -> str:
    if category in CORE:
        return "core"
    if category in ("tool.result.active", "file.snapshot.current"):
        return "evidence"
    if category == "model.plan.latest":
        return "plan"
    return "conversation"


def _shown(ev: Event, policy: ContextPolicy, gate: Any) -> tuple[str, str]:
    """:func:`_render`, with secrets masked for a target model with a
    recorded policy (``gate``)."""
    role, text = _render(ev, policy)
    return role, text if gate is None else mask_text(text)


def _render(ev: Event, policy: ContextPolicy) -> tuple[str, str]:
    """(role, text) of one selected event, with its source reference."""
    d = ev.data if isinstance(ev.data, dict) else {"value": ev.data}
    r = ref(ev)
    if ev.type == "user/message":
        return "user", f"[{r}] {_str(d.get('content'))}"
    if ev.type == "assistant/message":
        return "assistant", f"[{r}] {_str(d.get('content'))}"
    if ev.type == "tool/result":
        out = _str(d.get("output"))
        if len(out) > policy.max_tool_output_chars:
            cut = len(out) - policy.max_tool_output_chars
            out = out[: policy.max_tool_output_chars] + f"\n[... {cut} characters cut; see {r}]"
        status = " (error)" if d.get("is_error") else ""
        return "tool", f"[{r}] {d.get('name') or d.get('call_id', '')}{status}: {out}"
    if ev.type in CANCELS_CALL:
        return "tool", f"[{r}] {d.get('call_id', '')} (cancelled): {_str(d.get('reason'))}"
    if ev.type == "file/snapshot":
        return "context", f"[{r}] {d.get('path', '?')} @ {ev.workspace_revision}:\n" \
                          f"{_str(d.get('content'))}"
    return "context", f"[{r}] {ev.type}: {_str(d.get('text', d.get('value', d)))}"


def build_context(session: Session, policy: ContextPolicy | None = None, *,
                  target_model: str | None = None, workspace_revision: str | None = None,
                  branch: str | None = None, upto: int | None = None,
                  record: bool = True, now: int | None = None, memory: Any = None,
                  memory_query: str | None = None) -> ContextBuild:
    """Build the next model context of ``session`` under ``policy`` and record
    the build as a ``context/injection`` event (see the module docstring).

    ``workspace_revision``: the current revision facts must carry (default:
    the log's latest ``workspace/revision`` event); ``branch``: the branch
    whose facts count (default: the session's ``branch`` metadata, else
    ``"main"``); ``upto``: build from the events before this seq only (the
    context as it could have been built then -- what replay compares);
    ``record=False``: append nothing (``injection`` is None) -- a replay or a
    dry run must not change the log it reads; ``now``: the time (epoch ms)
    permissions are checked against (default: the clock; recorded, so that
    a replay checks them against the same time); ``memory``: a
    :class:`~trajlog.memory.MemoryView` whose layers the build reads, with
    ``memory_query`` (default: the latest user message) for retrieval
    (:mod:`.context_memory`)."""
    if not callable(getattr(session, "events", None)):
        raise ArgumentTypeError(f"session must be a trajlog Session, not "
                                f"{type(session).__name__}")
    if policy is not None and not isinstance(policy, ContextPolicy):
        raise ArgumentTypeError(f"policy must be a ContextPolicy or None, not "
                                f"{type(policy).__name__}")
    policy = policy or ContextPolicy()
    for name, value in (("workspace_revision", workspace_revision), ("branch", branch),
                        ("target_model", target_model)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise ArgumentTypeError(f"{name} must be a str or None, not "
                                    f"{type(value).__name__}")
        if not value and name != "target_model":
            raise InvalidArgumentError(f"{name} must be a non-empty str or None, not {value!r}")
        check_text(value, name)   # recorded in the context/injection
    if branch is None:
        branch = str(session.header.metadata.get("branch", "main"))
    for name, number in (("upto", upto), ("now", now)):
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)
                                   or number < 0):
            raise InvalidArgumentError(f"{name} must be an int >= 0 or None, not {number!r}")
    if now is None:
        now = now_ms()
    events = list(session.events()) if upto is None else (
        list(session.events(0, upto - 1)) if upto else [])   # to_seq is inclusive
    events = schemas.read(events, session.id)   # versions checked, migrations applied
    gate = recorded_policy(events, target_model)   # what the target model may receive
    branches = branch_scope(events, branch)   # a branch sees the main line up to its start
    events = branches.events
    statuses = Evidence(branch=branch)
    latest_plan = None
    declared = stated = None
    latest_file: dict[str, int] = {}
    commands: dict[int, frozenset[str]] = {}
    for ev in events:
        statuses.decide(ev)
        if ev.type == "event/status":
            continue
        d = ev.data if isinstance(ev.data, dict) else {}
        if ev.type == "plan/update":
            latest_plan = ev.seq
        elif ev.type == "file/snapshot" and isinstance(ev.data, dict):
            latest_file[str(d.get("path"))] = ev.seq
        elif ev.type == "workspace/revision" and branch_of(ev) in (None, branch):
            named = d.get("revision")
            declared = named if isinstance(named, str) and named else (
                ev.workspace_revision or declared)
        elif ev.type == "tool/call" and "call_id" in d:
            commands[ev.seq] = frozenset((str(d["call_id"]),))
        elif ev.type == "assistant/message" and isinstance(d.get("tool_calls"), list):
            commands[ev.seq] = frozenset(str(c.get("id")) for c in d["tool_calls"]
                                         if isinstance(c, dict))
        if ev.workspace_revision is not None:
            stated = ev.workspace_revision
    revision = workspace_revision or declared or stated
    scope = _Scope(branch, revision, latest_file, commands, now)

    # Exclusion by branch, status, data class and source applies to everything
    # the context shows -- the summary's claims included.
    excluded = [Excluded(*x) for x in branches.excluded]
    # a merge brings its branch's evidence back only if its own event may be read
    excluded += [Excluded(*x) for x in branches.admit(
        lambda ev: _exclusion(ev, None, policy, statuses, scope) or model_exclusion(ev, gate))]
    candidates: list[tuple[Event, str]] = []
    admitted: list[Event] = []
    orphans: list[Event] = []
    # statuses were decided in the first pass: this one only gathers claims
    evidence = Evidence(status=statuses.status)
    for ev in events:
        if ev.type in STRUCTURAL or ev.type.startswith(CONTEXT_STRUCTURAL_PREFIXES):
            continue
        category = _category(ev, latest_plan)
        reason = _exclusion(ev, category, policy, statuses, scope)
        if reason is None or reason.startswith(_SUMMARY_OK):
            reason = model_exclusion(ev, gate) or reason
        if reason is not None and not reason.startswith(_SUMMARY_OK):
            excluded.append(Excluded(ev.seq, ref(ev), reason))
            if reason == "tool.result.incomplete":
                orphans.append(ev)
            continue
        admitted.append(ev)
        evidence.claim(ev)
        if reason is not None:
            excluded.append(Excluded(ev.seq, ref(ev), reason))
        elif category is not None:
            candidates.append((ev, category))

    # Core first, within the whole budget; then the layers, newest first.
    selected: list[Item] = []
    used = 0
    for ev, category in candidates:
        if category in CORE:
            role, text = _shown(ev, policy, gate)
            selected.append(Item(ev.seq, ref(ev), category, "core", role, text, ev))
            used += len(text)
    branches.claim(evidence)   # what a gated merge brought back to the main line
    blocks = summary_blocks(admitted, evidence, orphans)
    branches.annotate(blocks, evidence)
    summary = summary_text(blocks)
    if gate is not None:   # a model with a recorded policy gets secrets masked
        summary = mask_text(summary)
    header = (f"Context built by policy {policy.name} v{policy.version}. Facts carry source "
              f"references such as [HUMAN-12] or [TEST-31]; cite them.\n{summary}")
    used += len(header)
    if used > policy.budget_chars:
        raise ContextBudgetError(
            f"the core of session {session.id} (task contract, human decisions and the "
            f"summary: {used} characters) does not fit the budget of {policy.budget_chars}; "
            "raise the budget rather than lose core facts")
    layers = None if memory is None else memory_layers(
        memory, policy, now, memory_query, admitted, session, used, gate)
    remaining = policy.budget_chars - max(used, policy.reserved_chars) - (
        0 if layers is None else layers.held)   # the policy layers' reserved share
    used += 0 if layers is None else layers.chars
    budgets = {name: int(remaining * share) for name, share in policy.layer_shares}
    counts = Counter[str]()
    files = 0
    recent = [ev.seq for ev, c in candidates if c == "conversation.recent"][
        -policy.recent_messages:] if policy.recent_messages else []
    for ev, category in reversed(candidates):
        if category in CORE:
            continue
        layer = _layer(category)
        reason = None
        if category == "conversation.recent" and ev.seq not in recent:
            reason = "limit.recent_messages"
        elif category == "file.snapshot.current" and files >= policy.max_file_snippets:
            reason = "limit.max_file_snippets"
        elif len(selected) >= policy.max_events:
            reason = "limit.max_events"
        if reason is None:
            # the budget is checked on the plain text first: masking (a scan
            # for secrets) only what can still be selected keeps a build for
            # a gated model from scanning every candidate of a long log
            role, text = _render(ev, policy)
            if gate is not None and len(text) <= budgets.get(layer, 0):
                text = mask_text(text)
            if len(text) > budgets.get(layer, 0):
                reason = f"budget.{layer}"
            else:
                budgets[layer] -= len(text)
                used += len(text)
                files += category == "file.snapshot.current"
                selected.append(Item(ev.seq, ref(ev), category, layer, role, text, ev))
        if reason is not None:
            excluded.append(Excluded(ev.seq, ref(ev), reason))
    selected.sort(key=lambda it: it.seq)
    excluded.sort(key=lambda x: x.seq)
    counts.update(x.reason for x in excluded)
    messages = [{"role": "system", "content": header}, *(layers.messages if layers else ())] + [
        {"role": it.role, "content": it.text, "ref": it.ref, "seq": it.seq} for it in selected]
    read = {it.seq for it in selected} | cited_seqs(blocks)
    by_seq = {ev.seq: ev for ev in events}
    digest = hashlib.sha256(summary.encode()).hexdigest()
    injection = session.append("context/injection", {
        "policy": policy.name, "policy_version": policy.version, "target_model": target_model,
        "selected": [it.seq for it in selected], "excluded": dict(sorted(counts.items())),
        "excluded_seqs": _excluded_runs(excluded), "summary_sha256": digest,
        "messages_sha256": messages_digest(messages), "chars": used,
        "policy_config": policy.config(), "builder_version": BUILDER_VERSION,
        "workspace_revision": revision, "branch": branch, "now": now, **branches.record(),
        # every event whose content the build sends (selected, or cited by the
        # summary), by data class: what the auditor view reports as sent (bounded)
        "read_data_classes": dict(sorted(Counter(
            by_seq[q].data_class or "unclassified" for q in read if q in by_seq).items())),
        **({} if layers is None else layers.record(memory_query is not None))},
        source="trajlog.context") if record else None
    return ContextBuild(messages, selected, excluded, blocks, summary, injection, used,
                        dict(counts), revision, branch, layers, tuple(sorted(read)))


EXCLUDED_RUNS = 1_000
#: bumped when the same policy over the same events would select differently
#: (a replay names "builder" as the cause of such a drift).  2: branches of
#: investigation scope a build, a model's data-class policy gates and masks it,
#: events are read through their schema versions
BUILDER_VERSION = 2


def messages_digest(messages: list[dict[str, Any]]) -> str:
    """SHA-256 of the messages a build produced, canonically encoded (sorted
    keys): what lets a replay prove it rebuilt the exact model input."""
    return hashlib.sha256(msgspec.json.encode(messages, order="sorted")).hexdigest()


def _excluded_runs(excluded: list[Excluded]) -> dict[str, list[list[int]]]:
    """Which seqs each reason excluded, as runs ``[first, last]`` of
    consecutive seqs (so that a log of 100k messages cut by the recent-message
    limit records a few runs, not 100k seqs); at most :data:`EXCLUDED_RUNS`
    runs per reason are kept -- the count in ``excluded`` stays exact."""
    runs: dict[str, list[list[int]]] = {}
    for x in excluded:   # sorted by seq
        mine = runs.setdefault(x.reason, [])
        if mine and mine[-1][1] == x.seq - 1:
            mine[-1][1] = x.seq
        elif len(mine) < EXCLUDED_RUNS:
            mine.append([x.seq, x.seq])
    return dict(sorted(runs.items()))


def _exclusion(ev: Event, category: str | None, policy: ContextPolicy, evidence: Evidence,
               scope: _Scope) -> str | None:
    """Why ``ev`` may not enter the context, or None."""
    d = ev.data if isinstance(ev.data, dict) else {}
    ex = policy.exclude
    if "branch.other" in ex and branch_of(ev) not in (None, scope.branch):
        return "branch.other"
    status = evidence.status_of(ev.seq)
    if status != "active" and f"event.status.{status}" in ex:
        return f"event.status.{status}"
    if ev.data_class is not None and f"data_class.{ev.data_class}" in ex:
        return f"data_class.{ev.data_class}"
    if "source.untrusted" in ex and source_class(ev) == "untrusted":
        return "source.untrusted"
    if ev.type in GRANTS and "permission.expired" in ex and (
            (lapse := expires_at(ev)) is not None and lapse <= scope.now):
        return "permission.expired"
    if category is None:
        return None
    if category == "model.plan.stale":
        return "model.plan.stale"
    if category not in policy.include:
        return f"not.included.{category}"
    revision = scope.revision
    if category == "file.snapshot.current":
        path = str(d.get("path"))
        if scope.latest_file.get(path) != ev.seq or (
                revision is not None and ev.workspace_revision != revision):
            return "file.snapshot.stale"
    if category == "tool.result.active":
        parent = ev.causal_parent
        if parent is not None and not (parent < ev.seq and str(d.get("call_id"))
                                       in scope.commands.get(parent, ())):
            return "tool.result.incomplete"
        # a result with no revision is left to require.workspace_revision
        if revision is not None and ev.workspace_revision not in (None, revision):
            return "tool.result.stale"
    if category in policy.require_for:
        for name in policy.require:
            if getattr(ev, name) is None:
                return f"require.{name}"
    return None


__all__ = ["BLOCKS", "BUILDER_VERSION", "STRICT_REQUIRE", "ContextBuild", "ContextPolicy",
           "Excluded", "Item", "build_context", "messages_digest", "summary_text"]
