"""The event index: what forks, recovery, idempotency and views look up
without reading the log, kept in two forms by how often it occurs.

* **Index rows** (``event_index``, one row per event) for the sparse events:
  turn markers (a fork's cut), sandbox settings (a subagent's snapshot),
  redaction pauses and resumes (the pause in force at a cut), status,
  compaction, approval and subagent events, and every event with an
  idempotency key.  Each row carries the event's type, time and envelope.
* **Marks** (one MessagePack list per chunk row, ``chunks.marks``) for the
  dense ones: step markers and tool calls -- an assistant message's requested
  call ids, ``tool/call`` and a call's closers (``tool/result``,
  ``tool/cancel``) by call id.  An agent's log is
  mostly these, so one row per event would cost more than the log itself
  (measured: ~10 us per event against ~3 for the chunk rows).
* **Call rows** (``call_index``, one per tool call id a session's own log
  requests, keyed by that id): whether an id was already used, and where its
  marks begin, without reading the log (:func:`requested`).

Both are copies, never the authority: ``verify()`` recomputes them from the
frames and compares (:func:`index_rows` and :func:`marks_of` are the one rule
both sides use).  Which type gets a row or a mark is its ``index`` column in
:mod:`trajlog.event_types`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgspec

from ..event_types import INDEX_ROW_PREFIXES, INDEX_ROWS, MARKS, PAUSED, RESUMED
from ..events import Event

SPARSE = INDEX_ROWS
# The redaction pause's events (indexed since schema 7; what a store migrated
# to it gets index rows for).
PAUSES = frozenset({PAUSED, RESUMED})
PREFIXES = INDEX_ROW_PREFIXES
# Mark codes (stable: they are stored).  RESULT marks a call's closer: its
# answer or its cancel.
STEP_START, STEP_END, REQUESTED, CALL, RESULT = 1, 2, 3, 4, 5
_BY_MARK = {"mark:step-start": STEP_START, "mark:step-end": STEP_END,
            "mark:requested": REQUESTED, "mark:call": CALL, "mark:closed": RESULT}
_CODES = {t: _BY_MARK[m] for t, m in MARKS.items() if _BY_MARK[m] != REQUESTED}
_REQUESTS = frozenset(t for t, m in MARKS.items() if _BY_MARK[m] == REQUESTED)
MARKED = frozenset(_CODES) | _REQUESTS   # the types event_marks may mark
_ENC = msgspec.msgpack.Encoder()
_DEC = msgspec.msgpack.Decoder(list[tuple[int, int, str | None]])


class IndexRow(NamedTuple):
    """One index row (``seq`` within its session)."""

    seq: int
    type: str
    time: int
    source: str | None
    causal_parent: int | None
    workspace_revision: str | None
    data_class: str | None
    idempotency_key: str | None


class Mark(NamedTuple):
    """A dense event of a chunk: its seq, what it is (a code above) and the
    tool call it concerns (None for step markers)."""

    seq: int
    code: int
    call_id: str | None


def index_rows(events: Sequence[Event], first: int) -> list[IndexRow]:
    """The index rows of consecutive events from seq ``first``: the one rule
    of which event gets a row -- a sparse type (by name or prefix), or an
    idempotency key.  (One loop, no call per event: most events have no row,
    and a row is made in C.)"""
    out: list[IndexRow] = []
    for i, ev in enumerate(events):
        t = ev.type
        if t in SPARSE or ev.idempotency_key is not None or t.startswith(PREFIXES):
            out.append(_new(IndexRow, (first + i, t, ev.time, ev.source, ev.causal_parent,
                                       ev.workspace_revision, ev.data_class,
                                       ev.idempotency_key)))
    return out


def entry(ev: Event, seq: int) -> IndexRow | None:
    """The index row of the event at ``seq``, or None if it has none."""
    row = index_rows((ev,), seq)
    return row[0] if row else None


_new = tuple.__new__   # an IndexRow or Mark made in C (a NamedTuple's own __new__ is Python)


def event_marks(ev: Event, seq: int, out: list[Mark]) -> None:
    """Append the marks of the event at ``seq`` to ``out``."""
    t = ev.type
    code = _CODES.get(t)
    if code is not None:
        call_id = None
        if code >= CALL:
            d = ev.data
            call_id = d.get("call_id") if type(d) is dict else None
            if type(call_id) is not str:
                return
        out.append(_new(Mark, (seq, code, call_id)))
    elif t in _REQUESTS:
        d = ev.data
        calls = d.get("tool_calls") if type(d) is dict else None
        for c in calls or ():
            call_id = c.get("id") if type(c) is dict else None
            if type(call_id) is str:
                out.append(_new(Mark, (seq, REQUESTED, call_id)))


def marks_of(events: Iterable[Event], first_seq: int) -> list[Mark]:
    """The marks of consecutive events from ``first_seq`` (a batch's)."""
    out: list[Mark] = []
    codes, requests = _CODES, _REQUESTS
    for i, ev in enumerate(events):
        if (t := ev.type) in codes or t in requests:   # (a call only for an event with marks)
            event_marks(ev, first_seq + i, out)
    return out


def pack_marks(marks: Sequence[Mark]) -> bytes | None:
    return _ENC.encode(marks) if marks else None


def unpack_marks(blob: Any) -> list[Mark]:
    if blob is None:
        return []
    return [Mark(*m) for m in _DEC.decode(blob)]


def requested(marks: Iterable[Mark]) -> list[tuple[str, int]]:
    """The call rows of ``marks``: ``(call id, seq)`` of each requested call."""
    return [(m.call_id, m.seq) for m in marks if m.code == REQUESTED and m.call_id is not None]


def split_marks(marks: Sequence[Mark], bounds: Sequence[tuple[int, int]]) -> list[bytes | None]:
    """The stored marks of each chunk of ``bounds`` = ``(first_seq, last_seq)``."""
    out, i = [], 0
    for _first, last in bounds:
        j = i
        while j < len(marks) and marks[j].seq <= last:
            j += 1
        out.append(pack_marks(marks[i:j]))
        i = j
    return out


__all__ = ["CALL", "MARKED", "PAUSES", "PREFIXES", "REQUESTED", "RESULT", "SPARSE", "STEP_END",
           "STEP_START", "IndexRow", "Mark", "entry", "event_marks", "index_rows", "marks_of",
           "pack_marks", "requested", "split_marks", "unpack_marks"]
