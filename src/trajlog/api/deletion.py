"""Deleting a session (docs/deleting.md).

A deletion is two steps, each a transaction:

1. the record: a last event, ``session/deleted`` (who, when, why), and one
   append-only deletion row (the same, and where the log ended before it),
   in one transaction.  From its commit on the
   session is gone from every listing and look-up by id (a look-up raises
   :class:`~trajlog.errors.SessionDeletedError` saying who deleted it and
   when), and no append, import, fork or adapter write brings it back: the
   write path refuses anything after ``session/deleted`` as after
   ``session/closed`` (a handle from before follows the log to it), and the
   header stays, so its id is taken (a new session with it fails the UNIQUE
   id, mapped to the deletion on that failure only);
2. the purge: every payload of the session's own log erased under its own
   tombstone, exactly as :meth:`trajlog.Store.erase` does (the same
   machinery: tombstones, blanked rows, dropped projection states, the
   process's caches, :meth:`~trajlog.storage.Backend.purge` -- free pages,
   WAL, dead row versions, and whatever else a backend hooks there).

Step 3 repacks its blanked rows into a few (the zeros compress to nothing):
the pages they held return to the database.  Its header, its head and its
blanked frames stay: the log remains append-only
and its chain still verifies against the stored payload checks, which with
the tombstones prove what was erased.  A crash between the steps leaves the
session deleted with payloads not yet erased: deleting it again finishes the
purge (a deletion is idempotent; the first record stands).

Children: refused while another live session depends on it -- a fork (whose
inherited prefix is this log) or a subagent it spawned
(:class:`~trajlog.errors.DependentSessionsError` names them); delete them
first.  An inherited prefix belongs to the parent and is not erased with a
fork.
"""

from __future__ import annotations

import time

from ..errors import DependentSessionsError, ErasureError, InvalidArgumentError
from ..event_types import DELETED
from ..storage import Request
from ..storage.base import DeletionRow, Reader, Writer
from .deleted import DeleteReport
from .forget import Forgetting
from .handles import LogRef
from .session import Engines


def _live_children(reader: Reader, ref: LogRef) -> list[str]:
    return [c.id for c in reader.children(ref.sid) if reader.deletion(c.id) is None]


def _record(e: Engines, ref: LogRef, reason: str, actor: str | None, now: int) -> DeletionRow:
    """Step 1 in one transaction: the ``session/deleted`` event (the log's
    last: a reader that follows the log sees the end) and the deletion row."""
    writer = e.writer
    rows = writer.prepare_items(ref.header, [(DELETED, {"reason": reason, "actor": actor,
                                                        "deleted_ms": now})])

    def apply(tx: Writer) -> DeletionRow:
        live = _live_children(tx, ref)   # (a fork made since the check)
        if live:
            raise DependentSessionsError(ref.id, live)
        state = writer.state(tx, ref)
        state.lease = writer.leases.check(tx, ref.sid, ref.id, state.lease)
        last = state.synced_seq
        writer.apply(tx, ref, rows)
        record = DeletionRow(ref.sid, ref.id, reason, actor, now, last)
        tx.insert_deletion(record)
        return record

    try:
        done: DeletionRow = writer.commit.submit(Request(apply, None, (ref.sid,)))
    finally:
        writer.forget(ref.sid)   # (its cached head: moved, or rolled back)
    return done


def delete_session(e: Engines, forget: Forgetting, session_id: str, *, reason: str,
                   actor: str | None, now_ms: int | None = None) -> DeleteReport:
    """Record the deletion of ``session_id`` and erase its log's payloads
    (see the module's docstring); idempotent."""
    if not isinstance(session_id, str):
        raise TypeError(f"session id must be str, not {type(session_id).__name__}")
    if not isinstance(reason, str) or not reason.strip():
        raise ErasureError("a deletion says why (reason=...)")
    if actor is not None and not isinstance(actor, str):
        raise InvalidArgumentError(f"actor must be str or None, not {type(actor).__name__}")
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    record = e.backend.reader().deletion(session_id)
    already = record is not None
    if record is None:
        ref = e.reading.ref_by_id(session_id)   # (SessionNotFoundError if none)
        live = _live_children(e.backend.reader(), ref)
        if live:
            raise DependentSessionsError(session_id, live)
        record = _record(e, ref, reason, actor, now)
    else:
        ref = e.reading.ref_by_sid(record.sid)   # (the header stays; its id finds nothing)
    purge = None
    if record.last_seq >= ref.seed:
        gone = set(e.backend.reader().erased_seqs(ref.sid, ref.seed, record.last_seq))
        todo = [s for s in range(ref.seed, record.last_seq + 1) if s not in gone]
        if todo:
            purge = forget.erase_ref(ref, todo, actor=actor, now_ms=now,
                                     reason=f"session deleted: {record.reason}")
    # the blanked rows merged into a few (their zeros compress to nothing): the
    # B-tree pages they held go back to the database (SQLite's free list)
    e.repacker.repack(ref)
    forget.after_purge()
    return DeleteReport(record.id, record.reason, record.actor, record.deleted_ms,
                        record.last_seq, 0 if purge is None else purge.frames_blanked,
                        already, purge)


__all__ = ["delete_session"]
