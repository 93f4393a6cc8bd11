"""The statements of saved projection states: derived, one per (session,
projection), dropped or rebuilt from the log whenever they cannot be used."""

from __future__ import annotations

from typing import Any

import apsw

from .statements import i64, u64


def projection_state(conn: apsw.Connection, sid: int, name: str,
                     version: int) -> tuple[int, int, bytes] | None:
    """(seq, chain u64, state) of the saved projection state, if any."""
    try:
        rows: list[Any] = conn.execute(
            "SELECT seq, chain, state FROM projection_states WHERE sid = ? AND name = ? "
            "AND version = ?", (sid, name, version)).fetchall()
    except UnicodeDecodeError:
        return None  # (a derived state: a damaged one is rebuilt from the log)
    if not rows or type(rows[0][0]) is not int or type(rows[0][1]) is not int or type(
            rows[0][2]) is not bytes:
        return None  # (a derived state: a damaged one is rebuilt from the log)
    return int(rows[0][0]), u64(rows[0][1]), bytes(rows[0][2])


def save_projection_state(conn: apsw.Connection, sid: int, name: str, version: int, seq: int,
                          chain: int, state: bytes) -> None:
    """Keep one state per (session, projection): other versions are dropped."""
    conn.execute("DELETE FROM projection_states WHERE sid = ? AND name = ?", (sid, name))
    conn.execute("INSERT INTO projection_states VALUES (?,?,?,?,?,?)",
                 (sid, name, version, seq, i64(chain), state))


def drop_projection_states(conn: apsw.Connection, sid: int) -> int:
    conn.execute("DELETE FROM projection_states WHERE sid = ?", (sid,))
    return int(conn.changes())


__all__ = ["drop_projection_states", "projection_state", "save_projection_state"]
