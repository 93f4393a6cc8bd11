"""Opening a PostgreSQL store's schema: its version checked, the schema made
when missing (as the connecting role, which then owns it), ``migrate`` and
``probe`` for the backend factory (:mod:`.factory`), and the printable,
password-free location.

Concurrent openers of a missing schema wait on one transaction-level
advisory lock; the later ones find it made.  A role that may not create the
schema gets a :class:`SchemaError` saying to run ``trajlog migrate`` as the
owner.  A schema at another version than this trajlog's is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import pq

from ..errors import SchemaError
from .factory import redact as redact_url
from .postgres_errors import PgErrors
from .postgres_schema import APP_ROLE, PG_SCHEMA_VERSION, ddl, grants, ident

Conn = psycopg.Connection[Any]
SCHEMA_VERSION = PG_SCHEMA_VERSION
DEFAULT_SCHEMA = "trajlog"


def redact(url: str) -> str:
    """``url`` (a libpq URL, or a key=value string) safe to print: its
    password shown as ``***``."""
    return re.sub(r"(?i)\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)", "password=***",
                  redact_url(url))


_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*([^\s,]+)")


def schema_in(url: str) -> str:
    """The schema a URL names (``options=-csearch_path=<schema>``, its first
    entry), else :data:`DEFAULT_SCHEMA`."""
    try:
        options = psycopg.conninfo.conninfo_to_dict(url).get("options") or ""
    except psycopg.Error:
        return DEFAULT_SCHEMA
    found = _SEARCH_PATH.search(str(options))
    return found.group(1).strip('"') if found else DEFAULT_SCHEMA


def with_schema(url: str, schema: str) -> str:
    """``url`` naming ``schema`` (as its ``options``), unless it already
    names it or it is the default."""
    if schema_in(url) == schema or (schema == DEFAULT_SCHEMA and "options" not in url):
        return url
    if "://" not in url:   # (a key=value string)
        return f"{url} options='-csearch_path={schema}'"
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{quote(schema)}"


def errors_for(url: str) -> PgErrors:
    """The error mapping of a store at ``url`` (its password never shown)."""
    try:
        secret = psycopg.conninfo.conninfo_to_dict(url).get("password")
    except psycopg.Error:
        secret = None
    return PgErrors(redact(url), str(secret) if secret else None)


def version(conn: Conn, schema: str) -> int | None:
    """The schema's version row (None: no schema, or no version table)."""
    # (a scan of the catalog, not to_regclass: its cache may still miss a
    # schema another opener has just made)
    found = conn.execute("SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = "
                         "c.relnamespace WHERE n.nspname = %s AND c.relname = 'meta'",
                         (schema,)).fetchone()
    if not found:
        return None
    row = conn.execute(f"SELECT version FROM {ident(schema)}.meta WHERE one = 1").fetchone()
    return None if row is None else int(row[0])


def create(conn: Conn, schema: str, errors: PgErrors) -> bool:
    """Make ``schema`` as the connecting role, with the app role's grants
    when that role exists; False when another opener made it meanwhile."""
    conn.execute("BEGIN", prepare=False)
    try:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"trajlog schema {schema}",))
        made = version(conn, schema) is None
        if made:
            try:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {ident(schema)}")
                conn.execute(f"SET LOCAL search_path = {ident(schema)}, pg_temp")
                conn.execute(ddl())
            except psycopg.errors.InsufficientPrivilege as exc:
                raise SchemaError(
                    f"{errors.location}: schema {schema!r} does not exist (or is not complete) "
                    f"and this role may not create it ({errors.text(exc)}); run `trajlog "
                    "migrate` as the schema's owner") from None
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchall():
                conn.execute(grants(schema))
        conn.execute("COMMIT", prepare=False)
        return made
    except BaseException:
        if conn.info.transaction_status != pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK", prepare=False)
        raise


def _refuse(errors: PgErrors, schema: str, found: int | None) -> SchemaError:
    return SchemaError(f"{errors.location}: schema {schema!r} is at trajlog PostgreSQL schema "
                       f"version {found}; this trajlog reads {PG_SCHEMA_VERSION}")


def open_schema(url: str, schema: str, errors: PgErrors) -> None:
    """Check ``schema``'s version at ``url``; make it when it is missing."""
    with errors:
        conn = psycopg.connect(url, autocommit=True)
    try:
        with errors:
            found = version(conn, schema)
            if found is None:
                create(conn, schema, errors)
                found = version(conn, schema)
        if found != PG_SCHEMA_VERSION:
            raise _refuse(errors, schema, found)
    finally:
        conn.close()


def migrate(url: str, progress: Callable[[int, int], None] | None = None,
            schema: str | None = None) -> int:
    """Bring the store at ``url`` to this trajlog's schema, as the owner
    (``trajlog migrate``): made when missing.  The version it had (0: none)."""
    schema = schema or schema_in(url)
    errors = errors_for(url)
    with errors:
        conn = psycopg.connect(url, autocommit=True)
    try:
        with errors:
            found = version(conn, schema)
            if found is None:
                create(conn, schema, errors)
                if progress is not None:
                    progress(1, 1)
                return 0
        if found != PG_SCHEMA_VERSION:   # (one version so far: nothing to migrate from)
            raise _refuse(errors, schema, found)
        return found
    finally:
        conn.close()


def probe(url: str, schema: str | None = None) -> int | None:
    """The schema version of the store at ``url``, read without writing (None:
    no trajlog schema there)."""
    schema = schema or schema_in(url)
    errors = errors_for(url)
    with errors, psycopg.connect(url, autocommit=True) as conn:
        return version(conn, schema)


__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "create", "errors_for", "migrate", "open_schema",
           "probe", "redact", "schema_in", "version", "with_schema"]
