"""Retention: which memory items and which event payloads are due to go.

Policies are recorded, never implied: an item carries its own
(``{"ttl_ms": n}`` or ``{"until_event": type}``); a session's is the latest
``retention/policy`` event (``{"ttl_ms": n}`` and/or
``{"until_event": type}``, e.g. ``session/closed``) its history shows: its
own log's, else the one its inherited prefix holds (a fork's, a forked
subagent's), else -- for a spawned subagent -- its parent's as of the spawn.
A policy erases the payloads of the session's own events (the prefix is its
parent's log, under the parent's policy); an ``until_event`` counts when it
happens in the session's own log (a parent closing does not close a fork).
Applying them is explicit (:meth:`trajlog.Store.apply_retention`),
idempotent, and every removal is a tombstone with its reason.  The structural markers of a log
(turns, steps, retention and closing events) keep their payloads, so an
expired log still balances.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import InvalidArgumentError
from ..event_types import RETENTION_KEEPS
from ..events import Event
from ..storage.base import MemoryReader

POLICY_EVENT = "retention/policy"
CLOSED_EVENT = "session/closed"
#: the types whose payload a policy never erases (the registry's ``retention`` column)
KEEP_TYPES = RETENTION_KEEPS
ACTOR = "trajlog:retention"


def check_policy(ttl_ms: Any, until_event: Any) -> dict[str, Any]:
    """The data of a ``retention/policy`` event (a typed error when malformed)."""
    if ttl_ms is None and until_event is None:
        raise InvalidArgumentError("a retention policy has ttl_ms, until_event or both")
    out: dict[str, Any] = {}
    if ttl_ms is not None:
        if type(ttl_ms) is not int or ttl_ms < 0:
            raise InvalidArgumentError(f"ttl_ms must be a non-negative int, not {ttl_ms!r}")
        out["ttl_ms"] = ttl_ms
    if until_event is not None:
        if not isinstance(until_event, str) or not until_event:
            raise InvalidArgumentError(f"until_event must be an event type, not {until_event!r}")
        out["until_event"] = until_event
    return out


def due_items(reader: MemoryReader, now_ms: int,
              happened: Callable[[int, str], bool],
              session_sid: Callable[[str], int | None]) -> list[tuple[str, str]]:
    """``(item id, reason)`` of every item whose retention has run out: its
    TTL passed, or the event it waits for happened in its session (the
    session it came from, or the session whose scope holds it)."""
    out = [(r.item_id, f"retention: ttl expired at {r.expires_ms}")
           for r in reader.memory_expired(now_ms, 2**62)]
    for r in reader.memory_until_event(2**62):
        assert r.until_event is not None
        sid = r.source_sid if r.source_sid is not None else (
            session_sid(r.scope_key) if r.scope == "session" else None)
        if sid is not None and happened(sid, r.until_event):
            out.append((r.item_id, f"retention: until {r.until_event}"))
    return out


def due_seqs(events: Iterable[Event], policy: dict[str, Any], now_ms: int,
             closed: bool) -> list[int]:
    """Seqs of a log whose payloads its policy says must go: older than the
    TTL, or every one once the ``until_event`` happened (``closed``).
    Structural markers stay (events already erased are skipped by the erasure)."""
    cutoff = now_ms - policy["ttl_ms"] if "ttl_ms" in policy else None
    out = []
    for ev in events:
        if ev.type in KEEP_TYPES:
            continue
        if closed or (cutoff is not None and ev.time <= cutoff):
            out.append(ev.seq)
    return out


__all__ = ["ACTOR", "CLOSED_EVENT", "KEEP_TYPES", "POLICY_EVENT", "check_policy", "due_items",
           "due_seqs"]
