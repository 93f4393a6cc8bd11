"""The deleted-session rows of the SQLite backend (schema 8): their DDL,
statements and the Reader/Writer methods mixed into
:class:`~trajlog.storage.sqlite.SQLiteReader` and
:class:`~trajlog.storage.sqlite.SQLiteWriter`."""

from __future__ import annotations

from typing import Any

import apsw

from .base import DeletionRow, refuse_deleted_id
from .errors_map import translate

# Schema 8 (migrate.py runs it after 7): one append-only row per deleted
# session -- who, when, why, where its log ended.  What the triggers stop: a
# deletion row that does not name its session's header, any UPDATE or DELETE
# of one, a fork or subagent made under a deleted session (from a handle
# held since: a fork reads no more of its parent than the turn it cuts at; a
# session with no parent skips the look-up).  No trigger on chunks (every
# append): a deleted log ends with session/deleted, which the write path
# refuses to follow as it refuses session/closed; and the header stays, so a
# new session with its id fails the UNIQUE id (mapped to the deletion then).
V8_DELETED = """
    CREATE TABLE deleted_sessions(
        sid        INTEGER PRIMARY KEY REFERENCES sessions(sid),
        id         TEXT    NOT NULL UNIQUE,
        reason     TEXT    NOT NULL CHECK (length(reason) > 0),
        actor      TEXT,
        deleted_ms INTEGER NOT NULL,
        last_seq   INTEGER NOT NULL CHECK (last_seq >= -1)
    ) STRICT;
    CREATE TRIGGER deleted_sessions_names_header BEFORE INSERT ON deleted_sessions
    WHEN NOT EXISTS (SELECT 1 FROM sessions WHERE sid = NEW.sid AND id = NEW.id)
    BEGIN SELECT RAISE(ABORT, 'trajlog: a deletion names its session'); END;
    CREATE TRIGGER deleted_sessions_no_update BEFORE UPDATE ON deleted_sessions
    BEGIN SELECT RAISE(ABORT, 'trajlog: deletions are append-only'); END;
    CREATE TRIGGER deleted_sessions_no_delete BEFORE DELETE ON deleted_sessions
    BEGIN SELECT RAISE(ABORT, 'trajlog: deletions are append-only'); END;
    CREATE TRIGGER sessions_not_under_deleted BEFORE INSERT ON sessions
    WHEN NEW.parent_sid IS NOT NULL
     AND EXISTS (SELECT 1 FROM deleted_sessions WHERE sid = NEW.parent_sid)
    BEGIN SELECT RAISE(ABORT, 'trajlog: the session was deleted'); END;
"""

COLUMNS = "sid, id, reason, actor, deleted_ms, last_seq"
# what session_by_id adds so that a deleted session is no longer found by its id
NOT_DELETED = ("AND NOT EXISTS (SELECT 1 FROM deleted_sessions d "
               "WHERE d.sid = sessions.sid)")


def _row(r: Any) -> DeletionRow:
    return DeletionRow(int(r[0]), str(r[1]), str(r[2]), r[3], int(r[4]), int(r[5]))


class DeletedReads:
    conn: apsw.Connection

    def deletion(self, session_id: str) -> DeletionRow | None:
        with translate():
            rows = self.conn.execute(f"SELECT {COLUMNS} FROM deleted_sessions WHERE id = ?",
                                     (session_id,)).fetchall()
        return _row(rows[0]) if rows else None

    def deletions(self) -> list[DeletionRow]:
        with translate():
            return [_row(r) for r in self.conn.execute(
                f"SELECT {COLUMNS} FROM deleted_sessions ORDER BY sid")]


class DeletedWrites:
    conn: apsw.Connection

    def insert_deletion(self, row: DeletionRow) -> None:
        with translate():
            self.conn.execute(f"INSERT INTO deleted_sessions({COLUMNS}) VALUES (?,?,?,?,?,?)",
                              tuple(row))


__all__ = ["NOT_DELETED", "V8_DELETED", "DeletedReads", "DeletedWrites", "refuse_deleted_id"]
