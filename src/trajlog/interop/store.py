"""The store with its ways in and out: :class:`Store` is the API's store plus
:meth:`~Store.export` and :meth:`~Store.import_path` (this layer sits above
the API, DESIGN.md section 2, so the methods are added here).  ``trajlog.open``
returns one."""

from __future__ import annotations

import os

from ..api import store as api_store
from ..api.lineage import DEFAULT_MAX_DEPTH
from ..redaction import RedactionPolicy
from ..storage import Backend
from .export import ExportReport
from .export import Progress as ExportProgress
from .export import export as _export
from .importer import ImportReport, import_path
from .importer import Progress as ImportProgress


class Store(api_store.Store):
    """A trajlog store (see :class:`trajlog.api.Store`) that also exports
    sessions and imports files."""

    def export(self, session_id: str, path: str | os.PathLike[str], *,
               format: str | None = None, progress: ExportProgress | None = None,
               ) -> ExportReport:
        """Write ``session_id`` to ``path``: ``.tlog`` (its frames, verifiable
        without the database), ``.jsonl`` / ``.jsonl.zst`` (one JSON line per
        event, checksums carried) or ``.zip`` (the session and every
        descendant under ``subagents/<id>/``).  ``format`` overrides the name's
        suffix.  Erased payloads stay erased; the file appears complete or not
        at all."""
        return _export(self, session_id, path, format=format, progress=progress)

    def import_path(self, path: str | os.PathLike[str], *, format: str = "auto",
                    progress: ImportProgress | None = None, close: bool = False,
                    ) -> ImportReport:
        """Import a trajlog export, or another agent's sessions (Claude Code,
        Codex, Inspect AI, OpenHands, SWE-agent, aider), from a file or a
        folder.  One transaction per session; importing the same file again
        writes nothing; ``close=True`` closes what a source left open (a
        rollout that ends mid-turn) with trajlog's own recovery.  See
        :mod:`trajlog.interop.importer`."""
        return import_path(self, path, format=format, progress=progress, close=close)


def open(path: str = "trajlog.db", durability: str = "full", *,
         busy_timeout_ms: int = 10_000, lease_ttl_ms: int = api_store.LEASE_TTL_MS,
         max_delegation_depth: int = DEFAULT_MAX_DEPTH,
         backend: Backend | None = None, repack: bool = True,
         redaction: RedactionPolicy | None = None) -> Store:
    """Open (creating if needed) the store at ``path`` (the arguments are those
    of :func:`trajlog.api.open`)."""
    return Store(path, durability=durability, busy_timeout_ms=busy_timeout_ms,
                 lease_ttl_ms=lease_ttl_ms, max_delegation_depth=max_delegation_depth,
                 backend=backend, repack=repack, redaction=redaction)


__all__ = ["Store", "open"]
