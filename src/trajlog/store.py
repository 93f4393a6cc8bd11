"""The public API: :func:`open` a :class:`Store`, create and read :class:`Session` logs.

Writes go through one group-commit path: every append becomes a request;
whichever calling thread finds no commit in progress becomes the leader, takes
every queued request into one ``BEGIN IMMEDIATE`` transaction, commits it
(``synchronous=FULL``: durable when COMMIT returns) and wakes the callers.  A
lone thread pays no hand-off; concurrent threads share one fsync.  Other
processes serialize on SQLite's write lock, and each transaction reads the
session head afresh, so seqs stay contiguous across processes.

Work that does not depend on the seq -- validation, serialization,
compression -- happens in the caller's thread before the request is queued;
only frame encoding (C, ~1 us) and the inserts happen under the write lock.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time as time_mod
import uuid as uuid_mod
from builtins import open as builtins_open
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import apsw
import msgspec
import zstandard

from . import _backend, codec, evidence, lineage, projections, storage
from ._format import FLAG_ZSTD, Cursor, FrameType, Status
from .codec import ScanReport, Verdict, Watermark
from .errors import (
    CorruptionError,
    HeadMismatchError,
    IdempotencyConflictError,
    InvalidArgumentError,
    InvalidStateError,
    LeaseHeldError,
    LiveWriterError,
    PayloadTooLargeError,
    SerializationError,
    SessionNotFoundError,
    StoreClosedError,
    StoreError,
    TrajlogError,
    UnsupportedFormatError,
    ValidationError,
    error_for,
)
from .events import (
    KNOWN_SHAPES,
    Event,
    check_envelope,
    check_json,
    check_shape,
    check_type,
    decode_event,
    encode_event,
    peek_type,
    with_seq,
)
from .lineage import DEFAULT_MAX_DEPTH, SessionTree
from .recovery import RECOVERY_SOURCE, OpenState, RecoveryReport, closers

DURABILITY = ("full", "normal")
LEASE_TTL_MS = 30_000
COMPRESS_THRESHOLD = 512   # payloads at least this long are zstd-compressed, if it pays
COMPRESS_LEVEL = 3
MAX_PAYLOAD = 16 * 1024 * 1024
_RECOVERY_ATTEMPTS = 3      # analyses of a log that keeps moving before load gives up
_PREFIX_CACHE = 64          # fork points whose prefix tool-call state is kept
_READ_CHUNK = 512           # events per query when streaming
_TOOL_TYPES = ("assistant/message", "tool/call", "tool/result", "turn/start", "turn/end",
               "step/start", "step/end")
_HOST = socket.gethostname()
_THREADS = min(4, os.cpu_count() or 1)
_ENVELOPE_KEYS = frozenset({"source", "causal_parent", "workspace_revision", "data_class",
                            "idempotency_key"})
_HEADER_ENCODER = msgspec.msgpack.Encoder()
_META_DECODER = msgspec.msgpack.Decoder()


def open(path: str = "trajlog.db", durability: str = "full", *,
         busy_timeout_ms: int = 10_000, lease_ttl_ms: int = LEASE_TTL_MS,
         max_delegation_depth: int = DEFAULT_MAX_DEPTH) -> Store:
    """Open (creating if needed) the store at ``path``.

    ``durability="full"`` (default): an append returns only once it is durable,
    also across power loss.  ``"normal"``: commits survive a crash of the
    process, but the last ones may be lost on power loss or an OS crash
    (SQLite WAL with ``synchronous=NORMAL``); roughly 7x more single appends/s.
    ``":memory:"`` gives a private in-memory store for tests.
    ``max_delegation_depth`` bounds how deep subagents may spawn subagents.
    """
    return Store(path, durability=durability, busy_timeout_ms=busy_timeout_ms,
                 lease_ttl_ms=lease_ttl_ms, max_delegation_depth=max_delegation_depth)


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The immutable header of a session, written once at creation."""

    id: str
    cwd: str
    parent_session: str | None
    seed_length: int
    origin: str | None
    delegation_depth: int
    agent_preset: str | None
    created_at: int
    metadata: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :meth:`Session.verify` found: every frame and the chain checked
    against the session head (the durable watermark)."""

    session: str
    events: int
    last_seq: int
    chain_head: int
    scan: ScanReport

    @property
    def ok(self) -> bool:
        return self.scan.verdict is Verdict.CLEAN


def _locked() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


class BalancedView:
    """A session's log followed by the closers recovery would append: what a
    reader may treat as the session after a crash, computed without writing.
    Iterating streams the log (verified) and then the closers."""

    def __init__(self, session: Session, last_seq: int, closers: tuple[Event, ...]) -> None:
        self.session = session
        self.last_seq = last_seq
        self.closers = closers

    def events(self) -> Iterator[Event]:
        yield from self.session.events(0, self.last_seq)
        yield from self.closers

    def __iter__(self) -> Iterator[Event]:
        return self.events()


@dataclass(slots=True)
class _Row:
    """An event ready to be framed: everything but its seq and chain."""

    event: Event
    stored: bytes
    flags: int
    raw_len: int


@dataclass(slots=True)
class _Request:
    session: Session
    rows: list[_Row]
    expect_last: int | None = None  # refuse unless the log's last seq is this
    done: bool = False
    result: list[Event] | None = None
    error: BaseException | None = None
    wake: threading.Lock = field(default_factory=_locked)


_REQUESTED, _STARTED, _FINISHED = 1, 2, 3


class _LogMovedError(InvalidStateError):
    """A request that expected the log to end at a given seq found it moved."""

# Refusals of one request that leave the rest of a group commit intact.
_REFUSALS = (ValidationError, LeaseHeldError, IdempotencyConflictError, InvalidStateError)


@dataclass(slots=True)
class _LogState:
    """What the write path needs to know of a session's log, kept in step with
    it: the head, the lease, and each tool call's progress (for validation)."""

    synced_seq: int
    chain: int
    lease: tuple[Any, ...] = (None, None, None, None, None)
    calls: dict[str, int] = field(default_factory=dict)
    turn_open: bool = False
    step_open: bool = False

    def plan(self, events: Iterable[Event], check: bool) -> dict[str, int]:
        """The call-status changes ``events`` make, refusing (with ``check``)
        what cannot follow; nothing is changed until :meth:`commit`."""
        overlay: dict[str, int] = {}
        calls = self.calls
        for ev in events:
            t = ev.type
            if t == "assistant/message":
                for call in ev.data.get("tool_calls") or () if isinstance(ev.data, dict) else ():
                    call_id = call.get("id") if isinstance(call, dict) else None
                    if not isinstance(call_id, str):
                        continue
                    if check and (overlay.get(call_id) or calls.get(call_id)):
                        raise ValidationError(f"tool call id {call_id!r} was already used")
                    overlay[call_id] = _REQUESTED
            elif t == "tool/call" or t == "tool/result":
                call_id = ev.data.get("call_id") if isinstance(ev.data, dict) else None
                status = overlay.get(call_id) or calls.get(call_id)  # type: ignore[arg-type]
                if t == "tool/call":
                    if check and status != _REQUESTED:
                        why = ("already started" if status else
                               "never requested by an assistant/message")
                        raise ValidationError(f"tool/call {call_id!r}: the call was {why}")
                    overlay[call_id] = _STARTED  # type: ignore[index]
                else:
                    if check and status != _STARTED and not (
                            status == _REQUESTED and ev.data.get("synthetic")):
                        why = {_FINISHED: "already finished",
                               _REQUESTED: "requested but never started"}.get(
                                   status or 0, "unknown")
                        raise ValidationError(f"tool/result {call_id!r}: the call is {why}")
                    overlay[call_id] = _FINISHED  # type: ignore[index]
        return overlay

    def commit(self, events: Sequence[Event], overlay: dict[str, int], last_seq: int,
               chain: int) -> None:
        self.calls.update(overlay)
        for ev in events:
            t = ev.type
            if t == "turn/start":
                self.turn_open = True
            elif t == "turn/end":
                self.turn_open = self.step_open = False
            elif t == "step/start":
                self.step_open = True
            elif t == "step/end":
                self.step_open = False
        self.synced_seq = last_seq
        self.chain = chain


class _Compressor:
    """Per-thread zstd contexts (zstandard's objects are not thread-safe)."""

    def __init__(self, level: int) -> None:
        self._level = level
        self._local = threading.local()

    def _cctx(self) -> Any:
        c = getattr(self._local, "c", None)
        if c is None:
            c = self._local.c = zstandard.ZstdCompressor(level=self._level)
        return c

    def compress_rows(self, rows: list[_Row]) -> None:
        """Compress the payloads that are long enough, keeping a compressed one
        only if it saves more than 1/16.  Several at once go through zstd's
        multi-threaded batch call (the GIL is released; measured ~2x on 2 cores)."""
        todo = [r for r in rows if r.raw_len >= COMPRESS_THRESHOLD]
        if not todo:
            return
        cctx = self._cctx()
        if len(todo) == 1:
            packed: list[Any] = [cctx.compress(todo[0].stored)]
        else:
            result = cctx.multi_compress_to_buffer([r.stored for r in todo],
                                                   threads=_THREADS)
            packed = [result[i].tobytes() for i in range(len(todo))]
        for row, data in zip(todo, packed, strict=True):
            if len(data) < row.raw_len - (row.raw_len >> 4):
                row.stored, row.flags = data, FLAG_ZSTD

    def decompress_many(self, stored: list[Any], raw_lens: list[int]) -> list[Any]:
        """Decompress several payloads at once on zstd's threads (the GIL is
        released; ~1.6x on 2 cores, measured).  Any disagreement with a
        ``raw_len`` falls back to :meth:`decompress`, frame by frame, which
        raises the typed error for the first bad one."""
        if len(stored) < 2:
            return [self.decompress(x, n) for x, n in zip(stored, raw_lens, strict=True)]
        d = getattr(self._local, "d", None)
        if d is None:
            d = self._local.d = zstandard.ZstdDecompressor()
        sizes = struct.pack(f"={len(raw_lens)}Q", *raw_lens)
        try:
            result = d.multi_decompress_to_buffer(stored, decompressed_sizes=sizes,
                                                  threads=_THREADS)
        except zstandard.ZstdError:
            return [self.decompress(x, n) for x, n in zip(stored, raw_lens, strict=True)]
        return [result[i] for i in range(len(stored))]

    def decompress(self, stored: Any, raw_len: int) -> bytes:
        d = getattr(self._local, "d", None)
        if d is None:
            d = self._local.d = zstandard.ZstdDecompressor()
        size = zstandard.frame_content_size(stored)
        if size != raw_len:
            raise error_for(Status.BAD_FIELD, reason=f"zstd content size {size} != raw_len "
                            f"{raw_len}", corrupt=True)
        out = d.decompress(stored, max_output_size=raw_len)
        if len(out) != raw_len:
            raise error_for(Status.BAD_FIELD, reason="decompressed length differs from raw_len",
                            corrupt=True)
        return out  # type: ignore[no-any-return,unused-ignore]


class Store:
    """One trajlog database.  Thread-safe; open one per process and share it.

    Use :func:`trajlog.open`.  Close it (or use it as a context manager) to
    release its connections; a closed store raises :class:`StoreClosedError`.
    """

    def __init__(self, path: str, *, durability: str = "full", busy_timeout_ms: int = 10_000,
                 lease_ttl_ms: int = LEASE_TTL_MS,
                 max_delegation_depth: int = DEFAULT_MAX_DEPTH) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be str or PathLike, not {type(path).__name__}")
        if durability not in DURABILITY:
            raise InvalidArgumentError(f"durability must be 'full' or 'normal', "
                                       f"not {durability!r}")
        path = os.fspath(path)
        self._memory = path == ":memory:"
        if self._memory:
            # One private database shared by this store's connections.
            path = f"file:/trajlog-{uuid_mod.uuid4().hex}?vfs=memdb"
        self.path = path
        self.durability = durability
        self._busy = busy_timeout_ms
        self.lease_ttl_ms = lease_ttl_ms
        if not isinstance(max_delegation_depth, int) or max_delegation_depth < 0:
            raise InvalidArgumentError("max_delegation_depth must be a non-negative int")
        self.max_delegation_depth = max_delegation_depth
        self._kernel = _backend.get_kernel()
        self._compressor = _Compressor(COMPRESS_LEVEL)
        self._keeper: apsw.Connection | None = None
        if self._memory:  # keeps the shared in-memory database alive
            self._keeper = storage.open_connection(path, migrations=True)
        storage.migrate(path, durability=durability, busy_timeout_ms=busy_timeout_ms)
        self._write = self._connect()
        with storage.translate():
            self._data_version = storage.data_version(self._write)
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        self._mutex = threading.Lock()      # guards _queue, _leader, _closed
        self._conn_lock = threading.Lock()  # owns the write connection
        self._queue: list[_Request] = []
        self._leader = False
        self._states: dict[int, _LogState] = {}
        self._projections: dict[tuple[int, str], Any] = {}  # see projections.project
        self._projection_locks: dict[tuple[int, str], threading.Lock] = {}
        # Writer leases this store holds: sid -> nesting depth.  The lease row
        # names the store, not a handle, so the depth is counted here.
        self._held: dict[int, int] = {}
        self._lease_lock = threading.Lock()  # guards _held; taken before _conn_lock
        self._prefix_calls: dict[tuple[int, int], dict[str, int]] = {}
        self._types_seen: set[str] = set()
        self._closed = False
        # host:pid:token:nonce -- the token tells this process from a later one
        # that gets the same pid (lease_is_live)
        token = process_token() or "-"
        self.writer_id = f"{_HOST}:{os.getpid()}:{token}:{uuid_mod.uuid4().hex[:12]}"

    # -- connections --------------------------------------------------------

    def _connect(self) -> apsw.Connection:
        return storage.open_connection(self.path, durability=self.durability,
                                       busy_timeout_ms=self._busy)

    def _reader(self) -> apsw.Connection:
        self._check_open()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    def close(self) -> None:
        """Release the writer leases this store still holds, then close every
        connection.  Idempotent."""
        if self._closed:
            return
        for sid in list(self._held):
            with contextlib.suppress(TrajlogError, apsw.Error):
                self._release_lease(sid, force=True)
        with self._mutex, self._conn_lock:
            self._closed = True
        for conn in [*self._readers, self._write, self._keeper]:
            if conn is not None:
                with contextlib.suppress(apsw.Error):
                    conn.close()
        self._readers.clear()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions -----------------------------------------------------------

    def create_session(self, cwd: str = ".", agent_preset: str | None = None,
                       metadata: Mapping[str, Any] | None = None, *,
                       session_id: str | None = None) -> Session:
        """Create an ordinary session with an empty log and return it."""
        return self._create(cwd=cwd, agent_preset=agent_preset, metadata=metadata,
                            session_id=session_id)

    def _create(self, *, cwd: str, agent_preset: str | None, metadata: Mapping[str, Any] | None,
                session_id: str | None = None, parent: Session | None = None,
                seed_length: int = 0, origin: str | None = None,
                delegation_depth: int = 0,
                initial: Sequence[tuple[str, Any, Mapping[str, Any]]] = (),
                parent_events: Sequence[tuple[str, Any, Mapping[str, Any]]] = (),
                ) -> Session:
        """Create a session, and append its ``initial`` events -- and
        ``parent_events`` to the parent -- in the same transaction (a
        subagent's task, its sandbox snapshot, a background job's answer)."""
        self._check_open()
        if not isinstance(cwd, str) or not cwd:
            raise TypeError("cwd must be a non-empty str")
        if agent_preset is not None and not isinstance(agent_preset, str):
            raise TypeError("agent_preset must be str or None")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping, not {type(metadata).__name__}")
        meta = dict(metadata or {})
        check_json(meta, "metadata")
        sid_uuid = _session_uuid(session_id)
        key = codec.session_key(sid_uuid, kernel=self._kernel)
        created = storage.now_ms()
        if parent is None:
            seed_chain = key
        else:
            seed_chain = parent._chain_at(seed_length - 1) if seed_length else key
        header = SessionHeader(str(sid_uuid), cwd, parent.id if parent else None, seed_length,
                               origin, delegation_depth, agent_preset, created,
                               MappingProxyType(meta))
        meta_bytes = _HEADER_ENCODER.encode(meta)
        row = (header.id, _signed(key), created, cwd, parent._sid if parent else None,
               seed_length, _signed(seed_chain), origin, delegation_depth,
               agent_preset, meta_bytes, _signed(self._header_check(header, key)))
        rows = [self._prepare(t, d, None, dict(env)) for t, d, env in initial]
        up = [self._prepare(t, d, None, dict(env)) for t, d, env in parent_events]
        self._compressor.compress_rows(rows + up)
        with self._write_txn() as conn:
            sid = storage.insert_session(conn, row, seed_length - 1, _signed(seed_chain))
            session = Session(self, sid, header, key, parent, seed_chain)
            if rows:
                session._apply(conn, rows)
            if up and parent is not None:
                parent._apply(conn, up)
        return session

    def _header_check(self, header: SessionHeader, key: int) -> int:
        blob = _HEADER_ENCODER.encode([header.id, header.cwd, header.parent_session,
                                       header.seed_length, header.origin,
                                       header.delegation_depth, header.agent_preset,
                                       header.created_at, dict(header.metadata)])
        return codec.checksum(blob, key, kernel=self._kernel)

    def session(self, session_id: str) -> Session:
        """The session with this id (:class:`SessionNotFoundError` if none)."""
        if not isinstance(session_id, str):
            raise TypeError(f"session id must be str, not {type(session_id).__name__}")
        with storage.translate():
            row = storage.session_by_id(self._reader(), session_id)
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.path}")
        return self._session_from_row(row)

    def _session_by_sid(self, sid: int) -> Session:
        with storage.translate():
            row = storage.session_by_sid(self._reader(), sid)
        if row is None:
            raise SessionNotFoundError(f"no session with internal id {sid}")
        return self._session_from_row(row)

    def _session_from_row(self, row: Sequence[Any], parent: Session | None = None) -> Session:
        (sid, sid_text, key, created, cwd, parent_sid, seed_length, _seed_chain, origin, depth,
         preset, meta, _check) = row
        if parent is None and parent_sid is not None:
            parent = self._session_by_sid(parent_sid)
        header = SessionHeader(sid_text, cwd, parent.id if parent else None, seed_length, origin,
                               depth, preset, created,
                               MappingProxyType(_META_DECODER.decode(meta)))
        return Session(self, sid, header, key & 0xFFFFFFFFFFFFFFFF, parent,
                       int(_seed_chain) & 0xFFFFFFFFFFFFFFFF)

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
        _, report = session._recover(repair=True)
        if report.refusal is not None:
            raise report.refusal
        return session

    def dependents(self, session_id: str) -> list[SessionHeader]:
        """Sessions whose inherited prefix reads this session's events (forks
        with a seed).  A session with dependents must never be purged: their
        logs would lose their beginning (retention relies on this rule)."""
        parent = self.session(session_id)
        return [c.header for c in parent.children(include_subagents=True)
                if c.header.seed_length > 0]

    def sessions(self, *, include_subagents: bool = False) -> list[SessionHeader]:
        """Headers of the store's sessions, oldest first; subagent sessions
        only when ``include_subagents``."""
        with storage.translate():
            rows = storage.list_sessions(self._reader(), include_subagents)
        return [self._session_from_row(r).header for r in rows]

    # -- the write path -------------------------------------------------------

    @contextlib.contextmanager
    def _write_txn(self) -> Iterator[apsw.Connection]:
        """A write transaction outside group commit (session creation, leases)."""
        with self._conn_lock:
            self._check_open()
            with storage.translate():
                storage.begin(self._write)
                try:
                    self._check_data_version(self._write)
                    yield self._write
                    storage.commit(self._write)
                except BaseException:
                    storage.rollback(self._write)
                    self._states.clear()
                    raise

    def _check_data_version(self, conn: apsw.Connection) -> None:
        """Inside a write transaction: forget the cached log states if another
        connection committed since this one last looked."""
        version = storage.data_version(conn)
        if version != self._data_version:
            self._data_version = version
            self._states.clear()

    def _submit(self, request: _Request) -> list[Event]:
        """Queue a request; lead a group commit or wait for one to carry it.

        The leader commits everything queued so far in one transaction, wakes
        exactly the callers it committed, and -- if more requests arrived
        meanwhile -- promotes the oldest waiting caller to lead the next one,
        so nobody waits on a commit that does not carry its request.
        """
        with self._mutex:
            self._check_open()
            follower = self._leader
            if follower:
                self._queue.append(request)
            else:
                self._leader = True
        if follower:
            request.wake.acquire()  # released when done, or when promoted to lead
        if not request.done:
            pending = [request]
            while True:
                with self._mutex:
                    pending += self._queue
                    self._queue = []
                try:
                    with self._conn_lock:
                        self._commit(pending)
                finally:
                    for req in pending:
                        req.done = True
                        if req is not request:
                            req.wake.release()
                with self._mutex:
                    if not self._queue:
                        self._leader = False
                        break
                    promoted = self._queue.pop(0)
                promoted.wake.release()  # it leads the next commit; ours is done
                break
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _commit(self, batch: list[_Request]) -> None:
        """One transaction for a batch of requests.  A request refused by
        validation writes nothing (every check runs before its inserts), so
        the others still commit.  With several requests, each runs in a
        savepoint: one that fails later (a constraint, an unexpected error) is
        rolled back alone and fails alone.  A failure that ends the transaction
        itself, or a commit failure, fails the whole batch."""
        conn = self._write
        isolate = len(batch) > 1
        try:
            with storage.translate():
                storage.begin(conn)
                try:
                    self._check_data_version(conn)
                    for req in batch:
                        if isolate:
                            storage.savepoint(conn, "request")
                        try:
                            with storage.translate():
                                req.result = req.session._apply(conn, req.rows,
                                                                req.expect_last)
                        except _REFUSALS as exc:
                            req.error = exc
                        except Exception as exc:
                            if not isolate or conn.getautocommit():
                                raise  # the transaction is gone: the batch fails
                            storage.rollback_to(conn, "request")
                            self._states.pop(req.session._sid, None)
                            req.error = _typed(exc)
                            continue
                        if isolate:
                            storage.release(conn, "request")
                    storage.commit(conn)
                except BaseException:
                    storage.rollback(conn)
                    raise
        except BaseException as exc:
            self._states.clear()  # the transaction failed: caches may be ahead of the log
            for req in batch:
                if req.error is None:
                    req.error = _typed(exc) if isinstance(exc, Exception) else exc
                req.result = None

    # -- derived state --------------------------------------------------------

    def _log_state(self, conn: apsw.Connection, session: Session) -> _LogState:
        """The session's head, lease and tool-call state, in step with its log."""
        state = self._states.get(session._sid)
        if state is not None:
            return state
        last_seq, chain, *lease = storage.head_and_lease(conn, session._sid)
        state = _LogState(session.header.seed_length - 1, 0,
                          calls=dict(self._prefix_call_state(conn, session)))
        if last_seq > state.synced_seq:
            tool_events = [session._decode_frame(frame, seq) for seq, frame in
                           storage.frames_of_types(conn, session._sid, state.synced_seq,
                                                   _TOOL_TYPES)]
            state.commit(tool_events, state.plan(tool_events, check=False), last_seq, chain)
        state.synced_seq, state.chain, state.lease = last_seq, chain, tuple(lease)
        self._states[session._sid] = state
        return state

    def _prefix_call_state(self, conn: apsw.Connection, session: Session) -> dict[str, int]:
        """The tool calls of a fork's inherited prefix (its ancestors' events
        up to ``seed_length - 1``): a fork may not reuse their ids, and may
        answer the calls they left open.  A prefix never changes, so its state
        is cached per fork point (or copied from the parent's state when the
        parent's log still ends at the fork point)."""
        seed, parent = session.header.seed_length, session._parent
        if not seed or parent is None:
            return {}
        point = (parent._sid, seed)
        calls = self._prefix_calls.get(point)
        if calls is not None:
            return calls
        at_parent = self._states.get(parent._sid)
        if at_parent is not None and at_parent.synced_seq == seed - 1:
            calls = dict(at_parent.calls)
        else:
            lo = parent.header.seed_length - 1
            walk = _LogState(lo, 0, calls=dict(self._prefix_call_state(conn, parent)))
            events = [parent._decode_frame(frame, seq) for seq, frame in
                      storage.frames_of_types(conn, parent._sid, lo, _TOOL_TYPES, seed - 1)]
            walk.commit(events, walk.plan(events, check=False), seed - 1, 0)
            calls = walk.calls
        if len(self._prefix_calls) >= _PREFIX_CACHE:
            self._prefix_calls.pop(next(iter(self._prefix_calls)))
        self._prefix_calls[point] = calls
        return calls

    def _seed_state(self, session: Session, state: OpenState, last_seq: int) -> None:
        """Hand the write path the state recovery just computed, so that it does
        not read the log a second time to validate the closers."""
        with self._conn_lock:
            last, chain, *lease = storage.head_and_lease(self._reader(), session._sid)
            if last != last_seq:
                return  # the log moved: let the write path rebuild its state
            calls = dict.fromkeys(state.finished, _FINISHED)
            for call_id, (status, _name) in state.calls.items():
                calls[call_id] = _REQUESTED if status == "requested" else _STARTED
            seeded = _LogState(last_seq, chain, tuple(lease), calls,
                               state.turn_start is not None, state.step_start is not None)
            self._states[session._sid] = seeded

    def _release_lease(self, sid: int, *, force: bool = False) -> None:
        """Leave one lease block of session ``sid``; the outermost exit (or
        ``force``) clears the lease row.  If that write fails the lease stays
        held -- and known to be held: it stays in ``_held``, and close() (or
        the next exit of a lease block) releases it."""
        with self._lease_lock:
            depth = self._held.get(sid, 0)
            if depth > 1 and not force:
                self._held[sid] = depth - 1
                return
            if not depth:
                return
            with self._write_txn() as conn:
                if storage.lease(conn, sid)[0] == self.writer_id:
                    storage.set_lease(conn, sid, None, None, None, None, None)
                    self._states.pop(sid, None)
            del self._held[sid]

    def _prepare(self, type_: Any, data: Any, time: int | None, envelope: Mapping[str, Any],
                 ) -> _Row:
        """Validate and serialize one event outside the write lock."""
        if type_ not in self._types_seen:
            check_type(type_)
            if len(self._types_seen) < 4096:
                self._types_seen.add(type_)
        if data is None:
            data = {}
        check_json(data, "data")
        if type_ in KNOWN_SHAPES:
            check_shape(type_, data)
        if time is None:
            time = storage.now_ms()
        elif type(time) is not int or not 0 <= time < 2**63:
            raise InvalidArgumentError("time must be epoch milliseconds (a non-negative int)")
        if envelope:
            if not envelope.keys() <= _ENVELOPE_KEYS:
                unknown = ", ".join(sorted(set(envelope) - _ENVELOPE_KEYS))
                raise TypeError(f"unknown envelope field(s): {unknown}")
            get = envelope.get
            check_envelope(get("source"), get("causal_parent"), get("workspace_revision"),
                           get("data_class"), get("idempotency_key"))
            event = Event(type_, time, data, get("source"), get("causal_parent"),
                          get("workspace_revision"), get("data_class"), get("idempotency_key"))
        else:
            event = Event(type_, time, data)
        try:
            raw = encode_event(event)
        except (UnicodeEncodeError, OverflowError, TypeError) as exc:
            raise SerializationError(f"cannot serialize the event: {exc}") from exc
        size = len(raw)
        if size > MAX_PAYLOAD:
            raise PayloadTooLargeError(f"event payload is {size} bytes; the limit is "
                                       f"{MAX_PAYLOAD}")
        return _Row(event, raw, 0, size)


class Session:
    """One session: its immutable header and its append-only log.

    Get one from :meth:`Store.create_session` or :meth:`Store.session`.
    Handles are cheap; several handles of one session may coexist.
    """

    def __init__(self, store: Store, sid: int, header: SessionHeader, key: int,
                 parent: Session | None, seed_chain: int) -> None:
        self._store = store
        self._sid = sid
        self.header = header
        self._key = key
        self._parent = parent
        self._seed_chain = seed_chain  # recorded at creation: the parent's chain at seed - 1
        self._turn_depth = 0
        self._step_depth = 0

    @property
    def id(self) -> str:
        return self.header.id

    def __repr__(self) -> str:
        return f"<trajlog.Session {self.id} cwd={self.header.cwd!r}>"

    # -- appending ----------------------------------------------------------

    def append(self, type: str, data: Any = None, *, time: int | None = None,
               source: str | None = None, causal_parent: int | None = None,
               workspace_revision: str | None = None, data_class: str | None = None,
               idempotency_key: str | None = None) -> Event:
        """Append one event; return it with its seq once it is durable.

        ``data`` must be JSON-compatible.  With an ``idempotency_key`` already
        used in this session for the same event, nothing is written and the
        original event is returned (also across processes); for a different
        event, :class:`IdempotencyConflictError`.
        """
        envelope = {k: v for k, v in (("source", source), ("causal_parent", causal_parent),
                                      ("workspace_revision", workspace_revision),
                                      ("data_class", data_class),
                                      ("idempotency_key", idempotency_key)) if v is not None}
        lineage.check_approval_append(self, type)
        projections.check_compaction_event(self, type, data)
        rows = [self._store._prepare(type, data, time, envelope)]
        self._store._compressor.compress_rows(rows)
        return self._store._submit(_Request(self, rows))[0]

    def append_batch(self, items: Iterable[Any]) -> list[Event]:
        """Append several events in one transaction: all of them or none.

        Each item is ``(type, data)`` or ``(type, data, envelope)``, where
        ``envelope`` is a dict of ``time`` and the envelope fields.
        """
        return self._append_items(items)

    def _append_items(self, items: Iterable[Any], expect_last: int | None = None,
                      ) -> list[Event]:
        rows = []
        for item in items:
            if not isinstance(item, (tuple, list)) or not 2 <= len(item) <= 3:
                raise TypeError("append_batch items are (type, data) or (type, data, envelope)")
            if len(item) == 3 and not isinstance(item[2], Mapping):
                raise TypeError("an append_batch envelope must be a mapping, not "
                                f"{type(item[2]).__name__}")
            env = dict(item[2]) if len(item) == 3 else {}
            when = env.pop("time", None)
            if isinstance(item[0], str):
                lineage.check_approval_append(self, item[0])
                projections.check_compaction_event(self, item[0], item[1])
            rows.append(self._store._prepare(item[0], item[1], when, env))
        if not rows:
            return []
        self._store._compressor.compress_rows(rows)
        keys = [r.event.idempotency_key for r in rows if r.event.idempotency_key is not None]
        if len(keys) != len(set(keys)):
            raise IdempotencyConflictError("the batch repeats an idempotency key")
        return self._store._submit(_Request(self, rows, expect_last))

    def _apply(self, conn: apsw.Connection, rows: list[_Row],
               expect_last: int | None = None) -> list[Event]:
        """Inside the write transaction: check, frame and insert ``rows``.
        Every refusal is raised before the first write."""
        store = self._store
        state = store._log_state(conn, self)
        self._check_lease(conn, state)
        if expect_last is not None and state.synced_seq != expect_last:
            raise _LogMovedError(f"session {self.id} moved to seq {state.synced_seq}; "
                                 f"expected it at {expect_last}")
        keyed = [(i, r.event.idempotency_key) for i, r in enumerate(rows)
                 if r.event.idempotency_key is not None]
        if keyed:
            found = [(i, hit[0]) for i, key in keyed
                     if (hit := storage.event_by_idempotency_key(conn, self._sid, key))]
            if found:
                if len(found) != len(keyed):
                    raise IdempotencyConflictError(
                        "the batch mixes idempotency keys already used in this session "
                        "with new ones")
                # A retry: the original batch began len(rows before the key) earlier.
                return self._replay(conn, rows, found[0][1] - found[0][0])
        events = [r.event for r in rows]
        overlay = state.plan(events, check=True)
        first = state.synced_seq + 1
        if first + len(rows) - 1 > storage.MAX_SESSION_SEQ:
            raise InvalidStateError(f"session {self.id} is full: a session's own log holds "
                                    f"at most {storage.MAX_SESSION_SEQ + 1} events")
        start = Cursor(0, first, state.chain)
        kernel = store._kernel
        status, blob, end = kernel.encode_batch(
            self._key, [r.stored for r in rows], [FrameType.EVENT] * len(rows), start,
            [r.flags for r in rows], [r.raw_len for r in rows])
        if status != Status.OK:
            raise error_for(status, seq=first, session=self.id)
        sid = self._sid
        base = storage.rid(sid, 0)
        db_rows = [(base + first + i, ev.type, ev.time, ev.source, ev.causal_parent,
                    ev.workspace_revision, ev.data_class, ev.idempotency_key, chain, frame)
                   for i, (ev, (frame, chain)) in enumerate(zip(
                       events, codec.split_frames(blob, [len(r.stored) for r in rows]),
                       strict=True))]
        storage.insert_events(conn, db_rows)
        state.commit(events, overlay, end.next_seq - 1, end.chain)
        return [with_seq(ev, first + i) for i, ev in enumerate(events)]

    def _replay(self, conn: apsw.Connection, rows: list[_Row], first_seq: int) -> list[Event]:
        """An idempotent retry: the original events, if they are the same events."""
        originals = []
        for i, row in enumerate(rows):
            frames = storage.frames(conn, self._sid, first_seq + i, first_seq + i)
            if not frames:
                raise IdempotencyConflictError("the retried batch is longer than the original")
            original = self._decode_frame(frames[0], first_seq + i)
            # Compared as encoded payloads: a tuple sent and the list it
            # decodes to are the same event.
            mine = encode_event(msgspec.structs.replace(row.event, time=original.time))
            if mine != encode_event(original):
                raise IdempotencyConflictError(
                    f"idempotency key {row.event.idempotency_key!r} was used for a different "
                    f"event (seq {original.seq})")
            originals.append(original)
        return originals

    # -- the writer lease ---------------------------------------------------

    def _lease_live(self, owner: str | None, host: str | None, pid: int | None,
                    started_ms: int | None, heartbeat_ms: int | None) -> bool:
        if owner is None or owner == self._store.writer_id:
            return False
        return lease_is_live(owner, host, pid, started_ms, heartbeat_ms,
                             self._store.lease_ttl_ms)

    def _check_lease(self, conn: apsw.Connection, state: _LogState) -> None:
        owner, host, pid, started_ms, heartbeat_ms = state.lease
        if self._lease_live(owner, host, pid, started_ms, heartbeat_ms):
            raise LeaseHeldError(
                f"session {self.id} is being written by {owner} (pid {pid} on {host}); "
                "wait for its lease or let it expire")
        if owner == self._store.writer_id:
            now = storage.now_ms()
            if heartbeat_ms is None or now - heartbeat_ms > self._store.lease_ttl_ms // 4:
                storage.heartbeat(conn, self._sid, owner, now)
                state.lease = (owner, host, pid, started_ms, now)

    @contextlib.contextmanager
    def lease(self, wait: float | bool = False) -> Iterator[Session]:
        """Hold the session's writer lease: no other writer may append meanwhile.

        A second writer gets :class:`LeaseHeldError` at once, or, with ``wait``
        (seconds, or True for no limit), polls until the lease is free.  A
        lease whose holder died (same host: its process is gone; other hosts:
        no heartbeat for ``lease_ttl_ms``) is taken over.  Re-entrant.
        """
        self._acquire(wait)
        try:
            yield self
        finally:
            self._release()

    def _acquire(self, wait: float | bool) -> None:
        store = self._store
        deadline = None if wait is True else time_mod.monotonic() + float(wait or 0)
        delay = 0.005
        while True:
            with store._lease_lock:
                depth = store._held.get(self._sid, 0)
                if depth:
                    store._held[self._sid] = depth + 1
                    return
                try:
                    with store._write_txn() as conn:
                        owner, host, pid, started, heartbeat_ms = storage.lease(conn, self._sid)
                        if self._lease_live(owner, host, pid, started, heartbeat_ms):
                            raise LeaseHeldError(
                                f"session {self.id} is being written by {owner} "
                                f"(pid {pid} on {host})")
                        now = storage.now_ms()
                        storage.set_lease(conn, self._sid, store.writer_id, _HOST,
                                          os.getpid(), now, now)
                        store._states.pop(self._sid, None)
                    store._held[self._sid] = 1
                    return
                except LeaseHeldError:
                    if deadline is not None and time_mod.monotonic() >= deadline:
                        raise
            time_mod.sleep(delay)
            delay = min(delay * 2, 0.25)

    def _release(self) -> None:
        self._store._release_lease(self._sid)

    # -- turns and steps ----------------------------------------------------

    @contextlib.contextmanager
    def turn(self, *, wait: float | bool = False) -> Iterator[Session]:
        """Append ``turn/start`` ... ``turn/end``, holding the writer lease.

        An exception escaping the block ends the turn with
        ``{"interrupted": true}`` and propagates.
        """
        if self._turn_depth:
            raise InvalidStateError("a turn is already open on this handle")
        with self.lease(wait):
            self.append("turn/start", {})
            self._turn_depth = 1
            try:
                yield self
            except BaseException:
                self._turn_depth = 0
                with contextlib.suppress(TrajlogError):
                    if self._step_depth:
                        self._step_depth = 0
                        self.append("step/end", {"interrupted": True})
                    self.append("turn/end", {"interrupted": True})
                raise
            self._turn_depth = 0
            self.append("turn/end", {"interrupted": False})

    @contextlib.contextmanager
    def step(self) -> Iterator[Session]:
        """Append ``step/start`` ... ``step/end`` inside a turn."""
        if not self._turn_depth:
            raise InvalidStateError("a step belongs inside a turn: use session.turn()")
        if self._step_depth:
            raise InvalidStateError("a step is already open on this handle")
        self.append("step/start", {})
        self._step_depth = 1
        try:
            yield self
        except BaseException:
            if self._step_depth:
                self._step_depth = 0
                with contextlib.suppress(TrajlogError):
                    self.append("step/end", {"interrupted": True})
            raise
        self._step_depth = 0
        self.append("step/end", {})

    # -- reading --------------------------------------------------------------

    def _decode_frame(self, frame: Any, seq: int) -> Event:
        """Decode one frame whose verification happened elsewhere (or is not needed)."""
        header = codec.decode_header(frame, kernel=self._store._kernel)
        payload = codec.payload_of(frame, header)
        return self._decode_payload(header.flags, header.raw_len, payload, seq)

    def _decode_payload(self, flags: int, raw_len: int, payload: Any, seq: int) -> Event:
        if flags & FLAG_ZSTD:
            payload = self._store._compressor.decompress(payload, raw_len)
        try:
            return decode_event(payload, seq)
        except msgspec.DecodeError as exc:
            raise error_for(Status.BAD_FIELD, reason=f"undecodable event payload: {exc}",
                            seq=seq, session=self.id, corrupt=True) from exc

    def _head(self, conn: apsw.Connection | None = None) -> tuple[int, int]:
        with storage.translate():
            head = storage.head(conn or self._store._reader(), self._sid)
        return head

    @property
    def last_seq(self) -> int:
        """Seq of the last durable event (-1 for an empty log)."""
        return self._head()[0]

    def _chain_at(self, seq: int) -> int:
        """The chain value stored in frame ``seq`` (this log or an ancestor's)."""
        if seq < 0:
            return self._key
        if seq == self.header.seed_length - 1:
            return self._seed_chain
        if seq < self.header.seed_length:
            assert self._parent is not None
            return self._parent._chain_at(seq)
        with storage.translate():
            rows = storage.frames(self._store._reader(), self._sid, seq, seq)
        if not rows:
            raise InvalidArgumentError(f"session {self.id} has no event {seq}")
        return codec.decode_header(rows[0], kernel=self._store._kernel).chain

    def _stream(self, first: int, last: int, cursor: Cursor,
                watermark: Watermark | None,
                want: Callable[[str], bool] | None = None) -> Iterator[Event]:
        """Verified events first..last of this session's own log (>= seed).

        Each chunk of rows is verified as a whole (every check, the chain
        continuing from the previous chunk) before any of its events is
        decoded and yielded.  With ``want``, events whose type (read from the
        verified payload, not from the type column) it rejects are skipped
        without being decoded.
        """
        kernel = self._store._kernel
        conn = self._store._reader()
        decompress_many = self._store._compressor.decompress_many
        seq = first
        while seq <= last:
            upto = min(last, seq + _READ_CHUNK - 1)
            with storage.translate():
                chunk = storage.frames(conn, self._sid, seq, upto)
            buf = b"".join(chunk)
            start = Cursor(0, seq, cursor.chain)
            status, headers, cursor, _ = kernel.scan(buf, self._key, start, len(chunk), True)
            if status not in (Status.END, Status.MORE) or len(headers) != upto - seq + 1:
                if status not in (Status.END, Status.MORE):
                    raise error_for(status, reason=codec.scan(
                        buf, self._key, start, watermark=upto, kernel=kernel).reason or None,
                        offset=cursor.offset, seq=cursor.next_seq, session=self.id,
                        corrupt=True)
                stored = storage.max_seq(conn, self._sid)
                if stored < upto and len(headers) == len(chunk):
                    raise HeadMismatchError(
                        Status.TRUNCATED, f"the log ends at seq {stored} but the session "
                        f"head says {watermark.seq if watermark else upto}",
                        offset=cursor.offset, seq=cursor.next_seq, session=self.id)
                raise error_for(Status.SEQ_MISMATCH, reason="seq gap: an event row is missing",
                                offset=cursor.offset, seq=cursor.next_seq, session=self.id,
                                corrupt=True)
            view = memoryview(buf)
            packed = [i for i, h in enumerate(headers) if h.flags & FLAG_ZSTD]
            unpacked = dict(zip(packed, decompress_many(
                [view[headers[i].payload_offset:headers[i].payload_offset
                      + headers[i].stored_len] for i in packed],
                [headers[i].raw_len for i in packed]), strict=True)) if packed else {}
            for i, h in enumerate(headers):
                if h.flags & FLAG_ZSTD:
                    payload: Any = unpacked[i]
                else:
                    p = h.payload_offset
                    payload = view[p:p + h.stored_len]
                if want is not None:
                    kind = peek_type(payload)
                    if kind is not None and not want(kind):
                        continue
                try:
                    yield decode_event(payload, h.seq)
                except msgspec.DecodeError as exc:
                    raise error_for(Status.BAD_FIELD, reason=f"undecodable event payload: {exc}",
                                    seq=h.seq, session=self.id, corrupt=True) from exc
            seq = upto + 1
        if watermark is not None and watermark.chain is not None and cursor.chain != (
                watermark.chain) and last == watermark.seq:
            raise HeadMismatchError(Status.BAD_CHAIN, "the log's chain does not reach the "
                                    f"chain recorded for seq {last} (the session head, or a "
                                    "fork's seed)", seq=last, session=self.id)

    def events(self, from_seq: int = 0, to_seq: int | None = None) -> Iterator[Event]:
        """Stream events ``from_seq`` .. ``to_seq`` (default: the last durable
        one), verified as they are read, in bounded memory.

        From seq 0 every frame and the whole chain are checked, and the chain
        must end at the session head.  From a later seq the chain is checked
        from that point on, seeded by the stored chain of the event before it.
        Corruption raises :class:`CorruptionError` (or a subclass).
        """
        if not isinstance(from_seq, int) or not isinstance(to_seq, (int, type(None))):
            raise TypeError("seqs must be int")
        if from_seq < 0:
            raise InvalidArgumentError("from_seq must be >= 0")
        return self._events(from_seq, to_seq, None)

    def _events(self, from_seq: int, to_seq: int | None,
                end_chain: tuple[int, int] | None,
                want: Callable[[str], bool] | None = None) -> Iterator[Event]:
        """events(); ``end_chain = (seq, chain)`` also requires frame ``seq`` to
        carry ``chain`` (a child checking the parent frame it continues);
        ``want`` selects event types (every frame is still verified)."""
        last_seq, chain_head = self._head()
        to_seq = last_seq if to_seq is None else min(to_seq, last_seq)
        if from_seq > to_seq:
            return
        seed = self.header.seed_length
        if from_seq < seed:
            assert self._parent is not None
            stop = min(to_seq, seed - 1)
            yield from self._parent._events(
                from_seq, stop, (seed - 1, self._seed_chain) if stop == seed - 1 else end_chain,
                want)
            from_seq = seed
            if to_seq < seed:
                return
        chain = self._chain_at(from_seq - 1)
        mark = end_chain if end_chain is not None and end_chain[0] == to_seq else (
            last_seq, chain_head)
        yield from self._stream(from_seq, to_seq, Cursor(0, from_seq, chain), Watermark(*mark),
                                want)

    def get(self, seq: int) -> Event:
        """The event at ``seq`` (verified against the frame before it)."""
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise TypeError(f"seq must be int, not {type(seq).__name__}")
        for event in self.events(seq, seq):
            return event
        raise InvalidArgumentError(f"session {self.id} has no event {seq} "
                                   f"(last seq {self.last_seq})")

    def tail(self, n: int = 50) -> list[Event]:
        """The last ``n`` events, oldest first.  Costs O(n) whatever the log's length."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InvalidArgumentError("n must be a non-negative int")
        last_seq = self._head()[0]
        return list(self.events(max(0, last_seq - n + 1))) if n else []

    def verify(self) -> VerifyReport:
        """Recompute every frame check and the whole chain, and compare the end
        of the chain with the session head (the durable watermark).  For a
        fork, the inherited prefix of every ancestor is verified too, and the
        chain must pass from the parent's frame ``seed_length - 1`` into this
        log's first frame.

        Never repairs.  Returns a report whose ``scan`` says clean or names the
        first defect (seq, byte offset in that session's log stream, reason)
        and whose ``session`` names the session holding it; a defect raises
        nothing -- call ``report.scan.raise_for(report.session)`` to raise it.
        """
        conn = self._store._reader()
        last_seq, chain_head = self._head(conn)
        session, report = self._verify_upto(last_seq, chain_head)
        return VerifyReport(session, report.cursor.next_seq, last_seq, chain_head, report)

    def _verify_upto(self, upto: int, expect_chain: int | None) -> tuple[str, ScanReport]:
        """Verify this log's frames 0..upto (ancestors' included) and, when
        given, that frame ``upto`` carries ``expect_chain``."""
        kernel = self._store._kernel
        conn = self._store._reader()
        with storage.translate():
            hrows: list[Any] = conn.execute(
                "SELECT header_check, seed_chain FROM sessions WHERE sid = ?",
                (self._sid,)).fetchall()
        if _signed(self._store._header_check(self.header, self._key)) != hrows[0][0]:
            raise CorruptionError(Status.BAD_HEADER, "session header check mismatch",
                                  session=self.id)
        seed = self.header.seed_length
        seed_chain = int(hrows[0][1]) & 0xFFFFFFFFFFFFFFFF
        if seed and self._parent is not None:
            parent_upto = min(upto, seed - 1)
            where, report = self._parent._verify_upto(
                parent_upto, seed_chain if parent_upto == seed - 1 else expect_chain)
            if report.verdict is not Verdict.CLEAN:
                return where, report  # the defect is in that ancestor
            if upto < seed:
                return self.id, report
        cursor = Cursor(0, seed, seed_chain)
        offset = 0
        seq = seed
        report = codec.scan(b"", self._key, cursor, kernel=kernel)
        chunk: list[bytes] = []
        while seq <= upto:
            stop = min(upto, seq + 4 * _READ_CHUNK - 1)
            with storage.translate():
                chunk = storage.frames(conn, self._sid, seq, stop)
            buf = b"".join(chunk)
            final = stop >= upto
            # Every committed row is durable: the watermark is the chunk's end,
            # and at the end it names the expected chain too.
            report = codec.scan(buf, self._key, Cursor(0, cursor.next_seq, cursor.chain),
                                watermark=Watermark(stop, expect_chain if final else None),
                                kernel=kernel)
            if report.verdict is not Verdict.CLEAN or report.frames != len(chunk) or final:
                break
            cursor = report.cursor
            offset += len(buf)
            seq = stop + 1
        else:
            if expect_chain is not None and cursor.chain != expect_chain:
                report = _with(report, Verdict.CORRUPT, Status.BAD_CHAIN,
                               "the chain does not reach the expected head")
        if report.verdict is Verdict.CLEAN and report.frames != len(chunk):
            report = _with(report, Verdict.CORRUPT, Status.SEQ_MISMATCH,
                           "an event row is missing")
        if report.verdict is Verdict.TORN:  # in the database everything is durable
            report = _with(report, Verdict.CORRUPT, report.status,
                           f"{report.reason} (inside committed rows)")
        return self.id, _shift(report, offset)

    # -- recovery -------------------------------------------------------------

    def inspect(self) -> tuple[BalancedView, RecoveryReport]:
        """The balanced view of this session and what recovery would do; writes
        nothing.  A log that cannot be trusted gives a report whose
        ``outcome`` is ``"refused"`` and whose ``refusal`` is the typed error
        :meth:`Store.load` would raise."""
        return self._recover(repair=False)

    def _analyze(self) -> tuple[OpenState, int, BaseException | None]:
        """One verified pass over the log: its open state, the head's last seq,
        and the refusal if the log cannot be trusted (nothing raised)."""
        state = OpenState()
        conn = self._store._reader()
        last_seq, _ = self._head(conn)
        try:
            with storage.translate():
                beyond = storage.max_seq(conn, self._sid)
            if beyond > last_seq:
                raise HeadMismatchError(Status.SEQ_MISMATCH, f"events up to seq {beyond} are "
                                        f"stored beyond the session head at seq {last_seq}",
                                        seq=last_seq + 1, session=self.id)
            for ev in self.events(0, last_seq):
                state.feed(ev)
        except (CorruptionError, UnsupportedFormatError) as exc:
            return state, last_seq, exc
        return state, last_seq, None

    def _closer_events(self, state: OpenState) -> tuple[Event, ...]:
        when = state.last_time if state.last_time is not None else storage.now_ms()
        return tuple(with_seq(Event(t, when, d, RECOVERY_SOURCE), state.last_seq + 1 + i)
                     for i, (t, d) in enumerate(closers(state)))

    def _live_refusal(self, state: OpenState, last_seq: int) -> LiveWriterError | None:
        store = self._store
        owner, host, pid, started, heartbeat_ms = storage.lease(store._reader(), self._sid)
        # This store's own lease is live too while one of its lease blocks is
        # open: a turn it is still writing must not be closed under it.
        mine = owner == store.writer_id and self._sid in store._held
        if not mine and not self._lease_live(owner, host, pid, started, heartbeat_ms):
            return None
        open_at = state.turn_start if state.turn_start is not None else last_seq
        return LiveWriterError(f"writer {owner} (pid {pid} on {host}) is live and the log is "
                               "open: recovery would race it", session=self.id, seq=open_at)

    def _recover(self, repair: bool) -> tuple[BalancedView, RecoveryReport]:
        for _attempt in range(_RECOVERY_ATTEMPTS):
            state, last_seq, refusal = self._analyze()
            if refusal is None and not state.balanced:
                refusal = self._live_refusal(state, last_seq)
            if refusal is not None:
                report = RecoveryReport(self.id, "refused", state.events, last_seq, (),
                                        state.turn_start, state.step_start, refusal)
                return BalancedView(self, state.last_seq, ()), report
            closing = self._closer_events(state)
            outcome = "balanced" if not closing else ("repaired" if repair else "repair")
            if closing and repair:
                self._store._seed_state(self, state, last_seq)
                try:
                    # Written only if the log still ends where the analysis
                    # ended: a writer that slipped in means analysing again.
                    closing = tuple(self._append_items(
                        [(ev.type, ev.data, {"time": ev.time, "source": RECOVERY_SOURCE})
                         for ev in closing], expect_last=last_seq))
                except _LogMovedError:
                    continue
            report = RecoveryReport(self.id, outcome, state.events, last_seq, closing,
                                    state.turn_start, state.step_start)
            return BalancedView(self, last_seq, () if repair else closing), report
        raise InvalidStateError(f"session {self.id} kept changing during recovery "
                                f"({_RECOVERY_ATTEMPTS} attempts); nothing was written")

    # -- compaction and event status -------------------------------------------

    def compact(self, from_seq: int, to_seq: int, summary: str, *,
                source: str | None = "model") -> Event:
        """Append a ``compaction/apply`` event whose ``surface-replace`` op hides
        events ``from_seq .. to_seq`` behind ``summary`` in the model history.
        Nothing is deleted: the raw events stay in the log.  The range must not
        split a tool call from its result, and must nest with earlier ones."""
        if not isinstance(summary, str) or not summary:
            raise TypeError("summary must be a non-empty str")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (from_seq, to_seq)):
            raise TypeError("from_seq and to_seq must be int")
        return self.append("compaction/apply", {"op": projections.SURFACE_REPLACE,
                                                "from_seq": from_seq, "to_seq": to_seq,
                                                "summary": summary}, source=source)

    def mark(self, seq: int, status: str, reason: str, *, source: str) -> Event:
        """Append an ``event/status`` event: event ``seq`` becomes ``superseded``,
        ``rejected``, ``expired``, ``audit-only`` (or ``active`` again), with
        the reason and who decided."""
        if status not in evidence.STATUSES:
            raise ValidationError(f"status must be one of {', '.join(evidence.STATUSES)}")
        if not isinstance(seq, int) or not 0 <= seq <= self.last_seq:
            raise InvalidArgumentError(f"session {self.id} has no event {seq}")
        if not isinstance(reason, str) or not reason:
            raise TypeError("reason must be a non-empty str")
        return self.append("event/status", {"target": seq, "status": status,
                                            "reason": reason}, source=source)

    # -- lineage --------------------------------------------------------------

    def parent(self) -> Session | None:
        """The session this one was forked or spawned from, if any."""
        return self._parent

    def children(self, *, include_subagents: bool = True) -> list[Session]:
        """Sessions forked or spawned from this one, oldest first."""
        with storage.translate():
            rows = storage.children_of(self._store._reader(), self._sid)
        return [self._store._session_from_row(r, parent=self) for r in rows
                if include_subagents or r[8] is None]

    def tree(self) -> SessionTree:
        """This session and all its descendants."""
        return lineage.tree(self)

    def fork(self, at_seq: int, *, metadata: Mapping[str, Any] | None = None) -> Session:
        """A new ordinary session that shares this log up to the end of the turn
        containing ``at_seq`` (:class:`ForkUnavailableError` if that turn is
        still open).  Nothing is copied; the cost does not grow with the log."""
        return lineage.fork(self, at_seq, metadata)

    def spawn_subagent(self, task: str, agent_preset: str | None = None, *,
                       call_id: str | None = None, background: bool = False,
                       sandbox: Mapping[str, Any] | None = None,
                       metadata: Mapping[str, Any] | None = None) -> Session:
        """A subagent session with no seed: ``origin="subagent"``, one more level
        of delegation (:class:`DelegationLimitError` beyond the store's limit),
        the task as its first user message, the parent's explicit sandbox
        settings snapshotted.  ``call_id`` names the parent's spawning tool call
        that :meth:`finish` answers; ``background=True`` answers it at once with
        a job id and notifies the parent when the child finishes."""
        return lineage.spawn(self, task, agent_preset, seeded=False, call_id=call_id,
                             background=background, sandbox=sandbox, metadata=metadata)

    def fork_subagent(self, task: str, agent_preset: str | None = None, *,
                      call_id: str | None = None, background: bool = False,
                      sandbox: Mapping[str, Any] | None = None,
                      metadata: Mapping[str, Any] | None = None) -> Session:
        """As :meth:`spawn_subagent`, seeded with this log up to its last
        completed turn (never the turn in progress); its approval policy is
        fixed to never."""
        return lineage.spawn(self, task, agent_preset, seeded=True, call_id=call_id,
                             background=background, sandbox=sandbox, metadata=metadata)

    def finish(self, status: str = "done") -> Event:
        """Report this subagent's outcome to its parent, exactly once: a
        ``tool/result`` for the spawning call (foreground) or a
        ``subagent/notification`` (background)."""
        return lineage.finish(self, status)

    def missed_notifications(self) -> list[Session]:
        """Background subagents that settled without notifying this session."""
        return lineage.missed_notifications(self)

    def approvals(self) -> list[Event]:
        """The ``approval/grant`` events in force (inherited one-time grants never
        count; a forked subagent has none)."""
        return lineage.effective_approvals(self)


def _session_uuid(session_id: Any) -> uuid_mod.UUID:
    """A new session's id: the caller's UUID (checked), or a random one."""
    if session_id is None:
        return uuid_mod.uuid4()
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be str or None, not {type(session_id).__name__}")
    try:
        return uuid_mod.UUID(session_id)
    except ValueError:
        raise InvalidArgumentError(f"session_id {session_id!r} is not a UUID") from None


def _typed(exc: Exception) -> Exception:
    """A write failure as the caller sees it: trajlog errors as they are, an
    unexpected one wrapped in :class:`StoreError` (cause kept)."""
    if isinstance(exc, TrajlogError):
        return exc
    wrapped = StoreError(f"the write failed: {type(exc).__name__}: {exc}")
    wrapped.__cause__ = exc
    return wrapped


def _with(report: ScanReport, verdict: Verdict, status: int, reason: str) -> ScanReport:
    return ScanReport(verdict, Status(status), report.valid_len, report.frames, report.last_seq,
                      report.cursor, report.torn_bytes, report.hints, reason, report.watermark)


def _shift(report: ScanReport, offset: int) -> ScanReport:
    """Express offsets relative to the whole log stream instead of one chunk."""
    if not offset:
        return report
    cur = report.cursor
    return ScanReport(report.verdict, report.status, report.valid_len + offset, report.frames,
                      report.last_seq, Cursor(cur.offset + offset, cur.next_seq, cur.chain),
                      report.torn_bytes, report.hints, report.reason, report.watermark)


def _signed(value: int) -> int:
    """A u64 as the i64 SQLite stores."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _proc_stat_start(pid: int | None) -> int | None:
    """Start time of a process in clock ticks since boot (/proc; None elsewhere)."""
    try:
        with builtins_open("/proc/self/stat" if pid is None else f"/proc/{pid}/stat",
                           "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime
    except (OSError, ValueError, IndexError):
        return None


def _boot_id() -> str | None:
    try:
        with builtins_open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def process_token(pid: int | None = None) -> str | None:
    """Who a process is, beyond its pid: the boot it belongs to and its start
    time (``None``: this process).  Two processes never share a token; a
    restarted writer that got its old pid back does not get its old token."""
    start, boot = _proc_stat_start(pid), _boot_id()
    return None if start is None or boot is None else f"{boot}/{start}"


def _started_ms(pid: int) -> int | None:
    """Wall-clock start of a process in ms (second resolution; /proc only)."""
    start = _proc_stat_start(pid)
    try:
        with builtins_open("/proc/stat") as f:
            btime = next(int(x.split()[1]) for x in f if x.startswith("btime"))
    except (OSError, StopIteration, ValueError):
        return None
    if start is None:
        return None
    return (btime * 1000) + start * 1000 // os.sysconf("SC_CLK_TCK")


def lease_is_live(owner: str | None, host: str | None, pid: int | None,
                  started_ms: int | None, heartbeat_ms: int | None, ttl_ms: int) -> bool:
    """The liveness rule of a writer lease.

    On this host, a lease is live while the very process that took it exists:
    a process with its pid, that is the same process -- the same boot and start
    time as recorded in the lease owner's token, or, for a lease without a
    token, a process that started before the lease was taken.  (A restarted
    writer that got its old pid back, or any pid reused after a reboot, does not
    keep the lease alive.)  From another host, a lease is live while its
    heartbeat is younger than ``ttl_ms``.  A lease that is not live may be taken
    over.
    """
    if host != _HOST or pid is None:
        return heartbeat_ms is not None and storage.now_ms() - heartbeat_ms <= ttl_ms
    if not _pid_alive(pid):
        return False
    parts = (owner or "").split(":")
    recorded = parts[2] if len(parts) >= 4 and "/" in parts[2] else None
    current = process_token(None if pid == os.getpid() else pid)
    if recorded is not None and current is not None:
        return recorded == current
    begun = _started_ms(pid)
    if begun is not None and started_ms is not None:
        return begun <= started_ms + 2000  # btime has one-second resolution
    return True


__all__ = ["DURABILITY", "BalancedView", "Session", "SessionHeader", "Store", "VerifyReport",
           "open"]
