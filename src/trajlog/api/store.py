"""The store facade: :func:`open` a :class:`Store`, create and find sessions.

A store is one backend (the embedded SQLite file by default) and the parts
that work on it: the write engine with its group commit and leases
(:mod:`.writer`, :mod:`.leases`), the read path (:mod:`.reading`), recovery
(:mod:`.recover`), lineage (:mod:`.lineage`) and the projections' state cache.
Session handles (:mod:`.session`) share them.  Exports and imports are
:mod:`trajlog.interop`'s, which works on this store by its shape
(:class:`trajlog.interop.protocols.StoreLike`).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from ..codec.compression import Compressor
from ..errors import (
    InvalidArgumentError,
    LogMovedError,
    StoreClosedError,
    TrajlogError,
)
from ..events import Event, SessionHeader
from ..interop.protocols import ChainCheck, Item, Loaded, SessionSpec
from ..memory import Identity, MemoryAudit, MemoryView, PurgeReport
from ..memory.audit import audit
from ..memory.retention_rules import RetentionRules
from ..memory.search_index import deploy_global, rebuild
from ..memory.stored_rules import load_rules
from ..projections.engine import StateCache
from ..redaction import RedactionPolicy, Redactor
from ..storage import Backend, Request, Writer
from ..storage.factory import migrate_store, open_backend, schema_version_of
from . import checks
from .bulk import Bulk, Loader
from .deleted import DeleteReport, deletion_defects
from .deletion import delete_session
from .forget import Forgetting
from .handles import LogRef, Options
from .leases import new_writer_id, writer_closed, writer_opened
from .lineage import DEFAULT_MAX_DEPTH, Lineage
from .reading import LogReader, VerifyReport
from .recover import Recovery
from .repack import Repacker
from .session import Engines, Session
from .session_search import Searcher
from .stats import StoreStats, store_stats
from .store_retention import RetentionFace
from .store_search import SearchFace
from .sweeper import Sweeper
from .write_stages import Row, returned, turn_marker
from .writer import WriteEngine

if TYPE_CHECKING:   # (imported when first used: see Store.export)
    from ..interop.export import ExportReport
    from ..interop.export import Progress as ExportProgress
    from ..interop.importer import ImportReport
    from ..interop.importer import Progress as ImportProgress

DURABILITY = ("full", "normal")
LEASE_TTL_MS = 30_000
# what append_atomic checks a session it creates against (an ordinary session)
_ORDINARY = SessionHeader("", ".", None, 0, None, 0, None, 0, {})


def migrate(path: str, *, progress: Callable[[int, int], None] | None = None) -> int:
    """Bring the store at ``path`` (a file, or a ``postgresql://`` URL) to
    this trajlog's schema now (what :func:`open` does on its own) and return
    the schema version it had; ``progress(sessions done, total)`` while a
    trajlog 0.1 store's sessions are rewritten.  A store that does not exist
    is an error, not created."""
    return migrate_store(os.fspath(path), progress=progress)


def schema_of(path: str) -> int | None:
    """The schema version of the trajlog store at ``path`` (a file, or a
    ``postgresql://`` URL), or None for a database that is not one (an empty
    file, another program's database); read without writing.  A path that
    does not exist is an error."""
    return schema_version_of(os.fspath(path))


def open(path: str = "trajlog.db", durability: str = "full", *,
         tenant: str | None = None, lock_timeout_ms: int = 10_000,
         busy_timeout_ms: int | None = None, lease_ttl_ms: int = LEASE_TTL_MS,
         max_delegation_depth: int = DEFAULT_MAX_DEPTH, backend: Backend | None = None,
         repack: bool = True, redaction: RedactionPolicy | None = None,
         retention: RetentionRules | None = None) -> Store:
    """Open (creating if needed) the store at ``path``: a file (SQLite, the
    embedded default) or a ``postgresql://`` URL (a libpq connection URL,
    several hosts allowed; docs/postgresql.md).

    ``durability="full"`` (default): an append returns only once it is durable,
    also across power loss.  ``"normal"``: commits survive a crash of the
    process, but the last ones may be lost on power loss or an OS crash
    (SQLite WAL with ``synchronous=NORMAL``; PostgreSQL
    ``synchronous_commit=off``); roughly 7x more single appends/s on SQLite.
    ``":memory:"`` gives a private in-memory store for tests.
    ``tenant`` binds a PostgreSQL store to one tenant: every unit of work runs
    with it, and row-level security hides every other tenant's data.
    ``lock_timeout_ms`` bounds a wait for another connection's lock
    (``busy_timeout_ms`` is its former name).
    ``max_delegation_depth`` bounds how deep subagents may spawn subagents.
    ``backend`` runs the store on another :class:`~trajlog.storage.Backend`
    (``path``, ``durability``, ``tenant`` and the timeout are then the backend's).
    ``repack=False`` leaves small rows as they are until :meth:`Store.repack`.
    ``redaction`` scans every payload and memory item before it is written
    and routes each identity's privacy mode (:mod:`trajlog.redaction`).
    ``retention`` sets the store's retention rules by kind, and whether a
    background sweeper applies them, for this store object; without it, the
    rules saved in the store (:meth:`Store.set_retention`) apply
    (docs/retention.md).
    """
    return Store(path, durability=durability, tenant=tenant,
                 lock_timeout_ms=lock_timeout_ms if busy_timeout_ms is None else busy_timeout_ms,
                 lease_ttl_ms=lease_ttl_ms, max_delegation_depth=max_delegation_depth,
                 backend=backend, repack=repack, redaction=redaction, retention=retention)


@dataclass(frozen=True, slots=True)
class _Opener:
    """Opens one session when called (so that :meth:`Store.stats` can report
    a session it cannot open by its id)."""

    store: Store
    session_id: str

    def __call__(self) -> Session:
        return self.store.session(self.session_id)


@dataclass(frozen=True, slots=True)
class StoreAudit:
    """What :meth:`Store.verify` found: a report (or the error that stopped
    its verification) per session, the memory audit, and the deletion rows
    whose log does not end with their ``session/deleted`` record."""

    sessions: dict[str, VerifyReport | str]
    memory: MemoryAudit
    deletions: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.memory.ok and not self.deletions and all(
            not isinstance(r, str) and r.ok for r in self.sessions.values())


class Store(RetentionFace, SearchFace):
    """One trajlog database.  Thread-safe; open one per process and share it.

    Use :func:`trajlog.open`.  Close it (or use it as a context manager) to
    release its connections; a closed store raises :class:`StoreClosedError`.
    """

    def __init__(self, path: str, *, durability: str = "full", tenant: str | None = None,
                 lock_timeout_ms: int = 10_000, lease_ttl_ms: int = LEASE_TTL_MS,
                 max_delegation_depth: int = DEFAULT_MAX_DEPTH,
                 backend: Backend | None = None, repack: bool = True,
                 redaction: RedactionPolicy | None = None,
                 retention: RetentionRules | None = None) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be str or PathLike, not {type(path).__name__}")
        if durability not in DURABILITY:
            raise InvalidArgumentError(f"durability must be 'full' or 'normal', "
                                       f"not {durability!r}")
        for name, value in (("max_delegation_depth", max_delegation_depth),
                            ("lock_timeout_ms", lock_timeout_ms),
                            ("lease_ttl_ms", lease_ttl_ms)):
            if type(value) is not int or not 0 <= value < 2**31:
                raise InvalidArgumentError(f"{name} must be a non-negative int, not {value!r}")
        if not isinstance(repack, bool):
            raise TypeError(f"repack must be bool, not {type(repack).__name__}")
        if tenant is not None and not isinstance(tenant, str):
            raise TypeError(f"tenant must be str, not {type(tenant).__name__}")
        if retention is not None and not isinstance(retention, RetentionRules):
            raise TypeError(f"retention must be RetentionRules, not {type(retention).__name__}")
        opened = backend is None
        if backend is None:
            backend = open_backend(os.fspath(path), durability=durability,
                                   lock_timeout_ms=lock_timeout_ms, tenant=tenant)
        if retention is None:   # (rules given at open override the stored ones)
            try:
                retention = load_rules(backend)
            except BaseException:
                if opened:
                    backend.close()
                raise
        durability = backend.durability
        options = Options(durability, lease_ttl_ms, max_delegation_depth, new_writer_id())
        reading = LogReader(backend, Compressor())
        writer = WriteEngine(backend, reading, options)
        repacker = Repacker(writer.transaction, backend.snapshot, lambda: writer.appends)
        if repack:
            writer.on_small_rows = repacker.request
        views = StateCache()
        self._e = Engines(backend, options, reading, writer, Recovery(backend, reading, writer),
                          Lineage(backend, reading, writer, options), views, repacker)
        self._forget = Forgetting(backend, reading, views)
        self._sweeper = Sweeper(backend, reading, self._forget, lambda: writer.appends,
                                retention)
        self._loader = Loader(self._e)
        self._search = Searcher(backend, reading)
        writer_opened(options.writer_id)
        # dropped without close(): its leases die with it
        self._finalizer = weakref.finalize(self, writer_closed, options.writer_id)
        self.path = backend.path
        self.durability = durability
        self.lease_ttl_ms = lease_ttl_ms
        self.max_delegation_depth = max_delegation_depth
        self.writer_id = options.writer_id
        self.redaction = redaction
        self._sweeper.start()

    @property
    def redaction(self) -> RedactionPolicy | None:
        """The redaction policy every later write passes through (None: none)."""
        red = self._e.writer.redactor
        return None if red is None else red.policy

    @redaction.setter
    def redaction(self, policy: RedactionPolicy | None) -> None:
        self._e.writer.redactor = None if policy is None else Redactor(policy)

    def close(self) -> None:
        """Release the writer leases this store still holds, then close every
        connection.  Idempotent."""
        if self._e.backend.closed:
            return
        try:
            self._sweeper.close()
            self._search.close()
            self._e.repacker.close()
            self._e.writer.leases.release_all()
            self._e.writer.commit.stop()
            self._e.reading.close()
            self._e.backend.close()
        finally:
            self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_session(self, cwd: str = ".", agent_preset: str | None = None,
                       metadata: Mapping[str, Any] | None = None, *,
                       session_id: str | None = None) -> Session:
        """Create an ordinary session with an empty log and return it."""
        if self._e.backend.closed:
            raise StoreClosedError("the store is closed")
        ref = self._e.writer.create(cwd=cwd, agent_preset=agent_preset, metadata=metadata,
                                    session_id=session_id)
        return Session(self._e, ref)

    def session(self, session_id: str) -> Session:
        """The session with this id (:class:`SessionNotFoundError` if none)."""
        if not isinstance(session_id, str):
            raise TypeError(f"session id must be str, not {type(session_id).__name__}")
        return Session(self._e, self._e.reading.ref_by_id(session_id))

    def append_atomic(self, writes: Iterable[tuple[str | Session, Iterable[Any], int | None]],
                      *,
                      create: Mapping[str, Mapping[str, Any] | None] | None = None,
                      ) -> list[list[Event]]:
        """Append to several sessions in one transaction: every write or none.

        Each write is ``(session, items, expect_last)`` -- a handle or a
        session id, ``items`` as for :meth:`Session.append_batch`.
        ``expect_last`` (None: no check) is the seq the session's log must end
        at (-1: empty); if one log ends elsewhere, :class:`LogMovedError` and
        nothing is written -- optimistic concurrency over several sessions.
        A session named in ``create`` (its id -> its metadata) that does not
        exist yet is made, ordinary, with ``cwd="."``, in the same
        transaction.  Turn markers are refused (they move the writer lease).
        Returns each write's events, in order."""
        return [events for _, events in self._append_atomic(writes, create)]

    def _append_atomic(self, writes: Iterable[tuple[str | Session, Iterable[Any], int | None]],
                       create: Mapping[str, Mapping[str, Any] | None] | None,
                       ) -> list[tuple[Session, list[Event]]]:
        """:meth:`append_atomic`, with each write's session handle (a caller
        that keeps them writes and reads those sessions again without looking
        them up)."""
        self._check_open()
        e = self._e
        made = dict(create or {})
        plan: list[tuple[str, LogRef | None, list[Row], int | None]] = []
        named: set[str] = set()
        targets: list[str | Session] = []
        for target, items, expect_last in writes:
            targets.append(target)
            ref: LogRef | None = target._ref if isinstance(target, Session) else None
            session_id = target.id if isinstance(target, Session) else target
            if not isinstance(session_id, str):
                raise TypeError(f"session id must be str, not {type(session_id).__name__}")
            if session_id in named:
                raise InvalidArgumentError(f"session {session_id} is written twice")
            named.add(session_id)
            if expect_last is not None and (type(expect_last) is not int or expect_last < -1):
                raise InvalidArgumentError("expect_last must be None or an int >= -1")
            if ref is None and session_id not in made:  # (one to make: looked up in the tx)
                ref = e.reading.ref_by_id(session_id)
            rows = e.writer.prepare_items(_ORDINARY if ref is None else ref.header, items)
            if turn_marker(rows) is not None:
                raise InvalidArgumentError("append_atomic takes no turn/start or turn/end")
            plan.append((session_id, ref, rows, expect_last))
        if not plan:
            return []
        writer = e.writer

        def apply(tx: Writer) -> list[tuple[LogRef, list[Event]]]:
            refs: list[LogRef | None] = []
            for session_id, ref, rows, expect_last in plan:  # every refusal first
                if ref is None and tx.session_by_id(session_id) is not None:
                    ref = e.reading.ref_by_id(session_id, reader=tx)  # it exists already
                    for row in rows:
                        checks.check_append_type(ref.header, row.event.type)
                last = -1
                if ref is not None:
                    state = writer.state(tx, ref)
                    state.lease = writer.leases.check(tx, ref.sid, ref.id, state.lease)
                    last = state.synced_seq
                if expect_last is not None and last != expect_last:
                    raise LogMovedError(f"session {session_id} moved to seq {last}; "
                                        f"expected it at {expect_last}")
                refs.append(ref)
            done: list[tuple[LogRef, list[Event]]] = []
            try:
                with tx.savepoint():  # a late refusal must not leave the first writes
                    for (session_id, _, rows, _), ref in zip(plan, refs, strict=True):
                        if ref is None:
                            ref = writer.create(cwd=".", agent_preset=None, tx=tx,
                                                metadata=made[session_id], session_id=session_id)
                        done.append((ref, writer.apply(tx, ref, rows)))
            except BaseException:
                for ref, _ in done:  # their cached heads are ahead of the rolled-back log
                    writer.forget(ref.sid)
                raise
            return done

        sids = tuple(sorted({p[1].sid for p in plan if p[1] is not None}))  # (locked first)
        result: list[tuple[LogRef, list[Event]]] = writer.commit.submit(
            Request(apply, None, sids))
        for ref, _ in result:
            writer.after_commit(ref)
        return [(target if isinstance(target, Session) and target._ref is ref
                 else Session(e, ref), returned(p[2], events))
                for target, p, (ref, events) in zip(targets, plan, result, strict=True)]

    def load(self, session_id: str) -> Session:
        """Verify a session and make it whole after a crash; return it.

        Every committed event is kept.  If the log is open (a tool call, a step
        or a turn with no end), the synthetic closers of :mod:`trajlog.recovery`
        are appended in one transaction.  Loading a balanced session writes
        nothing, so load is idempotent.  Refused, with a typed error naming
        session, seq, offset and reason: a seq gap (:class:`SequenceError`), a
        frame or chain checksum failure (:class:`ChecksumError`,
        :class:`ChainError`), a head that disagrees with the log
        (:class:`HeadMismatchError`), and an open log whose writer is still live
        (:class:`LiveWriterError`).
        """
        session = self.session(session_id)
        _, report = self._e.recovery.recover(session._ref, repair=True)
        if report.refusal is not None:
            raise report.refusal
        return session

    def dependents(self, session_id: str) -> list[SessionHeader]:
        """Sessions whose inherited prefix reads this session's events (forks
        with a seed).  A session with dependents must never be purged: their
        logs would lose their beginning (retention relies on this rule)."""
        parent = self.session(session_id)
        return [c.header for c in self._e.reading.children(parent._ref)
                if c.header.seed_length > 0]

    def repack(self, session_id: str | None = None) -> int:
        """Merge small chunk rows now -- of one session, or of every session --
        instead of waiting for the background repack; returns how many rows
        went.  Frames and chain stay byte for byte (verified before the old
        rows go).  Of every session: those whose header is damaged are left
        as they are (a repack of one of them by id refuses)."""
        self._e.repacker.drain()
        refs = ([self.session(session_id)._ref] if session_id is not None else
                [self.session(h.id)._ref for h in self.sessions(include_subagents=True)
                 if h.damage is None])
        return sum(self._e.repacker.repack(ref) for ref in refs)

    # -- memory and forgetting ---------------------------------------------------------

    def memory(self, identity: Identity) -> MemoryView:
        """The memory view bound to ``identity``: every query it makes carries
        the identity's scope predicates.  An identity naming a session must
        own it (:class:`~trajlog.memory.MemoryView`): MemoryAccessError if the
        session's header names another tenant or user, or there is no such
        session."""
        self._check_open()
        reading = self._e.reading
        return MemoryView(self._forget, identity, redactor=self._e.writer.redactor,
                          session_metadata=lambda sid: reading.ref_by_id(sid).header.metadata)

    def deploy_global(self, type: str, content: Any, *, key: str | None = None,
                      actor: str) -> str:
        """Write a global item (deploy time only: a memory view refuses global
        writes).  Idempotent on its content; returns the item id."""
        self._check_open()
        return deploy_global(self._e.backend, type, content, key=key, actor=actor)

    def erase(self, session_id: str, seq: int | list[int], *, reason: str,
              actor: str | None = None) -> PurgeReport:
        """Erase the payload of event ``seq`` (or of several seqs) under a
        tombstone and purge every copy: the log keeps the frame's header,
        payload check and chain, so ``verify()`` still passes; every reader
        and projection returns the tombstone's view instead.  An event of a
        fork's inherited prefix is erased in the ancestor that holds it (for
        every session that reads it).  Idempotent; returns the purge report."""
        self._check_open()
        seqs = [seq] if isinstance(seq, int) else list(seq)
        return self._forget.erase(session_id, seqs, reason=reason, actor=actor)

    def delete_session(self, session_id: str, *, reason: str,
                       actor: str | None = None) -> DeleteReport:
        """Delete a session: record who deleted it, when and why (an
        append-only record that outlives it), then erase every payload of its
        log under tombstones with erasure's purge.  From then on it is in no
        listing, a look-up by its id raises :class:`SessionDeletedError`, and
        nothing writes under its id again.  Refused while forks or subagents
        of it are live (:class:`DependentSessionsError`).  Idempotent
        (docs/deleting.md)."""
        self._check_open()
        return delete_session(self._e, self._forget, session_id, reason=reason, actor=actor)

    def verify(self) -> StoreAudit:
        """Verify every session (each on its own: one damaged session never
        stops the others) and the memory layer; reported, never raised."""
        self._check_open()
        sessions: dict[str, VerifyReport | str] = {}
        for header in self.sessions(include_subagents=True):
            try:
                sessions[header.id] = self.session(header.id).verify()
            except TrajlogError as exc:
                sessions[header.id] = f"{type(exc).__name__}: {exc}"
        reader = self._e.backend.reader()
        return StoreAudit(sessions, audit(reader), deletion_defects(reader))

    def verify_memory(self) -> MemoryAudit:
        """Verify every memory version, every tombstone and the purge each
        tombstone promises (reported, never raised)."""
        self._check_open()
        return audit(self._e.backend.reader())

    def rebuild_memory_index(self) -> int:
        """Make the derived full-text index again from the canonical versions
        (creating it if it was dropped); returns how many items it holds."""
        self._check_open()
        return rebuild(self._e.backend)

    def drop_memory_index(self) -> None:
        """Drop the derived full-text index (searches fall back to the
        canonical rows until :meth:`rebuild_memory_index`)."""
        self._check_open()
        self._e.backend.memory_index(False)

    def _check_open(self) -> None:
        if self._e.backend.closed:
            raise StoreClosedError("the store is closed")

    def load_session(self, spec: SessionSpec, items: Iterable[Item],
                     check: ChainCheck | None = None) -> Loaded:
        """Load a whole session in one transaction (what importers use; see
        :mod:`trajlog.api.bulk`): create it with ``items``, or bring the
        stored session of the same id up to them -- the same events write
        nothing, more are appended, different ones (or a stored header other
        than the one ``spec`` would create) raise :class:`ImportConflictError`."""
        if self._e.backend.closed:
            raise StoreClosedError("the store is closed")
        return self._loader.load(spec, items, check)

    def bulk_loader(self) -> Bulk:
        """Load many sessions with few commits: each session all or nothing
        (a savepoint), a commit every few hundred sessions or a quarter
        second, and at the end (:class:`~trajlog.api.bulk.Bulk`)."""
        if self._e.backend.closed:
            raise StoreClosedError("the store is closed")
        return self._loader.bulk()

    # -- ways in and out (trajlog.interop) ----------------------------------------------

    def export(self, session_id: str, path: str | os.PathLike[str], *,
               format: str | None = None, progress: ExportProgress | None = None,
               view: Any = None) -> ExportReport:
        """Write ``session_id`` to ``path``: ``.tlog`` (its frames, verifiable
        without the database), ``.jsonl`` / ``.jsonl.zst`` (one JSON line per
        event, checksums carried) or ``.zip`` (the session and every
        descendant under ``subagents/<id>/``).  ``format`` overrides the name's
        suffix.  Erased payloads stay erased; the file appears complete or not
        at all (:mod:`trajlog.interop.export`).  ``view``: a reader view
        (``"developer"``, ``"auditor"``, ``"external-model"`` or a
        :class:`~trajlog.projections.reader_views.ReaderView`): the session as
        that reader sees it, as JSONL (docs/reader-views.md)."""
        # imported here, not at the top: a host that never exports never loads
        # the formats (zipfile, tempfile, the importers' sources) with trajlog
        from ..interop.export import export as export_session
        return export_session(self, session_id, path, format=format, progress=progress,
                              view=view)

    def import_path(self, path: str | os.PathLike[str], *, format: str = "auto",
                    progress: ImportProgress | None = None, close: bool = False,
                    ) -> ImportReport:
        """Import a trajlog export, or another agent's sessions (Claude Code,
        Codex, Inspect AI, OpenHands, SWE-agent, aider), from a file or a
        folder.  One transaction per session; importing the same file again
        writes nothing; ``close=True`` closes what a source left open (a
        rollout that ends mid-turn) with trajlog's own recovery.  See
        :mod:`trajlog.interop.importer`."""
        from ..interop.importer import import_path as import_into  # (see export)
        return import_into(self, path, format=format, progress=progress, close=close)

    def stats(self, session_ids: Iterable[str] | None = None, *, by_type: bool = True,
              progress: Callable[[int], None] | None = None) -> StoreStats:
        """Sessions, events, chunk rows, raw and stored bytes (the compression)
        and, with ``by_type``, events by type -- of ``session_ids`` or of every
        session; ``progress(sessions measured)`` as it goes."""
        self._check_open()
        ids = (list(session_ids) if session_ids is not None else
               [h.id for h in self.sessions(include_subagents=True)])
        return store_stats([_Opener(self, i) for i in ids], self._e.backend.size(), by_type=by_type,
                           progress=progress)

    def sessions(self, *, include_subagents: bool = False) -> list[SessionHeader]:
        """Headers of the store's sessions, oldest first; subagent sessions
        only when ``include_subagents``."""
        return self._e.reading.sessions(include_subagents)


__all__ = ["DURABILITY", "LEASE_TTL_MS", "Store", "StoreAudit", "open"]
