"""Writer liveness on PostgreSQL: a lock held by the writer's connection.

On one machine, a dead pid tells a dead writer.  Writers of a server
database run on many hosts (container hostnames collide, clocks skew, a pid
means nothing remotely), so a store that takes a writer lease also takes a
session-level advisory lock keyed by its writer id, on a connection of its
own.  The server drops the lock when that connection ends: the process
killed, its host lost, the server restarted or failed over.  A lease whose
lock nobody holds has no live writer, whatever its heartbeat says; one whose
lock is held is live, however old its heartbeat (the writer may just be
idle).  A writer that lost its connection takes the lock again at its next
lease or heartbeat.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]

# (a bigint advisory lock shows in pg_locks as classid = its high 32 bits,
# objid = its low 32 bits, objsubid = 1)
_HELD = ("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
         "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
         "AND classid = %s::oid AND objid = %s::oid AND objsubid = 1 AND granted)")


def lock_key(owner: str) -> int:
    """The advisory lock key of a writer id: 64 bits of its BLAKE2b, signed."""
    digest = hashlib.blake2b(b"trajlog writer " + owner.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Liveness:
    """The advisory locks of one store's writers, on one connection."""

    def __init__(self, connect: Callable[[], Conn]) -> None:
        self._connect = connect
        self._conn: Conn | None = None
        self._owners: set[str] = set()
        self._lock = threading.Lock()

    def _connection(self) -> Conn:
        """(lock held) The liveness connection; a new one (holding nothing)
        when the last was lost."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            conn = self._conn = self._connect()
            self._owners.clear()
        return conn

    def hold(self, owner: str) -> None:
        """Hold ``owner``'s lock (again, if its connection was lost)."""
        with self._lock:
            conn = self._connection()
            if owner in self._owners:
                try:   # (is the connection, and so the lock, still there?)
                    conn.execute("SELECT 1", prepare=False)
                    return
                except psycopg.OperationalError:
                    conn = self._connection()
            conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(owner),), prepare=False)
            self._owners.add(owner)

    def alive(self, owner: str) -> bool:
        """Whether some connection holds ``owner``'s lock."""
        key = lock_key(owner) & 0xFFFF_FFFF_FFFF_FFFF
        with self._lock:
            row = self._connection().execute(
                _HELD, (key >> 32, key & 0xFFFF_FFFF), prepare=False).fetchone()
        return bool(row and row[0])

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            self._owners.clear()
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()


__all__ = ["Liveness", "lock_key"]
