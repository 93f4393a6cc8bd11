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
import threading
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


async def _settle(fut: asyncio.Future[Any], on_cancel: Callable[[], None] | None = None,
                  ) -> bool:
    """Wait for ``fut``, work another thread already does: a cancellation
    meanwhile does not abandon it (its effect -- a lease taken, an event
    written -- would then be nobody's to undo), it waits on until ``fut`` is
    done.  Returns True if the task was cancelled meanwhile: the caller
    raises :class:`asyncio.CancelledError` once it has cleaned up."""
    cancelled = False
    while not fut.done():
        try:
            await asyncio.wait((fut,))
        except asyncio.CancelledError:
            if not cancelled and on_cancel is not None:
                on_cancel()
            cancelled = True
    return cancelled


async def _outcome(fut: asyncio.Future[T]) -> T:
    """``fut``'s result once it settled; then a cancellation that came meanwhile."""
    cancelled = await _settle(fut)
    result = fut.result()
    if cancelled:
        raise asyncio.CancelledError
    return result


async def _blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # settled: a cancelled caller never leaves the call running (or queued, never
    # to run) behind it
    return await _outcome(asyncio.get_running_loop().run_in_executor(
        None, functools.partial(fn, *args, **kwargs)))


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
        """Queue ``rows`` for group commit and await it.  Once queued the commit
        happens whatever the task does: a cancellation is raised only after it
        settled, so the caller's next step sees what it wrote."""
        loop = asyncio.get_running_loop()
        outcome: list[tuple[list[Event] | None, BaseException | None]] = []
        wake = [loop.create_future()]   # (a cancellation cancels it: replaced)

        def settle(events: list[Event] | None, error: BaseException | None) -> None:
            outcome.append((events, error))
            if not wake[0].done():
                wake[0].set_result(None)

        def done(events: list[Event] | None, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(settle, events, error)

        self.sync._e.writer.submit_async(self.sync._ref, rows, done)
        cancelled = False
        while not outcome:   # (one plain await on the hot path)
            try:
                await wake[0]
            except asyncio.CancelledError:
                cancelled = True
                wake[0] = loop.create_future()
        events, error = outcome[0]
        if error is not None:
            raise error
        if cancelled:
            raise asyncio.CancelledError
        return events or []

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

    def _open_turn(self, wait: float | bool, abort: threading.Event) -> bool:
        """Take the lease and append ``turn/start`` (blocking: one executor
        call, so no cancellation can fall between them).  False: aborted
        while waiting for the lease, nothing held."""
        leases, sid = self.sync._e.writer.leases, self.sync._ref.sid
        if not leases.acquire(sid, self.id, wait, abort):
            return False
        try:
            self.sync.append("turn/start", {})
        except BaseException:
            leases.release(sid)
            raise
        return True

    def _close_turn(self, step_open: bool, interrupted: bool) -> None:
        """``[step/end,] turn/end``, then give the lease back whatever happened
        (blocking).  An interrupted turn closes as well as it can: its own
        error is the one that propagates."""
        try:
            if interrupted:
                with contextlib.suppress(TrajlogError):
                    if step_open:
                        self.sync.append("step/end", {"interrupted": True})
                    self.sync.append("turn/end", {"interrupted": True})
            else:
                self.sync.append("turn/end", {"interrupted": False})
        finally:
            self.sync._e.writer.leases.release(self.sync._ref.sid)

    @contextlib.asynccontextmanager
    async def turn(self, *, wait: float | bool = False) -> AsyncIterator[AsyncSession]:
        """``turn/start`` ... ``turn/end`` holding the writer lease; an exception
        ends the turn interrupted and propagates.

        Cancellation-safe: a task cancelled anywhere here -- waiting for the
        lease, while ``turn/start`` or ``turn/end`` commits, in the block --
        leaves no lease held and no turn open (a cancellation while the lease
        is awaited stops the wait; one during a commit is raised once the turn
        is closed and the lease given back)."""
        if self._turn:
            raise InvalidStateError("a turn is already open on this handle")
        loop = asyncio.get_running_loop()
        abort = threading.Event()
        opening = loop.run_in_executor(None, self._open_turn, wait, abort)
        cancelled = await _settle(opening, abort.set)
        if not opening.result():   # (raises the lease's refusal)
            raise asyncio.CancelledError
        if cancelled:   # opened meanwhile: closed again before the cancellation goes on
            await _settle(loop.run_in_executor(None, self._close_turn, False, True))
            raise asyncio.CancelledError
        self._turn = True
        try:
            yield self
        except BaseException:
            self._turn = False
            step_open, self._step = self._step, False
            await _outcome(loop.run_in_executor(None, self._close_turn, step_open, True))
            raise
        self._turn = False
        await _outcome(loop.run_in_executor(None, self._close_turn, False, False))

    @contextlib.asynccontextmanager
    async def step(self) -> AsyncIterator[AsyncSession]:
        """``step/start`` ... ``step/end`` inside a turn (a cancellation while
        ``step/start`` commits still closes the step it wrote)."""
        if not self._turn:
            raise InvalidStateError("a step belongs inside a turn: use session.turn()")
        if self._step:
            raise InvalidStateError("a step is already open on this handle")
        try:
            await self.append("step/start", {})
        except asyncio.CancelledError:
            # raised once the commit settled: step/start is written, closed again
            # before the cancellation goes on
            with contextlib.suppress(TrajlogError, asyncio.CancelledError):
                await self.append("step/end", {"interrupted": True})   # (settled too)
            raise
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
