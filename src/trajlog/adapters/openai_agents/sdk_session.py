"""The :class:`TrajlogSession` class: the SDK's ``Session`` protocol and
``AdvancedSQLiteSession``-style branches on a trajlog log (how SDK items map
to events: :mod:`trajlog.adapters.openai_agents`; the mapping itself:
:mod:`.items`); stores shared by path, one per process."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from ... import projections
from ...aio import AsyncSession, AsyncStore
from ...api import Session
from ...api.store import Store
from ...api.store import open as open_store
from ...errors import (
    LogMovedError,
    SessionNotFoundError,
    StoreClosedError,
    TrajlogError,
    ValidationError,
)
from .items import CALLS, CLEAR, POP, Visible, backwards, events_for

T = TypeVar("T")
#: Namespace of the trajlog session ids: ``uuid5(NAMESPACE, sdk session id)``.
NAMESPACE = uuid.UUID("6f1d7c1e-3b0a-5f7e-9a52-7a6a1b9d0c11")
MAIN = "main"


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
        # trajlog session id -> (last seq, where each call stands there): what this
        # handle's own last write left, reused while no other writer moved the log
        self._calls: dict[str, tuple[int, dict[str, tuple[int, str]]]] = {}
        # trajlog session id -> where this handle's last pop left the walk: (the
        # log's last seq then, the seq below the popped item, the pops' targets,
        # the clear's stop); nothing above it is visible, so the next pop walks on
        # from there (its append expects that last seq: a log moved since refuses it)
        self._pops: dict[str, tuple[int, int, set[int], int]] = {}
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
        walk, complete = Visible(), True
        # a first window for the usual log (an item an event, an output two: a
        # call and its result), the next ones twice as long
        window = limit + limit // 2 + 8 if limit is not None else None
        for ev in backwards(s, window):
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

    def _plan(self, s: Session, items: list[Any], fresh: bool
              ) -> tuple[list[tuple[str, Any]], dict[str, tuple[int, str]] | None, int]:
        """The events for ``items``; the call states they leave (None when the
        items hold no call and no state was read); the seq planned at."""
        at = s.last_seq
        cached = None if fresh else self._calls.get(s.id)
        calls: dict[str, tuple[int, str]] | None = None
        if cached is not None and cached[0] == at:
            calls = cached[1]   # this handle's own state: updated in place
        elif fresh or any(isinstance(i, dict) and str(i.get("type", "")).startswith(
                "function_call") for i in items):
            # the fold reads back every event since its last call (its view is
            # read-only: copied); after this handle's own write, its state plus
            # the plan is the same answer, without the read
            calls = dict(projections.project(s, CALLS))
        planned: dict[str, tuple[int, str]] = {}
        get = (calls or {}).get
        out: list[tuple[str, Any]] = []
        for item in items:
            out.extend(events_for(item, get, planned))
        if calls is not None:
            calls.update(planned)
        return out, calls, at

    def _add_sync(self, branch: str, items: list[Any]) -> None:
        handle = self._handle(branch, True)
        assert handle is not None
        s = handle.sync
        try:
            try:
                plan, calls, at = self._plan(s, items, False)
                events = s.append_batch(plan)
            except ValidationError:
                # another writer moved a call on meanwhile: plan again from the log
                self._calls.pop(s.id, None)
                plan, calls, at = self._plan(s, items, True)
                events = s.append_batch(plan)
        except BaseException:
            self._calls.pop(s.id, None)   # (the plan updated it: not written)
            raise
        self._pops.pop(s.id, None)   # (an item above the last pop's walk)
        if calls is not None and events and events[0].seq == at + 1:
            self._calls[s.id] = (events[-1].seq, calls)   # nobody wrote in between
        else:
            self._calls.pop(s.id, None)

    async def add_items(self, items: list[Any]) -> None:
        """Append the items as events in one transaction (all or none)."""
        self._check_open()
        if not items:
            return
        # one executor call for the look-up, the plan and the durable commit: each
        # hop between the loop and a thread costs more than the commit's own CPU work
        await self._run(self._add_sync, self._branch, list(items))

    def _pop_sync(self, s: Session) -> tuple[bool, Any]:
        """One attempt at a pop: ``(True, item)`` when this call's
        ``history/pop`` was written, ``(True, None)`` when nothing is visible,
        ``(False, None)`` when another writer moved the log meanwhile."""
        walk, at, below = Visible(), -1, None
        resume = self._pops.pop(s.id, None)
        if resume is not None:
            at, below, hidden, walk.stop = resume
            walk.hidden = set(hidden)
        for ev in backwards(s, 16, below):
            if at < 0:
                at = ev.seq   # the log the walk sees ends here
            if not walk.feed(ev) or walk.found:
                break
        if not walk.found:
            if resume is not None:
                return False, None   # (walk again from the end: the log may have moved)
            return True, None
        ev, items = walk.found[0]
        # written only if the log still ends where the walk read it: then no
        # other handle popped this target since (nor anything else), so the
        # item is this caller's alone; the key still dedupes a pop of the same
        # target by a writer that does not check (its original is not ours)
        try:
            [[written]] = self._astore().sync.append_atomic([(s, [(
                POP, {"target": ev.seq}, {"idempotency_key": f"agents-pop:{ev.seq}"})], at)])
        except LogMovedError:
            return False, None
        if written.seq != at + 1:
            return False, None
        walk.hidden.add(ev.seq)
        self._pops[s.id] = (written.seq, ev.seq - 1, walk.hidden, walk.stop)
        return True, items[-1]

    def _pop_item_sync(self, branch: str) -> Any:
        handle = self._handle(branch, False)
        if handle is None:
            return None
        while True:
            done, item = self._pop_sync(handle.sync)
            if done:
                return item

    async def pop_item(self) -> Any:
        """Append ``history/pop`` for the newest visible item and return it
        (None when there is none).  Concurrent pops, through any handle or
        process, each return a different item."""
        self._check_open()
        # one executor call for the look-up, the walk and the commit (as add_items)
        return await self._run(self._pop_item_sync, self._branch)

    def _clear_sync(self, branch: str) -> None:
        handle = self._handle(branch, False)
        if handle is None:
            return
        s = handle.sync
        self._pops.pop(s.id, None)
        s.append(CLEAR, {"through": s.last_seq})

    async def clear_session(self) -> None:
        """Append ``history/clear`` through the last event: no item stays visible.
        Not a deletion (the SDK's session stays usable under its id, and its
        branches read the same events): ``Store.delete_session`` of
        ``trajlog_id()`` deletes the conversation (docs/deleting.md)."""
        self._check_open()
        await self._run(self._clear_sync, self._branch)

    # -- branches: trajlog forks, in the style of AdvancedSQLiteSession -------------------

    def _branch_handles(self) -> list[tuple[str, AsyncSession]]:
        """(branch id, handle) of main and every live branch, oldest first."""
        main = self._handle(MAIN, False)
        if main is None:
            return []
        out, todo = [(MAIN, main)], [main.sync]
        while todo:
            for child in todo.pop().children(include_subagents=False):
                name = child.header.metadata.get("agents_branch")
                if not isinstance(name, str) or self._deleted(child):
                    continue
                self._handles.setdefault(name, AsyncSession(child))
                out.append((name, self._handles[name]))
                todo.append(child)
        return out

    @staticmethod
    def _deleted(s: Session) -> bool:
        return any(ev.type == "agents/branch" and ev.data.get("deleted")
                   for ev in s.tail(1))

    def _turns_sync(self, branch: str) -> list[dict[str, Any]]:
        handle = self._handle(branch, False)
        if handle is None:
            return []
        walk = Visible()
        for ev in backwards(handle.sync, None):
            if not walk.feed(ev):
                break
        turns: list[dict[str, Any]] = []
        for ev, items in reversed(walk.found):
            if ev.type == "user/message":
                content = items[0].get("content", "")
                text = content if isinstance(content, str) else json.dumps(
                    content, ensure_ascii=False)
                turns.append({"turn": len(turns) + 1, "seq": ev.seq,
                              "content": text[:100] + "..." if len(text) > 100 else text,
                              "full_content": content, "timestamp": _ts(ev.time),
                              "can_branch": True})
        return turns

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch (a turn is a user message), numbered from 1."""
        self._check_open()
        turns = await self._run(self._turns_sync, branch_id or self._branch)
        return [{k: v for k, v in t.items() if k != "seq"} for t in turns]

    async def find_turns_by_content(self, search_term: str,
                                    branch_id: str | None = None) -> list[dict[str, Any]]:
        """The turns whose user message contains ``search_term`` (ASCII case-blind,
        as SQLite's LIKE)."""
        term = search_term.lower()
        return [t for t in await self.get_conversation_turns(branch_id)
                if term in json.dumps(t["full_content"], ensure_ascii=False).lower()
                or (isinstance(t["full_content"], str) and term in t["full_content"].lower())]

    def _fork_sync(self, turn_number: int, name: str | None) -> str:
        source = self._branch
        turns = self._turns_sync(source)
        turn = next((t for t in turns if t["turn"] == turn_number), None)
        if turn is None:
            raise ValueError(f"Turn {turn_number} does not contain a user message "
                             f"in branch '{source}'")
        store = self._astore().sync
        taken = {h.metadata.get("agents_branch") for h in store.sessions()}

        def free(candidate: str) -> bool:
            if candidate == MAIN or candidate in taken:
                return False
            try:
                store.session(self.trajlog_id(candidate))
            except SessionNotFoundError:
                return True
            return False   # a deleted branch keeps its id reserved

        if name is None:
            base = name = f"branch_from_turn_{turn_number}_{int(time.time())}"
            n = 1
            while not free(name):
                n += 1
                name = f"{base}_{n}"
        elif not free(name):
            raise ValueError(f"Branch '{name}' already exists in this session")
        parent = self._handle(source, False)
        assert parent is not None
        # the branch shares its parent's log up to the event before the turn's
        # user message: no copy, and its items keep their seqs
        child = parent.sync.fork(turn["seq"] - 1, session_id=self.trajlog_id(name), metadata={
            "agents_session_id": self.session_id, "agents_branch": name,
            "agents_branch_from": source, "agents_branch_turn": turn_number})
        self._handles[name] = AsyncSession(child)
        return name

    async def create_branch_from_turn(self, turn_number: int,
                                      branch_name: str | None = None) -> str:
        """A new branch holding everything before turn ``turn_number`` of the
        current branch (a trajlog fork); it becomes the current branch."""
        self._check_open()
        if branch_name is not None and not branch_name.strip():
            raise ValueError("Branch name cannot be empty")
        name = await self._run(self._fork_sync, turn_number, branch_name)
        self._branch = name
        return name

    async def create_branch_from_content(self, search_term: str,
                                         branch_name: str | None = None) -> str:
        """:meth:`create_branch_from_turn` at the first turn matching ``search_term``."""
        turns = await self.find_turns_by_content(search_term)
        if not turns:
            raise ValueError(f"No user turns found containing '{search_term}'")
        return await self.create_branch_from_turn(turns[0]["turn"], branch_name)

    def _known(self, branch_id: str) -> bool:
        return any(name == branch_id for name, _ in self._branch_handles())

    async def switch_to_branch(self, branch_id: str) -> None:
        """Make ``branch_id`` the current branch (``ValueError`` if it does not exist)."""
        self._check_open()
        if not await self._run(self._known, branch_id):
            raise ValueError(f"Branch '{branch_id}' does not exist")
        self._branch = branch_id

    async def delete_branch(self, branch_id: str, force: bool = False) -> None:
        """Retire a branch: its log stays (append-only) and ends with
        ``agents/branch {deleted: true}``; it is no longer listed and its id
        stays reserved.  ``main`` cannot be deleted; the current branch only
        with ``force`` (the session then switches to ``main``)."""
        self._check_open()
        if not branch_id or not branch_id.strip():
            raise ValueError("Branch ID cannot be empty")
        if branch_id == MAIN:
            raise ValueError("Cannot delete the 'main' branch")
        if not await self._run(self._known, branch_id):
            raise ValueError(f"Branch '{branch_id}' does not exist")
        if branch_id == self._branch:
            if not force:
                raise ValueError(f"Cannot delete current branch '{branch_id}'. Use "
                                 "force=True or switch branches first")
            self._branch = MAIN
        handle = self._handles.pop(branch_id)
        await handle.append("agents/branch", {"deleted": True})

    def _list_sync(self) -> list[dict[str, Any]]:
        out = []
        for name, handle in self._branch_handles():
            turns = self._turns_sync(name)
            out.append({"branch_id": name, "message_count": len(self._walk(handle.sync, None)),
                        "user_turns": len(turns), "is_current": name == self._branch,
                        "created_at": _ts(handle.header.created_at)})
        return out

    async def list_branches(self) -> list[dict[str, Any]]:
        """Every branch: ``branch_id``, ``message_count``, ``user_turns``,
        ``is_current``, ``created_at``."""
        self._check_open()
        return await self._run(self._list_sync)


__all__ = ["MAIN", "NAMESPACE", "TrajlogSession"]
