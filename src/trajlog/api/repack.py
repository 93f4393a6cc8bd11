"""Repack: small chunk rows merged into full ones, frames byte for byte.

Single appends are lean one-frame rows (uncompressed: the durable path stays
short); a batch's last row may be small too.  A repack merges runs of
consecutive small rows of one session into rows of up to the chunk cap,
compressed: the same frames, the same chain, fewer rows and fewer bytes.

It runs on a background thread, never on a caller's durable path, when a
session has gathered enough small rows or ended a turn, and each merge is its
own short transaction.  A merge is verified before the old rows go: every
source row is opened (body check, frames, chain), the merged row is opened
again from its stored bytes and must hold exactly the bytes of the rows it
replaces; the backend then allows the rewrite only as a repack (the row grows
over the rows after it, ending where they end with their chain).  A crash or a
power loss during a repack leaves the rows before or after it, never a mix.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from ..codec.chunks import CAP, Chunk, ChunkCompressor, open_chunk, pack
from ..errors import TrajlogError, repack_refused
from ..memory.versions import erased_lookup
from ..storage import Writer
from ..storage.event_index import pack_marks
from .handles import LogRef
from .writer import SMALL_ROW

_IDLE_SECONDS = 0.2   # the worker batches requests that arrive this close together


class Repacker:
    """Merges small rows, for one store: :meth:`repack` at once, or
    :meth:`request` for the background worker."""

    def __init__(self, transaction: Callable[[], AbstractContextManager[Writer]]) -> None:
        self._transaction = transaction
        self._compressor = ChunkCompressor()
        self._packed: dict[int, int] = {}   # sid -> seq up to which rows are known packed
        self._queue: dict[int, LogRef] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._busy = False
        self.errors: list[BaseException] = []   # what background repacks refused

    # -- the background worker ----------------------------------------------------

    def request(self, ref: LogRef) -> None:
        """Ask for a repack of ``ref`` soon (returns at once)."""
        with self._cond:
            if self._closed:
                return
            self._queue[ref.sid] = ref
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="trajlog-repack",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                self._cond.wait(_IDLE_SECONDS)  # let a burst of appends finish first
                if self._closed:
                    return
                sid, ref = next(iter(self._queue.items()))
                del self._queue[sid]
                self._busy = True
            try:
                self.repack(ref)
            except TrajlogError as exc:   # e.g. the store closed, damage found: not our caller's
                self.errors.append(exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def drain(self, timeout: float = 30.0) -> None:
        """Wait until no repack is queued or running (tests, tools, close)."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or (not self._queue and not self._busy),
                                timeout)

    def close(self) -> None:
        """Stop the worker after the merge it is doing (queued ones are dropped)."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(30)

    # -- merging ---------------------------------------------------------------------

    def repack(self, ref: LogRef) -> int:
        """Merge the session's runs of small rows; returns how many rows went."""
        start = self._packed.get(ref.sid, ref.seed - 1)
        with self._transaction() as tx:
            last = tx.head(ref.sid).last_seq
            meta = tx.chunk_meta(ref.sid, start, last)
        removed = 0
        for first, upto, count in _groups(meta):
            with self._transaction() as tx:
                removed += self._merge(tx, ref, first, upto, count)
        if meta:
            # Rows before the last small run are packed for good; the run at the
            # tail may still grow.
            tail = _tail_start(meta)
            self._packed[ref.sid] = tail - 1
        return removed

    def _merge(self, tx: Writer, ref: LogRef, first: int, upto: int, count: int) -> int:
        rows = tx.chunks(ref.sid, first, upto)
        if len(rows) != count or rows[0].first_seq != first or rows[-1].last_seq != upto:
            return 0  # the rows changed since they were planned (another repack): skip
        raw = []
        for prev, row in zip([None, *rows], rows, strict=False):
            if prev is not None and (row.first_seq != prev.last_seq + 1 or
                                     row.seed_chain != prev.last_chain):
                raise repack_refused(ref.id, row.first_seq, "the rows do not continue each other")
            opened = open_chunk(ref.key, row, self._compressor,
                                erased=erased_lookup(tx, ref.sid))
            if not isinstance(opened, tuple):
                raise repack_refused(ref.id, opened.seq, f"a source row does not verify "
                                     f"({opened.reason})")
            raw.append(bytes(opened[0]))
        body = _join(raw)
        n = sum(r.n for r in rows)
        merged = pack(ref.key, body, first, n, rows[0].seed_chain, rows[-1].last_chain,
                      self._compressor.compress([body])[0])
        check = open_chunk(ref.key, merged, self._compressor, erased=erased_lookup(tx, ref.sid))
        if not isinstance(check, tuple) or bytes(check[0]) != b"".join(raw):
            reason = check.reason if not isinstance(check, tuple) else (
                "its frames differ from the rows it replaces")
            raise repack_refused(ref.id, first, f"the merged row does not verify: {reason}")
        marks = pack_marks(tx.marks(ref.sid, first, upto))
        gone = tx.repack(ref.sid, merged, marks)
        if gone != count - 1:
            raise repack_refused(ref.id, first, f"{gone} rows went, {count - 1} expected")
        return gone


def _join(parts: list[bytes]) -> bytes:
    """The merged body: the source rows' frames, end to end (one place a bug
    could change a byte -- and the check after it would refuse the merge)."""
    return b"".join(parts)


def _groups(meta: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``(first_seq, last_seq, rows)`` of each run of at least two consecutive
    small rows, cut so that a merged row stays within the cap."""
    groups = []
    run: list[tuple[int, int, int]] = []

    def close() -> None:
        if len(run) >= 2:
            groups.append((run[0][0], run[-1][0] + run[-1][1] - 1, len(run)))

    size = 0
    for first, n, raw_len in meta:
        if raw_len >= SMALL_ROW or (run and size + raw_len > CAP):
            close()
            run, size = [], 0
            if raw_len >= SMALL_ROW:
                continue
        run.append((first, n, raw_len))
        size += raw_len
    close()
    return groups


def _tail_start(meta: list[tuple[int, int, int]]) -> int:
    """The first seq of the trailing run of small rows (or past the end)."""
    start = meta[-1][0] + meta[-1][1]
    for first, _n, raw_len in reversed(meta):
        if raw_len >= SMALL_ROW:
            break
        start = first
    return start


def merged_row(key: int, rows: list[Chunk], compressor: ChunkCompressor) -> Chunk:
    """The row a repack of ``rows`` would write (for tools and tests)."""
    raw = []
    for row in rows:
        opened = open_chunk(key, row, compressor)
        if not isinstance(opened, tuple):
            raise repack_refused(None, opened.seq, opened.reason)
        raw.append(bytes(opened[0]))
    body = _join(raw)
    return pack(key, body, rows[0].first_seq, sum(r.n for r in rows), rows[0].seed_chain,
                rows[-1].last_chain, compressor.compress([body])[0])

__all__ = ["Repacker", "merged_row"]
