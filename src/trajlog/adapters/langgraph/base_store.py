"""LangGraph's ``BaseStore`` over trajlog's memory layer: :class:`TrajlogStore`.

    store = TrajlogStore.open("trajlog.db")          # or TrajlogStore(trajlog_store)
    store.put(("users", "alice", "prefs"), "editor", {"name": "vim"}, ttl=60)
    store.get(("users", "alice", "prefs"), "editor").value
    store.search(("users",), filter={"name": "vim"})

The mapping (one memory identity per store, every LangGraph namespace inside it):

* the store acts for ``Identity(tenant, user=user)`` (``"langgraph"`` / ``"store"`` by
  default); every item is a ``fact`` in **user scope** -- a namespace is not an identity
  (``("test",)`` names no tenant), so the whole namespace goes into the item's key;
* item key = ``".".join(namespace) + ".." + key`` (labels never hold ``.`` and are never
  empty, so the first ``..`` ends the namespace), or ``"#" + sha256`` of both when that
  exceeds the memory layer's 256 characters; the content is
  ``{"namespace", "key", "value", "created_us", "updated_us"}`` -- a put of the same value
  under two keys is then two items, never a merge;
* ``put`` = ``MemoryView.put`` (a new version of the key's item, or a new item), ``get`` =
  ``find``, ``delete`` (``value=None``) = ``revoke`` (tombstone + purge: the value is in no
  byte of the file); ``search`` and ``list_namespaces`` read the items whose indexed text
  holds the namespace's ASCII-alphanumeric labels (``MemoryView.search``; the scope's whole
  ``MemoryView.list`` when there is no such label), check each record, newest write first;
  ``query`` is trajlog's full-text search (every word must match, best first;
  ``fts=False`` ignores it as LangGraph's stores without a vector index do);
* ``ttl`` (minutes) = ``retention={"ttl_ms": ...}``; the sweep is
  ``trajlog.Store.apply_retention()`` (:meth:`TrajlogStore.sweep_ttl`, or the sweeper
  thread); an expired item is never returned, swept or not.  A refresh (``refresh_ttl``)
  is ``MemoryView.renew`` and a put ``MemoryView.correct(..., retention=...)``: a new
  version of the same item whose TTL counts from then.
* under the store's redaction policy the value is masked in place (it is JSON); the
  item's key is its address, which redaction does not touch (memory keys are never
  scanned), so a label or key the policy masks in the record is read back from the key
  and never searched for in the masked full-text index.  A hashed key (the record is
  then the only copy of the address) whose labels or key hold a finding is refused with
  ``UnredactableValueError``.
* vector search (``index=...``) is not supported.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import heapq
import json
import re
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from ...api.store import Store
from ...api.store import open as open_store
from ...errors import InvalidArgumentError, UnredactableValueError
from ...memory import Identity, MemoryItem, MemoryView
from ...redaction import RedactionPolicy

SCOPE = "user"
TYPE = "fact"
# MemoryView.list returns at most this many items: a store holding more could
# not be searched whole, so it is refused rather than read partially.
MAX_ITEMS = 10_000
MAX_KEY = 256
_TOKEN = re.compile(r"[A-Za-z0-9]+")   # one unicode61 token, whatever surrounds it
_WORD = re.compile(r"\w+")             # what MemoryView.search takes as a word
_FIELDS = frozenset({"namespace", "key", "value", "created_us", "updated_us"})
# A record's updated_us is stamped before the memory layer stamps its version's
# created_ms, from the same clock in the same call: updated_us < (created_ms + 1)
# * 1000.  A search walking the versions by created_ms, newest first, stops when
# the next one's bound is below the last updated_us it keeps.  (A wall clock
# stepped back between the two stamps of one put -- microseconds apart -- could
# misplace that item in the order; nothing else.)
_STAMP_SLACK_MS = 1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _now_us() -> int:
    # microseconds: "newest first" needs an order finer than a durable commit
    return time.time_ns() // 1_000


def _dt(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc)


def item_key(namespace: tuple[str, ...], key: str) -> str:
    """The memory item key of a LangGraph (namespace, key)."""
    readable = ".".join(namespace) + ".." + key
    if len(readable) <= MAX_KEY:
        return readable
    # (never holds "..", so it cannot collide with a readable key)
    return "#" + hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()


def _record(mi: MemoryItem) -> dict[str, Any] | None:
    """The adapter's record in an item, or None for an item it did not write.
    The item's key is its address: where a redaction policy masked the
    record's copy of a label or the key, the key's text is returned."""
    c = mi.content
    if (isinstance(c, dict) and c.keys() == _FIELDS and isinstance(c["namespace"], list)
            and isinstance(c["key"], str) and isinstance(c["value"], dict)):
        k = mi.key
        if k is not None and not k.startswith("#"):
            labels, _, key = k.partition("..")
            ns = labels.split(".") if labels else []     # (labels are never empty)
            if ns != c["namespace"] or key != c["key"]:
                return {**c, "namespace": ns, "key": key}
        return c
    return None


def _finding(policy: RedactionPolicy | None, texts: Iterable[str]) -> str | None:
    """The kind of the first finding ``policy`` acts on in ``texts``."""
    if policy is None:
        return None
    for text in texts:
        for scanner in policy.scanners:
            for f in scanner.scan(text):
                if policy.actions.get(f.kind, policy.default) != "allow":
                    return f.kind
    return None


def _live(mi: MemoryItem, now: int) -> dict[str, Any] | None:
    """The record of an item a read may return: active, not expired (swept or not)."""
    if mi.state != "active" or (mi.expires_ms is not None and mi.expires_ms <= now):
        return None
    return _record(mi)



def _matching(mi: MemoryItem, now: int, prefix: tuple[str, ...],
              filter_: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The live record of ``mi`` if it is under ``prefix`` and passes the
    search's ``filter_``, else None."""
    rec = _live(mi, now)
    if rec is None or tuple(rec["namespace"][:len(prefix)]) != prefix:
        return None
    if filter_ and not all(_compare(rec["value"].get(k), v) for k, v in filter_.items()):
        return None
    return rec

def _recent_first(items: list[MemoryItem]) -> list[MemoryItem]:
    """Items by their record's last write, newest first (a total order: one
    item per namespace and key), whichever way they were found."""
    def order(mi: MemoryItem) -> tuple[int, list[str], str]:
        rec = _record(mi)
        return (0, [], "") if rec is None else (rec["updated_us"], rec["namespace"],
                                                 rec["key"])
    return sorted(items, key=order, reverse=True)


def _item(rec: Mapping[str, Any]) -> Item:
    return Item(value=rec["value"], key=rec["key"], namespace=tuple(rec["namespace"]),
                created_at=_dt(rec["created_us"]), updated_at=_dt(rec["updated_us"]))


def _search_item(rec: Mapping[str, Any]) -> SearchItem:
    return SearchItem(namespace=tuple(rec["namespace"]), key=rec["key"], value=rec["value"],
                      created_at=_dt(rec["created_us"]), updated_at=_dt(rec["updated_us"]))


class TrajlogStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are trajlog memory items (see the
    module docstring for the mapping).  Thread-safe within a process; ``abatch``
    runs ``batch`` on a worker thread."""

    supports_ttl = True

    def __init__(self, store: Any, *, tenant: str = "langgraph", user: str = "store",
                 ttl: TTLConfig | None = None, fts: bool = True,
                 index: Mapping[str, Any] | None = None) -> None:
        """``store``: a :class:`trajlog.Store` (or an ``AsyncStore``: its
        ``.sync``).  ``tenant`` / ``user``: the memory identity every item
        belongs to.  ``ttl``: LangGraph's ``TTLConfig``.  ``fts``: whether a
        search's ``query`` runs trajlog's full-text search."""
        if index is not None:
            raise NotImplementedError("TrajlogStore has no vector index: semantic search "
                                      "is not supported (index=None)")
        self._store: Store = getattr(store, "sync", store)
        self._mem: MemoryView = self._store.memory(Identity(tenant, user=user))
        self.ttl_config = ttl
        self._fts = fts
        self._owned = False
        # find-then-write of a put is not one transaction in the memory layer:
        # the lock keeps two threads from both creating a key's item
        self._lock = threading.RLock()
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()

    @classmethod
    def open(cls, path: str, **kwargs: Any) -> TrajlogStore:
        """A store on the trajlog database at ``path`` (closed by :meth:`close`)."""
        self = cls(open_store(path), **kwargs)
        self._owned = True
        return self

    def close(self) -> None:
        """Stop the sweeper; close the trajlog store if :meth:`open` made it."""
        self.stop_ttl_sweeper()
        if self._owned:
            self._store.close()

    def __enter__(self) -> TrajlogStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def memory(self) -> MemoryView:
        """The trajlog memory view the items live in."""
        return self._mem

    # -- batch -------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; reads see the store as it was before the
        batch's puts, which are applied last (the last put of a key wins), as
        LangGraph's ``InMemoryStore`` does."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        with self._lock:
            now = _now_ms()
            for i, op in enumerate(ops):
                if isinstance(op, GetOp):
                    results[i] = self._get(op, now)
                elif isinstance(op, SearchOp):
                    results[i] = self._search(op, now)
                elif isinstance(op, ListNamespacesOp):
                    labels = [x for c in op.match_conditions or () for x in c.path]
                    results[i] = _list_namespaces(op, self._candidates(labels), now)
                elif isinstance(op, PutOp):
                    puts[(tuple(op.namespace), op.key)] = op
                else:
                    raise ValueError(f"unknown operation type: {type(op).__name__}")
            if puts:
                self._put(puts.values())
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on a worker thread (the event loop never waits on a commit)."""
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)

    # -- reads -------------------------------------------------------------------

    def _refresh(self, op: GetOp | SearchOp) -> bool:
        if not op.refresh_ttl or self.ttl_config is None:
            return False
        return bool(self.ttl_config.get("refresh_on_read", True))

    def _get(self, op: GetOp, now: int) -> Item | None:
        mi = self._mem.find(SCOPE, item_key(tuple(op.namespace), op.key))
        if mi is None:
            return None
        rec = _live(mi, now)
        if rec is None or tuple(rec["namespace"]) != tuple(op.namespace) or (
                rec["key"] != op.key):
            return None
        if self._refresh(op):
            self._renew(mi)
        return _item(rec)

    def _listing(self) -> list[MemoryItem]:
        """Every active item of the scope."""
        items = self._mem.list(scopes=[SCOPE], types=[TYPE], states=("active",),
                               limit=MAX_ITEMS)
        if len(items) >= MAX_ITEMS:
            raise InvalidArgumentError(f"TrajlogStore searches and lists at most {MAX_ITEMS} "
                                       "items per identity (MemoryView.list's limit)")
        return items

    def _candidates(self, labels: Iterable[str], query: str | None = None
                    ) -> list[MemoryItem]:
        """The items a search over namespaces holding ``labels`` must look at.

        Listing the scope reads every item (MemoryView.list verifies each one), so
        the full-text index narrows it first: a label of ASCII letters and digits
        is exactly one token of the indexed text of every item under it (the
        record holds its namespace), so asking for it loses no item.  Other
        labels are only checked on the records.  With a ``query``, its words
        must match too and the hits keep their rank (best first)."""
        words = self._labels(labels)
        if query:
            words = _WORD.findall(query) + words
        if words:
            hits = self._mem.search(" ".join(words), limit=MAX_ITEMS, types=[TYPE],
                                    scopes=[SCOPE])
            if len(hits) < MAX_ITEMS:
                return hits if query else _recent_first(hits)
        if query:   # (a query of more items than a search returns)
            raise InvalidArgumentError(f"TrajlogStore ranks at most {MAX_ITEMS} hits")
        return _recent_first(self._listing())

    def _labels(self, labels: Iterable[str]) -> list[str]:
        """The labels the full-text index holds as one token each, sorted
        (a label the policy masks is not in the indexed text)."""
        policy = self._store.redaction
        return sorted({x for x in labels if _TOKEN.fullmatch(x)
                       and _finding(policy, (x,)) is None})

    def _search(self, op: SearchOp, now: int) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        query = op.query if op.query and self._fts and _WORD.search(op.query) else None
        words = self._labels(prefix)
        if query is None and words:
            return self._search_recent(op, words, now)
        candidates = self._candidates(prefix, query)
        start, stop = max(op.offset, 0), max(op.offset, 0) + max(op.limit, 0)
        hits: list[tuple[MemoryItem, dict[str, Any]]] = []
        for mi in candidates:
            rec = _matching(mi, now, prefix, op.filter)
            if rec is None:
                continue
            hits.append((mi, rec))
            if len(hits) >= stop:
                break
        hits = hits[start:stop]
        if self._refresh(op):
            for mi, _ in hits:
                self._renew(mi)
        return [_search_item(rec) for _, rec in hits]

    def _search_recent(self, op: SearchOp, words: list[str], now: int) -> list[SearchItem]:
        """A search without a query, newest write first: the items under the
        prefix's labels walked from the latest written, a page at a time,
        stopping once no item still unread can rank among the first
        ``offset + limit`` (see :data:`_STAMP_SLACK_MS`)."""
        prefix = tuple(op.namespace_prefix)
        stop = max(op.offset, 0) + max(op.limit, 0)
        best: list[tuple[tuple[int, list[str], str], int, MemoryItem, dict[str, Any]]] = []
        if stop:
            for i, mi in enumerate(self._mem._recent(" ".join(words), types=[TYPE],
                                                    scopes=[SCOPE], page=stop + 2)):
                if len(best) >= stop and (
                        (mi.created_ms + _STAMP_SLACK_MS) * 1000 < best[0][0][0]):
                    break
                rec = _matching(mi, now, prefix, op.filter)
                if rec is None:
                    continue
                entry = ((rec["updated_us"], rec["namespace"], rec["key"]), -i, mi, rec)
                if len(best) < stop:
                    heapq.heappush(best, entry)
                elif entry[0] > best[0][0]:
                    heapq.heapreplace(best, entry)
        hits = sorted(best, reverse=True)[max(op.offset, 0):stop]
        if self._refresh(op):
            for _, _, mi, _ in hits:
                self._renew(mi)
        return [_search_item(rec) for _, _, _, rec in hits]

    # -- writes ------------------------------------------------------------------

    def _renew(self, mi: MemoryItem) -> None:
        """Restart an item's TTL: a new version of it whose ttl counts from now."""
        if (mi.retention or {}).get("ttl_ms") is not None:
            self._mem.renew(mi.id, reason="langgraph: ttl refreshed")

    def _put(self, ops: Iterable[PutOp]) -> None:
        base, now = _now_us(), _now_ms()
        fresh: list[dict[str, Any]] = []
        for n, op in enumerate(ops):
            stamp = base + n   # puts of one batch keep their order
            ns = tuple(op.namespace)
            ikey = item_key(ns, op.key)
            if ikey.startswith("#") and op.value is not None:
                # a hashed key: the record is the only copy of the address,
                # and a masked label or key would lose the item
                kind = _finding(self._store.redaction, (*ns, op.key))
                if kind is not None:
                    raise UnredactableValueError("memory/fact", "$.namespace/$.key", kind,
                                                 "a LangGraph store address")
            cur = self._mem.find(SCOPE, ikey)
            if op.value is None:
                if cur is not None:
                    self._mem.revoke(cur.id, reason="langgraph: delete")
                continue
            rec = None if cur is None else _live(cur, now)
            ttl_ms = None if op.ttl is None else max(int(op.ttl * 60_000), 0)
            content = {"namespace": list(ns), "key": op.key, "value": dict(op.value),
                       "created_us": stamp if rec is None else rec["created_us"],
                       "updated_us": stamp}
            retention = None if ttl_ms is None else {"ttl_ms": ttl_ms}
            if cur is not None and rec is not None and cur.type == TYPE:
                # a new version; its TTL (or none) counts from this put
                self._mem.correct(cur.id, content, reason="langgraph: put",
                                  retention=retention)
                continue
            if cur is not None:   # expired but not swept yet: a new item replaces it
                self._mem.revoke(cur.id, reason="langgraph: replaced")
            fresh.append(dict(scope=SCOPE, type=TYPE, content=content, key=ikey,
                              retention=retention))
        if fresh:
            self._mem.remember_many(fresh)   # one transaction for every new key

    # -- TTL -----------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Revoke every expired item now (``trajlog.Store.apply_retention``,
        which also applies every other recorded retention policy of the
        store); returns how many items it revoked."""
        with self._lock:
            return len(self._store.apply_retention().items_revoked)

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl` on a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(None, self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None
                          ) -> concurrent.futures.Future[None]:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's
        ``sweep_interval_minutes``, else 5) on a daemon thread until
        :meth:`stop_ttl_sweeper`; the future completes when it stops."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            done.set_result(None)
            return done
        interval = sweep_interval_minutes or (self.ttl_config or {}).get(
            "sweep_interval_minutes") or 5
        self._stop.clear()

        def loop() -> None:
            try:
                while not self._stop.wait(float(interval) * 60):
                    self.sweep_ttl()
            finally:
                done.set_result(None)

        self._sweeper = threading.Thread(target=loop, name="trajlog-ttl-sweeper",
                                         daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True once it has stopped (or never ran)."""
        if self._sweeper is None:
            return True
        self._stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped


# -- namespaces and filters (LangGraph's semantics, as InMemoryStore has them) ----------

def _matches(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    if cond.match_type == "prefix":
        pairs = zip(ns, path, strict=False)
    elif cond.match_type == "suffix":
        pairs = zip(reversed(ns), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type: {cond.match_type!r}")
    return all(p == "*" or k == p for k, p in pairs)


def _list_namespaces(op: ListNamespacesOp, listing: list[MemoryItem],
                     now: int) -> list[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for mi in listing:
        rec = _live(mi, now)
        if rec is None:
            continue
        ns = tuple(rec["namespace"])
        if all(_matches(c, ns) for c in op.match_conditions or ()):
            found.add(ns if op.max_depth is None else ns[:op.max_depth])
    out = sorted(found)
    return out[op.offset:op.offset + op.limit]


def _compare(value: Any, wanted: Any) -> bool:
    """JSONB-like containment: operators ``$eq $ne $gt $gte $lt $lte``,
    nested mappings, lists element by element, else equality."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, k, v) for k, v in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v)
                                               for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(wanted)
                and all(_compare(a, b) for a, b in zip(value, wanted, strict=True)))
    return bool(value == wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(operand)
        except (TypeError, ValueError):
            return False   # a missing or non-numeric field never compares
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"unsupported filter operator: {op!r}")


__all__ = ["MAX_ITEMS", "TrajlogStore", "item_key"]
