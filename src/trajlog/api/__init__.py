"""The public API: :func:`open` a :class:`Store`, create and read :class:`Session` logs.

:mod:`.store` -- the facade; :mod:`.session` -- the session handle;
:mod:`.writer` -- the write engine (validation, framing, group commit);
:mod:`.leases` -- writer leases; :mod:`.reading` -- the verified read path;
:mod:`.recover` -- inspect and load; :mod:`.lineage` -- forks and subagents;
:mod:`.checks` -- compaction and status checks inside the write transaction;
:mod:`.bulk` -- whole sessions loaded at once (what an import writes);
:mod:`.deletion` -- deleting a session;
:mod:`.session_search` -- search across sessions (the derived event index);
:mod:`.async_store`, :mod:`.async_session` -- the same store and sessions for
asyncio (:mod:`trajlog.aio`), run off the loop by :mod:`.async_calls`.
"""

from __future__ import annotations

from ..events import SessionHeader
from .deleted import DeleteReport
from .lineage import SessionTree
from .reading import VerifyReport
from .recover import BalancedView
from .session import Session
from .session_search import SearchHit, SearchResult
from .stats import SessionStats, StoreStats
from .store import DURABILITY, Store, StoreAudit, migrate, open, schema_of

__all__ = ["DURABILITY", "BalancedView", "DeleteReport", "SearchHit", "SearchResult", "Session",
           "SessionHeader", "SessionStats", "SessionTree", "Store", "StoreAudit", "StoreStats",
           "VerifyReport", "migrate", "open", "schema_of"]
