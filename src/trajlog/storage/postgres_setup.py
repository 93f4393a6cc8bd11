"""A PostgreSQL store's schema version, read before a store opens: what
:func:`trajlog.api.schema_of` and ``trajlog migrate`` ask of a server URL."""

from __future__ import annotations

from typing import Any

import psycopg

from .locations import redact
from .postgres_errors import PgErrors
from .postgres_schema import ident


def schema_version(conn: psycopg.Connection[Any], schema: str) -> int | None:
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


def probe(url: str, schema: str = "trajlog") -> int | None:
    """The trajlog schema version in ``schema`` at ``url`` (None: no trajlog
    store there), read without writing."""
    with PgErrors(redact(url), None), psycopg.connect(url, autocommit=True) as conn:
        return schema_version(conn, schema)


__all__ = ["probe", "schema_version"]
