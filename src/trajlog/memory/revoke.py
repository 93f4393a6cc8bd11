"""Revocation: a memory item's tombstone and the purge of its content from
every layer (the versions' frames, the full-text index, free pages, WAL)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..codec.memory_frames import blank
from ..errors import MemoryNotFoundError, StoreError
from ..storage.base import Backend
from .model import MemoryItem, PurgeReport
from .versions import open_versions, verified_rows, write_tombstone, write_version


def revoke_item(backend: Backend, item_id: str, *, reason: str, actor: str | None,
                now_ms: int, check: Callable[[MemoryItem], None]) -> PurgeReport:
    """Revoke ``item_id`` in one transaction, then checkpoint the WAL.  The
    item's verified rows go too (they hold its content)."""
    try:
        return _revoke(backend, item_id, reason=reason, actor=actor, now_ms=now_ms,
                       check=check)
    finally:
        verified_rows(backend).discard(item_id)


def _revoke(backend: Backend, item_id: str, *, reason: str, actor: str | None,
            now_ms: int, check: Callable[[MemoryItem], None]) -> PurgeReport:
    with backend.transaction() as w:
        # (what read_item reads, read once: the rows and the tombstone are used below)
        rows = w.memory_versions(item_id)
        already = w.tombstone_for_item(item_id) if rows else None
        versions = open_versions(rows, already is not None)
        if not versions:
            raise MemoryNotFoundError(f"no memory item {item_id!r}")
        cur = versions[-1]
        check(cur)
        blanked = removed = 0
        tid = None if already is None else already.tid
        has_index = w.memory_index_exists()   # (no schema change inside the transaction)
        damaged = False
        if has_index:   # (first: the revoked version's own index change is then a no-op)
            try:   # (in a savepoint: a failure outside one would end the transaction)
                with w.savepoint():
                    removed = w.unindex_memory([r.mid for r in rows])
            except StoreError:
                damaged = True
        if already is None:
            stone = write_tombstone(w, lambda t: {"item": item_id, "digest": cur.digest,
                                                  "versions": len(rows)},
                                    kind="memory", sid=None, seq=None, item=item_id,
                                    reason=reason, actor=actor, now_ms=now_ms)
            tid = stone.tid
            revoked = replace(cur, version=cur.version + 1, state="revoked", content=None,
                              created_ms=now_ms, stored="erased", conflicts_with=(),
                              decision={"actor": actor, "reason": reason, "tombstone": tid})
            write_version(w, revoked, rows[-1].source_sid, None, last=rows[-1])
        for row in rows:   # every version that may hold content (the revoked one holds none)
            if row.state != "revoked" and any(row.frame[40:]):
                w.blank_memory(row.mid, blank(row.frame))
                blanked += 1
    notes: tuple[str, ...] = ()
    if damaged:
        # The index could not be read to delete the item's words from it: it
        # goes whole (its pages zeroed by secure_delete); searches read the
        # canonical rows until rebuild_memory_index().
        backend.memory_index(False)
        notes = ("the full-text index was damaged and has been dropped; "
                 "rebuild_memory_index() makes it again",)
    purge = backend.purge()
    return PurgeReport(f"memory:{item_id}", tid, already is not None,
                       memory_versions_blanked=blanked, index_rows_removed=removed,
                       caches_cleared=True, purged=purge.done, residues=purge.residues,
                       notes=notes)


__all__ = ["revoke_item"]
