"""How the asyncio faces (:mod:`.async_store`, :mod:`.async_session`) run
blocking work: on the event loop's default executor, in a copy of the
caller's context (so an open run of :meth:`Session.run` is seen there), and
settled -- a cancelled caller never leaves the call running, or queued never
to run, behind it.

:func:`off_loop` turns a sync method into its awaitable twin: the same
arguments, the same result, run by :func:`blocking` on the wrapped object
(``self.sync``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


async def settle(fut: asyncio.Future[Any], on_cancel: Callable[[], None] | None = None,
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


async def outcome(fut: asyncio.Future[T]) -> T:
    """``fut``'s result once it settled; then a cancellation that came meanwhile."""
    cancelled = await settle(fut)
    result = fut.result()
    if cancelled:
        raise asyncio.CancelledError
    return result


def in_executor(fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
    """``fn(*args, **kwargs)`` started on the loop's default executor, in a
    copy of this context."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return asyncio.get_running_loop().run_in_executor(None, call)


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Await ``fn(*args, **kwargs)`` run off the loop (settled: see the module)."""
    return await outcome(in_executor(fn, *args, **kwargs))


def off_loop(method: Callable[Concatenate[Any, P], T],
             ) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """The awaitable twin of the sync ``method``, for a class whose instances
    hold the sync object as ``.sync``."""
    name = method.__name__

    async def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await blocking(getattr(self.sync, name), *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = (f"Awaitable :meth:`~{method.__qualname__}` (run off the event loop).\n\n"
                    f"{method.__doc__ or ''}")
    return call


__all__ = ["blocking", "in_executor", "off_loop", "outcome", "settle"]
