"""Damage a store the way a careless tool could: through a connection with
trajlog's triggers switched off.  Shared by the tests that check that
verification and recovery notice.

Frames live inside chunk rows (FORMAT.md 7).  The helpers here damage one
frame and store its row again *with a body check that matches the damaged
bytes* -- so what the reader meets is a damaged frame, found by the frame
checks, not merely a damaged row.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import apsw

from trajlog import codec
from trajlog.codec.chunks import body_seed
from trajlog.storage import statements as storage
from trajlog.storage.statements import i64, rid, u64


def file_bytes(path: str) -> bytes:
    """The raw bytes of a database and its WAL and journal, as on disk."""
    out = b""
    for suffix in ("", "-wal", "-journal"):
        if os.path.exists(path + suffix):
            with open(path + suffix, "rb") as f:
                out += f.read()
    return out


def foreign(store) -> apsw.Connection:
    """A connection that bypasses trajlog's protections (the caller closes it)."""
    settle(store)
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    return conn


def settle(store) -> None:
    """Let the store's background repack finish, so that rows stay put."""
    repacker = getattr(getattr(store, "_e", None), "repacker", None)
    if repacker is not None:
        repacker.drain()


def _key(conn: apsw.Connection, sid: int) -> int:
    return u64(conn.execute("SELECT session_key FROM sessions WHERE sid = ?",
                            (sid,)).fetchall()[0][0])


def row_of(conn: apsw.Connection, sid: int, seq: int) -> tuple:
    """(cid, n, raw_len, codec, body_check, seed_chain, last_chain, body) of the
    chunk row holding ``seq``."""
    found = conn.execute(f"SELECT {storage.CHUNK_COLUMNS} FROM chunks WHERE cid <= ? AND "
                         "cid >= ? ORDER BY cid DESC LIMIT 1",
                         (rid(sid, seq), rid(sid, 0))).fetchall()
    assert found, f"no row holds seq {seq}"
    return found[0]


def raw_body(row: tuple) -> bytes:
    body = bytes(row[7])
    if row[3] == 1:
        import zstandard

        body = zstandard.ZstdDecompressor().decompress(body, max_output_size=row[2])
    return body


def frames_of(raw: bytes) -> list[bytes]:
    """The frames of a row's raw body, cut by their (unverified) headers."""
    out, pos = [], 0
    while pos < len(raw):
        size = codec.decode_header(raw, pos).size
        out.append(raw[pos:pos + size])
        pos += size
    return out


def edit_row(store, sid: int, seq: int, edit: Callable[[list[bytes], int], list[bytes]],
             *, last_chain: int | None = None) -> None:
    """Rewrite the row holding ``seq``: ``edit(frames, index of seq)`` returns
    the frames to store.  The row keeps its key and seed chain; it is stored
    raw with a body check over the new bytes."""
    conn = foreign(store)
    try:
        row = row_of(conn, sid, seq)
        first = row[0] & 0xFFFFFFFF
        frames = edit(frames_of(raw_body(row)), seq - first)
        body = b"".join(frames)
        check = codec.checksum(body, body_seed(_key(conn, sid), first))
        if frames:
            conn.execute("UPDATE chunks SET n = ?, raw_len = ?, codec = 0, body_check = ?, "
                         "last_chain = ?, body = ? WHERE cid = ?",
                         (len(frames), len(body), i64(check),
                          row[6] if last_chain is None else i64(last_chain), body, row[0]))
        else:
            conn.execute("DELETE FROM chunks WHERE cid = ?", (row[0],))
    finally:
        conn.close()


def flip_frame_bits(store, sid: int, seq: int, offset: int, mask: int) -> None:
    """XOR byte ``offset`` of the stored frame of event ``seq`` of session ``sid``."""
    def flip(frames: list[bytes], i: int) -> list[bytes]:
        frame = bytearray(frames[i])
        frame[offset] ^= mask
        frames[i] = bytes(frame)
        return frames
    edit_row(store, sid, seq, flip)


def delete_frame(store, sid: int, seq: int) -> None:
    """Remove event ``seq``'s frame from its row (a row of one frame goes)."""
    edit_row(store, sid, seq, lambda frames, i: frames[:i] + frames[i + 1:])


def frame_at(store, sid: int, seq: int) -> bytes:
    conn = foreign(store)
    try:
        row = row_of(conn, sid, seq)
        return frames_of(raw_body(row))[seq - (row[0] & 0xFFFFFFFF)]
    finally:
        conn.close()


def replace_frame(store, sid: int, seq: int, frame: bytes) -> None:
    def put(frames: list[bytes], i: int) -> list[bytes]:
        frames[i] = frame
        return frames
    edit_row(store, sid, seq, put)


def append_row(store, sid: int, first_seq: int, frame: bytes, seed_chain: int) -> None:
    """Store a row holding ``frame`` at ``first_seq`` behind trajlog's back."""
    conn = foreign(store)
    try:
        check = codec.checksum(frame, body_seed(_key(conn, sid), first_seq))
        chain = codec.decode_header(frame).chain
        conn.execute(storage.CHUNK_INSERT, (rid(sid, first_seq), 1, len(frame), 0, i64(check),
                                            i64(seed_chain), i64(chain), frame, None))
    finally:
        conn.close()


# Beneath the API: the connections and caches of a store, for tests that look
# at (or damage) what trajlog stored.

def raw(store) -> apsw.Connection:
    """The calling thread's reader connection of ``store``."""
    return store._e.backend.connection()


def stored_head(store, sid: int) -> int:
    """The head's last seq as stored (``Session.last_seq`` refuses a damaged head)."""
    return int(raw(store).execute("SELECT last_seq FROM session_heads WHERE sid = ?",
                                  (sid,)).fetchall()[0][0])


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


# Schema edits a foreign connection must be refused (the authorizer on
# connections trajlog writes with; read-only opening on its readers).
SCHEMA_EDITS = [
    "DROP TRIGGER chunks_repack",
    "DROP TABLE chunks",
    "ALTER TABLE chunks RENAME TO old_chunks",
    "CREATE TABLE extra(x)",
    "CREATE TEMP TRIGGER t BEFORE INSERT ON chunks BEGIN SELECT 1; END",
    "DROP INDEX event_index_idempotency",
]
