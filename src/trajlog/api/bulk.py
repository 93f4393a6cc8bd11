"""Bulk loading of whole sessions: what an import writes.

One session is all or nothing: its header and every event, appended batch by
batch (bounded memory, whatever the session's size) inside one transaction
-- or, in a :class:`Bulk` load, inside one savepoint of a transaction shared
with the sessions around it (one commit, one fsync, for many small
sessions; still all or nothing per session).  A failure anywhere -- a refused
event, a checksum that disagrees with the source, a crash -- leaves nothing
of that session behind.

Loading a session the store already holds under the same id first compares
its header with the one the load would create (id, cwd, parent, seed, origin,
depth, preset, metadata, and the creation time when the source has one): a
session made by someone else that merely shares the id is an
:class:`ImportConflictError`, never extended.  Then, event by event, what is
stored with what is offered: the same events write nothing; more events (the
source grew, e.g. a live agent's file) are appended; a different event is an
:class:`ImportConflictError` and writes nothing.

A load that links to stored data has it compared before anything is written:
``check`` (a trajlog export's) first sees the chain the session starts from --
the stored parent's chain at the cut, for a fork -- and refuses one that is not
the source's; a fork cut beyond the stored parent's last event is an
:class:`ImportFormatError`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, suppress
from typing import Any

from ..codec.records import encode_metadata
from ..errors import (
    ImportConflictError,
    ImportFormatError,
    SessionDeletedError,
    SessionNotFoundError,
)
from ..events import check_json, encode_event, plain_str
from ..interop.protocols import ChainCheck, Item, Loaded, SessionSpec
from ..storage import Writer
from .handles import LogRef
from .lineage import INHERITED_METADATA
from .session import Engines

BATCH_EVENTS = 1000
BATCH_BYTES = 1 << 20
#: a Bulk load commits after this many sessions, or this many seconds
BULK_SESSIONS = 512
BULK_SECONDS = 0.25


def _check_owner(spec: SessionSpec, parent: LogRef) -> None:
    """A child inherits its parent's identity (:data:`.lineage.INHERITED_METADATA`):
    an imported child naming a stored parent whose identity is not its own is
    not that parent's child -- even a child with no inherited events (a
    spawned subagent, seed 0), whose file holds no chain to compare."""
    mine, theirs = spec.metadata or {}, parent.header.metadata
    for key in INHERITED_METADATA:
        if mine.get(key) != theirs.get(key):
            raise ImportFormatError(
                f"session {spec.session_id}", f"names stored session {parent.id} as its parent, "
                f"but its {key!r} ({mine.get(key)!r}) is not the parent's "
                f"({theirs.get(key)!r}), which a child inherits: not a child of the stored "
                "session; nothing was written")


class Loader:
    """Loads whole sessions into one store (see the module docstring)."""

    def __init__(self, engines: Engines) -> None:
        self._e = engines

    def load(self, spec: SessionSpec, items: Iterable[Item],
             check: ChainCheck | None = None) -> Loaded:
        """Create the session of ``spec`` holding ``items``, or bring the
        stored one up to them, in one transaction (module docstring).
        ``check`` sees the chain after every batch (an import of a trajlog
        export compares it with the source's)."""
        writer = self._e.writer
        with writer.transaction() as tx:
            return self.load_in(tx, spec, items, check)

    def bulk(self) -> Bulk:
        """A :class:`Bulk` load: many sessions, few commits."""
        return Bulk(self)

    def load_in(self, tx: Writer, spec: SessionSpec, items: Iterable[Item],
                check: ChainCheck | None) -> Loaded:
        """:meth:`load` inside the open transaction ``tx``."""
        reading = self._e.reading
        try:
            ref = reading.ref_by_id(spec.session_id, tx)
        except SessionNotFoundError:
            return self._create(tx, spec, iter(items), check)
        self._same_header(tx, ref, spec)
        return self._extend(tx, ref, iter(items), check)

    def _same_header(self, tx: Writer, ref: LogRef, spec: SessionSpec) -> None:
        """Raise :class:`ImportConflictError` unless ``ref``'s stored header is
        the one loading ``spec`` would create (the id alone proves nothing:
        a source's own UUID may name a session someone else made)."""
        have = ref.header
        parent = spec.parent_id
        if parent is not None:
            with suppress(SessionNotFoundError):   # (then it differs, as a str)
                parent = self._e.reading.ref_by_id(parent, tx).id
        meta = encode_metadata(check_json(dict(spec.metadata), "metadata"))
        wanted = (("cwd", plain_str(spec.cwd), have.cwd),
                  ("parent", parent, have.parent_session),
                  ("seed length", spec.seed_length, have.seed_length),
                  ("origin", spec.origin, have.origin),
                  ("delegation depth", spec.delegation_depth, have.delegation_depth),
                  ("agent preset", spec.agent_preset, have.agent_preset),
                  ("creation time", have.created_at if spec.created_ms is None
                   else spec.created_ms, have.created_at),
                  ("metadata", meta, encode_metadata(dict(have.metadata))))
        for name, want, stored in wanted:
            if type(want) is not type(stored) or want != stored:
                raise ImportConflictError(
                    f"session {ref.id} is already stored with another header (its {name} "
                    "differs from the import's): it is not the session this import would "
                    "create; nothing was written")

    def _create(self, tx: Writer, spec: SessionSpec, items: Iterator[Item],
                check: ChainCheck | None) -> Loaded:
        writer = self._e.writer
        parent = (self._e.reading.ref_by_id(spec.parent_id, tx) if spec.parent_id is not None
                  else None)
        if spec.seed_length < 0 or (spec.seed_length and parent is None):
            raise ImportFormatError(
                f"session {spec.session_id}", f"a seed length of {spec.seed_length} "
                f"{'without a parent' if parent is None else 'is negative'}; nothing was "
                "written")
        if parent is not None and spec.seed_length:
            last = self._e.reading.head(parent, tx).last_seq
            if last < spec.seed_length - 1:
                raise ImportFormatError(
                    f"session {spec.session_id}", f"a fork of session {parent.id} at seq "
                    f"{spec.seed_length}, which the stored session {parent.id} does not reach "
                    f"(its last event is seq {last}): not a fork of the stored session, or "
                    "a fork of a later state of it (import that first); nothing was written")
        count = 0

        def fill(tx: Writer, ref: LogRef) -> None:
            nonlocal count
            if check is not None:
                # what the session links to, before any of it is written
                check(ref.seed - 1, ref.seed_chain)
            if parent is not None:
                _check_owner(spec, parent)
            prepare = writer.prepare
            rows = (prepare(t, d, tm, dict(env) if env else {}) for t, d, tm, env in items)
            count = self._write_rows(tx, ref, rows, check, expect_last=ref.seed - 1)

        ref = writer.create(cwd=spec.cwd, agent_preset=spec.agent_preset,
                            metadata=spec.metadata, session_id=spec.session_id, parent=parent,
                            seed_length=spec.seed_length, origin=spec.origin,
                            delegation_depth=spec.delegation_depth,
                            created_ms=spec.created_ms, fill=fill, tx=tx)
        return Loaded(ref.header, True, count, 0)

    def _extend(self, tx: Writer, ref: LogRef, items: Iterator[Item],
                check: ChainCheck | None) -> Loaded:
        """Compare the stored events with ``items``; append what is new."""
        writer = self._e.writer
        if check is not None:
            check(ref.seed - 1, ref.seed_chain)
        kept = 0
        first = None
        stored = iter(self._e.reading.events(ref, ref.seed, None, reader=tx))
        for item in items:
            row = writer.prepare(item[0], item[1], item[2], dict(item[3]))
            have = next(stored, None)
            if have is None:
                first = row
                break
            if encode_event(have) != row.payload:
                raise ImportConflictError(
                    f"session {ref.id} is already stored with a different event at seq "
                    f"{have.seq} ({have.type!r}; the import has {item[0]!r}); nothing was "
                    "written")
            kept += 1
            if check is not None and kept % BATCH_EVENTS == 0:
                check(have.seq, self._e.reading.chain_at(ref, have.seq, tx))
        if check is not None and kept:
            seq = ref.seed + kept - 1
            check(seq, self._e.reading.chain_at(ref, seq, tx))
        if first is None:
            return Loaded(ref.header, False, 0, kept)
        rest = _chain_rows(first, (writer.prepare(t, d, tm, dict(env))
                                   for t, d, tm, env in items))
        count = self._write_rows(tx, ref, rest, check, expect_last=ref.seed + kept - 1)
        return Loaded(ref.header, False, count, kept)

    def _write_rows(self, tx: Writer, ref: LogRef, rows: Iterator[Any],
                    check: ChainCheck | None, expect_last: int) -> int:
        """Append ``rows`` in batches inside ``tx``; the number written."""
        count = 0
        batch: list[Any] = []
        size = 0
        for row in rows:
            if row.check and batch:
                # a compaction or status mark is checked against the log as
                # written before its batch: write what it refers to first
                count += self._flush(tx, ref, batch, check, expect_last + count)
                batch, size = [], 0
            batch.append(row)
            size += len(row.payload)
            if len(batch) >= BATCH_EVENTS or size >= BATCH_BYTES:
                count += self._flush(tx, ref, batch, check, expect_last + count)
                batch, size = [], 0
        if batch:
            count += self._flush(tx, ref, batch, check, expect_last + count)
        return count

    def _flush(self, tx: Writer, ref: LogRef, batch: list[Any], check: ChainCheck | None,
               expect_last: int) -> int:
        writer = self._e.writer
        writer.apply(tx, ref, batch, expect_last=expect_last)
        if check is not None:
            state = writer.state(tx, ref)
            check(state.synced_seq, state.chain)
        return len(batch)


class Bulk:
    """Sessions loaded in shared transactions, one savepoint each: a session
    that fails is rolled back alone (and its error raised); the others of the
    transaction stay.  The transaction commits every :data:`BULK_SESSIONS`
    sessions or :data:`BULK_SECONDS` (so other writers wait at most that
    long), and at :meth:`close`.  A session is durable once the commit after
    it returned: :meth:`load` reports it, :meth:`close` (or
    :meth:`commit`) makes it so."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader
        self._writer = loader._e.writer
        self._cm: AbstractContextManager[Writer] | None = None
        self._tx: Writer | None = None
        self._sessions = 0
        self._since = 0.0
        #: sessions loaded since the last commit (lost if that commit fails)
        self.pending: list[Loaded] = []
        #: sessions reported loaded whose transaction then failed (not stored)
        self.lost: list[Loaded] = []

    def load(self, spec: SessionSpec, items: Iterable[Item],
             check: ChainCheck | None = None) -> Loaded:
        if self._tx is None:
            self._cm = self._writer.transaction()
            self._tx = self._cm.__enter__()
            self._sessions, self._since = 0, time.monotonic()
        tx = self._tx
        try:
            with tx.savepoint():
                loaded = self._loader.load_in(tx, spec, items, check)
        except BaseException:
            self._forget_failed(spec)
            if not tx.in_transaction():   # the failure ended the transaction itself
                self._abandon()
            raise
        self.pending.append(loaded)
        self._sessions += 1
        if self._sessions >= BULK_SESSIONS or time.monotonic() - self._since > BULK_SECONDS:
            self.commit()
        return loaded

    def _forget_failed(self, spec: SessionSpec) -> None:
        # its cached write state may hold the rolled-back events
        try:
            ref = self._loader._e.reading.ref_by_id(spec.session_id, self._tx)
        except (SessionNotFoundError, SessionDeletedError):
            self._writer.forget(None)
            return
        self._writer.forget(ref.sid)

    def _abandon(self) -> None:
        cm, self._cm, self._tx = self._cm, None, None
        assert cm is not None
        self.lost.extend(self.pending)
        self.pending = []
        cm.__exit__(RuntimeError, RuntimeError("abandoned"), None)

    def commit(self) -> None:
        """Commit what was loaded so far.  If the commit fails, the sessions
        it held are moved to :attr:`lost` and the error is raised."""
        cm, self._cm, self._tx = self._cm, None, None
        pending, self.pending = self.pending, []
        if cm is not None:
            try:
                cm.__exit__(None, None, None)
            except BaseException:
                self.lost.extend(pending)
                raise

    def close(self) -> None:
        self.commit()

    def __enter__(self) -> Bulk:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None and self._tx is not None and not self._tx.in_transaction():
            self._abandon()
            return
        self.commit()


def _chain_rows(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


__all__ = ["BATCH_EVENTS", "Bulk", "ChainCheck", "Item", "Loaded", "Loader", "SessionSpec"]
