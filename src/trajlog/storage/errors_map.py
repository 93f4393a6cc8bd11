"""apsw exceptions as trajlog's typed errors (one place, for every storage module)."""

from __future__ import annotations

from typing import Any

import apsw

from ..errors import (
    HeadMovedError,
    SessionDeletedError,
    StoreBusyError,
    StoreClosedError,
    StoreDamagedError,
    StoreError,
)

# the guard trigger's refusal of a chunk that is not its head's next (schema.py)
_NOT_NEXT = "a chunk starts at its head's next seq"
# the guard triggers' refusal to write under a deleted session (schema.py V8_DELETED)
DELETED = "trajlog: the session was deleted"


class translate:
    """Context manager: apsw exceptions become trajlog StoreErrors (cause kept)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None or not isinstance(exc, apsw.Error):
            return
        if isinstance(exc, apsw.BusyError):
            raise StoreBusyError(f"database is locked: {exc}") from exc
        if isinstance(exc, (apsw.ConnectionClosedError, apsw.CursorClosedError)):
            raise StoreClosedError("the store is closed") from exc
        if isinstance(exc, apsw.ConstraintError) and _NOT_NEXT in str(exc):
            raise HeadMovedError(f"another writer moved the session's head: {exc}") from exc
        if isinstance(exc, apsw.ConstraintError) and DELETED in str(exc):
            raise SessionDeletedError("the session was deleted: the store refuses to write "
                                      "to it, fork it or make a session with its id") from exc
        if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
            raise StoreDamagedError(f"{type(exc).__name__}: {exc}") from exc
        raise StoreError(f"{type(exc).__name__}: {exc}") from exc


__all__ = ["DELETED", "translate"]
