"""Seq <-> version in an eventsourcing originator's log (what the recorders
of :mod:`trajlog.adapters.eventsourcing` read bounded selections with)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..api import Session
from ..errors import ErasedEventError
from ..events import Event


def field(ev: Event, session_id: str, name: str) -> Any:
    """A field of a stored event (an erased one has none)."""
    data = ev.data
    if not isinstance(data, Mapping) or name not in data:
        raise ErasedEventError(session_id, ev.seq, f"its stored event has no {name!r}")
    return data[name]


class Versions:
    """Seq <-> version in one originator's log: versions increase with the
    seq, so a seq is found from the first and last versions when they are
    contiguous (the usual case), else by bisection."""

    def __init__(self, session: Session, last: int) -> None:
        self._session, self._last = session, last
        self._at: dict[int, int] = {}
        first, end = self.at(0), self.at(last)
        self._base = first if end - first == last else None

    def at(self, seq: int) -> int:
        version = self._at.get(seq)
        if version is None:
            version = self._at[seq] = field(self._session.get(seq), self._session.id, "v")
        return version

    def first_above(self, version: int) -> int:
        """The first seq whose version is above ``version`` (last + 1: none)."""
        if self._base is not None:
            return min(max(version - self._base + 1, 0), self._last + 1)
        lo, hi = 0, self._last + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.at(mid) > version:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def last_at_most(self, version: int) -> int:
        """The last seq whose version is at most ``version`` (-1: none)."""
        return self.first_above(version) - 1


__all__ = ["Versions", "field"]
