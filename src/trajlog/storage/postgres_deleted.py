"""The deleted-session rows of the PostgreSQL backend: their DDL (a block of
:func:`~trajlog.storage.postgres_schema.ddl`, with the app role's grant),
statements, and the Reader/Writer methods mixed into
:class:`~trajlog.storage.postgres_reader.PgReader` and
:class:`~trajlog.storage.postgres.PgWriter` -- the counterpart of
:mod:`.sqlite_deleted` and schema.py's ``V8_DELETED``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from .base import DeletionRow

_R = TypeVar("_R")
Conn = psycopg.Connection[Any]
T = "tenant_id = current_setting('trajlog.tenant')"
COLUMNS = "sid, id, reason, actor, deleted_ms, last_seq"
# what session_by_id adds so that a deleted session is no longer found by its id
NOT_DELETED = (f"AND NOT EXISTS (SELECT 1 FROM deleted_sessions d WHERE d.{T} "
               "AND d.sid = sessions.sid)")
_REFUSE = "RAISE EXCEPTION USING ERRCODE = 'TL001', MESSAGE = "

# One append-only row per deleted session; the guards refuse a deletion row
# that does not name its session's header, any change of one, and a fork or
# subagent made under a deleted session (a session with no parent skips the
# guard).  No trigger on chunks (every append): the write path refuses to
# follow a log's session/deleted; the header stays (its id is taken).
DDL = f"""
CREATE TABLE deleted_sessions(
    tenant_id  text   NOT NULL DEFAULT current_setting('trajlog.tenant'),
    sid        bigint NOT NULL,
    id         text   NOT NULL,
    reason     text   NOT NULL CHECK (length(reason) > 0),
    actor      text,
    deleted_ms bigint NOT NULL,
    last_seq   bigint NOT NULL CHECK (last_seq >= -1),
    PRIMARY KEY (tenant_id, sid),
    UNIQUE (tenant_id, id),
    FOREIGN KEY (tenant_id, sid) REFERENCES sessions(tenant_id, sid)
);

CREATE FUNCTION deleted_sessions_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE tenant_id = NEW.tenant_id AND sid = NEW.sid
                                             AND id = NEW.id) THEN
        {_REFUSE} 'trajlog: a deletion names its session';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION sessions_not_under_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM deleted_sessions
                WHERE tenant_id = NEW.tenant_id AND sid = NEW.parent_sid) THEN
        {_REFUSE} 'trajlog: the session was deleted';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER deleted_sessions_insert BEFORE INSERT ON deleted_sessions
    FOR EACH ROW EXECUTE FUNCTION deleted_sessions_insert();
CREATE TRIGGER deleted_sessions_fixed BEFORE UPDATE OR DELETE ON deleted_sessions
    FOR EACH ROW EXECUTE FUNCTION refuse('deletions are append-only');
CREATE TRIGGER deleted_sessions_no_truncate BEFORE TRUNCATE ON deleted_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION refuse('deleted_sessions is append-only');

CREATE TRIGGER sessions_not_under_deleted BEFORE INSERT ON sessions
    FOR EACH ROW WHEN (NEW.parent_sid IS NOT NULL)
    EXECUTE FUNCTION sessions_not_under_deleted();

ALTER TABLE deleted_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE deleted_sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON deleted_sessions
    USING (tenant_id = current_setting('trajlog.tenant', true))
    WITH CHECK (tenant_id = current_setting('trajlog.tenant', true));
"""

GRANTS = "GRANT INSERT ON deleted_sessions TO {role};\n"


def _row(r: Any) -> DeletionRow:
    return DeletionRow(int(r[0]), str(r[1]), str(r[2]), r[3], int(r[4]), int(r[5]))


def _deletion(conn: Conn, session_id: str) -> DeletionRow | None:
    rows = conn.execute(f"SELECT {COLUMNS} FROM deleted_sessions WHERE {T} AND id = %s",
                        (session_id,)).fetchall()
    return _row(rows[0]) if rows else None


def _deletions(conn: Conn) -> list[DeletionRow]:
    return [_row(r) for r in conn.execute(
        f"SELECT {COLUMNS} FROM deleted_sessions WHERE {T} ORDER BY sid").fetchall()]


def _insert(conn: Conn, row: DeletionRow) -> None:
    conn.execute(f"INSERT INTO deleted_sessions({COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s)",
                 tuple(row))


class PgDeletedReads:
    """The deletion reads of a PostgreSQL Reader (``_run(f, *args)`` runs
    ``f(conn, *args)`` in the reader's unit of work)."""

    def _run(self, fn: Callable[..., _R], *args: Any) -> _R:
        raise NotImplementedError

    def deletion(self, session_id: str) -> DeletionRow | None:
        return self._run(_deletion, session_id)

    def deletions(self) -> list[DeletionRow]:
        return self._run(_deletions)


class PgDeletedWrites:
    """The deletion write of a PostgreSQL Writer."""

    def _run(self, fn: Callable[..., _R], *args: Any) -> _R:
        raise NotImplementedError

    def insert_deletion(self, row: DeletionRow) -> None:
        self._run(_insert, row)


__all__ = ["DDL", "GRANTS", "NOT_DELETED", "PgDeletedReads", "PgDeletedWrites"]
