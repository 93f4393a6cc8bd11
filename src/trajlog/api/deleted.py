"""What a deleted session looks like to the rest of the api: the error a
look-up by its id raises, and the report of a deletion
(:mod:`.deletion` does the deleting)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SessionNotFoundError, StoreError, session_deleted
from ..memory.model import PurgeReport
from ..storage import Reader


def missing(reader: Reader, session_id: str, where: str) -> StoreError:
    """The error for an id ``session_by_id`` did not find: deleted (who,
    when, why) or never there.  Looked up on a miss only, so a found id
    costs nothing more."""
    gone = reader.deletion(session_id)
    if gone is None:
        return SessionNotFoundError(f"no session {session_id!r} in {where}")
    return session_deleted(gone.id, gone.reason, gone.actor, gone.deleted_ms)


@dataclass(frozen=True, slots=True)
class DeleteReport:
    """What :meth:`trajlog.Store.delete_session` did.

    ``deleted_ms``, ``actor`` and ``reason`` are the deletion record's (the
    first deletion's when ``already``); ``events_erased`` the payloads this
    call erased, each under its own tombstone; ``purge`` the erasure's purge
    report (None when there was nothing left to erase)."""

    session: str
    reason: str
    actor: str | None
    deleted_ms: int
    last_seq: int
    events_erased: int
    already: bool
    purge: PurgeReport | None


__all__ = ["DeleteReport", "missing"]
