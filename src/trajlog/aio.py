"""trajlog for asyncio (:mod:`trajlog.api.async_store`):
``store = await trajlog.aio.open(path)``; every method of the store, its
sessions and its memory view, awaitable."""

from __future__ import annotations

from .api.async_store import AsyncMemoryView, AsyncSession, AsyncStore, open

__all__ = ["AsyncMemoryView", "AsyncSession", "AsyncStore", "open"]
