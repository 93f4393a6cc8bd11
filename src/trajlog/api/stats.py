"""Size and shape of a store: what ``trajlog stats`` reports.

Counts come from the session heads and the chunk rows' recorded lengths (no
decompression); the count of events by type reads each session's own events
through the verified read path, so it is the one part that costs a scan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import TrajlogError
from .session import Session


@dataclass(frozen=True, slots=True)
class SessionStats:
    """One session: its own events (``inherited`` more are read from its
    parent), its chunk rows and their raw (framed) and stored bytes."""

    id: str
    events: int
    inherited: int
    rows: int
    raw_bytes: int
    stored_bytes: int
    by_type: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Every session measured, the bytes the store takes (its files; a
    server's tables), and the sessions that could not be measured (id -> why:
    a damaged header or log), which the totals leave out."""

    sessions: list[SessionStats]
    file_bytes: int
    damaged: dict[str, str] = field(default_factory=dict)

    @property
    def events(self) -> int:
        return sum(s.events for s in self.sessions)

    @property
    def raw_bytes(self) -> int:
        return sum(s.raw_bytes for s in self.sessions)

    @property
    def stored_bytes(self) -> int:
        return sum(s.stored_bytes for s in self.sessions)

    @property
    def compression(self) -> float:
        """Raw framed bytes per stored byte (1.0 when nothing is stored)."""
        return self.raw_bytes / self.stored_bytes if self.stored_bytes else 1.0

    @property
    def by_type(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for s in self.sessions:
            total.update(s.by_type)
        return dict(total.most_common())


def session_stats(session: Session, *, by_type: bool = True) -> SessionStats:
    """Measure one session (``by_type`` reads its own events to count them)."""
    ref = session._ref
    rows, raw, stored = session._e.backend.reader().chunk_sizes(ref.sid)
    last = session.last_seq
    types: Counter[str] = Counter()
    if by_type and last >= ref.seed:
        types.update(ev.type for ev in session.events(ref.seed, lazy=True))
    return SessionStats(session.id, last + 1 - ref.seed, ref.seed, rows, raw, stored,
                        dict(types.most_common()))


def store_stats(sessions: Iterable[Callable[[], Session]], size: int, *,
                by_type: bool = True,
                progress: Callable[[int], None] | None = None) -> StoreStats:
    """Measure each session (given as a callable that opens it) of the store
    whose backend takes ``size`` bytes, each on its own: one that cannot be
    read is reported in ``damaged`` and the others are still measured."""
    out, damaged = [], {}
    for n, opener in enumerate(sessions, 1):
        try:
            s = opener()
            if s.header.damage is not None:
                damaged[s.id] = f"damaged header: {s.header.damage}"
            else:
                out.append(session_stats(s, by_type=by_type))
        except TrajlogError as exc:
            damaged[getattr(opener, "session_id", str(n))] = f"{type(exc).__name__}: {exc}"
        if progress is not None:
            progress(n)
    return StoreStats(out, size, damaged)


__all__ = ["SessionStats", "StoreStats", "session_stats", "store_stats"]
