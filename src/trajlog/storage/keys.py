"""The keys and integer conversions every backend shares (no driver here).

Keys: a session's chunk rows and index rows are keyed by one integer,
``(sid << 32) + seq`` (:func:`rid`), so a session's rows sit together in one
key range.  Keys, chains and checks are u64 at the Backend seam and signed
64-bit in SQLite and PostgreSQL (neither has an unsigned 64-bit type):
:func:`i64` / :func:`u64` are the one conversion.  A sid stays below 2**31,
so ``(sid << 32) + seq`` fits a signed 64-bit integer exactly.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from .._format import Status
from ..codec.chunks import Chunk
from ..errors import HeadMismatchError, InvalidStateError, head_mismatch
from .event_index import IndexRow

MAX_SESSION_SEQ = 2**32 - 1   # a session's own log in one store: 4.29 billion events
MAX_SESSIONS = 2**31 - 1


def i64(value: int) -> int:
    """A u64 (key, chain, check) as the i64 a database stores."""
    return value - (1 << 64) if value >= 1 << 63 else value


def u64(value: int) -> int:
    """An i64 read from a database as the u64 it stands for."""
    return int(value) & 0xFFFFFFFFFFFFFFFF


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def rid(sid: int, seq: int) -> int:
    """The key of (session, seq) in the chunk and index tables."""
    return (sid << 32) + seq


def bound(sid: int, seq: int) -> int:
    """A read's range bound at (session, seq): a seq past the session's key
    space is its last key, so that a caller's huge seq (any Python int) can
    neither overflow a statement's int64 nor reach into the next session."""
    return (sid << 32) + min(seq, MAX_SESSION_SEQ)


def no_head(sid: int) -> HeadMismatchError:
    """A session whose head row is gone (moved, deleted): its log cannot be
    told from a truncated one -- corruption, never an empty log."""
    return head_mismatch(Status.TRUNCATED, f"the session's head row (internal id {sid}) is "
                         "gone", seq=None, session=None)


def past_max(seq: int) -> InvalidStateError:
    return InvalidStateError(f"a session holds at most {MAX_SESSION_SEQ + 1} events in one "
                             f"store; seq {seq} is past it")


def chunk_rows(sid: int, chunks: Sequence[Chunk],
               marks: Sequence[bytes | None]) -> list[tuple[Any, ...]]:
    """The chunk insert parameters of ``chunks`` with their packed ``marks``:
    ``(key, n, raw_len, codec, body_check, seed_chain, last_chain, body, marks)``."""
    if chunks and chunks[-1].last_seq > MAX_SESSION_SEQ:
        raise past_max(chunks[-1].last_seq)
    return [(rid(sid, c.first_seq), c.n, c.raw_len, c.codec, i64(c.body_check),
             i64(c.seed_chain), i64(c.last_chain), c.body, m)
            for c, m in zip(chunks, marks, strict=True)]


def chunk_row(sid: int, c: Chunk, mark: bytes | None) -> tuple[Any, ...]:
    """:func:`chunk_rows` of one chunk (a single append's), in one call: the
    key and the i64 conversions written out."""
    first, n = c.first_seq, c.n
    if first + n - 1 > MAX_SESSION_SEQ:
        raise past_max(first + n - 1)
    check, seed, last = c.body_check, c.seed_chain, c.last_chain
    return ((sid << 32) + first, n, c.raw_len, c.codec,
            check - (1 << 64) if check >= 1 << 63 else check,
            seed - (1 << 64) if seed >= 1 << 63 else seed,
            last - (1 << 64) if last >= 1 << 63 else last, c.body, mark)


def index_rows(sid: int, rows: Iterable[IndexRow]) -> list[tuple[Any, ...]]:
    """The index insert parameters: ``(key, type, time, source, causal_parent,
    workspace_revision, data_class, idempotency_key)``."""
    return [(rid(sid, r.seq), *r[1:]) for r in rows]


__all__ = ["MAX_SESSIONS", "MAX_SESSION_SEQ", "bound", "chunk_row", "chunk_rows", "i64",
           "index_rows", "no_head", "now_ms", "rid", "u64"]
