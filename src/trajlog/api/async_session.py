"""The asyncio face of a session handle: :class:`AsyncSession`, every public
method of :class:`trajlog.Session`, awaitable.

Appends are the fast path: an event is validated and serialized in the event
loop's thread (CPU work, microseconds), queued for the store's group commit,
and awaited as a future -- the loop never blocks on a commit.  Everything
else that may wait on the database (a lease, a read, a fork) runs the sync
method off the loop (:mod:`.async_calls`).  Turns, steps, leases and runs are
``async with`` blocks, cancellation-safe: a cancelled task leaves no lease
held and no turn open.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from ..errors import InvalidStateError, TrajlogError
from ..events import Event, SessionHeader
from . import run_scope
from .async_calls import blocking, in_executor, off_loop, outcome, settle
from .checks import check_append_type
from .reading import FrameRun
from .session import Session, envelope_of

_READ_BATCH = 256   # events fetched per executor call while iterating


class AsyncSession:
    """An asyncio face of a :class:`trajlog.Session` (``session.sync`` is the
    handle): the same methods, each awaitable; ``turn``, ``step``, ``lease``
    and ``run`` are ``async with`` blocks, ``events`` and ``frames`` async
    iterators.  ``last_seq`` reads the database, so here it is a coroutine
    method, not a property."""

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

    @property
    def seed_chain(self) -> int:
        """:attr:`trajlog.Session.seed_chain` (held by the handle: no read)."""
        return self.sync.seed_chain

    def __repr__(self) -> str:
        return f"<trajlog.aio.AsyncSession {self.id}>"

    # -- appends: through the group commit, awaited ----------------------------

    async def _submit(self, rows: list[Any]) -> list[Event]:
        """Queue ``rows`` for group commit and await it.  Once queued the commit
        happens whatever the task does: a cancellation is raised only after it
        settled, so the caller's next step sees what it wrote."""
        loop = asyncio.get_running_loop()
        result: list[tuple[list[Event] | None, BaseException | None]] = []
        wake = [loop.create_future()]   # (a cancellation cancels it: replaced)

        def settled(events: list[Event] | None, error: BaseException | None) -> None:
            result.append((events, error))
            if not wake[0].done():
                wake[0].set_result(None)

        def done(events: list[Event] | None, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(settled, events, error)

        self.sync._e.writer.submit_async(self.sync._ref, rows, done)
        cancelled = False
        while not result:   # (one plain await on the hot path)
            try:
                await wake[0]
            except asyncio.CancelledError:
                cancelled = True
                wake[0] = loop.create_future()
        events, error = result[0]
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
        envelope = envelope_of(source, causal_parent, workspace_revision, data_class,
                               idempotency_key, supersedes, branch_id)
        check_append_type(self.header, type)
        rows = [self.sync._e.writer.prepare(type, data, time, envelope)]
        return (await self._submit(rows))[0]

    async def append_batch(self, items: Iterable[Any]) -> list[Event]:
        """:meth:`trajlog.Session.append_batch`: one transaction, all or none."""
        rows = self.sync._e.writer.prepare_items(self.header, items)
        return await self._submit(rows) if rows else []

    async def close(self, reason: str | None = None) -> Event:
        """:meth:`trajlog.Session.close`, off the loop."""
        return await blocking(lambda: self.sync.close(reason))

    async def closed(self) -> bool:
        """:attr:`trajlog.Session.closed` (a read of the database)."""
        return await blocking(lambda: self.sync.closed)

    # -- the writer lease, turns and steps ---------------------------------------

    async def _take_lease(self, take: Any, *args: Any) -> bool:
        """Run ``take(*args, abort)`` (it takes the lease) off the loop; a
        cancellation meanwhile stops its wait, and a lease it took anyway is
        given back before the cancellation goes on.  False: aborted, nothing
        held."""
        abort = threading.Event()
        taking = in_executor(take, *args, abort)
        cancelled = await settle(taking, abort.set)
        if not taking.result():   # (raises the lease's refusal)
            raise asyncio.CancelledError
        return not cancelled

    @contextlib.asynccontextmanager
    async def lease(self, wait: float | bool = False) -> AsyncIterator[AsyncSession]:
        """:meth:`trajlog.Session.lease`: hold the writer lease for the block
        (cancellation-safe as :meth:`turn`)."""
        leases, sid = self.sync._e.writer.leases, self.sync._ref.sid
        if not await self._take_lease(leases.acquire, sid, self.id, wait):
            await settle(in_executor(leases.release, sid))
            raise asyncio.CancelledError
        try:
            yield self
        finally:
            await outcome(in_executor(leases.release, sid))

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
        if not await self._take_lease(self._open_turn, wait):
            # opened meanwhile: closed again before the cancellation goes on
            await settle(in_executor(self._close_turn, False, True))
            raise asyncio.CancelledError
        self._turn = True
        try:
            yield self
        except BaseException:
            self._turn = False
            step_open, self._step = self._step, False
            await outcome(in_executor(self._close_turn, step_open, True))
            raise
        self._turn = False
        await outcome(in_executor(self._close_turn, False, False))

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

    # -- runs ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def run(self, *, model: str, params: Mapping[str, Any] | None = None,
                  policy_version: Any = None, tool_contract_version: Any = None,
                  privacy_mode: str | None = None, parent_run: str | None = None,
                  static_prefix: Any = None, run_id: str | None = None,
                  artifacts: Mapping[str, str] | None = None,
                  ) -> AsyncIterator[run_scope.Run]:
        """:meth:`trajlog.Session.run`: ``run/started`` now, ``run/finalized``
        when the block is left (``failed`` on an exception, ``interrupted``
        on a cancellation); the run is open in this task's context."""
        data = await blocking(   # (a child run may read its parent's log: off the loop)
            run_scope.started_data, self.sync, model=model, params=params,
            policy_version=policy_version, tool_contract_version=tool_contract_version,
            privacy_mode=privacy_mode, parent_run=parent_run, static_prefix=static_prefix,
            run_id=run_id, artifacts=artifacts)
        current = run_scope.Run(self.id, await self.append(run_scope.STARTED, data))
        token = run_scope.enter(current)
        try:
            yield current
        except Exception as exc:
            await blocking(run_scope.close_quietly, self.sync, current, "failed", exc)
            raise
        except BaseException as exc:  # a cancelled task, KeyboardInterrupt, ...
            await settle(in_executor(run_scope.close_quietly, self.sync, current,
                                     "interrupted", exc))
            raise
        else:
            await blocking(run_scope.finalize, self.sync, current, "completed")
        finally:
            run_scope.leave(token)

    switch_model = off_loop(Session.switch_model)

    # -- stage checkpoints and resumption (the fork of fork_from: ``.child``,
    # a sync handle; AsyncSession(child) wraps it) --------------------------------

    checkpoint = off_loop(Session.checkpoint)
    resume = off_loop(Session.resume)
    restart = off_loop(Session.restart)
    fork_from = off_loop(Session.fork_from)

    # -- reading -------------------------------------------------------------------

    async def last_seq(self) -> int:
        """:attr:`trajlog.Session.last_seq` (a read of the database)."""
        return await blocking(lambda: self.sync.last_seq)

    async def events(self, from_seq: int = 0, to_seq: int | None = None, *,
                     lazy: bool = False) -> AsyncIterator[Event]:
        """:meth:`trajlog.Session.events`: verified events, read off the loop a
        batch at a time."""
        it = self.sync.events(from_seq, to_seq, lazy=lazy)
        async for ev in _batches(it):
            yield ev

    async def frames(self) -> AsyncIterator[FrameRun]:
        """:meth:`trajlog.Session.frames`, a run at a time off the loop."""
        it = self.sync.frames()
        while run := await blocking(next, it, None):
            yield run

    get = off_loop(Session.get)
    tail = off_loop(Session.tail)
    verify = off_loop(Session.verify)
    inspect = off_loop(Session.inspect)
    fold_source = off_loop(Session.fold_source)

    # -- compaction and event status -----------------------------------------------

    compact = off_loop(Session.compact)
    mark = off_loop(Session.mark)

    # -- lineage: sessions come back as AsyncSession ---------------------------------

    async def parent(self) -> AsyncSession | None:
        """:meth:`trajlog.Session.parent`."""
        found = await blocking(self.sync.parent)
        return None if found is None else AsyncSession(found)

    async def children(self, *, include_subagents: bool = True) -> list[AsyncSession]:
        """:meth:`trajlog.Session.children`."""
        return [AsyncSession(s) for s in
                await blocking(self.sync.children, include_subagents=include_subagents)]

    async def fork(self, at_seq: int, *, metadata: Mapping[str, Any] | None = None,
                   session_id: str | None = None) -> AsyncSession:
        """:meth:`trajlog.Session.fork`."""
        return AsyncSession(await blocking(self.sync.fork, at_seq, metadata=metadata,
                                           session_id=session_id))

    async def spawn_subagent(self, task: str, agent_preset: str | None = None, *,
                             call_id: str | None = None, background: bool = False,
                             sandbox: Mapping[str, Any] | None = None,
                             metadata: Mapping[str, Any] | None = None) -> AsyncSession:
        """:meth:`trajlog.Session.spawn_subagent`."""
        return AsyncSession(await blocking(
            self.sync.spawn_subagent, task, agent_preset, call_id=call_id,
            background=background, sandbox=sandbox, metadata=metadata))

    async def fork_subagent(self, task: str, agent_preset: str | None = None, *,
                            call_id: str | None = None, background: bool = False,
                            sandbox: Mapping[str, Any] | None = None,
                            metadata: Mapping[str, Any] | None = None) -> AsyncSession:
        """:meth:`trajlog.Session.fork_subagent`."""
        return AsyncSession(await blocking(
            self.sync.fork_subagent, task, agent_preset, call_id=call_id,
            background=background, sandbox=sandbox, metadata=metadata))

    async def missed_notifications(self) -> list[AsyncSession]:
        """:meth:`trajlog.Session.missed_notifications`."""
        return [AsyncSession(s) for s in await blocking(self.sync.missed_notifications)]

    tree = off_loop(Session.tree)
    start_branch = off_loop(Session.start_branch)
    rebase_branch = off_loop(Session.rebase_branch)
    merge_branch = off_loop(Session.merge_branch)
    abandon_branch = off_loop(Session.abandon_branch)
    branches = off_loop(Session.branches)
    task = off_loop(Session.task)
    finish = off_loop(Session.finish)
    report = off_loop(Session.report)

    async def remember_result(self, memory: Any, seq: int) -> Any:
        """Awaitable :meth:`trajlog.Session.remember_result` (``memory``: a
        memory view or its asyncio face)."""
        return await blocking(self.sync.remember_result, getattr(memory, "sync", memory), seq)
    approvals = off_loop(Session.approvals)


async def _batches(it: Iterator[Event]) -> AsyncIterator[Event]:
    """``it``'s items, fetched off the loop :data:`_READ_BATCH` at a time."""
    while batch := await blocking(lambda: list(islice(it, _READ_BATCH))):
        for ev in batch:
            yield ev


__all__ = ["AsyncSession"]
