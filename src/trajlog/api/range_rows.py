"""The index rows and marks a verification compares with the frames, read
with the chunk rows that hold their seqs (:meth:`Reader.log_range`: one call,
one round trip on a server) instead of one read per row.

:class:`RangeRows` is the fetch a verifying :class:`~trajlog.codec.stream.LogStream`
reads its rows through; the checks then take the index rows and marks of a
run of seqs from what it kept, and it forgets those behind the run (memory
stays bounded by the rows of one fetch and its read-ahead).
"""

from __future__ import annotations

from collections import deque

from ..codec.chunks import Chunk
from ..errors import CorruptionError
from ..storage import IndexRow, Reader
from ..storage.event_index import Mark


class RangeRows:
    """Chunk rows of one session, with their index rows and marks kept."""

    def __init__(self, reader: Reader, sid: int) -> None:
        self._reader = reader
        self._sid = sid
        self._index: deque[IndexRow] = deque()
        self._marks: deque[Mark] = deque()
        self._upto = -1   # the highest seq whose index rows and marks are kept
        self._direct = False   # a range read failed: the checks read on their own

    def fetch(self, first: int, last: int, limit: int, budget: int) -> list[Chunk]:
        """:meth:`Reader.chunks`, keeping the index rows and marks of the seqs
        the rows hold (those not kept already: a row may come back)."""
        if self._direct:
            return self._reader.chunks(self._sid, first, last, limit, budget)
        try:
            got = self._reader.log_range(self._sid, first, last, limit, budget)
        except CorruptionError:
            # (the index rows or marks cannot be read: the checks ask for them
            # again themselves and report the defect where it is)
            self._direct = True
            return self._reader.chunks(self._sid, first, last, limit, budget)
        upto = self._upto
        self._index.extend(r for r in got.index_rows if r.seq > upto)
        self._marks.extend(m for m in got.marks if m.seq > upto)
        if got.chunks:
            self._upto = max(upto, got.chunks[-1].last_seq)
        return got.chunks

    def index_rows(self, after: int, upto: int) -> list[IndexRow]:
        """The index rows of seqs ``after + 1 .. upto`` (those before are forgotten)."""
        if self._direct or upto > self._upto:
            return self._reader.index_rows(self._sid, after, upto)
        kept = self._index
        while kept and kept[0].seq <= after:
            kept.popleft()
        return [r for r in kept if r.seq <= upto] if kept and kept[0].seq <= upto else []

    def marks(self, first: int, last: int) -> list[Mark]:
        """The marks of seqs ``first .. last`` (those before are forgotten)."""
        if self._direct or last > self._upto:
            return self._reader.marks(self._sid, first, last)
        kept = self._marks
        while kept and kept[0].seq < first:
            kept.popleft()
        return [m for m in kept if m.seq <= last] if kept and kept[0].seq <= last else []


__all__ = ["RangeRows"]
