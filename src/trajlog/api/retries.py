"""Idempotent retries, recorded.

An append whose idempotency key the session already holds, for the same
event, writes that event again nowhere and hands back the stored original (the
idempotent contract, also across processes).  An append-only log must still
record the repeated request and how it was handled, not drop it silently (seed
000, section 2), so the same transaction appends one event::

    request/retry {"idempotency_key": k, "original": seq, "outcome": "deduplicated",
                   "attempt": n, "synthetic": true[, "batch": [first, last]]}
      envelope: source "trajlog:retry", causal_parent = seq (the original),
                idempotency_key = retry_key(k, n)

``attempt`` counts the requests made with ``k``: 2 for the first retry.  Each
record carries its own derived key ``trajlog:retry:<digest of k>:<n>``, so the
attempts already recorded are found in the idempotency index (unique, per
session) by a galloping search -- O(log n) look-ups, never a scan of the log
-- whatever the privacy mode strips from the data.  ``synthetic`` marks an
event trajlog wrote for itself (as recovery's closers): it passes a redaction
pause, since a retry must not fail where the original succeeded.

A batch is retried as a whole (every keyed event found, at the same offsets:
else :class:`IdempotencyConflictError`, as before); it gets one record, named
by its first key, with ``batch`` the original's seq range.  A retry in a
session whose log is full is not recorded (nothing more fits).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec

from ..errors import IdempotencyConflictError, index_mismatch
from ..events import Event, encode_event
from ..storage import Reader
from .handles import LogRef
from .reading import LogReader

RETRY = "request/retry"
RETRY_SOURCE = "trajlog:retry"


def retry_key(key: str, attempt: int) -> str:
    """The idempotency key of the record of ``key``'s ``attempt``-th request
    (at most 60 characters, whatever the length of ``key``)."""
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"trajlog:retry:{digest}:{attempt}"


def next_attempt(reader: Reader, sid: int, key: str) -> int:
    """The number of the request being made with ``key`` (the original was 1,
    so the first retry is 2): records are numbered 2, 3, ... without a gap,
    so the first free number is found by doubling, then bisecting."""
    def taken(n: int) -> bool:
        return reader.seq_of_idempotency_key(sid, retry_key(key, n)) is not None

    if not taken(2):
        return 2
    lo, hi = 2, 4           # taken(lo); find a free hi
    while taken(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:      # taken(lo), free(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if taken(mid) else (lo, mid)
    return hi


def retry_record(reader: Reader, ref: LogRef, originals: Sequence[Event], key: str,
                 ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(type, data, envelope)`` of the record of a deduplicated request."""
    original = next(ev.seq for ev in originals if ev.idempotency_key == key)
    attempt = next_attempt(reader, ref.sid, key)
    data: dict[str, Any] = {"idempotency_key": key, "original": original,
                            "outcome": "deduplicated", "attempt": attempt, "synthetic": True}
    if len(originals) > 1:
        data["batch"] = [originals[0].seq, originals[-1].seq]
    return RETRY, data, {"source": RETRY_SOURCE, "causal_parent": original,
                         "idempotency_key": retry_key(key, attempt)}


def originals(reading: LogReader, tx: Reader, ref: LogRef, events: Sequence[Event],
              found: list[tuple[int, int]]) -> list[Event]:
    """An idempotent retry of ``events``: the original events, if they are the
    same events.  ``found``: (position, seq) of each key the index knows; each
    is checked against its frame (the index is a copy, the frame decides)."""
    for i, seq in found:
        key = events[i].idempotency_key
        at = list(reading.events(ref, seq, seq, reader=tx))
        if not at or at[0].idempotency_key != key:
            raise index_mismatch(ref.id, seq, f"indexed with idempotency key {key!r}, "
                                 f"the frame has {at[0].idempotency_key if at else None!r}")
    first_seq = found[0][1] - found[0][0]  # the original batch began this much earlier
    for i, seq in found:
        if seq - i != first_seq or first_seq < ref.seed:
            raise IdempotencyConflictError(
                f"the retried batch does not match the original: its event {i} has the "
                f"idempotency key of seq {seq}, so the original would have begun at seq "
                f"{seq - i}" + ("" if seq - i == first_seq else
                                f", and by its event {found[0][0]} at seq {first_seq}") +
                f" (this session's own log begins at seq {ref.seed})")
    stored = list(reading.events(ref, first_seq, first_seq + len(events) - 1, reader=tx))
    if len(stored) != len(events):
        raise IdempotencyConflictError("the retried batch is longer than the original")
    out = []
    for event, original in zip(events, stored, strict=True):
        # Compared as encoded payloads: a tuple sent and the list it decodes
        # to are the same event.
        mine = encode_event(msgspec.structs.replace(event, time=original.time))
        if mine != encode_event(original):
            raise IdempotencyConflictError(
                f"idempotency key {event.idempotency_key!r} was used for a different "
                f"event (seq {original.seq})")
        out.append(original)
    return out


__all__ = ["RETRY", "RETRY_SOURCE", "next_attempt", "originals", "retry_key", "retry_record"]
