"""Opening an SQLite connection the way every trajlog connection is set up
(and every setting read back), probing a file without writing it, and
running the migrations (:mod:`.migrate`) on a connection of their own.  The
backend that uses them is :mod:`.sqlite`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from ..errors import InvalidArgumentError, SchemaError, StoreDamagedError, StoreError
from . import migrate as migrations
from .errors_map import translate
from .schema import MIN_SQLITE, authorizer


def sqlite_version() -> tuple[int, ...]:
    return tuple(int(x) for x in apsw.sqlite_lib_version().split("."))


def _pragma(conn: apsw.Connection, name: str, value: Any = None) -> Any:
    # One statement per execute, fully consumed: apsw runs later statements of
    # a multi-statement string only as the cursor is iterated.
    sql = f"PRAGMA {name}" if value is None else f"PRAGMA {name}={value}"
    rows = conn.execute(sql).fetchall()
    return rows[0][0] if rows else None


def open_connection(path: str, *, durability: str = "full", busy_timeout_ms: int = 10_000,
                    migrations: bool = False, reader: bool = False) -> apsw.Connection:
    """Open and configure one connection; every setting is read back.

    ``migrations=True`` gives the one connection allowed to change the schema
    (no authorizer); every other connection refuses schema changes.
    ``reader=True`` gives a read-only connection that refuses them without a
    Python authorizer (a callback per column at every compile, and FTS5
    compiles statements of its own at every ranked search): opened
    ``SQLITE_OPEN_READONLY`` (no SQL can make it write the database or its
    schema), ``query_only`` (no temporary table, view or trigger either) and
    no attached database (``SQLITE_LIMIT_ATTACHED`` = 0).
    """
    if type(busy_timeout_ms) is not int or not 0 <= busy_timeout_ms < 2**31:
        # it is formatted into a PRAGMA: nothing but an int may get there
        raise InvalidArgumentError(f"busy_timeout_ms must be an int of milliseconds, not "
                                   f"{busy_timeout_ms!r}")
    if durability not in ("full", "normal"):
        raise InvalidArgumentError(f"durability must be 'full' or 'normal', not {durability!r}")
    if sqlite_version() < MIN_SQLITE:
        raise SchemaError(f"SQLite {apsw.sqlite_lib_version()} is older than "
                          f"{'.'.join(map(str, MIN_SQLITE))}, which fixes a WAL-reset race")
    flags = (apsw.SQLITE_OPEN_READONLY if reader else
             apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE) | apsw.SQLITE_OPEN_URI
    try:
        conn = apsw.Connection(path, flags=flags)
    except apsw.Error as exc:
        raise StoreError(f"cannot open {path!r}: {exc}") from exc
    try:
        conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
        conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 1)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_FKEY, 1)
        # The query planner stability guarantee: a plan never depends on a
        # bound value.  Without it SQLite marks a statement to be compiled
        # anew at every rebind whenever a bound value might change its plan
        # (``col = ?`` with an ORDER BY, a bound LIMIT, LIKE, partial
        # indexes): every memory read was prepared again at every execute,
        # and each prepare runs the authorizer.  trajlog's statements name
        # their partial-index terms as literals and pin the index where it
        # matters, so no plan needs a bound value.
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
        memory = path == ":memory:" or "vfs=memdb" in path
        wanted: list[tuple[str, Any, Any]] = [
            # first: every later pragma may need a lock another process holds
            ("busy_timeout", busy_timeout_ms, busy_timeout_ms),
            ("journal_mode", "WAL", "memory" if memory else "wal"),
            ("synchronous", {"full": "FULL", "normal": "NORMAL"}[durability],
             {"full": 2, "normal": 1}[durability]),
            ("foreign_keys", "ON", 1),
            ("recursive_triggers", "ON", 1),
            # deleted and rewritten content is zeroed, so an erased payload
            # leaves no copy in free pages or slack space
            ("secure_delete", "ON", 1),
            ("trusted_schema", "OFF", 0),
            ("journal_size_limit", 64 * 1024 * 1024, 64 * 1024 * 1024),
        ]
        if reader:
            wanted.append(("query_only", "ON", 1))
            conn.limit(apsw.SQLITE_LIMIT_ATTACHED, 0)
        for name, value, expect in wanted:
            try:
                _pragma(conn, name, value)
                got = _pragma(conn, name)
            except apsw.NotADBError as exc:
                raise SchemaError(f"{path!r} is not an SQLite database (or it is damaged "
                                  f"beyond SQLite's own recovery): {exc}") from exc
            except apsw.CorruptError as exc:
                raise StoreDamagedError(f"{path!r} is damaged: {type(exc).__name__}: "
                                        f"{exc}") from exc
            except apsw.Error as exc:
                raise StoreError(f"cannot set up {path!r}: {type(exc).__name__}: {exc}") from exc
            if (got.lower() if isinstance(got, str) else got) != expect:
                raise SchemaError(f"PRAGMA {name} reads back {got!r}, expected {expect!r}")
        if conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, -1) != 1 or conn.config(
                apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, -1) != 1 or conn.config(
                apsw.SQLITE_DBCONFIG_ENABLE_QPSG, -1) != 1:
            raise SchemaError("defensive mode, triggers or the query planner stability "
                              "guarantee could not be enabled")
        if reader and conn.limit(apsw.SQLITE_LIMIT_ATTACHED, -1) != 0:
            raise SchemaError("a reader connection could not refuse ATTACH")
        if not (migrations or reader):
            conn.authorizer = authorizer
    except BaseException:
        conn.close()
        raise
    return conn


def probe(path: str) -> tuple[int, int, bool]:
    """``(user_version, application_id, has tables)`` of the SQLite database
    at ``path``, read without writing anything and without creating it (an
    empty file reads as ``(0, 0, False)``)."""
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI)
    except apsw.Error as exc:
        raise StoreError(f"cannot open {path!r}: {exc}") from exc
    try:
        with translate():
            try:
                version = int(_pragma(conn, "user_version"))
                app = int(_pragma(conn, "application_id"))
                tables = bool(conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()[0][0])
            except apsw.NotADBError as exc:
                raise SchemaError(f"{path!r} is not an SQLite database: {exc}") from exc
        return version, app, tables
    finally:
        conn.close()


def migrate(path: str, *, durability: str = "full", busy_timeout_ms: int = 10_000,
            progress: Callable[[int, int], None] | None = None) -> int:
    """Bring the schema up to :data:`SCHEMA_VERSION` (:mod:`.migrate`); return
    the version found.  Runs on its own connection, every step in one
    ``BEGIN IMMEDIATE`` transaction, so concurrent openers serialize and a crash
    leaves a store the next open resumes.  ``progress(sessions done, total)``
    is called as the sessions of a trajlog 0.1 store are rewritten."""
    conn = open_connection(path, durability=durability, busy_timeout_ms=busy_timeout_ms,
                           migrations=True)
    try:
        with translate():
            return migrations.migrate(conn, path, progress=progress)
    finally:
        conn.close()


__all__ = ["migrate", "open_connection", "probe", "sqlite_version"]
