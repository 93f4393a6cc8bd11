"""The bytes of a repack: consecutive chunk rows of one session merged into
one row holding the same frames (FORMAT.md 7).

A merge is lean: each source row's body check (XXH3 of its stored bytes, in
C) and, for a compressed one, its decompression bounded by ``raw_len``
(:func:`source_bodies`); the raw bodies joined; then one C scan over the
joined body and one compression (:func:`merged_chunk`).  The scan checks every
frame of the run -- header check, payload check (or an erased frame stepped
over), seq, chain from the first row's seed chain, zero padding -- and that
each source row's frames start where its row says and end at its last chain:
the checks opening each source row would make, over the same bytes, in one
pass.  The stored form is decompressed once and compared byte for byte with
the joined body, so the row written holds exactly the frames it replaces.

Merged rows are read-mostly, so they are compressed at :data:`REPACK_LEVEL`
by a compressor of their own (:class:`RowCompressor`), apart from the write
path's (:class:`~.chunks.ChunkCompressor`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import zstandard

from .._format import Status
from .chunks import RAW, ZSTD, Chunk, ChunkCompressor, ChunkDefect, Erased, body_seed, open_chunk
from .frames import _kernel

# zstd level of merged rows: at benchmarks/workload.py's events, level 3 stores
# ~4 % fewer bytes than level 1 for ~1.4 us more per merged single-append row
# (a merge runs off the caller's path).
REPACK_LEVEL = 3


class RowCompressor:
    """zstd at :data:`REPACK_LEVEL` for merged rows, one context per thread; a
    body is stored compressed only when that saves more than 1/16."""

    def __init__(self, level: int = REPACK_LEVEL) -> None:
        self.level = level
        self._local = threading.local()

    def compress(self, body: bytes) -> bytes | None:
        """The body's zstd frame, or None (store it raw)."""
        c = getattr(self._local, "c", None)
        if c is None:
            c = self._local.c = zstandard.ZstdCompressor(level=self.level,
                                                         write_content_size=True)
        packed: bytes = c.compress(body)
        return packed if len(packed) < len(body) - (len(body) >> 4) else None


def source_bodies(key: int, rows: Sequence[Chunk],
                  opener: ChunkCompressor) -> list[bytes | memoryview] | ChunkDefect:
    """The raw bodies of ``rows`` (consecutive rows of one session, in order):
    each row's body check, then its decompression bounded by its raw length;
    the rows' seqs and chains must continue each other.  The first defect
    otherwise (its frames are checked by :func:`merged_chunk`)."""
    k = _kernel(None)
    out: list[bytes | memoryview] = []
    prev: Chunk | None = None
    for row in rows:
        seq = row.first_seq
        if prev is not None and (seq != prev.last_seq + 1 or row.seed_chain != prev.last_chain):
            return ChunkDefect(Status.BAD_CHAIN, "the rows do not continue each other", 0, seq)
        prev = row
        if row.n < 1 or row.codec not in (RAW, ZSTD):
            return ChunkDefect(Status.BAD_FIELD, "chunk row fields out of range", 0, seq)
        if k.checksum(row.body, body_seed(key, seq)) != row.body_check:
            return ChunkDefect(Status.BAD_PAYLOAD, "chunk body check mismatch", 0, seq)
        raw: Any = row.body
        if row.codec == ZSTD:
            raw = opener.decompress(row.body, row.raw_len)
            if raw is None:
                return ChunkDefect(Status.BAD_FIELD, "chunk body does not decompress to its "
                                   "raw length", 0, seq)
        elif len(raw) != row.raw_len:
            return ChunkDefect(Status.BAD_FIELD, "chunk body length differs from raw_len", 0,
                               seq)
        out.append(raw)
    return out


def merged_chunk(key: int, rows: Sequence[Chunk], body: bytes, packer: RowCompressor,
                 opener: ChunkCompressor, erased: Erased | None = None) -> Chunk | ChunkDefect:
    """The row that replaces ``rows`` (their bodies passed
    :func:`source_bodies`), holding ``body`` -- which must be their raw
    bodies end to end: one scan of its frames from the first row's seed chain
    to the last row's last chain, each row's frames where the row says, and
    the stored form decompressed back to ``body``; else the first defect."""
    first = rows[0]
    n = sum(r.n for r in rows)
    plain = Chunk(first.first_seq, n, len(body), RAW, 0, first.seed_chain, rows[-1].last_chain,
                  body)
    opened = open_chunk(key, plain, opener, raw=body, erased=erased)   # (raw: no body check)
    if not isinstance(opened, tuple):
        return opened
    table = opened[1]
    frames = offset = 0
    for row in rows:   # every source row's frames begin where its row says, at its seed chain
        if frames and (table.offset(frames) != offset or
                       table.chain(frames - 1) != row.seed_chain):
            return ChunkDefect(Status.SEQ_MISMATCH, "a source row's frames do not begin where "
                               "the row says", offset, row.first_seq)
        frames += row.n
        offset += row.raw_len
    stored = packer.compress(body)
    if stored is not None and opener.decompress(stored, len(body)) != body:
        return ChunkDefect(Status.BAD_FIELD, "the compressed row does not decompress to the "
                           "frames it replaces", 0, first.first_seq)
    k = _kernel(None)
    data = body if stored is None else stored
    return Chunk(first.first_seq, n, len(body), RAW if stored is None else ZSTD,
                 k.checksum(data, body_seed(key, first.first_seq)), first.seed_chain,
                 rows[-1].last_chain, data)


__all__ = ["REPACK_LEVEL", "RowCompressor", "merged_chunk", "source_bodies"]
