"""Bulk loading of whole sessions: what an import writes.

One session is one transaction: its header and every event, appended batch by
batch inside it (bounded memory, whatever the session's size), so a failure
anywhere -- a refused event, a checksum that disagrees with the source, a
crash -- leaves no session behind.  Loading a session the store already holds
under the same id compares, event by event, what is stored with what is
offered: the same events write nothing; more events (the source grew, e.g. a
live agent's file) are appended in one transaction; different events are an
:class:`ImportConflictError` and write nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ImportConflictError, SessionNotFoundError
from ..events import SessionHeader, encode_event
from ..storage import Writer
from .handles import LogRef
from .session import Engines

BATCH_EVENTS = 1000
BATCH_BYTES = 1 << 20

#: ``(type, data, time, envelope)``; envelope: source, causal_parent, ...
Item = tuple[str, Any, int, Mapping[str, Any]]
#: called after each batch with (last seq written, chain of that frame)
ChainCheck = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class SessionSpec:
    """The header of a session to load."""

    session_id: str
    cwd: str = "."
    agent_preset: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_ms: int | None = None
    parent_id: str | None = None
    seed_length: int = 0
    origin: str | None = None
    delegation_depth: int = 0


@dataclass(frozen=True, slots=True)
class Loaded:
    """What loading one session did: ``created`` (a new session), ``appended``
    events written, ``kept`` events that were already stored."""

    header: SessionHeader
    created: bool
    appended: int
    kept: int


class Loader:
    """Loads whole sessions into one store (see the module docstring)."""

    def __init__(self, engines: Engines) -> None:
        self._e = engines

    def exists(self, session_id: str) -> bool:
        try:
            self._e.reading.ref_by_id(session_id)
        except SessionNotFoundError:
            return False
        return True

    def load(self, spec: SessionSpec, items: Iterable[Item],
             check: ChainCheck | None = None) -> Loaded:
        """Create the session of ``spec`` holding ``items``, or bring the
        stored one up to them (module docstring).  ``check`` sees the chain
        after every batch (an import of a trajlog export compares it with the
        source's)."""
        reading = self._e.reading
        try:
            ref = reading.ref_by_id(spec.session_id)
        except SessionNotFoundError:
            return self._create(spec, iter(items), check)
        return self._extend(ref, iter(items), check)

    def _create(self, spec: SessionSpec, items: Iterator[Item],
                check: ChainCheck | None) -> Loaded:
        writer = self._e.writer
        parent = (self._e.reading.ref_by_id(spec.parent_id) if spec.parent_id is not None
                  else None)
        count = 0

        def fill(tx: Writer, ref: LogRef) -> None:
            nonlocal count
            count = self._write(tx, ref, items, check)

        ref = writer.create(cwd=spec.cwd, agent_preset=spec.agent_preset,
                            metadata=spec.metadata, session_id=spec.session_id, parent=parent,
                            seed_length=spec.seed_length, origin=spec.origin,
                            delegation_depth=spec.delegation_depth,
                            created_ms=spec.created_ms, fill=fill)
        return Loaded(ref.header, True, count, 0)

    def _extend(self, ref: LogRef, items: Iterator[Item], check: ChainCheck | None) -> Loaded:
        """Compare the stored events with ``items``; append what is new."""
        writer = self._e.writer
        kept = 0
        pending: list[Any] = []
        stored = iter(self._e.reading.events(ref, ref.seed, None))
        for item in items:
            row = writer.prepare(item[0], item[1], item[2], dict(item[3]))
            have = next(stored, None)
            if have is None:
                pending.append(row)
                break
            if encode_event(have) != row.payload:
                raise ImportConflictError(
                    f"session {ref.id} is already stored with a different event at seq "
                    f"{have.seq} ({have.type!r}; the import has {item[0]!r}); nothing was "
                    "written")
            kept += 1
        if not pending:
            return Loaded(ref.header, False, 0, kept)
        first = pending[0]
        with writer.transaction() as tx:
            # the head must still be where the comparison ended
            rest = _chain_rows(first, (writer.prepare(t, d, tm, dict(env))
                                       for t, d, tm, env in items))
            count = self._write_rows(tx, ref, rest, check, expect_last=ref.seed + kept - 1)
        return Loaded(ref.header, False, count, kept)

    def _write(self, tx: Writer, ref: LogRef, items: Iterator[Item],
               check: ChainCheck | None) -> int:
        prepare = self._e.writer.prepare
        rows = (prepare(t, d, tm, dict(env) if env else {}) for t, d, tm, env in items)
        return self._write_rows(tx, ref, rows, check, expect_last=ref.seed - 1)

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


def _chain_rows(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


__all__ = ["BATCH_EVENTS", "ChainCheck", "Item", "Loaded", "Loader", "SessionSpec"]
