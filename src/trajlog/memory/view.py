"""A memory view bound to one identity: remember, get, search, and the state
changes -- every query carrying the identity's scope predicates.

Reads go through :mod:`.versions` (every version verified against its frame);
writes are gated (:mod:`.gates`), idempotent on (content digest, scope,
type, key), and never overwrite: a change is a new version, a contradiction is
quarantined with the item it contradicts named.
"""

from __future__ import annotations

import builtins
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..errors import (
    GlobalScopeReadOnlyError,
    InvalidArgumentError,
    MemoryAccessError,
    MemoryNotFoundError,
    MemoryStateError,
    StoreError,
)
from ..redaction import Redactor
from ..storage.base import Backend, MemoryRow, Writer
from .arguments import MAX_LIMIT, check_owner, limit_of, names, retention_of
from .gates import check_evidence, check_promotion, check_write
from .model import SCOPES, SENSITIVITY, TYPES, Identity, MemoryItem, PurgeReport, digest_of
from .model import text_of as _text_of
from .revoke import revoke_item
from .versions import (
    VersionWriter,
    current_item,
    read_item,
    verified_rows,
    write_version,
)

_WORD = re.compile(r"\w+", re.UNICODE)
# Who wins when several scopes speak for one setting (first wins): policy is
# authoritative (global, then tenant); preferences overlay from the nearest
# scope out (session, user, then the tenant's default).
PRECEDENCE = (("global", "policy"), ("tenant", "policy"), ("session", "preference"),
              ("user", "preference"), ("tenant", "preference"), ("session", "fact"),
              ("user", "fact"), ("tenant", "fact"), ("global", "fact"))


class MemoryHost(Protocol):
    """What a view needs from its store (given by :class:`trajlog.Store`)."""

    backend: Backend

    def sid_of(self, session_id: str) -> int:
        """The internal id of a session (SessionNotFoundError if none)."""
        ...

    def event_type(self, session_id: str, seq: int) -> str:
        """The type of a stored event, read verified (InvalidArgumentError if none)."""
        ...

    def after_purge(self) -> None:
        """Drop every in-memory copy that may hold erased content."""
        ...


@dataclass(frozen=True, slots=True)
class Resolution:
    """A setting resolved across scopes: the winning item and the ones it
    overrides, in precedence order."""

    key: str
    value: Any
    item: MemoryItem | None
    overridden: tuple[MemoryItem, ...] = ()


_KEEP: Any = object()   # "leave the item's retention as it is"


def _now() -> int:
    return time.time_ns() // 1_000_000


def _words(query: str) -> list[str]:   # (the backend builds its own query of them)
    if not (words := _WORD.findall(query)):
        raise InvalidArgumentError(f"search query {query!r} holds no words")
    return words


class MemoryView:
    """Scoped, typed memory for one :class:`Identity` (``store.memory(identity)``).

    An identity naming a session must own it: the session exists and its
    header's ``tenant`` and ``user`` metadata, where it names them, are the
    identity's (else :class:`MemoryAccessError`, before any query): a session
    scope is keyed by the session id, so the id alone must not open it."""

    def __init__(self, host: MemoryHost, identity: Identity, *,
                 session_metadata: Callable[[str], Mapping[str, Any]],
                 redactor: Redactor | None = None) -> None:
        if not isinstance(identity, Identity):
            raise TypeError(f"identity must be a trajlog.Identity, not "
                            f"{type(identity).__name__}")
        if identity.session is not None:
            check_owner(identity, session_metadata)
        self._host = host
        self._backend = host.backend
        self._verified = verified_rows(host.backend)   # the store's verify-once rows
        self.identity = identity
        self._redactor = redactor   # scans content before it is written (trajlog.redaction)

    def _redact(self, type: str, content: Any, sensitivity: str) -> tuple[Any, str, bool]:
        """Content as the redaction policy stores it, its sensitivity raised,
        and whether a ``hash`` finding holds the item provisional."""
        if self._redactor is None:
            return content, sensitivity, False
        out = self._redactor.redact(f"memory/{type}", content, sensitivity)
        return out.data, out.data_class or sensitivity, out.pause

    def __repr__(self) -> str:
        return f"<trajlog.MemoryView {self.identity}>"

    # -- scope ---------------------------------------------------------------

    def _check_visible(self, item: MemoryItem) -> None:
        """A fetch outside the identity's scopes fails; it is never filtered quietly."""
        ident = self.identity
        if item.scope == "global":
            return
        if item.tenant != ident.tenant:
            raise MemoryAccessError(f"memory item {item.id} belongs to another tenant")
        if item.scope == "user" and item.scope_key != ident.user:
            raise MemoryAccessError(f"memory item {item.id} belongs to another user's scope")
        if item.scope == "session" and item.scope_key != ident.session:
            raise MemoryAccessError(f"memory item {item.id} belongs to another session's "
                                    "scope")

    def _scopes(self, scopes: Any) -> builtins.list[tuple[str, str]]:
        mine = self.identity.scopes()
        wanted = names(scopes, SCOPES, "scope")
        return mine if wanted is None else [(s, k) for s, k in mine if s in wanted]

    def _versions(self, item_id: str) -> builtins.list[MemoryItem]:
        if not isinstance(item_id, str):
            raise TypeError(f"item id must be str, not {type(item_id).__name__}")
        versions = read_item(self._backend.reader(), item_id, self._verified)
        if not versions:
            raise MemoryNotFoundError(f"no memory item {item_id!r}")
        self._check_visible(versions[-1])
        return versions

    # -- reads ----------------------------------------------------------------

    def get(self, item_id: str) -> MemoryItem:
        """The item's current version (MemoryAccessError outside the identity's scopes)."""
        if not isinstance(item_id, str):
            raise TypeError(f"item id must be str, not {type(item_id).__name__}")
        reader = self._backend.reader()
        row = reader.memory_latest_of(item_id)
        if row is None:
            raise MemoryNotFoundError(f"no memory item {item_id!r}")
        item = current_item(reader, row, self._verified)
        self._check_visible(item)
        return item

    def history(self, item_id: str) -> builtins.list[MemoryItem]:
        """Every version of the item, oldest first (a revoked item's content is gone)."""
        return self._versions(item_id)

    def list(self, *, types: Any = None,
             states: Any = ("provisional", "active", "quarantined"), scopes: Any = None,
             key: str | None = None, limit: int = 1000) -> builtins.list[MemoryItem]:
        """Current versions in the identity's scopes, oldest first."""
        rows = self._backend.reader().memory_current(
            self.identity.tenant, self._scopes(scopes), names(types, TYPES, "type"),
            names(states, ("provisional", "active", "quarantined", "revoked"), "state"), key,
            limit_of(limit))
        return [self._current(row) for row in rows]

    def find(self, scope: str, key: str) -> MemoryItem | None:
        """The current item holding ``key`` in one of the identity's scopes
        (not revoked), or None: a key-value look-up (LangGraph's
        ``BaseStore.get`` maps onto it, a namespace path being a key prefix)."""
        scope_key = self.identity.scope_key(scope)
        reader = self._backend.reader()
        if scope != "global" and isinstance(key, str):
            # the newest item under the key, unless revoked (then an older one may hold it)
            last = reader.memory_latest_keyed(self.identity.tenant, scope, scope_key, key)
            if last is None:
                return None
            if last.state != "revoked":
                return self._current(last)
        rows = reader.memory_current(
            self.identity.tenant, [(scope, scope_key)], None,
            ["provisional", "active", "quarantined"], key, 2)
        return self._current(rows[-1]) if rows else None

    def keys(self, scope: str, prefix: str = "", *, limit: int = 1000) -> builtins.list[str]:
        """The keys held in one scope, starting with ``prefix``, sorted (the
        namespaces of a key-value store are the prefixes of its keys)."""
        items = self.list(scopes=[scope], limit=limit_of(limit))
        return sorted({i.key for i in items if i.key is not None and i.key.startswith(prefix)})

    def put(self, scope: str, type: str, key: str, content: Any, *,
            reason: str = "put", actor: str | None = None,
            retention: Mapping[str, Any] | None = None) -> MemoryItem | None:
        """Key-value write: the item holding ``key`` in ``scope`` gets a new
        version with this content (the old versions stay), or a new item is
        remembered -- one item per key, never a contradiction with itself."""
        current = self.find(scope, key)
        if current is None:
            return self.remember(scope, type, content, key=key, retention=retention,
                                 actor=actor)
        if current.type != type:
            raise InvalidArgumentError(f"key {key!r} holds a {current.type}, not a {type}")
        return self.correct(current.id, content, reason=reason, actor=actor,
                            **({} if retention is None else {"retention": retention}))

    def quarantined(self) -> builtins.list[MemoryItem]:
        """Items waiting for a resolution (restore, correct or revoke)."""
        return self.list(states=("quarantined",))

    def _current(self, row: MemoryRow) -> MemoryItem:
        item = current_item(self._backend.reader(), row, self._verified)
        self._check_visible(item)
        return item

    def search(self, query: str, *, limit: int = 10, types: Any = None,
               scopes: Any = None) -> builtins.list[MemoryItem]:
        """Active items matching every word of ``query``, best first.  The
        scope predicates are part of the query, before the ranking; without
        the full-text index (dropped, or being rebuilt) the canonical rows
        are searched instead -- recall may change, scoping never does."""
        if not isinstance(query, str):
            raise TypeError(f"query must be str, not {type(query).__name__}")
        limit = limit_of(limit)
        tys = names(types, TYPES, "type")
        scopes_ = self._scopes(scopes)
        reader = self._backend.reader()
        words = _words(query)
        if reader.memory_index_exists():
            try:
                rows = reader.memory_search(words, self.identity.tenant, scopes_, tys, limit)
            except StoreError:
                # a damaged derived index degrades recall, never correctness
                return self._scan(query, scopes_, tys, limit)
            return [item for row in rows if (item := self._hit(row, scopes_, tys)) is not None]
        return self._scan(query, scopes_, tys, limit)

    def _hit(self, row: MemoryRow, scopes: builtins.list[tuple[str, str]],
             types: builtins.list[str] | None) -> MemoryItem | None:
        """A search hit, from its canonical versions: one the index holds
        wrongly (not the item's active version, outside the scopes asked
        for) is dropped -- the index is a copy, never the authority."""
        item = current_item(self._backend.reader(), row, self._verified)
        if item.version != row.version or item.state != "active" or (
                types is not None and item.type not in types):
            return None
        if item.scope != "global" and (item.tenant != self.identity.tenant or (
                item.scope, item.scope_key) not in scopes):
            return None
        if item.scope == "global" and ("global", "") not in scopes:
            return None
        return item

    def _recent(self, query: str, *, types: Any = None, scopes: Any = None,
                page: int = 32) -> Iterator[MemoryItem]:
        """(For the LangGraph store's search: a lazy, sync-only iterator, so
        not on the async face.)  Active items matching every word of ``query``, the latest written
        first (by their latest version's ``created_ms``, then its order of
        writing), read a page at a time as the caller iterates: a caller that
        stops early reads and opens only what it took.  Scoped as
        :meth:`search`; without the full-text index, the canonical rows are
        searched and sorted."""
        if not isinstance(query, str):
            raise TypeError(f"query must be str, not {type(query).__name__}")
        tys = names(types, TYPES, "type")
        scopes_ = self._scopes(scopes)
        words = _words(query)
        reader = self._backend.reader()
        if not reader.memory_index_exists():
            yield from sorted(self._scan(query, scopes_, tys, 2**62),
                              key=lambda i: i.created_ms, reverse=True)
            return
        before = (2**62, 2**62)
        while True:
            try:
                rows = reader.memory_recent(words, self.identity.tenant, scopes_, tys, before,
                                            page)
            except StoreError:
                # a damaged derived index degrades recall, never correctness
                yield from sorted(self._scan(query, scopes_, tys, 2**62),
                                  key=lambda i: i.created_ms, reverse=True)
                return
            for row in rows:
                item = self._hit(row, scopes_, tys)
                if item is not None:
                    yield item
            if len(rows) < page:
                return
            before = (rows[-1].created_ms, rows[-1].mid)
            page = min(page * 2, MAX_LIMIT)

    def _scan(self, query: str, scopes: builtins.list[tuple[str, str]],
              types: builtins.list[str] | None, limit: int) -> builtins.list[MemoryItem]:
        words = {w.casefold() for w in _WORD.findall(query)}
        hits: builtins.list[tuple[int, int, MemoryItem]] = []
        for row in self._backend.reader().memory_current(self.identity.tenant, scopes, types,
                                                         ["active"], None, 2**62):
            item = self._current(row)
            found = [w.casefold() for w in _WORD.findall(_text_of(item.content, item.key))]
            if words <= set(found):
                hits.append((-sum(found.count(w) for w in words), row.mid, item))
        hits.sort(key=lambda h: (h[0], h[1]))
        return [h[2] for h in hits[:limit]]

    def resolve(self, key: str) -> Resolution:
        """The value of a setting several scopes may hold, by :data:`PRECEDENCE`:
        tenant (and global) policy is authoritative; the user's preference
        overlays the tenant's default, a session's overlays the user's."""
        items = self.list(key=key, states=("active",))
        ranked = sorted((i for i in items if (i.scope, i.type) in PRECEDENCE),
                        key=lambda i: (PRECEDENCE.index((i.scope, i.type)), -i.created_ms))
        if not ranked:
            return Resolution(key, None, None)
        win = ranked[0]
        value = win.content.get("value", win.content) if isinstance(win.content, dict) else (
            win.content)
        return Resolution(key, value, win, tuple(ranked[1:]))

    # -- writes ---------------------------------------------------------------

    def remember(self, scope: str, type: str, content: Any, *, key: str | None = None,
                 source: tuple[str, int] | None = None, retention: Mapping[str, Any] | None
                 = None, sensitivity: str = "internal", state: str = "active",
                 evidence: Mapping[str, Any] | None = None,
                 actor: str | None = None) -> MemoryItem | None:
        """Write an item in one of the identity's scopes (see :mod:`.gates`).

        Idempotent: the same content, scope, type and key again returns the
        first item (under another key it is another item).  An item with a
        ``key`` that contradicts an active item of the same scope, type and
        key is stored *quarantined*, naming it.
        ``source`` = ``(session id, seq)`` must name a stored event.
        ``retention``: ``{"ttl_ms": n}`` or ``{"until_event": "session/closed"}``.
        With privacy ``"none"`` nothing is written (returns None); with
        ``"metadata"`` the item is kept without its content."""
        return self.remember_many([dict(scope=scope, type=type, content=content, key=key,
                                        source=source, retention=retention,
                                        sensitivity=sensitivity, state=state,
                                        evidence=evidence, actor=actor)])[0]

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> builtins.list[
            MemoryItem | None]:
        """:meth:`remember` for many items (each a mapping of its keyword
        arguments, ``scope``, ``type`` and ``content`` required) in one
        transaction: all are written or, on the first refusal, none."""
        prepared = [self._prepare(**dict(spec)) for spec in items]
        if self.identity.privacy == "none":
            return [None] * len(prepared)
        out: builtins.list[MemoryItem | None] = []
        keys = [(bytes.fromhex(i.digest), i.tenant, i.scope, i.scope_key, i.type, i.key)
                for i, _ in prepared]
        with self._backend.transaction() as w:
            writer = VersionWriter(w)
            # merges found at once; an item the batch repeats merges into its first
            merged: dict[Any, MemoryItem] = {
                k: current_item(w, row, self._verified)
                for k, row in w.memory_merge_matches(keys).items()}
            for (item, source_sid), k in zip(prepared, keys, strict=True):
                got = merged.get(k)
                if got is None:
                    got = merged[k] = self._write_new(w, writer, item, source_sid)
                out.append(got)
            writer.flush()
        writer.publish(self._verified)
        return out

    def _prepare(self, scope: str, type: str, content: Any, *, key: str | None = None,
                 source: tuple[str, int] | None = None,
                 retention: Mapping[str, Any] | None = None, sensitivity: str = "internal",
                 state: str = "active", evidence: Mapping[str, Any] | None = None,
                 actor: str | None = None) -> tuple[MemoryItem, int | None]:
        if type not in TYPES:
            raise InvalidArgumentError(f"type must be one of {TYPES}, not {type!r}")
        if state not in ("provisional", "active"):
            raise InvalidArgumentError("a new item is provisional or active")
        if sensitivity not in SENSITIVITY:
            raise InvalidArgumentError(f"sensitivity must be one of {SENSITIVITY}")
        if key is not None and (not isinstance(key, str) or not key or len(key) > 256):
            raise InvalidArgumentError(f"key must be a non-empty string, not {key!r}")
        scope_key = self.identity.scope_key(scope)
        ev = check_evidence(evidence)
        content, sensitivity, held = self._redact(type, content, sensitivity)
        if held:   # memory has no session to pause: a human activates it
            state = "provisional"
        digest = digest_of(content)
        source_sid, source_type = self._source(source)
        check_write(scope, type, ev, source_type)
        now = _now()
        ret, expires = retention_of(retention, now)
        stored = "full" if self.identity.privacy == "full" else "metadata"
        return MemoryItem(str(uuid.uuid4()), 1, scope, type, state,
                          content if stored == "full" else None, self.identity.tenant,
                          scope_key, key, source, ret, expires, sensitivity, now, digest.hex(),
                          None if ev is None and actor is None else
                          {"actor": actor, "reason": "remembered", "evidence": ev},
                          stored=stored), source_sid

    def _write_new(self, w: Writer, writer: VersionWriter, item: MemoryItem,
                   source_sid: int | None) -> MemoryItem:
        """Write version 1 of an item no stored item merges (same digest,
        scope, type and key) -- quarantined when it contradicts an active item."""
        if item.key is not None:
            rivals = [r for r in w.memory_current(item.tenant, [(item.scope, item.scope_key)],
                                                  [item.type], ["active"], item.key, 100)
                      if r.digest.hex() != item.digest]
            if rivals:
                names = ", ".join(r.item_id for r in rivals)
                item = replace(item, state="quarantined",
                               conflicts_with=tuple(r.item_id for r in rivals),
                               decision={**(item.decision or {"actor": None, "evidence": None}),
                                         "reason": "contradicts " + names})
        writer.write(item, source_sid, _index_text(item), ())
        return item

    def _source(self, source: Any) -> tuple[int | None, str | None]:
        if source is None:
            return None, None
        if (not isinstance(source, tuple) or len(source) != 2 or not isinstance(source[0], str)
                or type(source[1]) is not int or source[1] < 0):
            raise InvalidArgumentError(f"source must be (session id, seq), not {source!r}")
        sid = self._host.sid_of(source[0])
        return sid, self._host.event_type(source[0], source[1])

    def _change(self, item_id: str, *, to: str, allowed: tuple[str, ...], reason: str,
                actor: str | None, content: Any = None, new_content: bool = False,
                extra: Mapping[str, Any] | None = None, retention: Any = _KEEP,
                renew: bool = False,
                seen: builtins.list[MemoryItem] | None = None) -> MemoryItem:
        if not isinstance(reason, str) or not reason:
            raise InvalidArgumentError("a state change says why (reason=...)")
        with self._backend.transaction() as w:
            last = w.memory_latest_of(item_id)
            if last is None:
                raise MemoryNotFoundError(f"no memory item {item_id!r}")
            cur = current_item(w, last, self._verified)
            self._check_visible(cur)
            if seen is not None:
                seen.append(cur)
            if cur.scope == "global":
                raise GlobalScopeReadOnlyError(f"memory item {item_id} is global: read-only "
                                               "at run time")
            if cur.state not in allowed:
                raise MemoryStateError(f"memory item {item_id} is {cur.state}; it cannot "
                                       f"become {to} (from {', '.join(allowed)} only)")
            now = _now()
            changed = replace(cur, version=cur.version + 1, state=to, created_ms=now,
                              decision={"actor": actor, "reason": reason, **(extra or {})})
            if renew:   # the same retention, counted again from now
                retention = cur.retention
            if retention is not _KEEP:
                ret, expires = retention_of(retention, now)
                changed = replace(changed, retention=ret, expires_ms=expires)
            if new_content:
                if self.identity.privacy == "none":
                    raise MemoryAccessError("privacy mode 'none' writes no memory")
                stored = self.identity.privacy == "full"
                content, sens, held = self._redact(cur.type, content, cur.sensitivity)
                changed = replace(changed, state="provisional" if held else to,
                                  sensitivity=sens, content=content if stored else None,
                                  digest=digest_of(content).hex(),
                                  stored="full" if stored else "metadata", conflicts_with=())
            if cur.version != last.version:   # (read whole: a newer version was there)
                last = w.memory_versions(item_id)[-1]
            writer = VersionWriter(w)
            writer.write(changed, last.source_sid, _index_text(changed), last=last)
            writer.flush()
        writer.publish(self._verified)
        return changed

    def activate(self, item_id: str, *, reason: str = "verified",
                 actor: str | None = None) -> MemoryItem:
        """provisional -> active (retrievable)."""
        return self._change(item_id, to="active", allowed=("provisional",), reason=reason,
                            actor=actor)

    def quarantine(self, item_id: str, *, reason: str, actor: str | None = None) -> MemoryItem:
        """Exclude an item from retrieval (suspected poisoning, a contradiction)
        until it is restored, corrected or revoked."""
        return self._change(item_id, to="quarantined", allowed=("provisional", "active"),
                            reason=reason, actor=actor)

    def restore(self, item_id: str, *, reason: str, actor: str | None = None) -> MemoryItem:
        """quarantined -> active; the active items it contradicted are
        quarantined in turn (never two truths for one setting)."""
        cur = self.get(item_id)
        restored = self._change(item_id, to="active", allowed=("quarantined",), reason=reason,
                                actor=actor)
        self._supersede(item_id, cur.conflicts_with, reason, actor)
        return restored

    def _supersede(self, item_id: str, conflicts: Any, reason: str, actor: str | None) -> None:
        """Quarantine the still-active items ``item_id`` contradicted, now
        that it is active itself: one truth per setting."""
        for other in conflicts:
            try:
                if self.get(other).state == "active":
                    self._change(other, to="quarantined", allowed=("active",),
                                 reason=f"superseded by {item_id}: {reason}", actor=actor)
            except MemoryNotFoundError:
                continue

    def correct(self, item_id: str, content: Any, *, reason: str,
                actor: str | None = None, retention: Any = _KEEP) -> MemoryItem:
        """A new version with corrected content, active (also the way out of
        quarantine).  ``retention`` (``{"ttl_ms": n}``, ``{"until_event": t}``
        or None for none) replaces the item's and restarts its clock; left
        out, the item keeps its retention and expiry."""
        if not isinstance(item_id, str):   # (as get() refuses it)
            raise TypeError(f"item id must be str, not {type(item_id).__name__}")
        seen: builtins.list[MemoryItem] = []   # (the version it corrects, read once)
        corrected = self._change(item_id, to="active", allowed=("provisional", "active",
                                                                "quarantined"),
                                 reason=reason, actor=actor, content=content, new_content=True,
                                 retention=retention, seen=seen)
        cur = seen[0]
        if cur.state == "quarantined":  # out of quarantine, as restore() is
            self._supersede(item_id, cur.conflicts_with, reason, actor)
        return corrected

    def renew(self, item_id: str, *, reason: str = "renewed",
              actor: str | None = None) -> MemoryItem:
        """A new version, same content and state, whose ttl counts again from
        now (a read that refreshes a TTL); an item without a ttl gets a
        version that records the renewal and keeps having no expiry."""
        cur = self.get(item_id)
        return self._change(item_id, to=cur.state, allowed=("provisional", "active"),
                            reason=reason, actor=actor, renew=True)

    def promote(self, item_id: str, to: str, *, evidence: Mapping[str, Any] | None = None,
                actor: str | None = None, reason: str = "promoted",
                as_type: str | None = None) -> MemoryItem:
        """A gated write of a session item into user or tenant scope (see
        :mod:`.gates`): a new item whose decision records who, why and on what
        evidence, and whose provenance names the item it came from (so it
        replays); the original stays.  Idempotent like :meth:`remember`."""
        cur = self.get(item_id)
        ev = check_evidence(evidence)
        source_type = None
        if cur.source is not None:
            source_type = self._host.event_type(cur.source[0], cur.source[1])
        if cur.state not in ("provisional", "active"):
            raise MemoryStateError(f"memory item {item_id} is {cur.state}: only provisional "
                                   "or active items are promoted")
        check_promotion(cur, to, as_type, ev, source_type)
        if self.identity.privacy == "none":
            raise MemoryAccessError("privacy mode 'none' writes no memory")
        scope_key = self.identity.scope_key(to)
        now = _now()
        promoted = MemoryItem(str(uuid.uuid4()), 1, to, cur.type, "active", cur.content,
                              cur.tenant, scope_key, cur.key, cur.source, cur.retention,
                              cur.expires_ms, cur.sensitivity, now, cur.digest,
                              {"actor": actor, "reason": reason, "evidence": ev,
                               "from": f"{cur.id}@{cur.version}"},
                              promoted_from=f"{cur.id}@{cur.version}", stored=cur.stored)
        with self._backend.transaction() as w:
            same = w.memory_merge_match(bytes.fromhex(cur.digest), cur.tenant, to, scope_key,
                                        cur.type, cur.key)
            if same is not None:
                return current_item(w, same, self._verified)
            sid = w.memory_versions(cur.id)[-1].source_sid
            write_version(w, promoted, sid, _index_text(promoted))
        return promoted

    def revoke(self, item_id: str, *, reason: str, actor: str | None = None) -> PurgeReport:
        """Tombstone the item: a last version in state revoked, its earlier
        versions' content blanked in place (headers and checks kept), its
        index rows gone, free pages and the WAL cleared.  Idempotent."""
        self.get(item_id)   # visible (typed errors otherwise)
        if not isinstance(reason, str) or not reason:
            raise InvalidArgumentError("a revocation says why (reason=...)")
        report = revoke_item(self._backend, item_id, reason=reason, actor=actor,
                             now_ms=_now(), check=self._check_visible)
        self._host.after_purge()
        return report


def _index_text(item: MemoryItem) -> str | None:
    if item.state != "active" or item.stored != "full":
        return None
    return _text_of(item.content, item.key) or None


__all__ = ["PRECEDENCE", "MemoryHost", "MemoryView", "Resolution"]
