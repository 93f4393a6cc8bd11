"""trajlog for asyncio (:mod:`trajlog.api.aio`): ``store = await trajlog.aio.open(path)``."""

from __future__ import annotations

from .api.aio import AsyncSession, AsyncStore, open

__all__ = ["AsyncSession", "AsyncStore", "open"]
