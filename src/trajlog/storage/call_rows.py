"""The statements of the call index: which seq of a session's own log
requests each tool call id (one row per requested call, written with the
chunk row that holds the request; a call id is requested once per log)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw
import msgspec

from .statements import _damaged

CALL_INSERT = "INSERT INTO call_index(sid, call_id, seq) VALUES (?, ?, ?)"


def insert_calls(conn: apsw.Connection, sid: int, rows: Sequence[tuple[str, int]]) -> None:
    if len(rows) == 1:   # (a single append's one call: no executemany set-up)
        conn.execute(CALL_INSERT, (sid, *rows[0]))
        return
    conn.executemany(CALL_INSERT, [(sid, call_id, seq) for call_id, seq in rows])


def call_requested(conn: apsw.Connection, sid: int, call_id: str) -> int | None:
    """The seq where the session's own log requests ``call_id`` (None: it does not)."""
    rows: list[Any] = conn.execute("SELECT seq FROM call_index WHERE sid = ? AND call_id = ?",
                                   (sid, call_id)).fetchall()
    if not rows:
        return None
    if type(rows[0][0]) is not int:
        raise _damaged(conn, "call_index", sid, "its seq is not an integer")
    return int(rows[0][0])


_JSON = msgspec.json.Encoder()


def calls_requested(conn: apsw.Connection, sid: int, call_ids: Sequence[str]) -> dict[str, int]:
    """The seq where the session's own log requests each of ``call_ids`` that
    it requests, in one statement (the ids passed as one JSON array)."""
    if not call_ids:
        return {}
    out: dict[str, int] = {}
    for call_id, seq in conn.execute(
            "SELECT call_id, seq FROM call_index WHERE sid = ? AND call_id IN "
            "(SELECT value FROM json_each(?))", (sid, _JSON.encode(list(call_ids)))):
        if type(call_id) is not str or type(seq) is not int:
            raise _damaged(conn, "call_index", sid, "a call row holds a value of the wrong type")
        out[call_id] = seq
    return out


def call_count(conn: apsw.Connection, sid: int) -> int:
    """How many call rows the session has."""
    rows: list[Any] = conn.execute("SELECT count(*) FROM call_index WHERE sid = ?",
                                   (sid,)).fetchall()
    return int(rows[0][0])


__all__ = ["CALL_INSERT", "call_count", "call_requested", "calls_requested", "insert_calls"]
