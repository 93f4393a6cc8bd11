"""Checks of compaction and status events, run inside the write transaction.

They read the log as the transaction sees it, under the same lock as the
append, so two writers cannot both pass a check that only one may pass (two
overlapping compactions appended at once: one is refused).

* A ``compaction/*`` event whose op is ``surface-replace`` (the only op the
  model history applies) must cover a range ``from_seq .. to_seq`` inside the
  log, must not split a tool call from its result, and must nest with every
  earlier compaction (disjoint, or containing, or contained).
* An ``event/status`` event must target an event that exists before it, and
  come from a source that may decide (never ``web:*`` / ``external:*``).

:func:`check_append_type` runs earlier, before an event is serialized: a forked
subagent's approval policy is fixed to never, so it may append no
``approval/*`` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InvalidArgumentError, ValidationError
from ..event_types import CHECKED, CHECKED_PREFIXES, source_class, surface_range
from ..events import Event, SessionHeader
from ..lifecycle import Phase, transitions
from ..storage import Reader
from .handles import LogRef
from .reading import LogReader


def approvals_fixed(header: SessionHeader) -> bool:
    """A forked subagent's approval policy is fixed to never."""
    return header.origin == "subagent" and header.metadata.get("approval_policy") == "never"


def check_append_type(header: SessionHeader, type_: object) -> None:
    """Refuse an ``approval/*`` event in a session whose approvals are fixed."""
    if isinstance(type_, str) and type_.startswith("approval/") and approvals_fixed(header):
        raise ValidationError(f"session {header.id} is a forked subagent: its approval "
                              "policy is fixed to never and cannot change")


def needs_check(type_: str) -> bool:
    """Whether an event of ``type_`` is checked against the log (its
    ``checked`` column in :mod:`trajlog.event_types`)."""
    return type_.startswith(CHECKED_PREFIXES) or type_ in CHECKED


def applied_range(type_: str, data: Any) -> tuple[int, int] | None:
    """The range a logged compaction hides in the model history, if any (the
    model history's own rule: int bounds, in order)."""
    found = surface_range(type_, data)
    if found is None:
        return None
    lo, hi = found
    if isinstance(lo, int) and isinstance(hi, int) and lo <= hi:
        return lo, hi
    return None


def check_events(reading: LogReader, ref: LogRef, reader: Reader, events: Sequence[Event],
                 first_seq: int, compactions: Sequence[tuple[int, int]],
                 ) -> list[tuple[int, int]]:
    """Check the compaction and status events of a batch about to be appended
    at ``first_seq``; returns the compaction ranges it adds."""
    added: list[tuple[int, int]] = []
    for i, ev in enumerate(events):
        t = ev.type
        if t == "event/status":
            _check_status(ref, ev, first_seq + i)
            continue
        found = surface_range(t, ev.data)
        if found is None:
            continue
        lo, hi = found
        if (not isinstance(lo, int) or not isinstance(hi, int) or isinstance(lo, bool)
                or isinstance(hi, bool)):
            raise ValidationError(f"{t}: a surface-replace compaction needs int from_seq "
                                  "and to_seq")
        _check_compaction(reading, ref, reader, lo, hi, first_seq - 1, [*compactions, *added])
        added.append((lo, hi))
    return added


def _check_compaction(reading: LogReader, ref: LogRef, reader: Reader, from_seq: int,
                      to_seq: int, last: int, earlier: Sequence[tuple[int, int]]) -> None:
    if not 0 <= from_seq <= to_seq <= last:
        raise InvalidArgumentError(f"compaction range {from_seq}..{to_seq} is not inside the "
                                   f"log (0..{last})")
    requested: set[str] = set()
    answered: set[str] = set()
    for ev in reading.events(ref, from_seq, to_seq, reader=reader):
        for call_id, phase, _ in transitions(ev):
            if phase is Phase.REQUESTED:
                requested.add(call_id)
            elif phase is Phase.FINISHED:
                answered.add(call_id)
    if requested != answered:
        split = sorted(requested ^ answered)
        raise ValidationError(f"compaction {from_seq}..{to_seq} would split tool calls from "
                              f"their results: {', '.join(split)}")
    for lo, hi in earlier:
        overlap = not (hi < from_seq or lo > to_seq)
        nested = from_seq <= lo and hi <= to_seq
        if overlap and not nested:
            raise ValidationError(f"compaction {from_seq}..{to_seq} partly overlaps the "
                                  f"earlier compaction {lo}..{hi}")


def _check_status(ref: LogRef, ev: Event, seq: int) -> None:
    if source_class(ev) == "untrusted":
        # data from outside is never an instruction -- nor a decision about the log
        raise ValidationError(f"event/status at seq {seq}: an untrusted source "
                              f"({ev.source!r}) cannot set the status of an event")
    data = ev.data
    target = data.get("target") if isinstance(data, dict) else None
    if isinstance(target, int) and not isinstance(target, bool) and not 0 <= target < seq:
        raise InvalidArgumentError(f"session {ref.id} has no event {target}")


__all__ = ["applied_range", "approvals_fixed", "check_append_type", "check_events", "needs_check"]
