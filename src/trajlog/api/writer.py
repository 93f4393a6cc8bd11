"""The write engine: every append, from the caller's arguments to frames in a
committed transaction.

Work that does not depend on the seq -- validation, serialization,
compression -- happens in the caller's thread (:meth:`WriteEngine.prepare`)
before the request is queued for group commit; only the checks that read the
log, frame encoding (C, ~1 us) and the inserts happen inside the transaction
(:meth:`WriteEngine.apply`, the stages of :mod:`.write_stages` in order), under
the write lock.  Other processes serialize on the database's write lock, and
each transaction reads the session head afresh, so seqs stay contiguous across
processes.

Per session the engine keeps a :class:`LogState` in step with the log -- the
head, the lease, the lifecycle tracker and the compactions -- so that an
append validates without reading the log; it is dropped whenever the log may
have moved under it (another connection committed, a transaction failed).
A state begins where the log stands when it is first needed (a reopen, a
fork's cut) from the indexes, never by reading the log before that point
(:mod:`.logstate`): the first write costs the same whatever the log's length.
"""

from __future__ import annotations

import contextlib
import uuid as uuid_mod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import msgspec

from ..codec import session_key
from ..codec.chunks import CAP, WRITE_LEVEL, ChunkCompressor
from ..codec.records import decode_metadata, encode_metadata, header_check
from ..errors import (
    InvalidArgumentError,
    InvalidStateError,
    LeaseHeldError,
    PayloadTooLargeError,
    SerializationError,
)
from ..event_types import CLOSED, DELETED, ENDS_LOG, VERSIONS, WRITE_STATE, WRITE_STATE_PREFIXES
from ..events import (
    ENVELOPE_FIELDS,
    KNOWN_SHAPES,
    NOT_WALKED,
    Event,
    SessionHeader,
    check_envelope,
    check_json,
    check_shape,
    check_text,
    check_type,
    encode_event,
    now_ms,
    plain_str,
    walk_json,
)
from ..lifecycle import Tracker
from ..redaction import Redactor, pause_state, prepare_payload
from ..storage import Backend, GroupCommit, Request, SessionRow, Writer
from . import checks, retries
from .handles import LogRef, Options
from .leases import Leases
from .logstate import LogState, StateIndex
from .reading import LogReader
from .write_stages import (
    SMALL_ROW,
    Row,
    advance,
    check_close,
    check_expected_head,
    check_room,
    check_rules_kept,
    checked,
    count_small_rows,
    distinct_keys,
    find_retry,
    frame,
    hold_pause,
    index_entries,
    owned,
    pauses,
    returned,
    route_private,
    turn_marker,
    with_seqs,
)

MAX_PAYLOAD = 16 * 1024 * 1024
# Raw bytes of a session's run of small rows that ask for a repack: a run at
# full size, merged once (a turn's end only tells the repacker it may run now).
REPACK_BYTES = CAP
_STATES = 1024              # sessions whose write state is kept
_STATE_TYPES = WRITE_STATE   # lifecycle and pause types: what the write state follows


def _followed(type_: str) -> bool:
    return type_ in _STATE_TYPES or type_.startswith(WRITE_STATE_PREFIXES)
_ENVELOPE_KEYS = frozenset(ENVELOPE_FIELDS)
_NO_ENVELOPE: Mapping[str, Any] = MappingProxyType({})
_PAYLOAD = msgspec.msgpack.Encoder()
# Refusals: raised before a request writes anything, so its group commit goes on.
_REFUSALS = (InvalidArgumentError, LeaseHeldError, InvalidStateError)


class WriteEngine:
    """Appends and session creation for one store."""

    def __init__(self, backend: Backend, reading: LogReader, options: Options,
                 on_small_rows: Callable[[LogRef, bool], None] | None = None) -> None:
        self._backend = backend
        self._reading = reading
        self._chunks = ChunkCompressor(WRITE_LEVEL)   # (read-mostly rows: the repack's level)
        self._options = options
        self.on_small_rows = on_small_rows   # the repacker's request, if it runs by itself
        self.appends = 0   # commits of appends (the repacker waits until this stops moving)
        self.redactor: Redactor | None = None  # trajlog.redaction: set by the store
        self._states: dict[int, LogState] = {}
        self._recent = 0   # the sid last moved to the end of _states (see state())
        self._foreign_seen = backend.foreign_commits   # (see state())
        self._tx: Writer | None = None   # the transaction apply() runs in (a prior's look-ups)
        self._index = StateIndex(reading, lambda: self._tx)
        self._types_seen: dict[str, bool] = {}  # valid types -> checked in the transaction
        self.commit = GroupCommit(backend, _REFUSALS, self._forget_key, self._foreign)
        self.leases = Leases(self.transaction, options.writer_id, options.lease_ttl_ms,
                             self._lease_changed, backend.lease_alive)

    # -- transactions and the state cache ---------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Writer]:
        """A write transaction outside group commit (session creation, leases, saved
        projection states); cached states dropped as :meth:`state` says, or if it fails."""
        try:
            with self._backend.transaction() as tx:
                if tx.foreign_commit:
                    self._foreign()
                yield tx
        except BaseException:
            self._states.clear()   # (a rolled-back fork's sid may be reused)
            raise

    def _lease_changed(self, sid: int) -> None:
        """This store took or gave up ``sid``'s lease: its cached head row is
        re-read at the next append (not its whole lifecycle: a lease taken at
        every raw turn/start must not make each turn replay the log)."""
        state = self._states.get(sid)
        if state is not None:
            state.stale = True

    def _foreign(self) -> None:
        """Another connection committed: every cached head may be behind."""
        for state in self._states.values():
            state.stale = True

    def _forget_key(self, key: Any) -> None:
        self._states.pop(key, None) if key is not None else self._states.clear()

    def state(self, tx: Writer, ref: LogRef) -> LogState:
        """The session's head, lease, lifecycle and compactions, in step with its log."""
        if self._backend.foreign_commits != self._foreign_seen:
            # another connection committed, seen by a transaction of any kind
            self._foreign_seen = self._backend.foreign_commits
            self._foreign()
        states, sid = self._states, ref.sid
        state = states.get(sid)
        locked = tx.lock_heads((sid,))   # (per-session locks: the head, locked; SQLite: {})
        if state is not None:
            if sid != self._recent:   # the most recently used last
                states[sid] = states.pop(sid)
                self._recent = sid
            if locked and locked.get(sid) != (state.synced_seq, state.chain, state.lease):
                state.stale = True   # another writer moved this session
            if not state.stale:
                return state
        last_seq, chain, lease = locked[sid] if sid in locked else tx.head(ref.sid)
        if state is not None and last_seq >= state.synced_seq:
            # Another writer appended: follow its events (a log only grows).
            if last_seq > state.synced_seq:   # (its branches: folded again when needed)
                state.branches = None
                state.paused, state.closed, state.deleted = self._follow(
                    tx, ref, state.tracker, state.compactions, state.synced_seq, last_seq,
                    state.paused, state.closed)
            state.synced_seq, state.chain, state.lease, state.stale = last_seq, chain, lease, False
            return state
        state = self._index.begin(tx, ref, last_seq, chain, lease)
        self._keep(ref.sid, state)
        return state

    def _keep(self, sid: int, state: LogState) -> None:
        """Remember ``state``; beyond :data:`_STATES` sessions the least
        recently written one is forgotten (rebuilt from its log if written
        again), so that a host writing to many sessions stays bounded."""
        states = self._states
        states.pop(sid, None)
        states[sid] = state
        self._recent = sid
        while len(states) > _STATES:
            states.pop(next(iter(states)))

    def _follow(self, tx: Writer, ref: LogRef, tracker: Tracker,
                compactions: list[tuple[int, int]], after: int, upto: int,
                paused: bool = False, closed: int | None = None,
                ) -> tuple[bool, int | None, bool]:
        """Advance ``tracker`` and ``compactions`` over ``ref``'s own events
        ``after + 1 .. upto`` (verified; only the types they follow decoded);
        returns the redaction pause after them, where the log ended, and
        whether that end is a deletion."""
        deleted = False
        for ev in self._reading.events(ref, max(after + 1, ref.seed), upto, want=_followed,
                                       reader=tx):
            tracker.feed(ev)
            found = checks.applied_range(ev.type, ev.data)
            if found is not None:
                compactions.append(found)
            paused = p if (p := pause_state(ev.type)) is not None else paused
            if ev.type in ENDS_LOG:
                closed, deleted = ev.seq, ev.type == DELETED
        return paused, closed, deleted

    def pause_in_force(self, tx: Writer, parent: LogRef, upto: int) -> tuple[LogRef, int] | None:
        """The ``redaction/paused`` in force at seq ``upto`` of ``parent`` --
        the log that holds that seq, and the pause's seq -- or None."""
        return self._index.pause_in_force(tx, parent, upto)

    def begin_at_cut(self, child: LogRef) -> None:
        """Keep the state of ``child``, just made (in the open transaction)
        with no events of its own at a cut its maker confirmed: its first
        append does not look the cut up again (see ``StateIndex.at_cut``)."""
        self._keep(child.sid, self._index.at_cut(child))

    def seed(self, ref: LogRef, tracker: Tracker, compactions: list[tuple[int, int]],
             last_seq: int) -> None:
        """Take the state recovery just computed for a log ending at
        ``last_seq``, so that the closers validate without reading it again."""
        with self.transaction() as tx:
            _, chain, lease = head = tx.head(ref.sid)
            if head.last_seq == last_seq:
                self._keep(ref.sid, LogState(last_seq, chain, lease, tracker.copy(),
                                             list(compactions)))

    # -- preparing events (outside the write lock) --------------------------------

    def prepare(self, type_: Any, data: Any, time: int | None,
                envelope: Mapping[str, Any]) -> Row:
        """Validate and serialize one event."""
        if type(type_) is not str and isinstance(type_, str):
            type_ = plain_str(type_)
        checked = self._types_seen.get(type_)
        if checked is None:
            check_type(type_)
            checked = checks.needs_check(type_)
            if (version := VERSIONS.get(type_)) is not None:   # never cached: event-schemas.md
                envelope = {"schema_version": version, **envelope}   # (an importer's wins)
            elif len(self._types_seen) < 4096:
                self._types_seen[type_] = checked
        if data is None:
            data = {}
        data = check_json(data, "data")
        if type_ in KNOWN_SHAPES:
            check_shape(type_, data)
        pause: tuple[tuple[str, str], ...] = ()
        if self.redactor is not None:  # before framing (trajlog.redaction)
            data, envelope, pause = prepare_payload(self.redactor, type_, data, envelope)
        if time is None:
            time = now_ms()
        elif type(time) is not int or not 0 <= time < 2**63:
            raise InvalidArgumentError("time must be epoch milliseconds (a non-negative int)")
        if envelope:
            if not envelope.keys() <= _ENVELOPE_KEYS:
                unknown = ", ".join(sorted(set(envelope) - _ENVELOPE_KEYS))
                raise TypeError(f"unknown envelope field(s): {unknown}")
            env: list[Any] = [envelope.get(k) for k in ENVELOPE_FIELDS]
            # checked as stored: a subclass's len, comparisons or hash are never asked
            env = [plain_str(v) if isinstance(v, str)
                   else int.__int__(v) if isinstance(v, int) and not isinstance(v, bool)
                   else v for v in env]
            check_envelope(*env, type_=type_)
            event = Event(type_, time, data, *env)
            checked = checked or event.supersedes is not None or event.branch_id is not None
        else:
            event = Event(type_, time, data)
        try:
            # the common case in one encoder call: the payload is [type, time, data]
            raw = encode_event(event) if envelope else _PAYLOAD.encode((type_, time, data))
        except (UnicodeEncodeError, OverflowError, TypeError) as exc:
            raise SerializationError(f"cannot serialize the event: {exc}") from exc
        size = len(raw)
        if size > MAX_PAYLOAD:
            raise PayloadTooLargeError(f"event payload is {size} bytes; the limit is "
                                       f"{MAX_PAYLOAD}")
        return Row(event, raw, checked, pause)

    def prepare_items(self, header: SessionHeader, items: Iterable[Any]) -> list[Row]:
        """Rows for ``append_batch`` items: ``(type, data)`` or ``(type, data,
        envelope)``, the envelope a mapping of ``time`` and envelope fields."""
        fixed = checks.approvals_fixed(header)
        if not fixed and self.redactor is None:
            return self._prepare_plain(items)
        rows = [self._prepare_item(item, header if fixed else None) for item in items]
        distinct_keys(rows)
        return rows

    def _prepare_plain(self, items: Iterable[Any]) -> list[Row]:
        """:meth:`prepare_items` without a redactor or fixed approvals: the
        common item (``(type, data)`` or ``(type, data, {"time": t})``, a type
        seen before, a valid time) prepared inline, as :meth:`prepare` would;
        any other item goes to :meth:`prepare`."""
        rows: list[Row] = []
        append, prepare, seen = rows.append, self.prepare, self._types_seen
        encode, shapes, walk = _PAYLOAD.encode, KNOWN_SHAPES, walk_json
        envelopes = False   # (no envelope: no idempotency key to compare)
        for item in items:
            tt = type(item)
            n = len(item) if tt is tuple or tt is list else 0
            if n == 3:
                env = item[2]
                if type(env) is dict and len(env) == 1 and "time" in env:
                    time = env["time"]
                else:
                    rows.append(self._prepare_item(item))
                    envelopes = True
                    continue
            elif n == 2:
                time = now_ms()
            else:
                rows.append(self._prepare_item(item))
                continue
            type_, data = item[0], item[1]
            if (type(type_) is not str or data is None or type(time) is not int
                    or not 0 <= time < 2**63 or (checked := seen.get(type_)) is None):
                append(prepare(type_, data, time, _NO_ENVELOPE))
                continue
            try:
                walk(data, 0)   # (check_json's common case without its call)
            except NOT_WALKED:   # (check_json says what: a plain copy, or the error)
                data = check_json(data, "data")
            if type_ in shapes:
                check_shape(type_, data)
            try:
                raw = encode((type_, time, data))
            except (UnicodeEncodeError, OverflowError, TypeError) as exc:
                raise SerializationError(f"cannot serialize the event: {exc}") from exc
            if len(raw) > MAX_PAYLOAD:
                raise PayloadTooLargeError(f"event payload is {len(raw)} bytes; the limit is "
                                           f"{MAX_PAYLOAD}")
            append(Row(Event(type_, time, data), raw, checked))
        if envelopes:
            distinct_keys(rows)
        return rows

    def _prepare_item(self, item: Any, fixed: SessionHeader | None = None) -> Row:
        """One ``append_batch`` item of any form (see :meth:`prepare_items`);
        ``fixed``: the header of a session whose approvals are fixed (the
        item's type is checked against them)."""
        if not isinstance(item, (tuple, list)) or not 2 <= len(item) <= 3:
            raise TypeError("append_batch items are (type, data) or (type, data, envelope)")
        if fixed is not None:
            checks.check_append_type(fixed, item[0])
        if len(item) == 2:
            return self.prepare(item[0], item[1], None, _NO_ENVELOPE)
        env = item[2]
        if not isinstance(env, Mapping):
            raise TypeError("an append_batch envelope must be a mapping, not "
                            f"{type(env).__name__}")
        if len(env) == 1 and "time" in env:  # the common case: no copy
            return self.prepare(item[0], item[1], env["time"], _NO_ENVELOPE)
        env = dict(env)
        return self.prepare(item[0], item[1], env.pop("time", None), env)

    # -- appending (inside the transaction) ---------------------------------------

    def submit(self, ref: LogRef, rows: list[Row], expect_last: int | None = None,
               ) -> list[Event]:
        """Append ``rows`` through group commit; the events once durable."""
        if not rows:
            return []
        marker = turn_marker(rows)
        op = None if marker is None else self.leases.turn_op(ref.sid, marker)
        copies = owned(rows)   # (now: the caller's data as it was serialized)
        result: list[Event] = self.commit.call(self.apply, ref.sid, (ref, rows, expect_last, op))
        if op is not None:
            self.leases.after_turn_op(ref.sid, op, True)
        self.after_commit(ref)
        return returned(rows, result, copies)

    def submit_async(self, ref: LogRef, rows: list[Row],
                     done: Callable[[list[Event] | None, BaseException | None], None]) -> None:
        """Queue ``rows`` for group commit without waiting; ``done(events,
        error)`` is called from the committing thread."""
        marker = turn_marker(rows)
        op = None if marker is None else self.leases.turn_op(ref.sid, marker)
        copies = owned(rows)   # (in the caller's thread, before any other task runs)

        def finished(req: Request) -> None:
            self.leases.after_turn_op(ref.sid, op, req.error is None)
            if req.error is None:
                self.after_commit(ref)
                done(returned(rows, req.result, copies), None)
                return
            done(req.result, req.error)
        request = self.request(ref, rows, None, op)
        request.callback = finished
        self.commit.submit_async(request)

    def after_commit(self, ref: LogRef) -> None:
        """Ask for a repack when the session's run of small rows reached full
        size; tell the repacker when a turn ended (a moment to run)."""
        self.appends += 1
        state = self._states.get(ref.sid)
        if state is None or self.on_small_rows is None:
            return
        if state.small_bytes >= REPACK_BYTES:
            state.small_rows = state.small_bytes = 0
            state.turn_ended = False
            self.on_small_rows(ref, False)
        elif state.turn_ended:
            state.turn_ended = False
            self.on_small_rows(ref, True)

    def request(self, ref: LogRef, rows: list[Row], expect_last: int | None = None,
                lease_op: str | None = None) -> Request:
        return Request(lambda tx: self.apply(tx, ref, rows, expect_last, lease_op), ref.sid)

    def apply(self, tx: Writer, ref: LogRef, rows: list[Row],
              expect_last: int | None = None, lease_op: str | None = None) -> list[Event]:
        """Check, frame and insert ``rows``: the stages of :mod:`.write_stages`,
        in order.  Every refusal is raised before the append begins to write
        (step 12); a stage with nothing to do is skipped by a cheap test."""
        redactor = self.redactor
        # 1. where the log stands (kept in step with it; re-read if it moved)
        state = self.state(tx, ref)
        # 2. another writer's live lease refuses the append; ours is kept alive
        if state.lease.owner is not None:
            state.lease = self.leases.check(tx, ref.sid, ref.header.id, state.lease)
        # 3. the identity's privacy mode decides what of each event is stored
        if redactor is not None:
            rows = route_private(redactor, ref, rows)
        # 4. an append told where the log stands is refused if the log moved
        if expect_last is not None:
            check_expected_head(ref, state.synced_seq, expect_last)
        # 5. a repeated request gets its originals; a request/retry records it
        retried: list[Event] | None = None
        if len(rows) > 1 or rows[0].event.idempotency_key is not None:
            found = find_retry(self._reading, tx, ref, rows)
            if found is not None:
                retried = found[0]
                if state.synced_seq >= self._backend.max_session_seq:
                    # a full log: nothing more fits, the retry is not recorded
                    if lease_op is not None:
                        state.lease = self.leases.apply_turn_op(tx, ref.sid, lease_op,
                                                                state.lease)
                    return retried
                rows = self._retry_record(tx, ref, retried, found[1])
        first = state.synced_seq + 1
        paused = state.paused
        events = [rows[0].event] if len(rows) == 1 else [r.event for r in rows]
        # 6a. a closed log takes nothing more; a session/closed ends a balanced batch
        closing = (events[0].type == CLOSED if len(events) == 1   # (inline: no call)
                   else CLOSED in [e.type for e in events])
        if state.closed is not None or closing:
            check_close(tx, ref, state, events, first)
        # 6. a pause refuses content; a finding that pauses adds redaction/paused
        if pauses(paused, rows, events, redactor is not None):
            rows, paused = hold_pause(ref, paused, first, rows)
            events = [r.event for r in rows]
        # 7. the turns, steps and tool calls the events open and close, in order
        self._tx = tx   # (where the tracker's prior looks tool calls up)
        try:
            plan = state.tracker.plan(events, first, check=True)
        finally:
            self._tx = None
        # 8. supersedes, compactions and status events, checked against the log
        #    (and the branches after the batch, if it concerns any)
        added, branches = (check_rules_kept(self._reading, tx, ref, events, first,
                                            self._index.compactions(tx, ref, state, events),
                                            state.branches) if checked(rows) else ([], None))
        # 9. a full log refuses more events
        max_seq = self._backend.max_session_seq
        if first + len(rows) - 1 > max_seq:
            check_room(ref, first, len(rows), max_seq)
        # 10. the payloads framed, chained from the head, cut into chunk rows
        chunks, end = frame(ref, rows, first, state.chain, self._chunks)
        # 11. the index rows and call marks that reads and checks look up
        index, marks, calls = index_entries(events, first, chunks)
        # 12. a raw turn/start takes the lease, its turn/end gives it back
        if lease_op is not None:
            state.lease = self.leases.apply_turn_op(tx, ref.sid, lease_op, state.lease)
        # 13. the insert: chunk rows, index rows, marks and call rows
        tx.append(ref.sid, chunks, index, marks, calls)
        # 14. the state follows what was written
        advance(state, plan, added, end, paused, branches)
        if closing:
            state.closed = end.next_seq - 1
        # 15. rows a repack would merge, counted (it is asked for after the commit)
        count_small_rows(state, chunks, plan, events)
        # 16. what the caller gets: the events with their seqs, or the originals
        return with_seqs(events, first) if retried is None else retried

    def _retry_record(self, tx: Writer, ref: LogRef, originals: list[Event],
                      key: str) -> list[Row]:
        """The row of the ``request/retry`` event that records a retry
        (:mod:`.retries`), prepared and routed as any append's."""
        t, d, env = retries.retry_record(tx, ref, originals, key)
        rows = [self.prepare(t, d, None, env)]
        if self.redactor is not None:
            rows = route_private(self.redactor, ref, rows)
        return rows

    # -- sessions -------------------------------------------------------------------

    def create(self, *, cwd: str, agent_preset: str | None, metadata: Mapping[str, Any] | None,
               session_id: str | None = None, parent: LogRef | None = None,
               seed_length: int = 0, origin: str | None = None, delegation_depth: int = 0,
               initial: Sequence[tuple[str, Any, Mapping[str, Any]]] = (),
               parent_events: Sequence[tuple[str, Any, Mapping[str, Any]]] = (),
               created_ms: int | None = None,
               fill: Callable[[Writer, LogRef], None] | None = None,
               tx: Writer | None = None,
               ) -> LogRef:
        """Create a session, and append its ``initial`` events -- and
        ``parent_events`` to the parent -- in the same transaction (a
        subagent's task, its sandbox snapshot, a background job's answer).
        ``created_ms`` is the header's creation time (an import keeps the
        source's); ``fill(tx, ref)`` appends more in that transaction (an
        import's events, batch by batch: all of them or no session).  With
        ``tx``, all of it happens inside that open transaction."""
        if not isinstance(cwd, str) or not cwd:
            raise TypeError("cwd must be a non-empty str")
        if agent_preset is not None and not isinstance(agent_preset, str):
            raise TypeError("agent_preset must be str or None")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping, not {type(metadata).__name__}")
        meta = check_json(dict(metadata or {}), "metadata")
        cwd = plain_str(cwd)
        agent_preset = None if agent_preset is None else plain_str(agent_preset)
        for name, text in (("cwd", cwd), ("agent_preset", agent_preset)):
            if text is not None:
                check_text(text, name)
        sid_uuid = _session_uuid(session_id)
        key = session_key(sid_uuid)
        if created_ms is not None and (type(created_ms) is not int or
                                       not 0 <= created_ms < 2**63):
            raise InvalidArgumentError("created_ms must be epoch milliseconds")
        created = now_ms() if created_ms is None else created_ms
        if parent is None or not seed_length:
            seed_chain = key
        else:
            seed_chain = self._reading.chain_at(parent, seed_length - 1, tx)
        try:
            blob = encode_metadata(meta)
        except (UnicodeEncodeError, OverflowError, TypeError) as exc:
            raise SerializationError(f"cannot serialize the metadata: {exc}",
                                     "metadata") from None
        # the header holds what a reader will decode (a tuple is stored as a
        # list), so that its check is the one every later handle computes
        header = SessionHeader(str(sid_uuid), cwd, parent.id if parent else None, seed_length,
                               origin, delegation_depth, agent_preset, created,
                               MappingProxyType(decode_metadata(blob)))
        row = SessionRow(0, header.id, key, created, cwd, parent.sid if parent else None,
                         seed_length, seed_chain, origin, delegation_depth, agent_preset,
                         blob, header_check(header, key))
        rows = [self.prepare(t, d, None, dict(env)) for t, d, env in initial]
        up = [self.prepare(t, d, None, dict(env)) for t, d, env in parent_events]
        def write(tx: Writer) -> LogRef:
            sid = tx.insert_session(row, seed_length - 1, seed_chain)
            ref = LogRef(sid, key, header, parent, seed_chain)
            if rows:
                self.apply(tx, ref, rows)
            if up and parent is not None:
                self.apply(tx, parent, up)
            if fill is not None:
                fill(tx, ref)
            return ref
        if tx is not None:
            return write(tx)
        with self.transaction() as opened:
            return write(opened)

    def forget(self, sid: int | None) -> None:
        """Drop the cached state of ``sid`` (None: of every session) -- its
        writes were rolled back."""
        self._forget_key(sid)


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


__all__ = ["SMALL_ROW", "LogState", "Row", "WriteEngine"]
