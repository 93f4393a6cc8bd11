"""The memory layers of a context build: every run assembles its working set
again from durable memory, never from what a previous run happened to hold.

Given a memory view acting for one identity (``build_context(memory=...)``),
four layers are read, each with its own share of the budget
(``ContextPolicy.memory_shares``):

* ``constitution`` -- the global ``policy`` items (deployed, read-only at run
  time);
* ``tenant_policy`` -- the ``policy`` items of the identity's tenant;
* ``preferences`` -- the ``preference`` items of the identity's user;
* ``retrieved`` -- ``fact`` and ``episode`` items the view's search finds for
  the query (the caller's ``memory_query``, else the latest admitted user
  message), at most ``ContextPolicy.memory_retrieve`` of them.

The view's queries carry the identity's scope predicates before any ranking:
another tenant's or user's item is never a candidate.  Of the candidates only
active ones are shown -- a quarantined, provisional or revoked item, one whose
expiry passed at the build's ``now``, a restricted one (when the policy
excludes ``data_class.restricted``), one whose sensitivity the build's
target model may not receive (its ``model/policy``:
``memory.data_class.not_allowed_for_model`` -- a policy item too: a rule
the model may not read is not sent) or one kept without content is left out
with its reason.  The two policy layers are placed like the core: their share
is reserved (session noise -- conversation, tool output -- cannot use it), and
if they do not fit it the build refuses (:class:`ContextBudgetError`) rather
than drop a rule.  Preferences and retrieved items that do not fit their
share are left out (``memory.budget.<layer>``).

Each item renders with its reference, ``[MEM-<id>@v<version>]``, and the
``context/injection`` records ``memory`` (``[{id, version, layer, scope,
sensitivity}]``),
``memory_excluded`` (reason -> count) and the first excluded items, so that
a replay sees exactly which versions the model read.
"""

from __future__ import annotations

import builtins
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import (
    ArgumentTypeError,
    ContextBudgetError,
    MemoryAccessError,
    MemoryNotFoundError,
)
from ..events import Event, check_text
from ..memory.model import Identity, MemoryItem
from .context_policy import MEMORY_LAYERS, ContextPolicy
from .context_summary import text_of
from .reader_views import mask_text

LAYERS = MEMORY_LAYERS
#: the layers whose share is reserved and which refuse rather than shrink
RESERVED = ("constitution", "tenant_policy")
_TITLES = {"constitution": "Constitution (global policy)", "tenant_policy": "Tenant policy",
           "preferences": "User preferences", "retrieved": "Retrieved memory (facts, episodes)"}
_SEEN = ("provisional", "active", "quarantined")   # listed, so that an exclusion is recorded
_WORD = re.compile(r"\w+", re.UNICODE)
#: the words of a query searched at most (each one search)
MAX_WORDS = 16
#: excluded items recorded by id in the injection (the counts stay exact)
EXCLUDED_ITEMS = 100
#: an item of a sensitivity the build's target model may not receive
NOT_ALLOWED = "memory.data_class.not_allowed_for_model"


class MemorySource(Protocol):
    """What a build reads of memory (a :class:`trajlog.memory.MemoryView`)."""

    identity: Identity

    def list(self, *, types: Any = None, states: Any = ..., scopes: Any = None,
             key: str | None = None, limit: int = 1000) -> builtins.list[MemoryItem]: ...

    def search(self, query: str, *, limit: int = 10, types: Any = None,
               scopes: Any = None) -> builtins.list[MemoryItem]: ...


@dataclass(frozen=True, slots=True)
class RecordedMemory:
    """The item versions one ``context/injection`` recorded, read back from a
    view's history: what a replay rebuilds that call's memory layers from.
    A version whose content was erased since reads back without it."""

    identity: Identity
    layers: dict[str, list[MemoryItem]]
    #: recorded ``id@vN`` no longer found (the item is gone or out of scope)
    missing: tuple[str, ...] = ()

    @classmethod
    def of(cls, view: Any, recorded: Sequence[Any]) -> RecordedMemory:
        layers: dict[str, list[MemoryItem]] = {name: [] for name in LAYERS}
        missing = []
        for rec in recorded:
            try:
                versions = view.history(str(rec.get("id")))
            except (MemoryNotFoundError, MemoryAccessError):
                versions = []
            item = next((v for v in versions if v.version == rec.get("version")), None)
            if item is None or rec.get("layer") not in layers:
                missing.append(f"{rec.get('id')}@v{rec.get('version')}")
            else:
                layers[rec["layer"]].append(item)
        return cls(view.identity, layers, tuple(missing))


@dataclass(frozen=True, slots=True)
class MemoryUse:
    """One memory item version a build showed the model."""

    id: str
    version: int
    layer: str
    scope: str
    ref: str
    text: str
    item: MemoryItem = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class MemoryExcluded:
    id: str
    version: int
    layer: str
    reason: str


@dataclass(frozen=True, slots=True)
class MemoryLayers:
    """The memory part of one build."""

    used: list[MemoryUse]
    excluded: list[MemoryExcluded]
    #: the system messages, one per non-empty layer, after the build's header
    messages: list[dict[str, Any]]
    #: characters shown, and characters held from session noise (shown +
    #: the unused part of the policy layers' reserved share)
    chars: int
    held: int
    #: the retrieval query, and the seq of the user message it came from
    query: str | None
    query_seq: int | None
    identity: Identity

    def record(self, explicit_query: bool) -> dict[str, Any]:
        """What the ``context/injection`` records of it.  The query is
        recorded when the caller gave it; one taken from a user message is
        recorded by seq (an erasure of the message must not leave its text
        here)."""
        counts = Counter(x.reason for x in self.excluded)
        ident = self.identity
        return {"memory_identity": {"tenant": ident.tenant, "user": ident.user,
                                    "session": ident.session},
                "memory": [{"id": u.id, "version": u.version, "layer": u.layer,
                            "scope": u.scope, "sensitivity": u.item.sensitivity}
                           for u in self.used],
                "memory_excluded": dict(sorted(counts.items())),
                "memory_excluded_items": [{"id": x.id, "version": x.version, "layer": x.layer,
                                           "reason": x.reason}
                                          for x in self.excluded[:EXCLUDED_ITEMS]],
                "memory_query": self.query if explicit_query else None,
                "memory_query_seq": self.query_seq}


def memory_ref(item: MemoryItem) -> str:
    """The reference an item renders with: ``MEM-<id>@v<version>``."""
    return f"MEM-{item.id}@v{item.version}"


def render(item: MemoryItem) -> str:
    c = item.content
    text = c["text"] if isinstance(c, dict) and isinstance(c.get("text"), str) else (
        c.get("value") if isinstance(c, dict) and "value" in c else c)
    key = f"{item.key}: " if item.key else ""
    return f"[{memory_ref(item)}] {key}{text_of(text)}"


def _query(admitted: list[Event]) -> tuple[str | None, int | None]:
    """The latest admitted user message's text, and its seq."""
    for ev in reversed(admitted):
        if ev.type == "user/message" and isinstance(ev.data, dict) and isinstance(
                ev.data.get("content"), str):
            return ev.data["content"], ev.seq
    return None, None


def _candidates(source: Any, query: str | None, policy: ContextPolicy,
                ) -> dict[str, list[MemoryItem]]:
    if isinstance(source, RecordedMemory):
        return source.layers
    user = source.identity.user is not None
    words = query is not None and _WORD.search(query) is not None

    def listed(type_: str, scope: str) -> list[MemoryItem]:
        # (a view's list holds global items beside the scope asked for)
        return [i for i in source.list(types=[type_], scopes=[scope], states=_SEEN)
                if i.scope == scope]

    return {
        "constitution": listed("policy", "global"),
        "tenant_policy": listed("policy", "tenant"),
        "preferences": listed("preference", "user") if user else [],
        "retrieved": _retrieve(source, query, policy.memory_retrieve)
        if words and policy.memory_retrieve and query is not None else []}


def _retrieve(source: Any, query: str, limit: int) -> list[MemoryItem]:
    """Facts and episodes for ``query``: the view's search (active items of
    the identity's scopes only -- the filters come before its ranking) for
    each of the query's words (a search matches every word it is given; a
    user's question rarely matches whole), ranked by how many of the words
    an item matched, then by its best rank.  A few more than ``limit`` are
    taken: an expired one is left out after."""
    words = list(dict.fromkeys(w.casefold() for w in _WORD.findall(query)))[:MAX_WORDS]
    take = min(4 * limit + 4, 1000)
    score: dict[str, list[int]] = {}
    found: dict[str, MemoryItem] = {}
    for word in words:
        for rank, item in enumerate(source.search(word, types=["fact", "episode"],
                                                  limit=take)):
            hit = score.setdefault(item.id, [0, rank])
            hit[0] -= 1
            hit[1] = min(hit[1], rank)
            found[item.id] = item
    ordered = sorted(found, key=lambda i: (score[i][0], score[i][1]))
    return [found[i] for i in ordered[:take]]


def _mine(item: MemoryItem, ident: Identity) -> bool:
    """The item belongs to one of the identity's scopes (a guard: a view's
    queries already say so)."""
    if item.scope == "global":
        return True
    return item.tenant == ident.tenant and (item.scope, item.scope_key) in ident.scopes()


def _reason(item: MemoryItem, ident: Identity, policy: ContextPolicy, now: int,
            gate: Any) -> str | None:
    if not _mine(item, ident):
        return "memory.scope.other"
    if item.state != "active":
        return f"memory.state.{item.state}"
    if item.expires_ms is not None and item.expires_ms <= now:
        return "memory.expired"
    if item.sensitivity == "restricted" and "data_class.restricted" in policy.exclude:
        return "memory.data_class.restricted"
    if gate is not None and not gate.admits_class(item.sensitivity):
        return NOT_ALLOWED
    if item.content is None:
        return "memory.no_content"
    return None


def _check_identity(ident: Identity, session: Any) -> None:
    """Refuse (:class:`MemoryAccessError`) a view acting for another tenant,
    user or session than the build's.  The session's header names its
    tenant and may name its user.  A view acting for a session serves that
    session only (not its forks or children: their own views serve them).  A
    session whose header names no tenant belongs to none: it takes only a
    view bound to it by session id (the caller names this very session as
    the identity's), never a view for any tenant at large."""
    meta = session.header.metadata
    if "tenant" not in meta and ident.session != session.id:
        raise MemoryAccessError(
            f"session {session.id} names no tenant in its metadata: it takes only a memory "
            f"view bound to it (Identity(..., session={session.id!r})), not one for tenant "
            f"{ident.tenant!r} at large")
    for name in ("tenant", "user"):
        if name in meta and getattr(ident, name) not in (None, meta[name]):
            raise MemoryAccessError(f"the memory view acts for {name} {getattr(ident, name)!r}"
                                    f"; session {session.id} belongs to {meta[name]!r}")
    if ident.session is not None and ident.session != session.id:
        raise MemoryAccessError(f"the memory view acts for session {ident.session}; its "
                                f"session-scope memory may not enter session {session.id}")


def memory_layers(source: Any, policy: ContextPolicy, now: int, query: str | None,
                  admitted: list[Event], session: Any, core: int,
                  gate: Any = None) -> MemoryLayers:
    """The memory layers of one build of ``session`` (see the module
    docstring); ``core`` is what the core and the header already take of the
    budget; ``gate`` the target model's recorded
    :class:`~trajlog.projections.reader_views.ModelPolicy` (or None): an
    item of a sensitivity it does not admit is left out (:data:`NOT_ALLOWED`),
    and secrets in the items it admits are masked, as in the events it gets.
    A view acting for another tenant, user or session than the build's is
    refused (:class:`MemoryAccessError`, see :func:`_check_identity`)."""
    ident = getattr(source, "identity", None)
    if not isinstance(ident, Identity) or not (
            isinstance(source, RecordedMemory) or callable(getattr(source, "search", None))):
        raise ArgumentTypeError(f"memory must be a trajlog MemoryView, not "
                                f"{type(source).__name__}")
    _check_identity(ident, session)
    session_id = session.id
    if query is not None and not isinstance(query, str):
        raise ArgumentTypeError(f"memory_query must be a str or None, not "
                                f"{type(query).__name__}")
    if query is not None:
        check_text(query, "memory_query")   # recorded in the context/injection
    query_seq = None
    if query is None:
        query, query_seq = _query(admitted)
    shares = dict(policy.memory_shares)
    cands = _candidates(source, query, policy)
    used: list[MemoryUse] = []
    excluded: list[MemoryExcluded] = []
    messages: list[dict[str, Any]] = []
    chars = reserved_left = 0
    for layer in LAYERS:
        room = int(policy.budget_chars * shares.get(layer, 0.0))
        lines: list[str] = []
        for item in cands.get(layer, ()):
            reason = _reason(item, ident, policy, now, gate)
            if reason is None and layer == "retrieved" and len(lines) >= policy.memory_retrieve:
                reason = "memory.limit.retrieved"
            text = render(item) if reason is None else ""
            if text and gate is not None:
                text = mask_text(text)   # as the model's events are (reader_views)
            if reason is None and len(text) + 1 > room:
                if layer in RESERVED:
                    raise ContextBudgetError(
                        f"the {layer.replace('_', ' ')} of session {session_id}'s memory "
                        f"({memory_ref(item)} and before) does not fit its reserved share "
                        f"of {int(policy.budget_chars * shares.get(layer, 0.0))} characters; "
                        "raise memory_shares or budget_chars rather than drop a rule")
                reason = f"memory.budget.{layer}"
            if reason is not None:
                excluded.append(MemoryExcluded(item.id, item.version, layer, reason))
                continue
            room -= len(text) + 1
            lines.append(text)
            used.append(MemoryUse(item.id, item.version, layer, item.scope, memory_ref(item),
                                  text, item))
        if layer in RESERVED:
            reserved_left += room
        if lines:
            content = f"{_TITLES[layer]}:\n" + "\n".join(lines)
            messages.append({"role": "system", "content": content, "layer": layer})
            chars += len(content)
    if core + chars > policy.budget_chars:
        raise ContextBudgetError(
            f"the core of session {session_id} ({core} characters) and its memory policy and "
            f"layers ({chars}) do not fit the budget of {policy.budget_chars}")
    return MemoryLayers(used, excluded, messages, chars, chars + reserved_left, query, query_seq,
                        ident)


__all__ = ["EXCLUDED_ITEMS", "LAYERS", "NOT_ALLOWED", "RESERVED", "MemoryExcluded", "MemoryLayers",
           "MemorySource", "MemoryUse", "RecordedMemory", "memory_layers", "memory_ref"]
