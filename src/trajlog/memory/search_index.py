"""The derived full-text index of memory, and deploy-time global items.

The index (SQLite FTS5, one row per *active* version, rowid = the version's
row) is never authoritative: :func:`rebuild` makes it again from the
canonical versions (each verified), a dropped index makes searches fall back
to the canonical rows, and a revocation deletes its rows with FTS5's
``secure-delete`` on, so no copy of the words stays in the index's pages.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..errors import InvalidArgumentError
from ..storage.base import Backend
from .model import TYPES, MemoryItem, digest_of, text_of
from .versions import open_versions, write_version

BATCH = 5000


def rebuild(backend: Backend) -> int:
    """Make the index again -- dropped and created, so a damaged one goes
    whole -- and fill it from the canonical rows in one transaction; returns
    how many items it holds."""
    backend.memory_index(False)
    backend.memory_index(True)
    n = 0
    with backend.transaction() as w:
        w.clear_memory_index()
        after = 0
        while True:
            rows = w.memory_latest(after, BATCH)
            if not rows:
                break
            after = rows[-1].mid
            for row in rows:
                if row.state != "active":
                    continue
                item = open_versions(w.memory_versions(row.item_id),
                                     w.tombstone_for_item(row.item_id) is not None)[-1]
                if item.stored == "full":
                    text = text_of(item.content, item.key)
                    if text:
                        w.index_memory(row, text)
                        n += 1
        w.optimize_memory_index()
    return n


def deploy_global(backend: Backend, type_: str, content: Any, *, key: str | None,
                  actor: str) -> str:
    """Write a global item (deploy time); idempotent on its content, type and key."""
    if type_ not in TYPES:
        raise InvalidArgumentError(f"type must be one of {TYPES}, not {type_!r}")
    if not isinstance(actor, str) or not actor:
        raise InvalidArgumentError("a deployment names its actor")
    digest = digest_of(content)
    with backend.transaction() as w:
        same = w.memory_merge_match(digest, "", "global", "", type_, key)
        if same is not None:
            return same.item_id
        item = MemoryItem(str(uuid.uuid4()), 1, "global", type_, "active", content, "", "",
                          key, None, None, None, "internal", time.time_ns() // 1_000_000,
                          digest.hex(), {"actor": actor, "reason": "deployed",
                                         "evidence": None})
        write_version(w, item, None, text_of(content, key) or None)
    return item.id


__all__ = ["deploy_global", "rebuild"]
