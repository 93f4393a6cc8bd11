"""The deleted-session rows of the SQLite backend (schema 8): their
statements and the Reader/Writer methods mixed into
:class:`~trajlog.storage.sqlite.SQLiteReader` and
:class:`~trajlog.storage.sqlite.SQLiteWriter`."""

from __future__ import annotations

from typing import Any

import apsw

from .base import DeletionRow
from .errors_map import translate

COLUMNS = "sid, id, reason, actor, deleted_ms, last_seq"
# what session_by_id adds so that a deleted session is no longer found by its id
NOT_DELETED = "AND sid NOT IN (SELECT sid FROM deleted_sessions)"


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


__all__ = ["NOT_DELETED", "DeletedReads", "DeletedWrites"]
