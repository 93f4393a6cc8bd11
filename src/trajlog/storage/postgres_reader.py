"""The PostgreSQL backend's reads: every call a unit of work of its backend
(:meth:`PostgresBackend._read`: BEGIN with the tenant, the read, COMMIT) or a
read of this thread's snapshot; the statements are :mod:`.postgres_rows`'."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..codec.chunks import Chunk
from . import postgres_rows as pr
from .base import Head, LogRange, SessionRow
from .event_index import IndexRow, Mark
from .postgres_deleted import NOT_DELETED, PgDeletedReads
from .postgres_memory import PgMemoryReads
from .postgres_search import PgSearchReads

_R = TypeVar("_R")


class PgReader(PgSearchReads, PgDeletedReads, PgMemoryReads):
    """:class:`~trajlog.storage.base.Reader` whose every call is a unit of
    work of its backend (or a read of this thread's snapshot)."""

    def __init__(self, backend: Any) -> None:   # (a PostgresBackend: its units of work)
        self._backend = backend

    def _run(self, fn: Callable[..., _R], *args: Any) -> _R:
        return self._backend._read(fn, args)  # type: ignore[no-any-return]

    def session_by_id(self, session_id: str) -> SessionRow | None:
        rows = self._run(pr.sessions_where, f"AND id = %s {NOT_DELETED}", (session_id,))
        return rows[0] if rows else None

    def session_by_sid(self, sid: int) -> SessionRow | None:
        rows = self._run(pr.sessions_where, "AND sid = %s", (sid,))
        return rows[0] if rows else None

    def sessions(self, include_subagents: bool) -> list[SessionRow]:
        return self._run(pr.listing, include_subagents)

    def children(self, sid: int) -> list[SessionRow]:
        return self._run(pr.sessions_where,
                         "AND parent_sid = %s ORDER BY sid", (sid,))

    def head(self, sid: int) -> Head:
        return self._run(pr.head, sid)

    def head_stored(self, sid: int) -> tuple[Head, int]:
        return self._run(pr.head_stored, sid)

    def chunks(self, sid: int, first: int, last: int, limit: int = -1,
               budget: int = -1) -> list[Chunk]:
        return self._run(pr.chunks, sid, first, last, limit, budget)

    def log_range(self, sid: int, first: int, last: int, limit: int = -1,
                  budget: int = -1) -> LogRange:
        return LogRange(*self._run(pr.log_range, sid, first, last, limit, budget))

    def chunk_at(self, sid: int, seq: int) -> Chunk | None:
        return self._run(pr.chunk_at, sid, seq)

    def locate(self, sid: int, seq: int, body: bool) -> tuple[int, int, Chunk | None]:
        return self._run(pr.locate, sid, seq, body)

    def chunk_meta(self, sid: int, after: int, upto: int) -> list[tuple[int, int, int]]:
        return self._run(pr.chunk_meta, sid, after, upto)

    def max_seq(self, sid: int) -> int:
        return self._run(pr.max_seq, sid)

    def repack_run(self, sid: int, first: int, last: int) -> tuple[list[Chunk], list[Mark]]:
        return self._run(pr.repack_run, sid, first, last)

    def row_checks(self, sid: int, first: int, last: int) -> list[tuple[int, int, int]]:
        return self._run(pr.row_checks, sid, first, last)

    def chunk_sizes(self, sid: int) -> tuple[int, int, int]:
        return self._run(pr.chunk_sizes, sid)

    def index_rows(self, sid: int, after: int, upto: int) -> list[IndexRow]:
        return self._run(pr.index_range, sid, after, upto)

    def marks(self, sid: int, first: int, last: int) -> list[Mark]:
        return self._run(pr.marks, sid, first, last)

    def seq_of_idempotency_key(self, sid: int, key: str) -> int | None:
        return self._run(pr.seq_of_idempotency_key, sid, key)

    def call_requested(self, sid: int, call_id: str) -> int | None:
        return self._run(pr.call_requested, sid, call_id)

    def calls_requested(self, sid: int, call_ids: Sequence[str]) -> dict[str, int]:
        return self._run(pr.calls_requested, sid, call_ids)

    def call_count(self, sid: int) -> int:
        return self._run(pr.call_count, sid)

    def marker_at_or_before(self, sid: int, type_: str, seq: int) -> int | None:
        return self._run(pr.marker, sid, type_, seq, False)

    def marker_after(self, sid: int, type_: str, seq: int) -> int | None:
        return self._run(pr.marker, sid, type_, seq, True)

    def projection_state(self, sid: int, name: str,
                         version: int) -> tuple[int, int, bytes] | None:
        return self._run(pr.projection_state, sid, name, version)


__all__ = ["PgReader"]
