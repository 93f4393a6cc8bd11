"""The storage seam: what trajlog asks of a database, in (sid, seq) and bytes.

Everything above ``storage/`` talks to a :class:`Backend` and never to SQL.
The SQLite backend (:mod:`.sqlite`) is the embedded default; a PostgreSQL
backend implements the same protocols and nothing above them changes.

The contract a backend keeps (docs/architecture.md, "The storage seam"):

* **Sessions** are immutable header rows; ``sid`` is the backend's small
  integer for a session, ``id`` its UUID text.  Keys, chains and checks are
  unsigned 64-bit integers at this seam (a backend stores them as it likes).
* **Heads**: each session has one head row -- its last seq and the chain of
  that frame (the durable watermark) -- and the writer lease.  A head moves
  only with its log, in the same transaction.
* **Chunks**: frames go in as chunk rows (:class:`~trajlog.codec.chunks.Chunk`:
  a run of consecutive frames, exactly the bytes the codec made, with its
  checks) together with the sparse event index rows
  (:class:`~trajlog.storage.event_index.IndexRow`), and come out in seq order.  An
  append carries its first seq: a backend refuses one that is not exactly the
  head's next (so appends are idempotent to retry and ordered per session
  whatever the number of writers).  Rows change only by a repack (rows merged
  into one holding the same frames).
* **Transactions**: :meth:`Backend.transaction` is the one way to write --
  all of it or none; :meth:`Backend.reader` reads committed data.
  Concurrency is per session: :meth:`Writer.lock_heads` locks the heads a
  transaction writes, in sid order (a backend that runs one write
  transaction at a time, like SQLite, locks nothing and says through
  ``foreign_commit`` when cached heads may be stale); an append that does not
  start at its head's next seq is refused with ``HeadMovedError`` having
  written nothing; a deadlock or serialization failure ends the transaction
  with ``TransactionConflictError``, and group commit runs it again.
  ``Writer.savepoint`` nests a part that can be rolled back alone (group
  commit isolates each request this way).  **A StoreError raised inside a
  transaction ends the transaction unless it was raised inside a
  savepoint** (PostgreSQL aborts the whole transaction at the first failed
  statement): a caller that tolerates a failure runs that part in a
  savepoint.
* **Ids**: sids come from the backend (never reused on PostgreSQL; they
  need not be dense).  Memory version and tombstone ids are dense per
  store: in a write transaction, :meth:`MemoryReader.memory_max_mid` and
  :meth:`MemoryReader.max_tid` reserve the ids after them until the
  transaction ends (a backend with concurrent writers locks the memory head).
* **Leases**: a session's writer lease is in its head row; whether its
  holder is alive is :meth:`Backend.lease_alive`'s answer where the backend
  has one (heartbeats stamped by the server's clock), else the host+pid rule.
* **Erasure** leaves copies a backend may or may not be able to remove
  (free pages, a write-ahead log, dead tuples, replicas, backups):
  :meth:`Backend.purge` removes what it can and names what remains.
* **Deletion**: a deleted session keeps its header, head and (erased) rows,
  and one append-only deletion row; :meth:`Reader.session_by_id` and the
  listings no longer see it.  Its log ends with ``session/deleted``, so
  the write state's terminal check refuses a later append (as after
  ``session/closed``); the header's unique id refuses a session made with its
  id, and a guard on the sessions table one made under it.
* **Search**: the event search index is derived (made, dropped, rebuilt
  from the logs) and never written by an append; the tombstone write of an
  event's erasure (:meth:`Writer.insert_tombstone`) deletes the event's
  documents in the same transaction -- the one path every erasure,
  deletion and retention takes.
* **Errors** surface as :mod:`trajlog.errors` types (``StoreError`` and its
  subclasses), never as the driver's own exceptions.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple, Protocol

from ..codec.chunks import Chunk
from ..errors import session_deleted
from .event_index import IndexRow, Mark
from .search_model import DocRow, SearchFilter, SearchRow


class SessionRow(NamedTuple):
    """A session header as stored, with the backend's ``sid``."""

    sid: int
    id: str
    key: int
    created_ms: int
    cwd: str
    parent_sid: int | None
    seed_length: int
    seed_chain: int
    origin: str | None
    delegation_depth: int
    agent_preset: str | None
    metadata: bytes
    header_check: int
    damage: str | None = None   # set when a stored value has a type trajlog never writes


class Lease(NamedTuple):
    """The writer lease of a session (all None when free)."""

    owner: str | None = None
    host: str | None = None
    pid: int | None = None
    started_ms: int | None = None
    heartbeat_ms: int | None = None


class Head(NamedTuple):
    """A session's head: the last durable seq (-1: empty), its chain, the lease."""

    last_seq: int
    chain: int
    lease: Lease


class MemoryRow(NamedTuple):
    """One stored memory version; ``frame`` holds everything, the other
    columns copy what queries filter on."""

    mid: int
    item_id: str
    version: int
    tenant: str
    scope: str
    scope_key: str
    type: str
    state: str
    key: str | None
    digest: bytes
    source_sid: int | None
    source_seq: int | None
    expires_ms: int | None
    until_event: str | None
    sensitivity: str
    created_ms: int
    frame: bytes


class TombstoneRow(NamedTuple):
    """One stored tombstone (of an event payload or of a memory item)."""

    tid: int
    target_kind: str
    target_sid: int | None
    target_seq: int | None
    target_item: str | None
    reason: str
    actor: str | None
    created_ms: int
    frame: bytes


class DeletionRow(NamedTuple):
    """The record of a deleted session: who deleted it, when, why, and where
    its log ended (the events under it were erased, each under its own
    tombstone)."""

    sid: int
    id: str
    reason: str
    actor: str | None
    deleted_ms: int
    last_seq: int


def refuse_deleted_id(reader: Reader, session_id: str) -> None:
    """Raise :class:`~trajlog.errors.SessionDeletedError` if ``session_id`` is
    a deleted session's (its header stays, so a new session with its id fails
    the header's UNIQUE id): the slow path of a refused insert only."""
    gone = reader.deletion(session_id)
    if gone is not None:
        raise session_deleted(gone.id, gone.reason, gone.actor, gone.deleted_ms)


# One scope a query may see: (scope, scope_key); tenant "" holds global items.
Scope = tuple[str, str]


class MemoryReader(Protocol):
    """Reads of memory versions, tombstones and the memory index (schema 6)."""

    def memory_max_mid(self) -> int:
        """The highest memory version id made; in a write transaction the ids
        after it are this transaction's until it ends."""
        ...

    def memory_versions(self, item_id: str) -> list[MemoryRow]:
        """Every version of one item, oldest first."""
        ...

    def memory_latest_of(self, item_id: str) -> MemoryRow | None:
        """The latest version of one item (None: no such item)."""
        ...

    def memory_version(self, mid: int) -> MemoryRow | None: ...

    def memory_current(self, tenant: str, scopes: Sequence[Scope],
                       types: Sequence[str] | None, states: Sequence[str] | None,
                       key: str | None, limit: int) -> list[MemoryRow]:
        """The latest version of each item in ``scopes`` (scope filters in the query)."""
        ...

    def memory_latest_keyed(self, tenant: str, scope: str, scope_key: str,
                            key: str) -> MemoryRow | None:
        """The last version written under ``key`` in one non-global scope."""
        ...

    def memory_merge_match(self, digest: bytes, tenant: str, scope: str, scope_key: str,
                           type_: str, key: str | None) -> MemoryRow | None: ...

    def memory_merge_matches(self, wanted: Sequence[tuple[bytes, str, str, str, str, str | None]]
                             ) -> dict[tuple[bytes, str, str, str, str, str | None], MemoryRow]:
        """:meth:`memory_merge_match` of many (digest, tenant, scope,
        scope_key, type, key) at once: the wanted ones found."""
        ...

    def memory_expired(self, now_ms: int, limit: int) -> list[MemoryRow]: ...

    def memory_until_event(self, limit: int) -> list[MemoryRow]: ...

    def memory_all(self, after_mid: int, limit: int) -> list[MemoryRow]: ...

    def memory_latest(self, after_mid: int, limit: int) -> list[MemoryRow]:
        """The latest version of every item (any scope), in mid order."""
        ...

    def memory_index_exists(self) -> bool: ...

    def memory_search(self, words: Sequence[str], tenant: str, scopes: Sequence[Scope],
                      types: Sequence[str] | None, limit: int) -> list[MemoryRow]:
        """Full-text search of active versions holding every one of ``words``
        (plain words: the backend builds its own query from them), best
        first; scope filters before the rank."""
        ...

    def memory_recent(self, words: Sequence[str], tenant: str, scopes: Sequence[Scope],
                      types: Sequence[str] | None, before: tuple[int, int],
                      limit: int) -> list[MemoryRow]:
        """Full-text matches of every one of ``words`` (active latest
        versions), the latest written first, from just before ``before`` =
        (created_ms, mid)."""
        ...

    def memory_indexed(self, mids: Sequence[int]) -> list[int]:
        """Which of these versions the full-text index holds."""
        ...

    def memory_index_rows(self) -> int: ...

    def tombstone_for_event(self, sid: int, seq: int) -> TombstoneRow | None: ...

    def tombstone_for_item(self, item_id: str) -> TombstoneRow | None: ...

    def tombstones(self, after_tid: int, limit: int) -> list[TombstoneRow]: ...

    def erased_seqs(self, sid: int, first: int = 0, last: int = (1 << 63) - 1) -> list[int]:
        """The seqs of ``sid``'s own log under a tombstone, ``first .. last``, in order."""
        ...

    def max_tid(self) -> int:
        """The highest tombstone id made (reserving the next, as
        :meth:`memory_max_mid` does)."""
        ...

    def memory_head(self) -> tuple[int, int, int, int]:
        """``(last version, last tombstone)`` the head says were made, then
        how many versions and tombstones are stored."""
        ...


class SearchReader(Protocol):
    """Reads of the derived event search index."""

    def search_index_exists(self) -> bool: ...

    def search_behind(self) -> list[tuple[int, int, int]]:
        """``(sid, first seq to index, last committed seq)`` of every session
        whose committed head is past its mark (the last seq indexed)."""
        ...

    def search_events(self, words: Sequence[str], f: SearchFilter, limit: int,
                      marks: tuple[str, str]) -> list[SearchRow]:
        """Documents holding every one of ``words``, the filters (and the
        absence of a tombstone) in the statement before the rank, best
        first; snippets highlighted between ``marks``."""
        ...

    def search_index_rows(self) -> int: ...


class Reader(SearchReader, MemoryReader, Protocol):
    """Reads of committed data (or, on a :class:`Writer`, of the transaction)."""

    def session_by_id(self, session_id: str) -> SessionRow | None:
        """The header of a session that was not deleted (see :meth:`deletion`)."""
        ...

    def deletion(self, session_id: str) -> DeletionRow | None:
        """The deletion record of ``session_id`` (None: not deleted)."""
        ...

    def deletions(self) -> list[DeletionRow]:
        """Every deletion record, in sid order."""
        ...

    def session_by_sid(self, sid: int) -> SessionRow | None: ...

    def sessions(self, include_subagents: bool) -> list[SessionRow]: ...

    def children(self, sid: int) -> list[SessionRow]: ...

    def head(self, sid: int) -> Head:
        """The head row (``HeadMismatchError`` if the session has none)."""
        ...

    def head_stored(self, sid: int) -> tuple[Head, int]:
        """The head and the highest seq stored for the session's own log, in
        a chunk or an index row (-1: none), read at one instant."""
        ...

    def chunks(self, sid: int, first: int, last: int, limit: int = -1,
               budget: int = -1) -> list[Chunk]:
        """The chunk rows holding seqs ``first .. last`` of the session's own
        log, in order, from the row that contains ``first`` (at most ``limit``
        rows, -1: all; none past the row whose raw bytes reach ``budget``);
        a missing row is simply absent (the reader finds the gap)."""
        ...

    def log_range(self, sid: int, first: int, last: int, limit: int = -1,
                  budget: int = -1) -> LogRange:
        """:meth:`chunks` with the index rows and marks of the seqs those rows
        hold, read at one instant in one call (one round trip on a server)."""
        ...

    def chunk_at(self, sid: int, seq: int) -> Chunk | None:
        """The chunk row that contains ``seq``."""
        ...

    def locate(self, sid: int, seq: int, body: bool) -> tuple[int, int, Chunk | None]:
        """``(the head's last seq, the head's chain, the row holding seq -- or
        the last one before it -- or None)`` in one look-up; its body only
        when ``body``."""
        ...

    def chunk_meta(self, sid: int, after: int, upto: int) -> list[tuple[int, int, int]]:
        """``(first_seq, n, raw_len)`` of the rows starting after ``after`` up
        to ``upto`` -- no bodies."""
        ...

    def max_seq(self, sid: int) -> int:
        """The highest seq stored for the session's own log (-1 when none)."""
        ...

    def repack_run(self, sid: int, first: int, last: int) -> tuple[list[Chunk], list[Mark]]:
        """The rows starting at seqs ``first`` .. ``last`` (what a repack
        merges) and their marks, in order, read at once."""
        ...

    def row_checks(self, sid: int, first: int, last: int) -> list[tuple[int, int, int]]:
        """``(first_seq, n, body_check)`` of the rows starting at seqs
        ``first`` .. ``last``, in order -- no bodies: what a repack compares,
        in its write transaction, with the rows it merged from a snapshot."""
        ...

    def chunk_sizes(self, sid: int) -> tuple[int, int, int]:
        """``(rows, raw bytes, stored bytes)`` of the session's own chunk rows."""
        ...

    def index_rows(self, sid: int, after: int, upto: int) -> list[IndexRow]:
        """The event index rows of seqs after ``after`` up to ``upto``, in order."""
        ...

    def marks(self, sid: int, first: int, last: int) -> list[Mark]:
        """The marks (step markers, tool calls by call id) of seqs
        ``first .. last``, in order."""
        ...

    def seq_of_idempotency_key(self, sid: int, key: str) -> int | None: ...

    def call_requested(self, sid: int, call_id: str) -> int | None:
        """The seq where the session's own log requests tool call ``call_id``
        (None: it never does): an indexed look-up, O(log n)."""
        ...

    def calls_requested(self, sid: int, call_ids: Sequence[str]) -> dict[str, int]:
        """:meth:`call_requested` of many ids at once: those requested, and where."""
        ...

    def call_count(self, sid: int) -> int:
        """How many tool call ids the session's own log requests (its call rows)."""
        ...

    def marker_at_or_before(self, sid: int, type_: str, seq: int) -> int | None:
        """The last seq <= ``seq`` of a marker event (``turn/start``,
        ``turn/end``, ``sandbox/mode``, ``redaction/paused``,
        ``redaction/resumed``): an indexed look-up, O(log n)."""
        ...

    def marker_after(self, sid: int, type_: str, seq: int) -> int | None: ...

    def projection_state(self, sid: int, name: str,
                         version: int) -> tuple[int, int, bytes] | None:
        """``(seq, chain, state)`` of a saved projection state."""
        ...


class Writer(Reader, Protocol):
    """The writes of one transaction (from :meth:`Backend.transaction`)."""

    #: True when another connection committed since this backend last wrote:
    #: whatever the caller cached about the logs may be stale.  A backend that
    #: cannot tell store-wide says False and answers per session instead, from
    #: :meth:`lock_heads`.
    foreign_commit: bool

    def lock_heads(self, sids: Sequence[int]) -> dict[int, Head]:
        """Lock the heads of ``sids`` until the transaction ends, in sid order
        (so that two transactions never wait on each other in a cycle), and
        return them as they stand in this transaction.  A backend that runs
        one write transaction at a time has nothing to lock and returns ``{}``
        (its ``foreign_commit`` says when cached heads may be stale)."""
        ...

    def insert_deletion(self, row: DeletionRow) -> None:
        """Record a session's deletion (append-only): from then on its head
        does not move and no session is made with its id or as its child --
        the database refuses them (``SessionDeletedError``)."""
        ...

    def insert_session(self, row: SessionRow, last_seq: int, chain_head: int) -> int:
        """Insert a header (``row.sid`` is ignored) and its head; returns the sid."""
        ...

    def append(self, sid: int, chunks: Sequence[Chunk], index: Sequence[IndexRow],
               marks: Sequence[bytes | None], calls: Sequence[tuple[str, int]] = ()) -> None:
        """Append chunk rows of consecutive frames -- the first starting exactly
        at the head's next seq -- with their index rows, each row's packed
        marks and the call rows ``(call id, seq)`` of the ids they request,
        and advance the head to the last one's end and chain."""
        ...

    def repack(self, sid: int, merged: Chunk, marks: bytes | None) -> int:
        """Replace the rows ``merged`` covers (the first starts at its first
        seq) by ``merged``, which holds the same frames; returns how many rows
        went.  The caller verified ``merged`` against them."""
        ...

    def set_lease(self, sid: int, lease: Lease) -> None: ...

    def heartbeat(self, sid: int, owner: str, now_ms: int) -> None: ...

    def save_projection_state(self, sid: int, name: str, version: int, seq: int, chain: int,
                              state: bytes) -> None: ...

    def drop_projection_states(self, sid: int) -> int:
        """Drop a session's saved projection states; returns how many."""
        ...

    def insert_memory(self, row: MemoryRow) -> None: ...

    def blank_memory(self, mid: int, frame: bytes) -> None:
        """Zero the payload of a revoked item's version frame (header kept)."""
        ...

    def index_memory(self, row: MemoryRow, text: str) -> None: ...

    def unindex_memory(self, mids: Sequence[int]) -> int: ...

    def clear_memory_index(self) -> None: ...

    def optimize_memory_index(self) -> None: ...

    def insert_tombstone(self, row: TombstoneRow) -> None:
        """Store a tombstone; an event's also deletes the event's search
        documents (in this transaction)."""
        ...

    def index_events(self, sid: int, docs: Sequence[DocRow], upto: int) -> None:
        """Add search documents of ``sid`` and move its mark to ``upto``."""
        ...

    def unindex_events(self, sid: int, seqs: Sequence[int]) -> int: ...

    def rewrite_chunk(self, sid: int, chunk: Chunk) -> None:
        """Store a row's body with erased payloads blanked (same frames and chains)."""
        ...

    def savepoint(self) -> AbstractContextManager[None]:
        """A nested part of the transaction: an exception inside rolls back
        only that part (and propagates)."""
        ...

    def in_transaction(self) -> bool:
        """False once a failure has ended the transaction itself (on
        PostgreSQL, any failed statement outside a savepoint)."""
        ...


class Purge(NamedTuple):
    """What :meth:`Backend.purge` did, and the copies of erased bytes that
    remain beyond its reach (each a sentence a report can show)."""

    done: tuple[str, ...]
    residues: tuple[str, ...]


class LogRange(NamedTuple):
    """Chunk rows with the index rows and marks of the seqs they hold."""

    chunks: list[Chunk]
    index_rows: list[IndexRow]
    marks: list[Mark]


class Backend(Protocol):
    """A trajlog store's database."""

    #: where the store lives, safe to print (a file's path; a server URL
    #: without its password)
    path: str
    durability: str
    #: the highest seq a session's own log may reach in this backend
    max_session_seq: int
    #: how many transactions of this backend found that another connection had
    #: committed since the one before (``Writer.foreign_commit``), whoever
    #: opened them: a cache of the logs compares it with the count it last saw,
    #: so no transaction of another kind (an erasure, a memory write) hides
    #: the signal from it
    foreign_commits: int

    def reader(self) -> Reader:
        """This thread's reader of committed data."""
        ...

    def snapshot(self) -> AbstractContextManager[Reader]:
        """This thread's reader inside one read transaction: every read in the
        block sees the same committed state, whatever writers do meanwhile.
        Re-entrant (an inner block joins the outer one)."""
        ...

    def transaction(self) -> AbstractContextManager[Writer]:
        """A write transaction: committed (durably, as ``durability`` says)
        when the block ends, rolled back if it raises.  Serialized in-process;
        across processes by the database's locks (see :meth:`Writer.lock_heads`)."""
        ...

    def lease_alive(self, lease: Lease) -> bool | None:
        """Whether the writer holding ``lease`` is alive, as this backend can
        tell (a server: the lock its writer's connection holds, which dies
        with the connection); None when it cannot, and the host+pid rule and
        the heartbeat decide (one machine's file)."""
        ...

    def purge(self) -> Purge:
        """After an erasure committed: remove the physical copies of erased
        bytes this backend can reach (free pages, its write-ahead log, dead
        row versions) and name those that remain."""
        ...

    def size(self) -> int:
        """The bytes the store takes in the database (its files; a server's
        tables, indexes and their TOAST)."""
        ...

    def memory_index(self, present: bool) -> None:
        """Make or drop the derived memory full-text index."""
        ...

    def search_index(self, present: bool) -> None:
        """Make (empty) or drop the derived event search index."""
        ...

    def close(self) -> None:
        """Close every connection; later calls raise ``StoreClosedError``."""
        ...

    @property
    def closed(self) -> bool: ...


__all__ = ["Backend", "DeletionRow", "Head", "Lease", "LogRange", "MemoryReader", "MemoryRow",
           "Purge", "Reader", "Scope", "SearchReader", "SessionRow", "TombstoneRow", "Writer"]
