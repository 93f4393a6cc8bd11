"""Repack: small chunk rows merged into full ones, frames byte for byte.

Single appends are lean one-frame rows (uncompressed: the durable path stays
short); a batch's last row may be small too.  A repack merges runs of
consecutive small rows of one session into rows of up to the chunk cap,
compressed (:mod:`trajlog.codec.merge`): the same frames, the same chain,
fewer rows and fewer bytes.

Each frame is merged once, to full size.  The write engine asks for a repack
when a session's run of small rows reaches the cap (or a big row ends it);
the background worker then merges only *complete* runs -- cut at the cap, or
ended by a big row -- and leaves the run at the log's tail to grow, so that a
merged row is never merged again.  (:meth:`Repacker.repack`, asked for by a
caller, merges the tail too.)  The worker runs off the caller's path: at a
quiet moment -- no append in the store for :data:`_IDLE_SECONDS`, or
:data:`_TURN_QUIET_SECONDS` after a turn's end -- or once :data:`_BACKLOG`
full runs wait, and at close (what is queued is merged, not dropped); it gives
way again as soon as an append comes.  A merge reads its run in a read
snapshot and does its work there -- decompress, check, join, compress --
without the write lock, so appends go on meanwhile; its write transaction is
short: one SELECT of the run's starts and body checks (the rows merged must
still be there, unchanged by another repack or an erasure; else the merge is
skipped), one UPDATE and one DELETE.

A merge is verified before the old rows go: every source row's body check,
one scan of every frame of the joined body (each row's frames where the row
says, the chain from the first seed to the last chain), and the stored form
decompressed back to the joined body; the backend then allows the rewrite
only as a repack (the row grows over the rows after it, ending where they end
with their chain).  A crash or a power loss during a repack leaves the rows
before or after it, never a mix.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from ..codec.chunks import CAP, Chunk, ChunkCompressor
from ..codec.merge import RowCompressor, merged_chunk, source_bodies
from ..errors import TrajlogError, repack_refused
from ..memory.versions import erased_lookup
from ..storage import Reader, Writer
from ..storage.event_index import pack_marks
from .handles import LogRef
from .writer import SMALL_ROW

_IDLE_SECONDS = 0.2          # no append this long: the store is idle, the worker merges
_TURN_QUIET_SECONDS = 0.02   # ... this long after a turn's end
_BACKLOG = 16                # full runs asked for that are merged even without a quiet moment


class Repacker:
    """Merges small rows, for one store: :meth:`repack` at once, or
    :meth:`request` for the background worker."""

    def __init__(self, transaction: Callable[[], AbstractContextManager[Writer]],
                 snapshot: Callable[[], AbstractContextManager[Reader]],
                 appends: Callable[[], int] = lambda: 0) -> None:
        self._transaction = transaction
        self._snapshot = snapshot          # (reads and merges without the write lock)
        self._appends = appends            # the store's append count (a quiet moment: unmoved)
        self._opener = ChunkCompressor()   # (decompresses source rows, checks the stored form)
        self._packer = RowCompressor()
        self._packed: dict[int, int] = {}   # sid -> seq up to which rows are known packed
        self._queue: dict[int, LogRef] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._busy = False
        self._turn_end = False
        self._asked = 0                     # full runs asked for since the queue was last empty
        self._hurry = False                 # drain(): merge now, without a quiet moment
        self.errors: list[BaseException] = []   # what background repacks refused

    # -- the background worker ----------------------------------------------------

    def request(self, ref: LogRef, turn_end: bool = False) -> None:
        """Ask for a repack of ``ref``'s complete runs at the next quiet moment
        (returns at once); ``turn_end``: a turn ended, merge what is queued
        soon (no run is queued by it)."""
        with self._cond:
            if self._closed:
                return
            if turn_end:
                if self._queue:
                    self._turn_end = True
                    self._cond.notify()
                return
            self._queue[ref.sid] = ref
            self._asked += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="trajlog-repack",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def _pressing(self) -> bool:
        """Merge without waiting for a quiet moment: drain(), close(), or a
        backlog that never met one (a host that appends without a pause)."""
        return self._hurry or self._closed or self._asked >= _BACKLOG

    def _quiet(self) -> bool:
        """Wait for a quiet moment (no append for a while); False: closed."""
        while True:
            with self._cond:
                if self._closed:
                    return False
                if self._pressing():
                    return True
                seen = self._appends()
                wait = _TURN_QUIET_SECONDS if self._turn_end else _IDLE_SECONDS
                self._turn_end = False
                self._cond.wait(wait)
                if self._closed:
                    return False
                if self._appends() == seen:
                    return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
            if not self._quiet():
                return
            with self._cond:
                if self._closed or not self._queue:
                    continue
                sid, ref = next(iter(self._queue.items()))
                del self._queue[sid]
                self._busy = True
            try:
                self._background(ref)
            except TrajlogError as exc:   # e.g. the store closed, damage found: not our caller's
                self.errors.append(exc)
            finally:
                with self._cond:
                    self._busy = False
                    if not self._queue:
                        self._asked = 0
                    self._cond.notify_all()

    def _background(self, ref: LogRef) -> None:
        """Merge ``ref``'s complete runs, giving way when an append comes (the
        rest is queued again)."""
        seen = self._appends()

        def go_on() -> bool:
            return self._pressing() or self._appends() == seen

        if not self._repack(ref, tail=False, go_on=go_on):
            with self._cond:
                if not self._closed:
                    self._queue.setdefault(ref.sid, ref)

    def drain(self, timeout: float = 30.0) -> None:
        """Merge what is queued now, and wait until nothing is queued or
        running (tests, tools, close)."""
        with self._cond:
            if self._thread is None:   # no worker (a store without one): merge here
                queued = list(self._queue.values())
                self._queue.clear()
            else:
                queued = []
                self._hurry = True
                self._cond.notify_all()
                try:
                    self._cond.wait_for(lambda: self._closed or (not self._queue and
                                                                 not self._busy), timeout)
                finally:
                    self._hurry = False
        self._merge_queued(queued)

    def close(self) -> None:
        """Stop the worker, then merge the complete runs still queued (here:
        closing is off the append path)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
            queued = list(self._queue.values())
            self._queue.clear()
        if thread is not None and thread is not threading.current_thread():
            thread.join(30)
        self._merge_queued(queued)

    def _merge_queued(self, queued: list[LogRef]) -> None:
        """The complete runs of ``queued``, merged in this thread; a refusal
        is kept in :attr:`errors` (as the worker's are)."""
        for ref in queued:
            try:
                self._repack(ref, tail=False)
            except TrajlogError as exc:
                self.errors.append(exc)

    # -- merging ---------------------------------------------------------------------

    def repack(self, ref: LogRef) -> int:
        """Merge the session's runs of small rows, its tail's too; returns how
        many rows went."""
        removed: list[int] = []
        self._repack(ref, tail=True, removed=removed)
        return sum(removed)

    def merge_ready(self, ref: LogRef) -> int:
        """Merge the session's complete runs only (what the background worker
        does); returns how many rows went."""
        removed: list[int] = []
        self._repack(ref, tail=False, removed=removed)
        return sum(removed)

    def _repack(self, ref: LogRef, *, tail: bool, go_on: Callable[[], bool] = lambda: True,
                removed: list[int] | None = None) -> bool:
        """Merge ``ref``'s runs (the tail's too with ``tail``), one transaction
        each, while ``go_on()``; False when it stopped before the end."""
        start = self._packed.get(ref.sid, ref.seed - 1)
        with self._snapshot() as reader:
            last = reader.head(ref.sid).last_seq
            meta = reader.chunk_meta(ref.sid, start, last)
        if not meta:
            return True
        done = None   # the last seq of the last complete run merged
        for first, upto, count, complete in _groups(meta):
            if not (complete or tail):
                break
            if not go_on():
                return False
            gone = self._merge(ref, first, upto, count)
            if removed is not None:
                removed.append(gone)
            if complete:
                done = upto
        # Rows before the last small run, or up to the last complete run, are
        # packed for good; the run at the tail may still grow.
        packed = _tail_start(meta) - 1
        self._packed[ref.sid] = packed if done is None else max(packed, done)
        return True

    def _merge(self, ref: LogRef, first: int, upto: int, count: int) -> int:
        """Merge the run of ``count`` rows from seq ``first`` to ``upto``;
        returns how many rows went.  The rows are read and merged in a read
        snapshot, without the write lock (appends go on meanwhile: the
        decompression, the checks and the compression are most of a merge's
        time); the write transaction then finds the very rows merged -- the
        same starts, lengths and body checks, so no other repack and no
        erasure touched them since -- before it writes the merged row."""
        with self._snapshot() as reader:
            rows, marks = reader.repack_run(ref.sid, first, upto)
            if len(rows) != count or rows[0].first_seq != first or rows[-1].last_seq != upto:
                return 0  # the rows changed since they were planned (another repack): skip
            merged = _merged(ref.id, ref.key, rows, self._opener, self._packer,
                             erased_lookup(reader, ref.sid))
        sources = [(r.first_seq, r.n, r.body_check) for r in rows]
        with self._transaction() as tx:
            if tx.row_checks(ref.sid, first, upto) != sources:
                return 0  # changed since the snapshot (a repack, an erasure): skip
            gone = tx.repack(ref.sid, merged, pack_marks(marks))
            if gone != count - 1:   # (raised inside: the transaction rolls back)
                raise repack_refused(ref.id, first, f"{gone} rows went, {count - 1} expected")
        return gone


def _merged(session: str | None, key: int, rows: list[Chunk], opener: ChunkCompressor,
            packer: RowCompressor, erased: Callable[[int], bytes | None] | None) -> Chunk:
    """The verified row that replaces ``rows`` (:mod:`trajlog.codec.merge`)."""
    parts = source_bodies(key, rows, opener)
    if not isinstance(parts, list):
        raise repack_refused(session, parts.seq, f"a source row does not verify "
                             f"({parts.reason})")
    merged = merged_chunk(key, rows, _join(parts), packer, opener, erased)
    if not isinstance(merged, Chunk):
        raise repack_refused(session, rows[0].first_seq,
                             f"the merged row does not verify: {merged.reason}")
    return merged


def _join(parts: list[bytes | memoryview]) -> bytes:
    """The merged body: the source rows' frames, end to end (one place a bug
    could change a byte -- and the check after it would refuse the merge)."""
    return b"".join(parts)


def _groups(meta: list[tuple[int, int, int]]) -> list[tuple[int, int, int, bool]]:
    """``(first_seq, last_seq, rows, complete)`` of each run of at least two
    consecutive small rows, cut so that a merged row stays within the cap.  A
    run is complete when it can grow no more: cut at the cap (so its merged
    row is at least :data:`SMALL_ROW`: the next row did not fit) or ended by a
    big row; only the run at the tail is not."""
    groups = []
    run: list[tuple[int, int, int]] = []

    def close(complete: bool) -> None:
        if len(run) >= 2:
            groups.append((run[0][0], run[-1][0] + run[-1][1] - 1, len(run), complete))

    size = 0
    for first, n, raw_len in meta:
        if raw_len >= SMALL_ROW or (run and size + raw_len > CAP):
            close(True)
            run, size = [], 0
            if raw_len >= SMALL_ROW:
                continue
        run.append((first, n, raw_len))
        size += raw_len
    close(False)
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
    return _merged(None, key, rows, compressor, RowCompressor(), None)


__all__ = ["Repacker", "merged_row"]
