"""Damage a store the way a careless tool could: through a connection with
trajlog's append-only triggers switched off.  Shared by the tests that check
that verification and recovery notice."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import apsw

from trajlog.storage import sqlite as storage


def foreign(store) -> apsw.Connection:
    """A connection that bypasses trajlog's protections (the caller closes it)."""
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    return conn


def flip_frame_bits(store, sid: int, seq: int, offset: int, mask: int) -> None:
    """XOR byte ``offset`` of the stored frame of event ``seq`` of session ``sid``."""
    conn = foreign(store)
    try:
        rid = storage.rid(sid, seq)
        frame = bytearray(conn.execute("SELECT frame FROM events WHERE rid = ?",
                                       (rid,)).fetchall()[0][0])
        frame[offset] ^= mask
        conn.execute("UPDATE events SET frame = ? WHERE rid = ?", (bytes(frame), rid))
    finally:
        conn.close()


# Beneath the API: the connections and caches of a store, for tests that look
# at (or damage) what trajlog stored.

def raw(store) -> apsw.Connection:
    """The calling thread's reader connection of ``store``."""
    return store._e.backend.connection()


def write_conn(store) -> apsw.Connection:
    """``store``'s write connection (outside any transaction)."""
    return store._e.backend.write_connection


@contextlib.contextmanager
def write_txn(store) -> Iterator[apsw.Connection]:
    """A write transaction of ``store`` (its cached log states kept honest)."""
    with store._e.writer.transaction() as tx:
        yield tx.conn


def views(store) -> dict:
    """``store``'s in-memory projection states, keyed by (sid, name)."""
    return store._e.views.states
