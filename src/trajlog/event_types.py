"""The known event types: one declaration each, and everything trajlog knows
about a type read from it.

An event's type is a lowercase ``segment/segment`` name.  Any type may be
appended: a type declared here is one trajlog gives a meaning to; an unknown
type is stored, read and exported as it is (this registry describes, it never
refuses).  A family ``name/*`` declares what every type under that prefix
shares (``compaction/*``: an index row, a write check, a structural place in
the views); a type under it may have its own entry too.

The columns of :class:`EventType` (an empty value: nothing special):

* ``shape`` -- the data fields :mod:`trajlog.events` checks at append, field ->
  JSON type (``str``, ``bool``, ``int`` (no bool), ``list``, ``null``, joined by ``|``;
  ``list[tool_call]``: a list of ``{id: str, name: str}`` objects with unique
  ids); a ``?`` ends an optional field.  More fields are always allowed.
* ``lifecycle`` -- what the type does in :mod:`trajlog.lifecycle`: ``opens turn``,
  ``closes turn``, ``opens step``, ``closes step``, ``requests calls`` (an
  assistant message's ``tool_calls``), ``starts call`` (the host started it),
  ``answers call`` (its result), ``cancels call`` (the host gave it up).
  ``answers`` and ``cancels`` both close the call.
* ``closer`` -- the synthetic type :mod:`trajlog.recovery` appends after a crash
  for what an event of this type left open (a turn, a step, a requested or
  started call).
* ``index`` -- how :mod:`trajlog.storage.event_index` finds it without reading
  the log: ``row`` (a sparse index row with type, time and envelope), or a
  dense mark: ``mark:step-start``, ``mark:step-end``, ``mark:requested`` (each
  requested call id), ``mark:call`` (a started call), ``mark:closed`` (a closed
  call: its answer or its cancel).
* ``machine`` -- fields trajlog's own API writes (ids, digests) that redaction
  leaves unscanned when they have that form (:mod:`trajlog.redaction.machine`):
  dotted path -> form (``uuid``, ``digest``, ``call id``).
* ``keeps`` -- the data fields an erasure keeps (:mod:`trajlog.memory.replacement`),
  field -> kept form (``call id``, ``tool name``, ``run id``, ``closer status``,
  ``flag``, ``calls``); every other field is blanked.
* ``pause`` -- what it does under a redaction pause (:mod:`trajlog.redaction.pause`):
  ``passes`` (it may be appended while the pause holds the session: what
  closes, audits or resumes), ``pauses`` / ``resumes`` (it moves the pause).
* ``history`` / ``chat`` / ``trajectory`` / ``context`` -- how each view
  treats it (:mod:`trajlog.projections.folds`, :mod:`trajlog.projections.context`):
  ``history``: ``user`` / ``assistant`` / ``tool`` message, ``cut`` (hides
  earlier messages), ``compaction`` (a surface-replace hides a range behind its
  summary), ``request`` (the request config); ``chat``: ``message``, ``card``
  (a tool card), ``cut``; ``trajectory``: ``turn``, ``step``, ``request``,
  ``span`` (a tool span), ``note`` (noted on its turn); ``context``:
  ``structural`` (never shown to the model), ``conversation``, ``tool result``,
  ``task``, ``file``, ``plan``.  Empty: the view leaves it out (the context
  still reads claims and statuses from any type).
* ``checked`` -- the write path checks it against the log inside the append's
  transaction (:mod:`trajlog.api.checks`).
* ``grants`` -- it grants a permission with an expiry (``expires_at`` epoch ms,
  or ``ttl_ms`` from its time): the context's evidence shows it as a permission
  (:mod:`trajlog.projections.evidence`), a run's checkpoint counts it as a live
  one (:mod:`trajlog.api.checkpoints`).
* ``retention`` -- what a session's retention policy does with its payload
  (:mod:`trajlog.memory.retention`): ``kept`` (a structural marker, the policy,
  the close: never erased); else erased once due -- under the store rule of its
  kind (:mod:`trajlog.memory.retention_rules`): ``messages``, ``tool_calls``,
  ``tool_outputs``, ``summaries``; empty: ``other``.
* ``input`` -- what a user, a tool, a model or a subagent said: a memory item
  written from it is input, never instruction (:mod:`trajlog.memory.gates`).
* ``usage`` -- its payload states usage that a run's cost tallies (a request and
  its tokens, a tool call) (:mod:`trajlog.projections.envelopes`).
* ``version`` -- the version of its schema (how its fields are read) new events
  are written under, default 1; an event of a version above 1 records it in its
  envelope's ``schema_version``, and readers take older events through the
  upgrades of :mod:`trajlog.projections.schemas` (docs/event-schemas.md).

Adding a known type is one entry here plus its tests; the modules above derive
their sets from this table at import (frozensets and dicts: the append path
reads no more than it did).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

_NONE: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class EventType:
    """One known event type (or, ``name`` ending in ``/*``, a family of them);
    the module docstring explains each column."""

    name: str
    about: str
    shape: Mapping[str, str] = field(default_factory=lambda: _NONE)
    lifecycle: str = ""
    closer: str = ""
    index: str = ""
    machine: Mapping[str, str] = field(default_factory=lambda: _NONE)
    keeps: Mapping[str, str] = field(default_factory=lambda: _NONE)
    pause: str = ""
    history: str = ""
    chat: str = ""
    trajectory: str = ""
    context: str = ""
    checked: bool = False
    grants: bool = False
    retention: str = ""
    input: bool = False
    usage: bool = False
    version: int = 1

    @property
    def family(self) -> bool:
        """A prefix family (``name/*``) rather than one type."""
        return self.name.endswith("/*")

    @property
    def prefix(self) -> str:
        """What a type of the family starts with (``compaction/``)."""
        return self.name[:-1] if self.family else self.name


def _t(name: str, about: str, **columns: Any) -> EventType:
    for key in ("shape", "machine", "keeps"):
        if key in columns:
            columns[key] = MappingProxyType(dict(columns[key]))
    return EventType(name, about, **columns)


# Recurring column values, named once.
_ROW = "row"
_KEPT = "kept"
_CLOSES = {"interrupted": "flag", "synthetic": "flag"}
_RUN = {"run_id": "uuid"}
_CALL_ID = {"call_id": "call id"}

#: Every known type, grouped by who writes it.  Read it as a table.
TYPES: tuple[EventType, ...] = (
    # -- the conversation and its tool calls ------------------------------------
    _t("user/message", "what the user said",
       shape={"content": "str|list"}, history="user", chat="message", context="conversation",
       input=True, retention="messages"),
    _t("assistant/message", "what the model answered, and the tool calls it requests",
       shape={"content": "str|list|null?", "tool_calls": "list[tool_call]?"},
       lifecycle="requests calls", closer="tool/result", index="mark:requested",
       keeps={"tool_calls": "calls"}, history="assistant", chat="message", trajectory="request",
       context="conversation", input=True, usage=True, retention="messages"),
    _t("tool/call", "the host started a requested tool call",
       shape={"call_id": "str", "name": "str"}, lifecycle="starts call", closer="tool/result",
       index="mark:call", keeps={"call_id": "call id", "name": "tool name"}, chat="card",
       trajectory="span", context="structural", input=True, retention="tool_calls"),
    _t("tool/result", "a tool call's output (recovery's closer of a call: status "
       "TOOL_NOT_STARTED / TOOL_OUTCOME_UNKNOWN)",
       shape={"call_id": "str", "is_error": "bool?"}, lifecycle="answers call",
       index="mark:closed", machine={"child_session": "uuid", "job_id": "uuid"},
       keeps={"call_id": "call id", "name": "tool name", "status": "closer status",
              "is_error": "flag", "synthetic": "flag"},
       history="tool", chat="card", trajectory="span", context="tool result", input=True,
       usage=True, retention="tool_outputs"),
    _t("tool/cancel", "the host cancelled a call it requested or started: the call is "
       "closed, the model is told so, a later result is refused",
       shape={"call_id": "str", "reason": "str?"}, lifecycle="cancels call",
       index="mark:closed", machine=_CALL_ID, keeps={"call_id": "call id"}, pause="passes",
       history="tool", chat="card", trajectory="span", context="tool result",
       retention="tool_outputs"),
    _t("tool/reconciled", "a host checked an unknown tool outcome (run checkpoints)"),
    _t("tool/note", "a free note about a tool (the demo)"),
    # -- turns and steps --------------------------------------------------------
    _t("turn/start", "a turn begins (a fork may cut here)", lifecycle="opens turn",
       closer="turn/end", index=_ROW, trajectory="turn", context="structural", retention=_KEPT),
    _t("turn/end", "a turn ends", shape={"interrupted": "bool?"}, lifecycle="closes turn",
       index=_ROW, keeps=_CLOSES, pause="passes", trajectory="turn", context="structural",
       retention=_KEPT),
    _t("step/start", "a step of a turn begins", lifecycle="opens step", closer="step/end",
       index="mark:step-start", trajectory="step", context="structural", retention=_KEPT),
    _t("step/end", "a step ends", lifecycle="closes step", index="mark:step-end",
       keeps=_CLOSES, pause="passes", trajectory="step", context="structural",
       retention=_KEPT),
    # -- the model's request and its history ------------------------------------
    _t("request/header", "system prompt, tools and parameters of the next request",
       history="request", trajectory="request", context="structural"),
    _t("request/retry", "a request retried under its idempotency key", trajectory="note"),
    _t("model/switch", "the model changed", machine=_RUN, trajectory="note"),
    _t("history/pop", "hide one earlier message (target seq)", history="cut", chat="cut"),
    _t("history/clear", "hide every message up to a seq (through)", history="cut",
       chat="cut"),
    _t("compaction/*", "a compaction; op surface-replace hides from_seq..to_seq behind "
       "its summary", index=_ROW, history="compaction", context="structural", checked=True,
       retention="summaries"),
    _t("compaction/apply", "a compaction the session or an importer applied", index=_ROW,
       history="compaction", context="structural", checked=True, retention="summaries"),
    # -- evidence, status and the context builder -------------------------------
    _t("event/status", "the status of an earlier event (target, status, reason)",
       index=_ROW, pause="passes", context="structural", checked=True),
    _t("context/injection", "a context build, recorded",
       machine={"summary_sha256": "digest", "messages_sha256": "digest",
                "workspace_revision": "digest"}, context="structural"),
    _t("task/contract", "the task and what it forbids", context="task"),
    _t("human/decision", "a person's decision"),
    _t("plan/update", "the model's plan", context="plan"),
    _t("file/snapshot", "a file's content at a revision", context="file"),
    _t("workspace/revision", "the workspace's current revision (version 2: its branch and "
       "supersedes are the envelope's alone; version 1 also read data.branch_id, data.branch "
       "and data.supersedes)", context="structural", version=2),
    _t("goal/change", "a full goal snapshot, or its clearing", context="structural"),
    _t("schema/*", "a schema the session relies on"),
    _t("lease/grant", "a permission with an expiry", grants=True),
    _t("approval/*", "approvals (a forked subagent may append none)", index=_ROW),
    _t("approval/grant", "a permission with an expiry", index=_ROW, grants=True),
    _t("approval/deny", "a denied action", index=_ROW),
    _t("approval/policy", "the approval policy", index=_ROW, context="structural"),
    _t("sandbox/mode", "the sandbox settings (a subagent's snapshot)", index=_ROW,
       context="structural"),
    # -- reader views (docs/reader-views.md) ------------------------------------
    _t("model/policy", "the data classes a model may receive: a context build for it and "
       "a switch to it honour them", shape={"model": "str", "allowed_data_classes": "list",
                                            "unclassified": "str?"}),
    # -- the session's life, redaction, retention ------------------------------
    _t("session/closed", "the session was closed (Session.close): its log takes no more "
       "events", index=_ROW, retention=_KEPT),
    _t("session/deleted", "the session was deleted: its last event, after which the store "
       "refuses every write (who, when, why; the events before it erased)",
       shape={"reason": "str", "actor": "str|null"}, index=_ROW,
       retention=_KEPT, pause="passes"),
    _t("redaction/*", "the redaction pause and its audit", pause="passes"),
    _t("redaction/paused", "a hash finding paused the session",
       index=_ROW, machine={"inherited.session": "uuid"}, pause="pauses"),
    _t("redaction/resumed", "the pause was lifted", index=_ROW, pause="resumes"),
    _t("retention/*", "retention", index=_ROW),
    _t("retention/policy", "a session's retention policy", index=_ROW, retention=_KEPT),
    # -- runs and their checkpoints ---------------------------------------------
    _t("run/*", "a run's marks", pause="passes"),
    _t("run/started", "a run begins",
       machine={"run_id": "uuid", "parent_run": "uuid", "identity.session": "uuid",
                "static_prefix_hash": "digest"}, keeps={"run_id": "run id"}, pause="passes"),
    _t("run/finalized", "a run ends, with its integrity",
       machine={"run_id": "uuid", "integrity.digest": "digest", "integrity.chain": "digest"},
       keeps={"run_id": "run id"}, pause="passes"),
    _t("run/resume", "a run resumes", machine=_RUN, pause="passes"),
    _t("run/restart", "a run restarts", machine=_RUN, pause="passes"),
    _t("run/paused", "a run pauses", machine=_RUN, pause="passes"),
    _t("run/fork", "a run forks a session",
       machine={"run_id": "uuid", "parent_session": "uuid", "child_session": "uuid"},
       pause="passes"),
    _t("checkpoint/stage", "a run's stage checkpoint",
       machine={"run_id": "uuid", "workspace_revision": "digest"}),
    _t("checkpoint/invalidated", "a checkpoint's revision no longer matches",
       machine={"recorded_revision": "digest", "current_revision": "digest"}),
    _t("recovery/check", "a run checked what a crash left", machine=_RUN),
    # -- event schemas (projections/schemas.py) -----------------------------------
    _t("schema/migration", "an upgrade of older events of a type, recorded for a seq range "
       "(readers and replays apply it; the events are not rewritten)",
       shape={"type": "str", "upgrade": "str", "from_version": "int", "to_version": "int",
              "first_seq": "int", "last_seq": "int"}, retention=_KEPT),
    # -- branches of investigation (api/branch_ops.py, projections/branches.py) ---
    _t("branch/*", "a branch of investigation's life, on the main line",
       index=_ROW, context="structural", checked=True, retention=_KEPT),
    _t("branch/started", "a branch starts from a main-line event (from_seq), its start "
       "frozen: workspace revision, data sample ids, tool versions, permissions",
       shape={"name": "str"}, index=_ROW,
       machine={"frozen.workspace_revision": "digest"}, context="structural", checked=True,
       retention=_KEPT),
    _t("branch/rebased", "a branch moves its start to a later main-line event (onto_seq)",
       shape={"name": "str", "reason": "str"}, index=_ROW,
       context="structural", checked=True, retention=_KEPT),
    _t("branch/merged", "evidence, not history, brought back: common facts, adopted and "
       "rejected conclusions, unresolved questions, the gate and the status it gives "
       "(fact / reference-only)",
       shape={"name": "str", "status": "str"}, index=_ROW,
       machine={"gate.code_version": "digest"}, context="structural", checked=True,
       retention=_KEPT),
    _t("branch/abandoned", "a branch given up (its events stay, searchable)",
       shape={"name": "str", "reason": "str"}, index=_ROW, context="structural",
       checked=True, retention=_KEPT),
    # -- subagents and memory ---------------------------------------------------
    _t("subagent/*", "a subagent's events in its parent", index=_ROW),
    _t("subagent/notification", "a background subagent's news",
       index=_ROW, machine={"child_session": "uuid", "job_id": "uuid"},
       retention="tool_outputs"),
    _t("subagent/output", "a subagent's output", index=_ROW, input=True,
       retention="tool_outputs"),
    _t("subagent/result", "a subagent's typed result (fact, episode, suggestion, tool_result) "
       "with its provenance and sensitivity (Session.report)", index=_ROW, input=True,
       shape={"kind": "str", "sensitivity": "str"},
       machine={"provenance.session": "uuid", "provenance.run_id": "uuid"},
       retention="tool_outputs"),
    _t("memory/*", "a memory item's content, as redaction names it"),
    _t("memory/fact", "a fact a LangGraph store put"),
    # -- adapters (stored as they come) -----------------------------------------
    _t("agents/item", "an OpenAI Agents SDK item"),
    _t("agents/session", "an Agents SDK session"),
    _t("agents/branch", "an Agents SDK branch"),
    _t("langgraph/message", "a LangGraph message of another kind"),
    _t("checkpoint/put", "a LangGraph checkpoint"),
    _t("checkpoint/writes", "a LangGraph checkpoint's pending writes"),
    _t("checkpoint/delete", "a LangGraph thread deleted"),
    _t("checkpoint/forget", "a LangGraph checkpoint forgotten"),
    _t("eventsourcing/event", "an eventsourcing domain event"),
    _t("eventsourcing/notification", "an eventsourcing notification"),
    _t("eventsourcing/tracking", "an eventsourcing tracking record"),
    # -- importers (stored as they come) ----------------------------------------
    _t("claude-code/*", "a Claude Code record of another kind"),
    _t("claude-code/tool_use", "a Claude Code tool use"),
    _t("claude-code/tool_result", "a Claude Code tool result"),
    _t("claude-code/compact_boundary", "a Claude Code compaction boundary"),
    _t("claude-code/compact_summary", "a Claude Code compaction summary"),
    _t("codex/*", "a Codex record of another kind"),
    _t("codex/reasoning", "Codex reasoning"),
    _t("openhands/*", "an OpenHands record of another kind"),
    _t("openhands/event", "an OpenHands event"),
    _t("openhands/message", "an OpenHands message"),
    _t("openhands/condensation", "an OpenHands condensation"),
    _t("openhands/eval_record", "an OpenHands evaluation record"),
    _t("swe-agent/config", "a SWE-agent configuration"),
    _t("swe-agent/info", "a SWE-agent run's info"),
    _t("swe-agent/message", "a SWE-agent message"),
    _t("swe-agent/step", "a SWE-agent step"),
    _t("swe-agent/system", "a SWE-agent system prompt"),
)

BY_NAME: Mapping[str, EventType] = MappingProxyType(
    {t.name: t for t in TYPES if not t.family})
FAMILIES: tuple[EventType, ...] = tuple(t for t in TYPES if t.family)


def describe(type_: str) -> EventType | None:
    """The declaration of ``type_``: its own entry, else its family's, else
    None (an unknown type: stored as it is)."""
    found = BY_NAME.get(type_)
    if found is not None:
        return found
    for fam in FAMILIES:
        if type_.startswith(fam.prefix):
            return fam
    return None


def declared(type_: str) -> bool:
    """Whether ``type_`` is a known type (its own entry or its family's)."""
    return describe(type_) is not None


def _names(**col: Any) -> frozenset[str]:
    ((key, value),) = col.items()
    return frozenset(t.name for t in TYPES if not t.family and getattr(t, key) == value)


def _prefixes(key: str, value: Any) -> tuple[str, ...]:
    return tuple(t.prefix for t in FAMILIES if getattr(t, key) == value)


# ---------------------------------------------------------------------------
# Derived once, at import: what each module reads (sets and dicts, no lookups
# through the table on the append path).

#: events.py: type -> {field: JSON type} of the types whose shape is checked
SHAPES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {t.name: t.shape for t in TYPES if t.shape and not t.family})

#: lifecycle.py
OPENS_TURN, CLOSES_TURN = _names(lifecycle="opens turn"), _names(lifecycle="closes turn")
OPENS_STEP, CLOSES_STEP = _names(lifecycle="opens step"), _names(lifecycle="closes step")
REQUESTS_CALLS = _names(lifecycle="requests calls")
STARTS_CALL = _names(lifecycle="starts call")
ANSWERS_CALL = _names(lifecycle="answers call")
CANCELS_CALL = _names(lifecycle="cancels call")
CLOSES_CALL = ANSWERS_CALL | CANCELS_CALL
#: the types that name one call by ``call_id``
CALL_EVENTS = STARTS_CALL | CLOSES_CALL
#: every type the lifecycle follows
LIFECYCLE = frozenset(t.name for t in TYPES if t.lifecycle and not t.family)

#: recovery.py: the closers, by what they close
CLOSER_OF = MappingProxyType({t.name: t.closer for t in TYPES if t.closer})


def _one(names: frozenset[str]) -> str:
    (name,) = names
    return name


CALL_CLOSER = _one(frozenset({BY_NAME[n].closer for n in REQUESTS_CALLS | STARTS_CALL}))
STEP_CLOSER = _one(frozenset({BY_NAME[n].closer for n in OPENS_STEP}))
TURN_CLOSER = _one(frozenset({BY_NAME[n].closer for n in OPENS_TURN}))
#: the ``status`` of recovery's call closers (an erasure keeps them; the views read them)
TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
#: the ``status`` the views give a cancelled call's answer
TOOL_CANCELLED = "TOOL_CANCELLED"

#: storage/event_index.py: sparse rows (by name and by prefix) and dense marks
INDEX_ROWS = _names(index=_ROW)
INDEX_ROW_PREFIXES = _prefixes("index", _ROW)
MARKS: Mapping[str, str] = MappingProxyType(
    {t.name: t.index for t in TYPES if t.index.startswith("mark:")})

#: redaction/machine.py: type -> {path: form}
MACHINE: Mapping[str, Mapping[tuple[str, ...], str]] = MappingProxyType(
    {t.name: MappingProxyType({tuple(p.split(".")): f for p, f in t.machine.items()})
     for t in TYPES if t.machine})

#: memory/replacement.py: type -> {field: kept form}
KEEPS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {t.name: t.keeps for t in TYPES if t.keeps})

#: redaction/pause.py
PASS_WHEN_PAUSED = _names(pause="passes")
PASS_PREFIXES_WHEN_PAUSED = _prefixes("pause", "passes")
PAUSED, RESUMED = _one(_names(pause="pauses")), _one(_names(pause="resumes"))

#: projections: the types each view reads
HISTORY = {v: _names(history=v) for v in ("user", "assistant", "tool", "cut", "request")}
HISTORY_PREFIXES = _prefixes("history", "compaction")
CHAT = frozenset(t.name for t in TYPES if t.chat and not t.family)
TRAJECTORY = {v: _names(trajectory=v) for v in ("turn", "step", "request", "span", "note")}
CONTEXT_STRUCTURAL = _names(context="structural")
CONTEXT_STRUCTURAL_PREFIXES = _prefixes("context", "structural")
CONTEXT_TOOL_RESULTS = _names(context="tool result")

#: api/checks.py: the types checked inside the append's transaction
CHECKED = _names(checked=True)
CHECKED_PREFIXES = _prefixes("checked", True)

#: the conversation's messages (user and assistant), as the history reads them
MESSAGES = HISTORY["user"] | HISTORY["assistant"]

#: projections/evidence.py, api/checkpoints.py: a permission with an expiry
GRANTS = _names(grants=True)
#: projections/reader_views.py: what the auditor view reads in full -- decisions
#: (permissions, statuses, model policies and switches, runs, context builds, the
#: session's life), never content; by name and by prefix
AUDITED = GRANTS | frozenset({
    "approval/deny", "approval/policy", "event/status", "context/injection", "model/switch",
    "model/policy", "human/decision", "task/contract", "workspace/revision", "sandbox/mode",
    "session/closed", "session/deleted", "retention/policy"})
AUDITED_PREFIXES = ("approval/", "run/", "redaction/", "retention/")
#: memory/retention.py: payloads a retention policy never erases
RETENTION_KEEPS = _names(retention=_KEPT)
#: memory/retention_rules.py: the store rule's kind of a type, and of a family's prefix
RETENTION_KINDS = MappingProxyType({t.name: t.retention for t in TYPES if not t.family
                                    and t.retention not in ("", _KEPT)})
RETENTION_KIND_PREFIXES = MappingProxyType({t.prefix: t.retention for t in FAMILIES
                                            if t.retention not in ("", _KEPT)})
#: api/writer.py, projections/schemas.py: the types whose schema version is above 1
VERSIONS: Mapping[str, int] = MappingProxyType({t.name: t.version for t in TYPES
                                               if t.version > 1})
#: memory/gates.py: what someone said (input, never instruction)
INPUT = _names(input=True)
#: projections/envelopes.py: payloads that state usage
USAGE = _names(usage=True)

#: the end of a session's log: it takes no more events (``Session.close``)
CLOSED = "session/closed"
#: the record of a deletion, the last event of a deleted session's log (``Store.delete_session``)
DELETED = "session/deleted"
#: the events that end a log: the write path refuses anything after one
ENDS_LOG = frozenset({CLOSED, DELETED})
#: the lifecycle and compaction events the write path's state follows
WRITE_STATE = LIFECYCLE | {PAUSED, RESUMED} | ENDS_LOG
WRITE_STATE_PREFIXES = HISTORY_PREFIXES


# ---------------------------------------------------------------------------
# Rules about types that both the write path and the views apply.

#: a compaction's op that the model history applies
SURFACE_REPLACE = "surface-replace"
#: the statuses an ``event/status`` may set
STATUSES = ("active", "superseded", "rejected", "expired", "audit-only")


def surface_range(type_: str, data: Any) -> tuple[Any, Any] | None:
    """``(from_seq, to_seq)`` as written in a ``compaction/*`` event whose op is
    ``surface-replace`` (the only op the model history applies); else None."""
    if not type_.startswith(HISTORY_PREFIXES) or not isinstance(data, dict) or data.get(
            "op") != SURFACE_REPLACE:
        return None
    return data.get("from_seq"), data.get("to_seq")


def source_class(ev: Any) -> str:
    """Who an event speaks for, from its envelope's ``source`` and its type:
    ``untrusted`` (``external:*``, ``web:*``, data marked ``trust:
    "untrusted"``), ``human``, ``model``, ``user``, ``system`` or ``tool``
    (:mod:`trajlog.projections.evidence` explains each)."""
    src = ev.source or ""
    data = ev.data if isinstance(ev.data, dict) else {}
    if src.startswith(("external:", "web:")) or data.get("trust") == "untrusted":
        return "untrusted"
    if ev.type == "human/decision" or src in ("human", "reviewer") or src.startswith(
            ("human:", "reviewer:")):
        return "human"
    if src in ("model", "assistant") or (not src and ev.type in ("assistant/message",
                                                                 "plan/update")):
        return "model"
    if src == "user" or (not src and ev.type == "user/message"):
        return "user"
    if src in ("system", "host", "trajlog.recovery") or src.startswith("session:"):
        return "system"
    if src or ev.type in ANSWERS_CALL:
        return "tool"
    return "system"


#: the type-name rule (events.check_type)
TYPE_RE = re.compile(r"[a-z][a-z0-9_.-]*(/[a-z0-9_.*-]+)*")


def _check_table() -> None:
    """The table's own consistency, checked at import (a typo in an entry
    fails loudly at once, not in a view)."""
    seen: set[str] = set()
    for t in TYPES:
        if t.name in seen or not TYPE_RE.fullmatch(t.name):
            raise ValueError(f"event type {t.name!r}: declared twice or not a type name")
        seen.add(t.name)
        if type(t.version) is not int or t.version < 1 or (t.family and t.version != 1):
            raise ValueError(f"{t.name}: version must be an int >= 1 (1 for a family)")
        if t.closer and t.closer not in BY_NAME:
            raise ValueError(f"{t.name}: closer {t.closer!r} is not declared")


_check_table()

__all__ = ["BY_NAME", "FAMILIES", "STATUSES", "SURFACE_REPLACE", "TOOL_CANCELLED",
           "TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN", "TYPES", "VERSIONS", "EventType", "declared",
           "describe", "source_class", "surface_range"]
