"""trajlog for asyncio: the same store, with appends that await the group commit.

An append validates and serializes its event in the event loop's thread (it
is CPU work, microseconds), then queues it for group commit and awaits a
future: the commit itself (SQLite, fsync) runs on the store's commit thread,
which coalesces every queued append -- from any number of tasks, and from
threads of the same process -- into one transaction.  The loop never blocks
on a commit.  Work that may wait on the database (a lease, a read of the log)
runs in the loop's default executor.

::

    store = await trajlog.aio.open("trajlog.db")
    s = await store.create_session(cwd="/repo")
    async with s.turn():
        await s.append("user/message", {"content": "hi"})
    async for ev in s.events():
        ...
    await store.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from itertools import islice
from typing import Any, TypeVar

from ..errors import InvalidStateError, TrajlogError
from ..events import Event, SessionHeader
from ..memory import PurgeReport, RetentionReport
from .checks import check_append_type
from .reading import VerifyReport
from .session import Session
from .store import Store, StoreAudit
from .store import open as open_sync

T = TypeVar("T")
_READ_BATCH = 256   # events fetched per executor call while iterating


async def _blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(
        None, functools.partial(fn, *args, **kwargs))


async def open(path: str = "trajlog.db", durability: str = "full", **options: Any) -> AsyncStore:
    """Open (creating if needed) the store at ``path``; see :func:`trajlog.open`."""
    return AsyncStore(await _blocking(open_sync, path, durability, **options))


class AsyncStore:
    """An asyncio face of a :class:`trajlog.Store` (``store.sync`` is the store)."""

    def __init__(self, store: Store) -> None:
        self.sync = store

    async def create_session(self, cwd: str = ".", agent_preset: str | None = None,
                             metadata: Mapping[str, Any] | None = None, *,
                             session_id: str | None = None) -> AsyncSession:
        s = await _blocking(self.sync.create_session, cwd, agent_preset, metadata,
                            session_id=session_id)
        return AsyncSession(s)

    async def session(self, session_id: str) -> AsyncSession:
        return AsyncSession(await _blocking(self.sync.session, session_id))

    async def load(self, session_id: str) -> AsyncSession:
        return AsyncSession(await _blocking(self.sync.load, session_id))

    async def sessions(self, *, include_subagents: bool = False) -> list[SessionHeader]:
        return await _blocking(self.sync.sessions, include_subagents=include_subagents)

    async def erase(self, session_id: str, seq: int | list[int], *, reason: str,
                    actor: str | None = None) -> PurgeReport:
        """:meth:`trajlog.Store.erase`, off the event loop."""
        return await _blocking(self.sync.erase, session_id, seq, reason=reason, actor=actor)

    async def apply_retention(self, now_ms: int | None = None) -> RetentionReport:
        """:meth:`trajlog.Store.apply_retention`, off the event loop."""
        return await _blocking(self.sync.apply_retention, now_ms)

    async def verify(self) -> StoreAudit:
        """:meth:`trajlog.Store.verify`, off the event loop."""
        return await _blocking(self.sync.verify)

    async def close(self) -> None:
        await _blocking(self.sync.close)

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSession:
    """An asyncio face of a :class:`trajlog.Session` (``session.sync`` is the handle)."""

    def __init__(self, session: Session) -> None:
        self.sync = session
        self._turn = False
        self._step = False

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def header(self) -> SessionHeader:
        return self.sync.header

    async def _submit(self, rows: list[Any]) -> list[Event]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Event]] = loop.create_future()

        def settle(events: list[Event] | None, error: BaseException | None) -> None:
            if not future.done():
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(events or [])

        def done(events: list[Event] | None, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(settle, events, error)

        self.sync._e.writer.submit_async(self.sync._ref, rows, done)
        return await future

    async def append(self, type: str, data: Any = None, *, time: int | None = None,
                     source: str | None = None, causal_parent: int | None = None,
                     workspace_revision: str | None = None, data_class: str | None = None,
                     idempotency_key: str | None = None,
                     supersedes: int | None = None, branch_id: str | None = None) -> Event:
        """:meth:`trajlog.Session.append`, awaiting durability without blocking the loop."""
        envelope = {k: v for k, v in (("source", source), ("causal_parent", causal_parent),
                                      ("workspace_revision", workspace_revision),
                                      ("data_class", data_class),
                                      ("idempotency_key", idempotency_key),
                                      ("supersedes", supersedes), ("branch_id", branch_id))
                    if v is not None}
        check_append_type(self.header, type)
        rows = [self.sync._e.writer.prepare(type, data, time, envelope)]
        return (await self._submit(rows))[0]

    async def append_batch(self, items: Iterable[Any]) -> list[Event]:
        """:meth:`trajlog.Session.append_batch`: one transaction, all or none."""
        rows = self.sync._e.writer.prepare_items(self.header, items)
        return await self._submit(rows) if rows else []

    @contextlib.asynccontextmanager
    async def turn(self, *, wait: float | bool = False) -> AsyncIterator[AsyncSession]:
        """``turn/start`` ... ``turn/end`` holding the writer lease; an exception
        ends the turn interrupted and propagates."""
        if self._turn:
            raise InvalidStateError("a turn is already open on this handle")
        leases = self.sync._e.writer.leases
        await _blocking(leases.acquire, self.sync._ref.sid, self.id, wait)
        try:
            await self.append("turn/start", {})
            self._turn = True
            try:
                yield self
            except BaseException:
                self._turn = False
                with contextlib.suppress(TrajlogError):
                    if self._step:
                        self._step = False
                        await self.append("step/end", {"interrupted": True})
                    await self.append("turn/end", {"interrupted": True})
                raise
            self._turn = False
            await self.append("turn/end", {"interrupted": False})
        finally:
            await _blocking(leases.release, self.sync._ref.sid)

    @contextlib.asynccontextmanager
    async def step(self) -> AsyncIterator[AsyncSession]:
        """``step/start`` ... ``step/end`` inside a turn."""
        if not self._turn:
            raise InvalidStateError("a step belongs inside a turn: use session.turn()")
        if self._step:
            raise InvalidStateError("a step is already open on this handle")
        await self.append("step/start", {})
        self._step = True
        try:
            yield self
        except BaseException:
            if self._step:
                self._step = False
                with contextlib.suppress(TrajlogError):
                    await self.append("step/end", {"interrupted": True})
            raise
        self._step = False
        await self.append("step/end", {})

    async def events(self, from_seq: int = 0,
                     to_seq: int | None = None) -> AsyncIterator[Event]:
        """Verified events, read in the executor a batch at a time."""
        it = self.sync.events(from_seq, to_seq)
        while batch := await _blocking(lambda: list(islice(it, _READ_BATCH))):
            for ev in batch:
                yield ev

    async def get(self, seq: int) -> Event:
        return await _blocking(self.sync.get, seq)

    async def tail(self, n: int = 50) -> list[Event]:
        return await _blocking(self.sync.tail, n)

    async def last_seq(self) -> int:
        return await _blocking(lambda: self.sync.last_seq)

    async def verify(self) -> VerifyReport:
        return await _blocking(self.sync.verify)


__all__ = ["AsyncSession", "AsyncStore", "open"]
