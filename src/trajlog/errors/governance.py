"""The errors of governance: memory scopes and gates, erasure, redaction,
retention, replay, delegation, event schemas and model data classes -- refusals
a host reads to tell which rule held.  :mod:`trajlog.errors` is the front door."""

from __future__ import annotations

from .core import InvalidArgumentError, InvalidStateError, TrajlogError


class MemoryAccessError(TrajlogError):
    """A memory read or write outside the identity's scopes: another tenant's
    item, another user's or another session's, or a scope the identity does
    not name.  Never "best effort": the item is not returned."""


class MemoryNotFoundError(TrajlogError, KeyError):
    """No memory item with that id in this store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "memory item not found"


class GlobalScopeReadOnlyError(MemoryAccessError):
    """A run-time write to global scope (written at deploy time only)."""


class PromotionRefusedError(InvalidStateError):
    """A write or promotion that a memory gate refuses; ``rule`` names the
    gate (e.g. ``"instruction-poisoning"``) and the message says why."""

    rule = "gate"

    def __init__(self, message: str) -> None:
        super().__init__(f"{message} [{self.rule}]")


class InstructionPoisoningError(PromotionRefusedError):
    """Content from user messages or tool output would become policy."""

    rule = "instruction-poisoning"


class PrecedentPoisoningError(PromotionRefusedError):
    """An episode (one exception, one case) would become policy, or reach
    tenant scope without an approval."""

    rule = "precedent-poisoning"


class CrossScopeError(PromotionRefusedError):
    """An item would lift itself across scopes (user to tenant, tenant or
    anything to global)."""

    rule = "cross-scope-contamination"


class UnverifiedFactError(PromotionRefusedError):
    """A fact would reach tenant scope without verification evidence (a human
    approval, a record system, or independent corroboration)."""

    rule = "unverified-fact"


class MemoryStateError(InvalidStateError):
    """A state change the item's state does not allow (e.g. restoring an item
    that is not quarantined, changing a revoked one)."""


class ErasureError(InvalidStateError):
    """An erasure that cannot be done (an event the log does not hold, a
    structural marker whose removal would unbalance the log)."""


class ErasedEventError(ErasureError):
    """A reader needs the payload of an event that was erased (an adapter
    that rebuilds state from it: an eventsourcing aggregate, its
    notifications).  Carries ``session`` and ``seq``."""

    def __init__(self, session: str, seq: int, what: str) -> None:
        self.session, self.seq = session, seq
        super().__init__(f"seq {seq} of session {session} was erased: {what}")


class DependentSessionsError(InvalidStateError):
    """A deletion refused: other sessions depend on this one (forks whose
    inherited prefix is its log, subagents it spawned).  ``dependents`` names
    them; delete them first."""

    def __init__(self, session: str, dependents: list[str]) -> None:
        self.session, self.dependents = session, list(dependents)
        super().__init__(f"session {session} has {len(dependents)} live dependent "
                         f"session(s) ({', '.join(dependents)}): delete them first")


class RedactionRefusedError(InvalidArgumentError):
    """A payload holds a finding whose kind the redaction policy refuses:
    nothing was written.  Carries ``event_type`` (the event's type, or
    ``memory/<type>`` for a memory item), ``path`` (the JSON path of the
    string) and ``kind`` -- never the matched text."""

    def __init__(self, event_type: str, path: str, kind: str) -> None:
        self.event_type, self.path, self.kind = event_type, path, kind
        super().__init__(f"{event_type} holds a {kind} at {path}: the redaction policy "
                         "refuses it (nothing was written)")


class UnredactableValueError(RedactionRefusedError):
    """A payload holds a finding inside a value the writer cannot open (an
    adapter's serialized value in a format it cannot decode): masking the
    span there would corrupt the value, so nothing was written.  Carries
    ``event_type``, ``path`` and ``kind`` like :class:`RedactionRefusedError`
    and ``format`` (the value's format)."""

    def __init__(self, event_type: str, path: str, kind: str, format: str) -> None:
        super().__init__(event_type, path, kind)
        self.format = format
        self.args = (f"{event_type} holds a {kind} at {path}, inside a {format!r} value "
                     "that cannot be redacted without corrupting it (nothing was written)",)


class RedactionPausedError(InvalidStateError):
    """The session is paused by the redaction policy (a ``hash`` finding
    appended ``redaction/paused``): only closing markers, audit and
    ``redaction/*`` events are taken until a ``redaction/resumed``.
    Carries ``session``, ``seq`` (where the refused event would have gone)
    and ``event_type``."""

    def __init__(self, session: str, seq: int, event_type: str) -> None:
        self.session, self.seq, self.event_type = session, seq, event_type
        super().__init__(f"session {session} is paused by the redaction policy: "
                         f"{event_type} refused at seq {seq} (append redaction/resumed "
                         "to go on)")


class SessionClosedError(InvalidStateError):
    """The session was closed (its log holds ``session/closed``): it takes no
    more events.  Closing is final; fork it to go on from it.  Carries
    ``session``, ``seq`` (where the refused event would have gone),
    ``event_type`` and ``closed_at`` (the seq of its ``session/closed``)."""

    def __init__(self, session: str, seq: int, event_type: str, closed_at: int) -> None:
        self.session, self.seq, self.event_type = session, seq, event_type
        self.closed_at = closed_at
        super().__init__(f"session {session} was closed at seq {closed_at}: {event_type} "
                         f"refused at seq {seq} (fork it to go on)")


class RetentionRulesError(InvalidArgumentError):
    """Store retention rules that do not hold together; says which rule
    (``rule``: its kind, or None for the rules as a whole) and why."""

    def __init__(self, rule: str | None, why: str) -> None:
        self.rule = rule
        super().__init__(f"retention rule {rule!r}: {why}" if rule is not None
                         else f"retention rules: {why}")


class StoredRetentionRulesError(RetentionRulesError):
    """The retention rules stored in a store (its global ``policy`` item
    under the reserved key) do not read as rules: ``item`` and ``version``
    say which stored version, ``rule`` which rule (None: the value as a
    whole)."""

    def __init__(self, item: str, version: int, rule: str | None, why: str) -> None:
        self.item = item
        self.version = version
        super().__init__(rule, f"{why} (stored in memory item {item} version {version})")


class ReplayError(InvalidArgumentError):
    """A run that cannot be replayed: no such run in the session, or it
    recorded nothing a model input can be rebuilt from (no
    ``context/injection`` answered by an ``assistant/message``).  Carries
    ``session``, ``run_id`` and ``seq`` (where the log says so, or None)."""

    def __init__(self, session: str, run_id: str, seq: int | None, why: str) -> None:
        self.session, self.run_id, self.seq = session, run_id, seq
        where = f" at seq {seq}" if seq is not None else ""
        super().__init__(f"run {run_id} of session {session}{where}: {why}")


class ModelDataClassError(InvalidStateError):
    """A model switch refused: the context to send holds data classes the
    target ``model`` may not receive: ``refused`` [(seq or memory reference,
    class)], ``allowed``."""

    def __init__(self, model: str, refused: list[tuple[int | str, str]],
                 allowed: list[str]) -> None:
        self.model, self.refused, self.allowed = model, refused, allowed
        held = ", ".join(f"#{q} ({c})" if isinstance(q, int) else f"{q} ({c})"
                         for q, c in refused[:8]) + (" ..." * (len(refused) > 8))
        super().__init__(f"model {model} may receive only {', '.join(allowed) or 'nothing'}; "
                         f"the context holds {held}: pass context=build_context(session, "
                         f"target_model={model!r}), which leaves them out")


class DelegationPinError(InvalidStateError):
    """A child run leaving a ``field`` its parent run pinned (docs/delegation.md)."""
    def __init__(self, session: str, parent_run: str, field: str, why: str) -> None:
        self.session, self.parent_run, self.field = session, parent_run, field
        super().__init__(f"a run of session {session} under parent run {parent_run}: {why}")


class SubagentResultError(InvalidArgumentError):
    """A subagent result that is untyped or carries no provenance (run, model)."""


class SchemaVersionError(TrajlogError):
    """An event of a schema version newer than the reader knows (docs/event-schemas.md)."""
    def __init__(self, session: str | None, seq: int, type_: str, version: int) -> None:
        self.session, self.seq, self.type, self.version = session, seq, type_, version
        super().__init__(f"seq={seq} of session {session} ({type_}): schema v{version} is too new")


class BranchError(InvalidArgumentError):
    """A branch operation refused, nothing written (the message names session, branch, seq)."""


class BranchNotFoundError(BranchError):
    """No ``branch/started`` names the branch."""


class BranchPointError(BranchError):
    """A start or rebase point that is no earlier main-line event, or does not advance."""


class BranchStateError(BranchError):
    """The branch is merged, abandoned (it takes nothing more) or already started."""


class MergeGateError(BranchError):
    """A merge whose status its gate does not give, or whose lists are malformed."""
