"""Cancelling an asyncio task anywhere in ``async with s.turn()`` (or a step)
leaves the session usable: the writer lease is given back, every
``turn/start`` (and ``step/start``) written gets its closing record, and
another store can write the session at once.

The sweep cancels the task after N turns of the event loop, for every N up to
the length of a whole uncancelled turn, so each await of the turn's machinery
(taking the lease, ``turn/start``, the body's appends, a step, ``turn/end``,
giving the lease back) is hit; a second sweep keeps cancelling on every loop
turn after the first, so the cleanup itself is cancelled too."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

import trajlog
import trajlog.aio
from trajlog.errors import LeaseHeldError


def _markers(log: trajlog.Session) -> list[str]:
    return [ev.type for ev in log.events()
            if ev.type in ("turn/start", "turn/end", "step/start", "step/end")]


def assert_closed(log: trajlog.Session) -> None:
    """Every turn/start is followed by its turn/end, every step/start by its
    step/end inside that turn, and the log ends outside any turn."""
    turn = step = False
    for t in _markers(log):
        if t == "turn/start":
            assert not turn, f"a turn/start inside an open turn: {_markers(log)}"
            turn = True
        elif t == "step/start":
            assert turn and not step, _markers(log)
            step = True
        elif t == "step/end":
            assert step, _markers(log)
            step = False
        else:
            assert turn and not step, f"turn/end with a step open: {_markers(log)}"
            turn = False
    assert not turn and not step, f"the log ends inside a turn: {_markers(log)}"


async def body(s: trajlog.aio.AsyncSession) -> None:
    async with s.turn():
        await s.append("user/message", {"content": "hi"})
        await asyncio.sleep(0)
        async with s.step():
            await s.append("assistant/message", {"content": "hm"})
        await s.append("assistant/message", {"content": "done"})


async def run_cancelled(s: trajlog.aio.AsyncSession, after: int | None,
                        storm: bool = False, unit: str = "loop") -> int:
    """Run ``body`` and cancel it after ``after`` units (None: never;
    ``storm``: cancel again on every loop turn until it ends).  A unit is a
    turn of the event loop (``"loop"``), or an await on which the task
    suspended (``"await"``: each future it waits on, seen as
    ``Task._fut_waiter``).  Returns the units it took."""
    task = asyncio.create_task(body(s))
    count = 0
    waiter: object = None
    while not task.done():
        if after is not None and count >= after and (storm or count == after):
            task.cancel()
        await asyncio.sleep(0)
        if unit == "loop":
            count += 1
        else:
            now = getattr(task, "_fut_waiter", None)
            if now is not None and now is not waiter:
                count += 1
            waiter = now
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return count


def usable_from_elsewhere(path: str, sid: str, a: trajlog.aio.AsyncSession) -> None:
    """Another store takes the lease at once; meanwhile the first cannot write."""
    assert not a.sync._e.writer.leases.holds(a.sync._ref.sid), "the lease is still held"
    with trajlog.open(path) as other:
        log = other.session(sid)
        assert_closed(log)
        with log.turn():   # no LeaseHeldError
            log.append("user/message", {"content": "other store"})
            with pytest.raises(LeaseHeldError):
                a.sync.append("user/message", {"content": "not now"})
        assert_closed(log)


def sweep(tmp_path: Path, storm: bool, unit: str) -> dict[str, int]:
    path = str(tmp_path / "cancel.db")
    phases: dict[str, int] = {}

    async def main() -> None:
        store = await trajlog.aio.open(path, durability="normal")
        s = await store.create_session()
        sid = s.id
        whole = await run_cancelled(s, None, unit=unit)   # an uncancelled turn's length
        # every await; loop turns: some 60 points spread over the whole turn
        step = 1 if unit == "await" else max(1, whole // 60)
        n = -step
        # (loop turns: a later turn may take more of them than the one measured -- a slower
        # commit -- so the sweep goes on, up to 4x, until a cancellation lands after the end)
        while (n := n + step) <= whole + 1 or (
                unit == "loop" and "complete" not in phases and n <= 4 * whole + 2):
            before = (await s.last_seq())
            await run_cancelled(s, n, storm, unit)
            written = [ev.type for ev in await s.tail(await s.last_seq() - before)]
            # where the cancellation landed, judged by what reached the log
            phase = ("before turn/start" if "turn/start" not in written else
                     "in the turn" if "assistant/message" not in written else
                     "complete" if written.count("assistant/message") == 2
                     and written[-1] == "turn/end" and written.count("step/end") == 1
                     else "late in the turn")
            phases[phase] = phases.get(phase, 0) + 1
            await asyncio.get_running_loop().run_in_executor(
                None, usable_from_elsewhere, path, sid, s)
        # the first store still works: a whole turn of its own
        await run_cancelled(s, None)
        assert_closed(s.sync)
        await store.close()

    asyncio.run(main())
    return phases


def assert_reached(phases: dict[str, int], unit: str) -> None:
    """The sweep reached every part of the turn.  Counted in awaits it is
    deterministic; counted in loop turns it is not (a loop turn spent polling a
    thread's commit lasts as long as the commit), so there only both ends of
    the turn are required -- the loop sweep is there for its safety checks."""
    wanted = {"before turn/start", "complete"}
    if unit == "await":
        wanted.add("in the turn")
    assert wanted <= set(phases), phases


@pytest.mark.parametrize("unit", ["await", "loop"])
def test_a_turn_cancelled_at_any_await_leaves_the_session_usable(
        tmp_path: Path, unit: str) -> None:
    phases = sweep(tmp_path, False, unit)
    assert_reached(phases, unit)


@pytest.mark.parametrize("unit", ["await", "loop"])
def test_a_turn_whose_cleanup_is_cancelled_again_still_closes_and_releases(
        tmp_path: Path, unit: str) -> None:
    phases = sweep(tmp_path, True, unit)
    assert_reached(phases, unit)


def test_cancelling_a_turn_waiting_for_the_lease_stops_the_wait(tmp_path: Path) -> None:
    """A turn polling for a lease another store holds stops polling when its
    task is cancelled: it does not take the lease later, behind its caller's back."""
    path = str(tmp_path / "wait.db")
    with trajlog.open(path) as holder:
        log = holder.create_session()

        async def main() -> None:
            store = await trajlog.aio.open(path)
            s = await store.session(log.id)
            with log.lease():
                task = asyncio.create_task(body_waiting(s))
                for _ in range(20):
                    await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            # the holder gave the lease back: the cancelled waiter must not take it
            for _ in range(20):
                await asyncio.sleep(0.02)
            assert not s.sync._e.writer.leases.holds(s.sync._ref.sid)
            await store.close()

        async def body_waiting(s: trajlog.aio.AsyncSession) -> Any:
            async with s.turn(wait=True):
                await s.append("user/message", {"content": "late"})

        asyncio.run(main())
        with log.turn():   # nobody holds it
            log.append("user/message", {"content": "free"})
        assert_closed(log)
        assert "late" not in [ev.data.get("content") for ev in log.events()
                              if isinstance(ev.data, dict)]


def test_a_cancelled_append_still_settles_before_the_task_ends(tmp_path: Path) -> None:
    """An append cancelled while its commit is queued: the task sees the
    cancellation only once the commit settled, so what it wrote is already
    in the log when the cancellation arrives (nothing lands later)."""
    path = str(tmp_path / "append.db")

    async def main() -> None:
        store = await trajlog.aio.open(path)
        s = await store.create_session()
        landed_late = 0
        for n in range(0, 8):
            last = s.sync.last_seq
            task = asyncio.create_task(s.append("user/message", {"content": str(n)}))
            for _ in range(n):
                await asyncio.sleep(0)
            task.cancel()
            try:
                ev = await task
                assert ev.seq == last + 1
            except asyncio.CancelledError:
                pass
            seen = s.sync.last_seq   # at once: no await in between
            await s.append("user/message", {"content": "next"})   # after any commit in flight
            landed_late += s.sync.last_seq - seen - 1
        assert landed_late == 0
        await store.close()

    asyncio.run(main())
