"""psycopg exceptions as trajlog's typed errors (the PostgreSQL counterpart of
:mod:`.errors_map`): one place, for every PostgreSQL storage module.

SQLSTATE decides: a deadlock (40P01) or serialization failure (40001) is a
:class:`TransactionConflictError` (group commit runs the transaction again);
a lock wait past ``lock_timeout`` (55P03) is a :class:`StoreBusyError`; a
trigger's refusal (``TL001``, see :mod:`.postgres_schema`), a constraint or a
missing privilege is a :class:`StoreError` saying so, as the SQLite backend
raises for the same refusal; a missing schema or table is a
:class:`SchemaError`; a lost connection is a :class:`StoreError` naming the
store by its redacted location.  No message carries a password.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ..errors import (
    SchemaError,
    SessionDeletedError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    TransactionConflictError,
)

_CONFLICT = {"40P01", "40001"}
_BUSY = {"55P03", "57014"}   # lock_not_available; a cancelled (timed out) statement
_SCHEMA = {"3F000", "42P01", "42883"}   # no schema, no table, no function


class PgErrors:
    """Context manager: psycopg exceptions become trajlog StoreErrors (cause
    kept), ``location`` naming the store and ``secret`` (a password) never
    shown."""

    __slots__ = ("location", "secret")

    def __init__(self, location: str, secret: str | None) -> None:
        self.location = location
        self.secret = secret

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None or not isinstance(exc, psycopg.Error):
            return
        raise self.convert(exc) from exc

    def text(self, exc: BaseException) -> str:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if self.secret:
            message = message.replace(self.secret, "***")
        return message

    def convert(self, exc: psycopg.Error) -> StoreError:
        """The trajlog error for ``exc``."""
        state = exc.sqlstate or ""
        message = self.text(exc)
        if state in _CONFLICT:
            return TransactionConflictError(f"{self.location}: the transaction was ended by "
                                            f"the database ({state}: {message}); nothing of "
                                            "it was written")
        if state in _BUSY:
            return StoreBusyError(f"{self.location}: a lock stayed held past the lock timeout "
                                  f"({state}: {message})")
        if state == "TL001" and "trajlog: the session was deleted" in message:
            return SessionDeletedError("the session was deleted: the store refuses to write "
                                       "to it, fork it or make a session with its id")
        if state == "TL001" or state.startswith("23"):
            return StoreError(f"refused by the database: {message}")
        if state == "42501":
            return StoreError(f"{self.location}: permission denied: {message}")
        if state in _SCHEMA:
            return SchemaError(f"{self.location}: not a trajlog store this version can open "
                               f"({message})")
        if isinstance(exc, psycopg.InterfaceError) and "closed" in message:
            return StoreClosedError(f"{self.location}: the connection is closed")
        if isinstance(exc, psycopg.OperationalError) and (not state or state[:2] in
                                                           ("08", "57")):
            return StoreError(f"{self.location}: the connection to the database failed "
                              f"({message})")
        return StoreError(f"{self.location}: {type(exc).__name__}: {message}")


__all__ = ["PgErrors"]
