"""What a deleted session looks like to the rest of the api: the error a
look-up by its id raises, and the report of a deletion
(:mod:`.deletion` does the deleting)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SessionNotFoundError, StoreError, TrajlogError, session_deleted
from ..event_types import DELETED
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


def deletion_defects(reader: Reader) -> tuple[str, ...]:
    """What is wrong with the deletion rows: each row hides its session from
    every listing, so each must be the record of a deletion that happened --
    its session's log ends, right after the row's ``last_seq``, with
    ``session/deleted`` (which a deletion writes in the row's transaction).
    A row without it (forged around the API, or a damaged log) is named
    here rather than hiding a live session silently."""
    try:
        rows = reader.deletions()
    except TrajlogError as exc:   # (verify reports, never raises)
        return (f"the deletion rows cannot be read ({type(exc).__name__}: {exc})",)
    out = []
    for row in rows:
        end = row.last_seq + 1
        try:
            last = reader.head(row.sid).last_seq
            ends = reader.index_rows(row.sid, row.last_seq, end)
        except TrajlogError as exc:
            out.append(f"session {row.id}: its deletion row's log cannot be read "
                       f"({type(exc).__name__}: {exc})")
            continue
        if last != end or not ends or ends[-1].type != DELETED:
            found = ends[-1].type if ends else "nothing"
            out.append(f"session {row.id}: a deletion row hides it, but its log holds "
                       f"{found} at seq {end} and ends at seq {last}, not with "
                       f"{DELETED} at seq {end}")
    return tuple(out)


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
