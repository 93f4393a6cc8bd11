"""The memory and erasure part of the SQLite backend's Reader and Writer
(mixed into :class:`~trajlog.storage.sqlite.SQLiteReader` and
:class:`~trajlog.storage.sqlite.SQLiteWriter`)."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from ..codec.chunks import Chunk
from . import memory_rows as mr
from .base import MemoryRow, Scope, TombstoneRow
from .errors_map import translate
from .sqlite_search import unindex as search_unindex


class MemoryReads:
    conn: apsw.Connection

    def memory_max_mid(self) -> int:
        with translate():
            return mr.max_mid(self.conn)

    def memory_versions(self, item_id: str) -> list[MemoryRow]:
        with translate():
            return mr.versions(self.conn, item_id)

    def memory_latest_of(self, item_id: str) -> MemoryRow | None:
        with translate():
            return mr.latest_of(self.conn, item_id)

    def memory_version(self, mid: int) -> MemoryRow | None:
        with translate():
            return mr.version_at(self.conn, mid)

    def memory_current(self, tenant: str, scopes: Sequence[Scope],
                       types: Sequence[str] | None, states: Sequence[str] | None,
                       key: str | None, limit: int) -> list[MemoryRow]:
        with translate():
            return mr.current(self.conn, tenant, scopes, types, states, key, limit)

    def memory_latest_keyed(self, tenant: str, scope: str, scope_key: str,
                            key: str) -> MemoryRow | None:
        with translate():
            return mr.latest_keyed(self.conn, tenant, scope, scope_key, key)

    def memory_merge_match(self, digest: bytes, tenant: str, scope: str, scope_key: str,
                           type_: str, key: str | None) -> MemoryRow | None:
        with translate():
            return mr.merge_match(self.conn, digest, tenant, scope, scope_key, type_, key)

    def memory_merge_matches(self, wanted: Sequence[mr.MergeKey]) -> dict[mr.MergeKey,
                                                                          MemoryRow]:
        with translate():
            return mr.merge_matches(self.conn, wanted)

    def memory_expired(self, now_ms: int, limit: int) -> list[MemoryRow]:
        with translate():
            return mr.expired(self.conn, now_ms, limit)

    def memory_until_event(self, limit: int) -> list[MemoryRow]:
        with translate():
            return mr.until_event(self.conn, limit)

    def memory_latest(self, after_mid: int, limit: int) -> list[MemoryRow]:
        with translate():
            return mr.latest(self.conn, after_mid, limit)

    def memory_all(self, after_mid: int, limit: int) -> list[MemoryRow]:
        with translate():
            return mr.all_versions(self.conn, after_mid, limit)

    def memory_index_exists(self) -> bool:
        with translate():
            return mr.fts_exists(self.conn)

    def memory_search(self, words: Sequence[str], tenant: str, scopes: Sequence[Scope],
                      types: Sequence[str] | None, limit: int) -> list[MemoryRow]:
        with translate():
            return mr.search(self.conn, mr.fts_match(words), tenant, scopes, types, limit)

    def memory_recent(self, words: Sequence[str], tenant: str, scopes: Sequence[Scope],
                      types: Sequence[str] | None, before: tuple[int, int],
                      limit: int) -> list[MemoryRow]:
        with translate():
            return mr.recent(self.conn, mr.fts_match(words), tenant, scopes, types, before,
                             limit)

    def memory_indexed(self, mids: Sequence[int]) -> list[int]:
        with translate():
            return mr.fts_indexed(self.conn, mids)

    def memory_index_rows(self) -> int:
        with translate():
            return mr.fts_rows(self.conn)

    def tombstone_for_event(self, sid: int, seq: int) -> TombstoneRow | None:
        with translate():
            return mr.tombstone_event(self.conn, sid, seq)

    def tombstone_for_item(self, item_id: str) -> TombstoneRow | None:
        with translate():
            return mr.tombstone_item(self.conn, item_id)

    def tombstones(self, after_tid: int, limit: int) -> list[TombstoneRow]:
        with translate():
            return mr.tombstones(self.conn, after_tid, limit)

    def erased_seqs(self, sid: int, first: int = 0, last: int = (1 << 63) - 1) -> list[int]:
        with translate():
            return mr.erased_seqs(self.conn, sid, first, last)

    def memory_head(self) -> tuple[int, int, int, int]:
        with translate():
            return mr.memory_head(self.conn)

    def max_tid(self) -> int:
        with translate():
            return mr.max_tid(self.conn)


class MemoryWrites:
    conn: apsw.Connection

    def insert_memory(self, row: MemoryRow) -> None:
        with translate():
            mr.insert_version(self.conn, row)

    def blank_memory(self, mid: int, frame: bytes) -> None:
        with translate():
            mr.blank_version(self.conn, mid, frame)

    def index_memory(self, row: MemoryRow, text: str) -> None:
        with translate():
            mr.index_text(self.conn, row, text)

    def unindex_memory(self, mids: Sequence[int]) -> int:
        with translate():
            return mr.unindex(self.conn, mids)

    def clear_memory_index(self) -> None:
        with translate():
            mr.clear_index(self.conn)

    def optimize_memory_index(self) -> None:
        with translate():
            mr.optimize_index(self.conn)

    def insert_tombstone(self, row: TombstoneRow) -> None:
        with translate():
            mr.insert_tombstone(self.conn, row)
            if row.target_kind == "event" and row.target_sid is not None and (
                    row.target_seq is not None):
                # the search index's copy goes with the payload, in the
                # erasure's own transaction (delete, retention: all erase)
                search_unindex(self.conn, row.target_sid, [row.target_seq])

    def rewrite_chunk(self, sid: int, chunk: Chunk) -> None:
        with translate():
            mr.rewrite_chunk(self.conn, sid, chunk)

    def scrub_free_pages(self) -> int:
        with translate():
            return mr.scrub_free_pages(self.conn)


__all__ = ["MemoryReads", "MemoryWrites"]
