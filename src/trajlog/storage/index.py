"""The sparse event index: which events get a queryable row, and what it holds.

The index serves what forks, recovery, idempotency and views look up without
reading the log: turn and step markers, tool calls (an assistant message that
requests some, ``tool/call``, ``tool/result`` -- by call id), sandbox, status,
approval, subagent and compaction events, and every event with an idempotency
key.  Each row carries the event's type, time and envelope.  A row is a copy,
never the authority: ``verify()`` recomputes the rows from the frames and
compares (:func:`entry` is the one rule both sides use).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..events import Event

MARKERS = frozenset({"turn/start", "turn/end", "step/start", "step/end", "tool/call",
                     "tool/result", "sandbox/mode", "event/status"})
PREFIXES = ("compaction/", "approval/", "subagent/")


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
    call_id: str | None


def indexed(ev: Event) -> bool:
    """Whether an event has an index row."""
    t = ev.type
    if t in MARKERS or ev.idempotency_key is not None or t.startswith(PREFIXES):
        return True
    if t == "assistant/message":
        d = ev.data
        return type(d) is dict and bool(d.get("tool_calls"))
    return False


def entry(ev: Event, seq: int) -> IndexRow | None:
    """The index row of the event at ``seq``, or None if it has none."""
    if not indexed(ev):
        return None
    call_id: Any = None
    if ev.type == "tool/call" or ev.type == "tool/result":
        d = ev.data
        call_id = d.get("call_id") if type(d) is dict else None
        if type(call_id) is not str:
            call_id = None
    return IndexRow(seq, ev.type, ev.time, ev.source, ev.causal_parent, ev.workspace_revision,
                    ev.data_class, ev.idempotency_key, call_id)


__all__ = ["MARKERS", "PREFIXES", "IndexRow", "entry", "indexed"]
