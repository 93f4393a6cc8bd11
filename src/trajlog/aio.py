"""trajlog for asyncio (:mod:`trajlog.api.async_store`):
``store = await trajlog.aio.open(path)``."""

from __future__ import annotations

from .api.async_store import AsyncSession, AsyncStore, open

__all__ = ["AsyncSession", "AsyncStore", "open"]
