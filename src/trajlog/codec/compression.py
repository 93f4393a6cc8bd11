"""zstd for event payloads: which ones are stored compressed, and reading them
back with the length the frame header promises (never more).

A payload of at least :data:`THRESHOLD` bytes is compressed at :data:`LEVEL`
and kept compressed only when that saves more than 1/16 (FORMAT.md 4.5 says
why no dictionary).  Several payloads at once go through zstd's multi-threaded
batch calls, which release the GIL (measured ~2x on 2 cores for compression,
~1.6x for decompression).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Sequence
from typing import Any

import zstandard

from .._format import FLAG_ZSTD, Status
from ..errors import error_for

THRESHOLD = 512
LEVEL = 3
_THREADS = min(4, os.cpu_count() or 1)


class Compressor:
    """Per-thread zstd contexts (zstandard's objects are not thread-safe)."""

    def __init__(self, level: int = LEVEL) -> None:
        self._level = level
        self._local = threading.local()

    def _cctx(self) -> Any:
        c = getattr(self._local, "c", None)
        if c is None:
            c = self._local.c = zstandard.ZstdCompressor(level=self._level)
        return c

    def _dctx(self) -> Any:
        d = getattr(self._local, "d", None)
        if d is None:
            d = self._local.d = zstandard.ZstdDecompressor()
        return d

    def compress_many(self, raws: Sequence[bytes]) -> list[tuple[bytes, int]]:
        """``(stored bytes, frame flags)`` for each raw payload: compressed
        (``FLAG_ZSTD``) where that pays, else the raw bytes with flags 0."""
        out = [(raw, 0) for raw in raws]
        todo = [i for i, raw in enumerate(raws) if len(raw) >= THRESHOLD]
        if not todo:
            return out
        cctx = self._cctx()
        if len(todo) == 1:
            packed: list[Any] = [cctx.compress(raws[todo[0]])]
        else:
            result = cctx.multi_compress_to_buffer([raws[i] for i in todo], threads=_THREADS)
            packed = [result[k].tobytes() for k in range(len(todo))]
        for i, data in zip(todo, packed, strict=True):
            size = len(raws[i])
            if len(data) < size - (size >> 4):
                out[i] = (data, FLAG_ZSTD)
        return out

    def decompress_many(self, stored: list[Any], raw_lens: list[int]) -> list[Any]:
        """Decompress several payloads at once on zstd's threads.  Any
        disagreement with a ``raw_len`` falls back to :meth:`decompress`,
        payload by payload, which raises the typed error for the first bad one."""
        if len(stored) < 2:
            return [self.decompress(x, n) for x, n in zip(stored, raw_lens, strict=True)]
        sizes = struct.pack(f"={len(raw_lens)}Q", *raw_lens)
        try:
            result = self._dctx().multi_decompress_to_buffer(stored, decompressed_sizes=sizes,
                                                             threads=_THREADS)
        except zstandard.ZstdError:
            return [self.decompress(x, n) for x, n in zip(stored, raw_lens, strict=True)]
        return [result[i] for i in range(len(stored))]

    def decompress(self, stored: Any, raw_len: int) -> bytes:
        """One payload, bounded by ``raw_len`` (a corrupt size is refused, typed)."""
        size = zstandard.frame_content_size(stored)
        if size != raw_len:
            raise error_for(Status.BAD_FIELD, reason=f"zstd content size {size} != raw_len "
                            f"{raw_len}", corrupt=True)
        out = self._dctx().decompress(stored, max_output_size=raw_len)
        if len(out) != raw_len:
            raise error_for(Status.BAD_FIELD, reason="decompressed length differs from raw_len",
                            corrupt=True)
        return out  # type: ignore[no-any-return,unused-ignore]


__all__ = ["LEVEL", "THRESHOLD", "Compressor"]
