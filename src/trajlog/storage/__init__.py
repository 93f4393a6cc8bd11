"""Storage: the :class:`~.base.Backend` seam and its SQLite implementation.

:mod:`.base` -- the protocols, in (sid, seq) and bytes; :mod:`.commit` -- group
commit over any backend; :mod:`.sqlite` and :mod:`.schema` -- apsw, the only
place trajlog talks SQL.
"""

from __future__ import annotations

from .base import Backend, Head, Lease, Reader, SessionRow, Writer
from .commit import GroupCommit, Request
from .event_index import IndexRow
from .sqlite import SQLiteBackend

__all__ = ["Backend", "GroupCommit", "Head", "IndexRow", "Lease", "Reader", "Request",
           "SQLiteBackend", "SessionRow", "Writer"]
