"""trajlog as the store of an OpenAI Agents SDK session.

``TrajlogSession`` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``,
``clear_session``) on a trajlog log, plus branching in the style of the SDK's
``AdvancedSQLiteSession``, where a branch is a trajlog fork::

    from agents import Agent, Runner
    from trajlog.adapters.openai_agents import TrajlogSession

    session = TrajlogSession("user-42", "trajlog.db")
    await Runner.run(agent, "hi", session=session)

Each SDK item is one event of the type trajlog's projections, recovery and
views know: a user message is ``user/message``, an assistant message
``assistant/message`` (its content kept as the SDK's list), a
``function_call`` an ``assistant/message`` requesting that call, a
``function_call_output`` a ``tool/result`` (after a ``tool/call`` marked
``implied``: the SDK does not record when a tool starts), a ``reasoning``
item an ``assistant/message`` with ``reasoning``; any other item is carried
as ``agents/item``.  The fields the trajlog shape does not hold stay under
``"sdk"``, so ``get_items`` returns items equal to those added.  The log stays
append-only: ``pop_item`` appends ``history/pop {target}``, ``clear_session``
``history/clear {through}``, and reads honour both.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, TypeVar

import msgspec
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from .. import lifecycle, projections
from ..api import Session
from ..aio import AsyncSession, AsyncStore
from ..errors import SessionNotFoundError, StoreClosedError, TrajlogError, ValidationError
from ..events import Event
from ..interop.store import Store
from ..interop.store import open as open_store

T = TypeVar("T")
#: Namespace of the trajlog session ids: ``uuid5(NAMESPACE, sdk session id)``.
NAMESPACE = uuid.UUID("6f1d7c1e-3b0a-5f7e-9a52-7a6a1b9d0c11")
MAIN = "main"
_ITEM_TYPES = frozenset({"user/message", "assistant/message", "tool/result", "agents/item"})
_POP, _CLEAR = "history/pop", "history/clear"
_REQUESTED, _STARTED = lifecycle.Phase.REQUESTED, lifecycle.Phase.STARTED


# -- items <-> events -----------------------------------------------------------------

def _rest(item: dict[str, Any], *moved: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in moved}


def _events_for(item: Any, calls: Callable[[str], tuple[int, str] | None],
                planned: dict[str, tuple[int, str]]) -> list[tuple[str, dict[str, Any]]]:
    """The events that record one SDK item.  ``calls`` says where a call id
    stands in the log; ``planned`` holds what earlier items of this batch do."""
    if not isinstance(item, dict):
        return [("agents/item", {"item": item})]
    kind, role = item.get("type"), item.get("role")
    if kind in (None, "message") and "content" in item:
        content = item["content"]
        if role == "user" and isinstance(content, (str, list)):
            return [("user/message", {"content": content, "sdk": _rest(item, "content")})]
        if role == "assistant" and isinstance(content, (str, list, type(None))):
            return [("assistant/message", {"content": content, "sdk": _rest(item, "content")})]
    elif kind == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if (isinstance(call_id, str) and isinstance(name, str) and "arguments" in item
                and call_id not in planned and calls(call_id) is None):
            planned[call_id] = (_REQUESTED, name)
            return [("assistant/message", {
                "tool_calls": [{"id": call_id, "name": name, "arguments": item["arguments"]}],
                "sdk": _rest(item, "call_id", "name", "arguments")})]
    elif kind == "function_call_output":
        call_id = item.get("call_id")
        known = (planned.get(call_id) or calls(call_id)) if isinstance(call_id, str) else None
        if known is not None and known[0] in (_REQUESTED, _STARTED) and "output" in item:
            out: list[tuple[str, dict[str, Any]]] = []
            if known[0] == _REQUESTED:  # trajlog needs a started call; the SDK never says
                out.append(("tool/call", {"call_id": call_id, "name": known[1], "implied": True}))
            planned[str(call_id)] = (lifecycle.Phase.FINISHED, known[1])
            out.append(("tool/result", {"call_id": call_id, "output": item["output"],
                                        "sdk": _rest(item, "call_id", "output")}))
            return out
    elif kind == "reasoning" and "summary" in item:
        return [("assistant/message", {"reasoning": item["summary"],
                                       "sdk": _rest(item, "summary")})]
    # an item trajlog has no type for, or one its lifecycle would refuse (an
    # output with no open call, a reused call id): carried as it is
    return [("agents/item", {"item": item})]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _items_of(ev: Event) -> list[Any]:
    """The SDK items an event records (none for markers and erased events)."""
    d = ev.data
    if not isinstance(d, dict) or isinstance(d.get("erased"), dict):
        return []
    if ev.type == "agents/item":
        return [d.get("item")]
    sdk = d.get("sdk")
    if isinstance(sdk, dict):
        item = dict(sdk)
        if ev.type == "tool/result":
            item.update(call_id=d.get("call_id"), output=d.get("output"))
        elif "tool_calls" in d:
            c = d["tool_calls"][0]
            item.update(call_id=c["id"], name=c["name"], arguments=c["arguments"])
        elif "reasoning" in d:
            item["summary"] = d["reasoning"]
        else:
            item["content"] = d.get("content")
        return [item]
    # an event trajlog wrote itself (a recovery closer) or another writer did
    if ev.type == "tool/result":
        return [{"type": "function_call_output", "call_id": d.get("call_id"),
                 "output": _text(d.get("output", ""))}]
    if ev.type == "user/message":
        return [{"role": "user", "content": d.get("content")}]
    items: list[Any] = []
    if d.get("content"):
        items.append({"role": "assistant", "content": d["content"]})
    items.extend({"type": "function_call", "call_id": c["id"], "name": str(c.get("name", "")),
                  "arguments": _text(c.get("arguments", {}))}
                 for c in lifecycle.requested_calls(d))
    return items


def _synthetic(ev: Event) -> bool:
    return ev.type == "tool/result" and isinstance(ev.data, dict) and bool(
        ev.data.get("synthetic")) and "sdk" not in ev.data


class _Visible:
    """Walks a log from its end and keeps the items still visible: a pop hides
    its target, a clear everything up to ``through``.  A recovery closer is
    kept only while the call it answers is visible (a popped or cleared call
    needs no output)."""

    def __init__(self) -> None:
        self.hidden: set[int] = set()
        self.hidden_calls: set[str] = set()
        self.seen_calls: set[str] = set()
        self.found: list[tuple[Event, list[Any]]] = []   # newest first
        self.count = 0
        self.stop = -1   # seqs at or below it are cleared

    def feed(self, ev: Event) -> bool:
        """Take the next event (newer to older); False once nothing older counts."""
        if ev.seq <= self.stop:
            return False
        t, d = ev.type, ev.data
        if t == _POP and isinstance(d, dict) and isinstance(d.get("target"), int):
            self.hidden.add(d["target"])
        elif t == _CLEAR and isinstance(d, dict) and isinstance(d.get("through"), int):
            self.stop = max(self.stop, d["through"])
        elif t in _ITEM_TYPES:
            calls = [c["id"] for c in lifecycle.requested_calls(d)] if t[0] == "a" else []
            if ev.seq in self.hidden:
                self.hidden_calls.update(calls)
            elif items := _items_of(ev):
                self.seen_calls.update(calls)
                self.found.append((ev, items))
                self.count += len(items)
        return ev.seq > self.stop + 1

    def items(self, complete: bool) -> list[Any]:
        """Oldest first.  ``complete``: the walk reached the start (or a clear),
        so a closer whose call was never seen answers nothing visible."""
        out: list[Any] = []
        for ev, items in reversed(self.found):
            if _synthetic(ev):
                call = ev.data.get("call_id")
                if call in self.hidden_calls or (complete and call not in self.seen_calls):
                    continue
            out.extend(items)
        return out


# -- the call states, an incremental fold ---------------------------------------------

class _CallsState(msgspec.Struct):
    calls: dict[str, tuple[int, str]]


class _CallsFold:
    """Where each tool call of the log stands (what the write path checks)."""

    name: ClassVar[str] = "agents_calls"
    version: ClassVar[int] = 1
    state_type: ClassVar[Any] = _CallsState
    autosave: ClassVar[bool] = True
    wants = staticmethod(frozenset({"assistant/message", "tool/call", "tool/result"})
                         .__contains__)

    def init(self) -> _CallsState:
        return _CallsState({})

    def step(self, state: _CallsState, ev: Event) -> _CallsState:
        for call_id, phase, name in lifecycle.transitions(ev):
            old = state.calls.get(call_id)
            state.calls[call_id] = (int(phase), name or (old[1] if old else ""))
        return state

    def view(self, state: _CallsState) -> dict[str, tuple[int, str]]:
        return state.calls   # read-only by contract: planning overlays its own dict


_CALLS = _CallsFold()


# -- stores shared by path --------------------------------------------------------------

_SHARED: dict[str, list[Any]] = {}   # real path -> [AsyncStore, users]
_SHARED_LOCK = threading.Lock()


def _acquire(path: str) -> tuple[AsyncStore, str | None]:
    if path == ":memory:":
        return AsyncStore(open_store(path)), None
    key = os.path.realpath(path)
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None or entry[0].sync._e.backend.closed:
            entry = _SHARED[key] = [AsyncStore(open_store(key)), 0]
        entry[1] += 1
        return entry[0], key


def _release(store: AsyncStore, key: str | None) -> None:
    if key is None:
        store.sync.close()
        return
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None or entry[0] is not store:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _SHARED[key]
            store.sync.close()


def _backwards(s: Session, window: int | None) -> Iterator[Event]:
    """The log's events newest first: a window from the end, then windows
    twice as long before it (None: the whole log in one read)."""
    last = s.last_seq
    if window is None:
        yield from reversed(list(s.events()))
        return
    hi = last
    while hi >= 0:
        lo = max(0, hi - window + 1)
        yield from reversed(s.tail(hi + 1 - lo) if hi == last else list(s.events(lo, hi)))
        hi, window = lo - 1, window * 2


def _ts(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


class TrajlogSession:
    """An Agents SDK ``Session`` whose history is a trajlog log.

    ``db`` is a path (stores are shared by path in a process and opened on
    first use), a :class:`trajlog.Store` or a :class:`trajlog.aio.AsyncStore`
    (the caller's: :meth:`close` leaves it open).  The trajlog session id is
    ``uuid5(NAMESPACE, session_id)``, so the same SDK id always finds the same
    log; the SDK id is kept in its metadata (``agents_session_id``).
    """

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, db: str | os.PathLike[str] | Store | AsyncStore
                 = "trajlog.db", *, session_settings: SessionSettings | dict[str, Any]
                 | None = None, cwd: str = ".") -> None:
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be str, not {type(session_id).__name__}")
        self.session_id = session_id
        self.session_settings = (coerce_session_settings(session_settings)
                                 if session_settings is not None else SessionSettings())
        self.cwd = cwd
        self._db = db
        self._store: AsyncStore | None = db if isinstance(db, AsyncStore) else (
            AsyncStore(db) if isinstance(db, Store) else None)
        self._shared_key: str | None = None
        self._owns = self._store is None
        self._lock = threading.Lock()
        self._handles: dict[str, AsyncSession] = {}
        self._branch = MAIN
        self._closed = False

    # -- ids, store and handles -------------------------------------------------------

    def trajlog_id(self, branch: str = MAIN) -> str:
        """The trajlog session id of a branch of this SDK session."""
        name = self.session_id if branch == MAIN else f"{self.session_id}\x00branch\x00{branch}"
        return str(uuid.uuid5(NAMESPACE, name))

    @property
    def current_branch_id(self) -> str:
        return self._branch

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{type(self).__name__} {self.session_id!r} is closed")

    def _astore(self) -> AsyncStore:
        self._check_open()
        with self._lock:
            if self._store is None:
                self._store, self._shared_key = _acquire(os.fspath(self._db))  # type: ignore[arg-type]
            return self._store

    def _handle(self, branch: str, create: bool) -> AsyncSession | None:
        """The branch's session (blocking: call it in the executor)."""
        handle = self._handles.get(branch)
        if handle is not None:
            return handle
        store = self._astore()
        sid = self.trajlog_id(branch)
        try:
            s = store.sync.session(sid)
        except SessionNotFoundError:
            if not create or branch != MAIN:
                return None
            try:
                s = store.sync.create_session(self.cwd, metadata={
                    "agents_session_id": self.session_id}, session_id=sid)
                # seq 0 marks the session: every item has a seq > 0, so a branch
                # from the first turn is a fork too (at seq 0)
                s.append("agents/session", {"agents_session_id": self.session_id})
            except TrajlogError:
                s = store.sync.session(sid)   # another handle created it first
        handle = self._handles[branch] = AsyncSession(s)
        return handle

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(fn, *args))

    def trajlog_session(self, branch: str | None = None) -> Session | None:
        """The trajlog :class:`~trajlog.Session` of a branch (default: the
        current one), None before anything was added (blocking)."""
        handle = self._handle(branch or self._branch, False)
        return None if handle is None else handle.sync

    def close(self) -> None:
        """Release the store (closed with its last user when opened by path)."""
        with self._lock:
            self._closed = True
            self._handles.clear()
            if self._owns and self._store is not None:
                _release(self._store, self._shared_key)
                self._store = None

    # -- reading ------------------------------------------------------------------------

    @staticmethod
    def _walk(s: Session, limit: int | None) -> list[Any]:
        """The visible items: all of them, or the last ``limit``, read from the
        end a window at a time (O(limit) events plus the pops among them: an
        older event can hide no newer item, so the walk stops at ``limit``)."""
        walk, complete = _Visible(), True
        for ev in _backwards(s, 2 * limit + 16 if limit is not None else None):
            if not walk.feed(ev):
                break
            if limit is not None and walk.count >= limit:
                complete = False
                break
        items = walk.items(complete)
        return items if limit is None else items[-limit:]

    def _items_sync(self, limit: int | None, branch: str) -> list[Any]:
        handle = self._handle(branch, False)
        if handle is None:
            return []
        if limit is not None and limit < 0:
            limit = None   # as SQLite's LIMIT -1 in the SDK's SQLiteSession
        return [] if limit == 0 else self._walk(handle.sync, limit)

    async def get_items(self, limit: int | None = None, *,
                        branch_id: str | None = None) -> list[Any]:
        """The latest ``limit`` items (default ``session_settings.limit``; None:
        all) of the current branch, or of ``branch_id``, oldest first."""
        self._check_open()
        n = resolve_session_limit(limit, self.session_settings)
        return await self._run(self._items_sync, n, branch_id or self._branch)

    # -- writing ------------------------------------------------------------------------

    def _plan(self, s: Session, items: list[Any], fresh: bool) -> list[tuple[str, Any]]:
        planned: dict[str, tuple[int, str]] = {}
        calls: dict[str, tuple[int, str]] = {}
        if fresh or any(isinstance(i, dict) and str(i.get("type", "")).startswith(
                "function_call") for i in items):
            calls = projections.project(s, _CALLS)
        out: list[tuple[str, Any]] = []
        for item in items:
            out.extend(_events_for(item, calls.get, planned))
        return out

    async def add_items(self, items: list[Any]) -> None:
        """Append the items as events in one transaction (all or none)."""
        self._check_open()
        if not items:
            return
        handle = await self._run(self._handle, self._branch, True)
        assert handle is not None
        plan = await self._run(self._plan, handle.sync, list(items), False)
        try:
            await handle.append_batch(plan)
        except ValidationError:
            # another writer moved a call on meanwhile: plan again from the log
            plan = await self._run(self._plan, handle.sync, list(items), True)
            await handle.append_batch(plan)

    @staticmethod
    def _pop_sync(s: Session) -> tuple[int, Any] | None:
        walk = _Visible()
        for ev in _backwards(s, 16):
            if not walk.feed(ev) or walk.found:
                break
        if not walk.found:
            return None
        ev, items = walk.found[0]
        return ev.seq, items[-1]

    async def pop_item(self) -> Any:
        """Append ``history/pop`` for the newest visible item and return it
        (None when there is none)."""
        self._check_open()
        handle = await self._run(self._handle, self._branch, False)
        if handle is None:
            return None
        while True:
            found = await self._run(self._pop_sync, handle.sync)
            if found is None:
                return None
            target, item = found
            head = await handle.last_seq()
            # one pop per target, across handles and processes: a second pop of the
            # same target returns the first one's event and writes nothing
            ev = await handle.append(_POP, {"target": target},
                                     idempotency_key=f"agents-pop:{target}")
            if ev.seq > head:
                return item

    async def clear_session(self) -> None:
        """Append ``history/clear`` through the last event: no item stays visible."""
        self._check_open()
        handle = await self._run(self._handle, self._branch, False)
        if handle is None:
            return
        last = await handle.last_seq()
        await handle.append(_CLEAR, {"through": last})
