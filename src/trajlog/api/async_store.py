"""trajlog for asyncio: the same store, every method awaitable.

:class:`AsyncStore` and :class:`~.async_session.AsyncSession` offer every
public method of :class:`trajlog.Store` and :class:`trajlog.Session`
(``tests/api/test_one_store.py`` compares them), and
:class:`AsyncMemoryView` every one of :class:`trajlog.memory.MemoryView`.
An append awaits the group commit without blocking the loop
(:mod:`.async_session`); every other call runs the sync method off the loop
(:mod:`.async_calls`).

::

    store = await trajlog.aio.open("trajlog.db")
    s = await store.create_session(cwd="/repo")
    async with s.turn():
        await s.append("user/message", {"content": "hi"})
    async for ev in s.events():
        ...
    await store.export(s.id, "session.jsonl")
    await store.close()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..memory import Identity, MemoryView
from ..memory.retention_rules import RetentionRules
from ..redaction import RedactionPolicy
from .async_calls import blocking, off_loop
from .async_session import AsyncSession
from .store import Store
from .store import open as open_sync


async def open(path: str = "trajlog.db", durability: str = "full", **options: Any) -> AsyncStore:
    """Open (creating if needed) the store at ``path``; see :func:`trajlog.open`."""
    return AsyncStore(await blocking(open_sync, path, durability, **options))


class AsyncMemoryView:
    """An asyncio face of a :class:`trajlog.memory.MemoryView` (``view.sync``
    is the view): every method awaitable, run off the loop."""

    def __init__(self, view: MemoryView) -> None:
        self.sync = view

    get = off_loop(MemoryView.get)
    history = off_loop(MemoryView.history)
    list = off_loop(MemoryView.list)
    find = off_loop(MemoryView.find)
    keys = off_loop(MemoryView.keys)
    put = off_loop(MemoryView.put)
    quarantined = off_loop(MemoryView.quarantined)
    search = off_loop(MemoryView.search)
    resolve = off_loop(MemoryView.resolve)
    remember = off_loop(MemoryView.remember)
    remember_many = off_loop(MemoryView.remember_many)
    activate = off_loop(MemoryView.activate)
    quarantine = off_loop(MemoryView.quarantine)
    restore = off_loop(MemoryView.restore)
    correct = off_loop(MemoryView.correct)
    renew = off_loop(MemoryView.renew)
    promote = off_loop(MemoryView.promote)
    revoke = off_loop(MemoryView.revoke)


class AsyncStore:
    """An asyncio face of a :class:`trajlog.Store` (``store.sync`` is the
    store): the same methods, each awaitable; sessions come back as
    :class:`~.async_session.AsyncSession`, the memory view as
    :class:`AsyncMemoryView`.  The one method it lacks, ``bulk_loader``,
    holds a write transaction open between its caller's calls: await
    :meth:`import_path` or :meth:`load_session` instead, which run whole off
    the loop."""

    def __init__(self, store: Store) -> None:
        self.sync = store

    def __repr__(self) -> str:
        return f"<trajlog.aio.AsyncStore {self.sync.path!r}>"

    @property
    def redaction(self) -> RedactionPolicy | None:
        """:attr:`trajlog.Store.redaction` (set it to change the policy)."""
        return self.sync.redaction

    @redaction.setter
    def redaction(self, policy: RedactionPolicy | None) -> None:
        self.sync.redaction = policy

    @property
    def retention(self) -> RetentionRules | None:
        """:attr:`trajlog.Store.retention` (set it to change the rules)."""
        return self.sync.retention

    @retention.setter
    def retention(self, rules: RetentionRules | None) -> None:
        self.sync.retention = rules

    async def close(self) -> None:
        """:meth:`trajlog.Store.close`, off the event loop."""
        await blocking(self.sync.close)

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sessions: they come back as AsyncSession ---------------------------------

    async def create_session(self, cwd: str = ".", agent_preset: str | None = None,
                             metadata: Mapping[str, Any] | None = None, *,
                             session_id: str | None = None) -> AsyncSession:
        """:meth:`trajlog.Store.create_session`."""
        s = await blocking(self.sync.create_session, cwd, agent_preset, metadata,
                           session_id=session_id)
        return AsyncSession(s)

    async def session(self, session_id: str) -> AsyncSession:
        """:meth:`trajlog.Store.session`."""
        return AsyncSession(await blocking(self.sync.session, session_id))

    async def load(self, session_id: str) -> AsyncSession:
        """:meth:`trajlog.Store.load`."""
        return AsyncSession(await blocking(self.sync.load, session_id))

    async def append_atomic(
            self, writes: Iterable[tuple[str | AsyncSession, Iterable[Any], int | None]], *,
            create: Mapping[str, Mapping[str, Any] | None] | None = None,
    ) -> Any:
        """:meth:`trajlog.Store.append_atomic` (a write names its session by
        id or by an :class:`~.async_session.AsyncSession`)."""
        plain = [(t.sync if isinstance(t, AsyncSession) else t, items, expect)
                 for t, items, expect in writes]
        return await blocking(self.sync.append_atomic, plain, create=create)

    sessions = off_loop(Store.sessions)
    dependents = off_loop(Store.dependents)
    repack = off_loop(Store.repack)
    stats = off_loop(Store.stats)
    verify = off_loop(Store.verify)

    # -- ways in and out -----------------------------------------------------------

    export = off_loop(Store.export)
    import_path = off_loop(Store.import_path)
    load_session = off_loop(Store.load_session)

    # -- memory and forgetting -------------------------------------------------------

    async def memory(self, identity: Identity) -> AsyncMemoryView:
        """:meth:`trajlog.Store.memory`: the view bound to ``identity``."""
        return AsyncMemoryView(await blocking(self.sync.memory, identity))

    deploy_global = off_loop(Store.deploy_global)
    erase = off_loop(Store.erase)
    delete_session = off_loop(Store.delete_session)
    apply_retention = off_loop(Store.apply_retention)
    retention_plan = off_loop(Store.retention_plan)
    sweep_retention = off_loop(Store.sweep_retention)
    set_retention = off_loop(Store.set_retention)
    stored_retention = off_loop(Store.stored_retention)
    sweeper_status = off_loop(Store.sweeper_status)
    verify_memory = off_loop(Store.verify_memory)
    rebuild_memory_index = off_loop(Store.rebuild_memory_index)
    drop_memory_index = off_loop(Store.drop_memory_index)

    # -- search across sessions -------------------------------------------------------

    search = off_loop(Store.search)
    update_search_index = off_loop(Store.update_search_index)
    search_indexer = off_loop(Store.search_indexer)
    rebuild_search_index = off_loop(Store.rebuild_search_index)
    drop_search_index = off_loop(Store.drop_search_index)


__all__ = ["AsyncMemoryView", "AsyncSession", "AsyncStore", "open"]
