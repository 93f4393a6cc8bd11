"""The stages of an append, one concern each, in the order the write engine
runs them (:meth:`~trajlog.api.writer.WriteEngine.apply`).

Before the queue, in the caller's thread, :meth:`WriteEngine.prepare` has
validated each event, redacted it and serialized it into a :class:`Row`.
Inside the write transaction, under the write lock, an append then walks:

1. **state** -- the log's head, lease, lifecycle and compactions, in step
   with the log (:meth:`WriteEngine.state`, from the engine's cache).
2. **lease** -- another writer's live lease refuses the append; this
   store's own is kept alive (:meth:`~trajlog.api.leases.Leases.check`).
3. :func:`route_private` -- the identity's privacy mode decides what of each
   event is stored (:mod:`trajlog.redaction`).
4. :func:`check_expected_head` -- an append told where the log stands is
   refused if the log moved.
5. :func:`find_retry` -- keyed events the log already holds: an idempotent
   retry hands back the originals, and a ``request/retry`` record is written
   in their place (:mod:`.retries`).
6. :func:`hold_pause` -- a redaction pause refuses content, and a finding
   that pauses appends its ``redaction/paused``.
7. **lifecycle** -- the turns, steps and tool calls the events open and
   close, refused when out of order (:meth:`~trajlog.lifecycle.Tracker.plan`).
8. :func:`check_rules_kept` -- ``supersedes`` names an earlier seq;
   compactions nest and keep calls with their results; ``event/status``
   targets an earlier event from a source that may decide (:mod:`.checks`);
   branch events and appends to a branch follow the branch rules
   (:mod:`.branch_checks`), checked against the branches the state keeps.
9. :func:`check_room` -- a full log refuses more events.
10. :func:`frame` -- the payloads framed, chained from the head and cut into
    chunk rows (:mod:`trajlog.codec`).
11. :func:`index_entries` -- the index rows and the call marks of the
    events, split along the chunk rows (:mod:`trajlog.storage.event_index`).
12. **lease op** -- a raw ``turn/start`` takes the lease, its ``turn/end``
    gives it back (:meth:`~trajlog.api.leases.Leases.apply_turn_op`).
13. **insert** -- the chunk rows, index rows, marks and call rows, in the
    transaction (:meth:`~trajlog.storage.Writer.append`).
14. :func:`advance` -- the state follows what was written (the branches too).
15. :func:`count_small_rows` -- rows a repack would merge are counted, and a
    turn's end noted, so that the engine asks for a repack after the commit.
16. :func:`with_seqs` -- the events with their seqs (a retry: the stored
    originals); once committed, :meth:`WriteEngine.submit` hands the caller
    fresh copies (``returned``).

Every refusal is raised before step 12, where the append begins to write
(the heartbeat of this store's own lease at step 2 aside).  Stages 2, 3, 4,
5, 6, 8 and 12 are skipped by a cheap test in the engine when they have
nothing to do (nobody holds the lease, no redactor, no expected head, one
event without a key, no pause, nothing checked against the log, no lease
op), so that a plain append pays only for what it uses.

Each stage is a plain function of the values it needs: it can be read, and
tested (``tests/api/test_write_stages.py``), alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from msgspec.structs import force_setattr as set_field
from msgspec.structs import replace

from .._format import EVENT_JSON_DEPTH, Cursor
from ..codec.chunks import CAP, Chunk, ChunkCompressor
from ..codec.records import encode_chunks, fresh_events
from ..errors import (
    IdempotencyConflictError,
    InvalidStateError,
    LogMovedError,
    SessionClosedError,
    SessionDeletedError,
    ValidationError,
    session_deleted,
)
from ..event_types import CLOSED, DELETED
from ..events import Event, check_json, decode_event, encode_event
from ..lifecycle import Plan
from ..redaction import PAUSE_TYPES, Redactor, pause_rows, route_rows
from ..storage import Reader
from ..storage.event_index import (
    MARKED,
    IndexRow,
    Mark,
    event_marks,
    index_rows,
    marks_of,
    pack_marks,
    requested,
    split_marks,
)
from . import branch_checks, checks, retries
from .handles import LogRef
from .logstate import LogState
from .reading import LogReader

SMALL_ROW = CAP // 2        # a row below this is merged by a repack
_new = tuple.__new__        # a Cursor made in C (a NamedTuple's own __new__ is Python)
_TURN_MARKERS = {"turn/start": "turn/start", "turn/end": "turn/end"}   # (see turn_marker)


class Row(msgspec.Struct, gc=False):
    """An event ready to be framed: everything but its seq and chain.  (A
    struct: made in C, one per event of a batch.)"""

    event: Event
    payload: bytes
    check: bool = False  # a compaction or status event: checked in the transaction
    pause: tuple[tuple[str, str], ...] = ()  # hashed findings: the session pauses after it


def remake(event: Event, pause: tuple[tuple[str, str], ...] = ()) -> Row:
    """The row of an event a stage changed or added (serialized again)."""
    return Row(event, encode_event(event),
               checks.needs_check(event.type) or event.supersedes is not None
               or event.branch_id is not None, pause)


def turn_marker(rows: Sequence[Row]) -> str | None:
    """The last ``turn/start`` or ``turn/end`` among ``rows`` (None: neither)
    -- what the append does to a lease (:meth:`Leases.turn_op`)."""
    if len(rows) == 1:   # (a single append's: no loop)
        return _TURN_MARKERS.get(rows[0].event.type)
    for r in reversed(rows):
        t = r.event.type
        if t == "turn/start" or t == "turn/end":
            return t
    return None


# -- 3. privacy ------------------------------------------------------------------

def route_private(redactor: Redactor, ref: LogRef, rows: list[Row]) -> list[Row]:
    """``rows`` as the session's privacy mode stores them (its identity's
    metadata names the mode)."""
    return route_rows(redactor, ref.header.metadata, rows, remake)


# -- 4. expected head --------------------------------------------------------------

def check_expected_head(ref: LogRef, last_seq: int, expect_last: int) -> None:
    """Refuse an append that expected the log to end at ``expect_last``."""
    if last_seq != expect_last:
        raise LogMovedError(f"session {ref.id} moved to seq {last_seq}; "
                            f"expected it at {expect_last}")


# -- 5. idempotent retry -------------------------------------------------------------

def keyed(rows: Sequence[Row]) -> list[tuple[int, str]]:
    """``(position, idempotency key)`` of the rows that carry a key."""
    if len(rows) == 1:   # (the common case: no list built to be filtered)
        key = rows[0].event.idempotency_key
        return [] if key is None else [(0, key)]
    return [(i, key) for i, r in enumerate(rows)
            if (key := r.event.idempotency_key) is not None]


def find_retry(reading: LogReader, tx: Reader, ref: LogRef, rows: Sequence[Row],
               ) -> tuple[list[Event], str] | None:
    """If ``rows`` repeat a request the log already holds: the stored
    originals, and the key that names the retry's record (the first one).
    None: a new request.  A batch mixing used keys with new ones is refused."""
    with_keys = keyed(rows)
    if not with_keys:
        return None
    found = [(i, seq) for i, key in with_keys
             if (seq := tx.seq_of_idempotency_key(ref.sid, key)) is not None]
    if not found:
        return None
    if len(found) != len(with_keys):
        raise IdempotencyConflictError("the batch mixes idempotency keys already used in "
                                       "this session with new ones")
    return retries.originals(reading, tx, ref, [r.event for r in rows], found), with_keys[0][1]


def distinct_keys(rows: Sequence[Row]) -> None:
    """Refuse a batch that repeats an idempotency key (before the queue)."""
    keys = [r.event.idempotency_key for r in rows if r.event.idempotency_key is not None]
    if len(keys) != len(set(keys)):
        raise IdempotencyConflictError("the batch repeats an idempotency key")


# -- 6. redaction pause -----------------------------------------------------------------

def pauses(paused: bool, rows: Sequence[Row], events: Sequence[Event], private: bool) -> bool:
    """Has :func:`hold_pause` anything to do: a pause in force, an event that
    moves it, or (``private``: a redactor runs) a finding that pauses?  (One
    set test of the types: no call per event.)"""
    if len(events) == 1:   # (the common case: no list built)
        return paused or events[0].type in PAUSE_TYPES or (private and bool(rows[0].pause))
    return paused or not PAUSE_TYPES.isdisjoint([e.type for e in events]) or (
        private and any(r.pause for r in rows))


def hold_pause(ref: LogRef, paused: bool, first: int, rows: list[Row],
               ) -> tuple[list[Row], bool]:
    """``rows`` with the ``redaction/paused`` their findings call for, after
    refusing what a paused session does not take; and the pause after them."""
    return pause_rows(ref.id, paused, first, rows, remake)


# -- 6a. a closed log ----------------------------------------------------------------------

def check_close(tx: Reader, ref: LogRef, state: LogState, events: Sequence[Event],
                first: int) -> None:
    """Refuse any event after a ``session/closed`` (in the log or earlier in
    the batch) or a ``session/deleted`` (but a closed session's deletion
    record), and a ``session/closed`` while a turn, a step or a tool call is
    open (recovery could not close them after it)."""
    if state.closed is not None:
        if state.deleted:   # (the record read on this refusal only)
            raise deleted_log(tx, ref)
        if len(events) == 1 and events[0].type == DELETED:
            return   # a closed session deleted: its record is the one event after the end
        raise SessionClosedError(ref.id, first, events[0].type, state.closed)
    at = next(i for i, e in enumerate(events) if e.type == CLOSED)
    if at != len(events) - 1:
        raise SessionClosedError(ref.id, first + at + 1, events[at + 1].type, first + at)
    tracker = state.tracker
    if at:   # (the batch's own events first, on a copy)
        tracker = tracker.copy()
        for i, e in enumerate(events[:-1]):
            tracker.feed(replace(e, seq=first + i))
    if not tracker.balanced:
        raise InvalidStateError(f"session {ref.id}: session/closed refused at seq "
                                f"{first + at}: a turn, step or tool call is still open "
                                "(end it first)")


def deleted_log(tx: Reader, ref: LogRef) -> SessionDeletedError:
    """The refusal of a write to ``ref``, whose log ends with ``session/deleted``:
    who deleted it, when and why, from its deletion record."""
    gone = tx.deletion(ref.id)
    if gone is None:   # (the event without its record: a deletion cut short)
        return SessionDeletedError(f"session {ref.id} was deleted: its log ends with "
                                   "session/deleted", session=ref.id)
    return session_deleted(gone.id, gone.reason, gone.actor, gone.deleted_ms)


# -- 8. rules checked against the log ------------------------------------------------------

def checked(rows: Sequence[Row]) -> bool:
    """Has :func:`check_rules` anything to check (a compaction, a status
    event, a ``supersedes``: see :meth:`WriteEngine.prepare`)?"""
    if len(rows) == 1:   # (a single append's: no loop)
        return rows[0].check
    for r in rows:  # noqa: SIM110 -- a loop: cheaper than any() of a generator
        if r.check:
            return True
    return False


def check_rules(reading: LogReader, tx: Reader, ref: LogRef, events: Sequence[Event],
                first: int, compactions: Sequence[tuple[int, int]],
                ) -> list[tuple[int, int]]:
    """Refuse a ``supersedes`` that does not name an earlier seq, a
    compaction that does not nest with ``compactions`` or splits a call from
    its result, an ``event/status`` that targets no earlier event or comes
    from an untrusted source.  Returns the compaction ranges the events add."""
    return check_rules_kept(reading, tx, ref, events, first, compactions)[0]


def check_rules_kept(reading: LogReader, tx: Reader, ref: LogRef, events: Sequence[Event],
                     first: int, compactions: Sequence[tuple[int, int]],
                     branches: branch_checks.Branches | None = None,
                     ) -> tuple[list[tuple[int, int]], branch_checks.Branches | None]:
    """:func:`check_rules` against the log's branches the write state kept
    (``branches``; None: folded from the index); returns also the branches
    after the batch (None: it concerns no branch), for :func:`advance`."""
    check_supersedes(ref.id, events, first)
    after = branch_checks.check_branches(reading, tx, ref, events, first, branches)
    return checks.check_events(reading, ref, tx, events, first, compactions), after


def check_supersedes(session: str, events: Sequence[Event], first_seq: int) -> None:
    """Refuse an event whose ``supersedes`` does not name an earlier seq: a
    forward (or self) reference would retire a fact nobody has seen yet."""
    for i, ev in enumerate(events):
        target = ev.supersedes
        if target is not None and target >= first_seq + i:
            raise ValidationError(
                f"session {session}: the event at seq {first_seq + i} ({ev.type}) "
                f"supersedes seq {target}, which is not an earlier event")


# -- 9. room ----------------------------------------------------------------------------

def check_room(ref: LogRef, first: int, count: int, max_seq: int) -> None:
    """Refuse ``count`` events from seq ``first`` that the log cannot hold."""
    if first + count - 1 > max_seq:
        raise InvalidStateError(f"session {ref.id} is full: a session's own log holds "
                                f"at most {max_seq + 1} events")


# -- 10. frames ---------------------------------------------------------------------------

def frame(ref: LogRef, rows: Sequence[Row], first: int, chain: int,
          compressor: ChunkCompressor) -> tuple[list[Chunk], Cursor]:
    """The rows' payloads as frames from seq ``first``, chained from the head's
    ``chain``, cut into chunk rows; and the cursor after the last frame."""
    def explain(i: int) -> None:
        # the C core refused payload i on its bytes: the Python walk names
        # where (it raises), as prepare would have
        check_json(rows[i].event.data, "data")

    # one kernel call: the JSON rules checked again on the very bytes framed
    # (whatever made the row), the frames, and the row's body check
    payloads = [rows[0].payload] if len(rows) == 1 else [r.payload for r in rows]
    return encode_chunks(ref.key, payloads, _new(Cursor, (0, first, chain)), compressor,
                         session=ref.header.id, json_depth=EVENT_JSON_DEPTH, explain=explain)


# -- 11. index rows and marks ---------------------------------------------------------------

def index_entries(events: Sequence[Event], first: int, chunks: Sequence[Chunk],
                  ) -> tuple[list[IndexRow], list[bytes | None], Sequence[tuple[str, int]]]:
    """The events' index rows, their marks packed per chunk row, and the
    ``(call id, seq)`` of each tool call they request (the call index)."""
    index = index_rows(events, first)
    dense: list[Mark] = []
    if len(events) == 1:   # (a single append: most have no mark)
        if events[0].type in MARKED:   # (event_marks' own test inlined: no call for most)
            event_marks(events[0], first, dense)
        if not dense:
            return index, [None] * len(chunks), ()
    else:
        dense = marks_of(events, first)
    if len(chunks) == 1:
        marks = [pack_marks(dense)]
    else:
        marks = split_marks(dense, [(c.first_seq, c.last_seq) for c in chunks])
    return index, marks, requested(dense) if dense else ()


# -- 14. state --------------------------------------------------------------------------------

def advance(state: LogState, plan: Plan, added: list[tuple[int, int]], end: Cursor,
            paused: bool, branches: branch_checks.Branches | None = None) -> None:
    """The state after the insert: the lifecycle's plan applied, the
    compactions added, the head moved, the pause as the events left it, the
    branches as the batch left them (if it concerned any)."""
    state.tracker.apply(plan)
    if added:
        state.compactions += added
    if branches is not None:
        state.branches = branches
    state.synced_seq, state.chain = end.next_seq - 1, end.chain
    state.paused = paused


# -- 15. repack accounting ------------------------------------------------------------------------

def count_small_rows(state: LogState, chunks: Sequence[Chunk], plan: Plan,
                     events: Sequence[Event]) -> None:
    """Count the rows and raw bytes of the run of small rows a repack would
    merge (a big row ends the run: it is complete, ready to merge); note a
    turn's end after several small rows (the engine asks for a repack, or
    tells the repacker of the turn's end, after the commit)."""
    for c in chunks:
        if c.raw_len < SMALL_ROW:
            state.small_rows += 1
            state.small_bytes += c.raw_len
        elif state.small_rows > 1:
            state.small_bytes = max(state.small_bytes, CAP)
    # (a turn/end among the last two events: a redaction/paused may follow it)
    if state.small_rows > 1 and plan.turn_start is None and "turn/end" in [
            ev.type for ev in events[-2:]]:
        state.turn_ended = True


# -- 16. what the caller gets ---------------------------------------------------------------------

def with_seqs(events: Sequence[Event], first: int) -> list[Event]:
    """The events as written, with their seqs from ``first``."""
    if len(events) == 1:   # (with_seq inlined)
        set_field(events[0], "seq", first)
        return [events[0]]
    for i, ev in enumerate(events):   # (with_seq inlined: no Python call per event)
        set_field(ev, "seq", first + i)
    return list(events)


def owned(rows: Sequence[Row]) -> list[Any] | None:
    """Copies of the rows' data that :func:`returned` hands back instead of
    decoding the payloads again: taken in the caller's thread as soon as the
    rows are prepared (so they are what was serialized -- the caller has not
    run since), for data that a one-level copy makes the caller's own and
    equal to what is stored: a dict of ``str`` keys and immutable plain
    scalars (``str``, ``int``, ``float``, ``bool``, ``None``), the common
    message.  ``None`` for a row whose payload is decoded instead (nested or
    other data), and for the whole list when no row has such data."""
    out: list[Any] | None = None
    for i, r in enumerate(rows):
        data = r.event.data
        if type(data) is not dict:
            continue
        for k, v in data.items():
            t = type(v)
            if type(k) is not str or (t is not str and t is not int and t is not float
                                      and t is not bool and v is not None):
                break
        else:
            if out is None:
                out = [None] * len(rows)
            out[i] = dict(data)
    return out


def returned(rows: Sequence[Row], events: list[Event],
             copies: Sequence[Any] | None = None) -> list[Event]:
    """What an append hands back once committed: fresh copies of what it
    wrote (the caller's data is never shared: ``copies`` from :func:`owned`,
    or the payload decoded afresh), or -- a retry -- the stored originals,
    decoded afresh."""
    if events and events[0] is rows[0].event:
        if copies is None:
            return fresh_events([r.payload for r in rows], events[0].seq)
        if len(rows) == 1:   # (a single append's: no loop)
            data, r = copies[0], rows[0]
            return [decode_event(r.payload, r.event.seq) if data is None
                    else replace(r.event, data=data)]
        out, seq = [], events[0].seq
        for r, data in zip(rows, copies, strict=True):
            out.append(decode_event(r.payload, seq) if data is None
                       else replace(r.event, data=data, seq=seq))
            seq += 1
        return out
    return events[:len(rows)]   # (not a redaction/paused the write added)


__all__ = ["SMALL_ROW", "Row", "advance", "check_close", "check_expected_head", "check_room",
           "check_rules", "check_supersedes", "checked", "count_small_rows",
           "distinct_keys", "find_retry", "frame", "hold_pause", "index_entries", "keyed",
           "owned", "pauses", "remake", "returned", "route_private", "turn_marker",
           "with_seqs"]
