"""Which backend a store's location names, and the operations that need one
before a store is open: open it, migrate it, read its schema version.

A location is a file path (SQLite, the embedded default; ``":memory:"`` for a
private in-memory store) or a server URL: ``postgresql://`` or
``postgres://``, a libpq connection URL (several hosts allowed), for the
PostgreSQL backend.  :func:`trajlog.open`, :func:`trajlog.api.migrate`,
:func:`trajlog.api.schema_of`, the CLI's ``--db`` and the store's statistics all go
through here, so that no module above ``storage/`` asks whether a store is a
file.  The PostgreSQL backend's module (and psycopg) is imported only when a
URL names it.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple

from ..errors import BackendUnavailableError, InvalidArgumentError
from .base import Backend

SERVER_SCHEMES = ("postgresql://", "postgres://")

# user:password@ in a URL's authority (the password is what must never print)
_PASSWORD = re.compile(r"^(?P<scheme>[a-z]+://)(?P<user>[^:@/]*):[^@/]*@", re.IGNORECASE)
_PARAM_PASSWORD = re.compile(r"([?&]password=)[^&]*", re.IGNORECASE)


class Kind(NamedTuple):
    """What a location names: ``"sqlite"`` or ``"postgresql"``, and the
    schema version this trajlog writes there."""

    name: str
    schema_version: int


def is_server(location: str) -> bool:
    """True when ``location`` is a server URL rather than a file path."""
    return location.lower().startswith(SERVER_SCHEMES)


def redact(location: str) -> str:
    """``location`` safe to print: a URL's password (in its authority or as a
    ``password=`` parameter) replaced by ``***``; a path as it is."""
    if not is_server(location):
        return location
    shown = _PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", location)
    return _PARAM_PASSWORD.sub(r"\1***", shown)


def _postgres() -> ModuleType:
    try:
        return importlib.import_module(".postgres", __package__)
    except ImportError as exc:   # psycopg is the optional extra trajlog[postgres]
        raise BackendUnavailableError(
            f"the PostgreSQL backend needs psycopg 3 and psycopg-pool "
            f"(pip install 'trajlog[postgres]'): {exc}") from exc


def kind(location: str) -> Kind:
    """The backend ``location`` names, with the schema version this trajlog
    writes there."""
    if is_server(location):
        return Kind("postgresql", int(_postgres().SCHEMA_VERSION))
    from .schema import SCHEMA_VERSION
    return Kind("sqlite", SCHEMA_VERSION)


def open_backend(location: str, *, durability: str, lock_timeout_ms: int,
                 tenant: str | None) -> Backend:
    """The backend of the store at ``location``, opened (created if missing,
    where the connecting role or the file system allows)."""
    if is_server(location):
        backend: Backend = _postgres().PostgresBackend(
            location, durability=durability, lock_timeout_ms=lock_timeout_ms,
            tenant=tenant or "")
        return backend
    if tenant is not None:
        raise InvalidArgumentError(
            "tenant= binds a store to one tenant of a shared server database "
            "(postgresql://...); an SQLite store is one file: give each tenant its own")
    from .sqlite import SQLiteBackend
    return SQLiteBackend(os.fspath(location), durability=durability,
                         busy_timeout_ms=lock_timeout_ms)


def migrate_store(location: str, *,
                  progress: Callable[[int, int], None] | None = None) -> int:
    """Bring the store at ``location`` to this trajlog's schema; the version
    it had.  A store that does not exist is an error, not created."""
    if is_server(location):
        return int(_postgres().migrate(location, progress=progress))
    if not os.path.exists(location):
        raise InvalidArgumentError(f"no store at {location!r}")
    from .sqlite import migrate
    return int(migrate(os.fspath(location), progress=progress))


def schema_version_of(location: str) -> int | None:
    """The schema version of the store at ``location``, read without writing;
    None for a database that holds no trajlog store (an empty file, another
    program's database, a server schema trajlog never made).  A file that does
    not exist is an error."""
    if is_server(location):
        found: int | None = _postgres().probe(location)
        return found
    if not os.path.isfile(location):
        raise InvalidArgumentError(f"no store at {location!r}")
    from .schema import APPLICATION_ID
    from .sqlite import probe
    version, app, tables = probe(os.fspath(location))
    if app != APPLICATION_ID or (version == 0 and not tables):
        return None
    return int(version)


def exists(location: str) -> bool:
    """Whether a store may be there to read (a file that exists; a server is
    asked by :func:`schema_version_of`)."""
    return is_server(location) or os.path.exists(location)


__all__ = ["SERVER_SCHEMES", "Kind", "exists", "is_server", "kind", "migrate_store",
           "open_backend", "redact", "schema_version_of"]
