"""What the api's parts pass each other: a session's log (:class:`LogRef`) and
the store's options.  Plain values (a log also names the levels of its
lineage)."""

from __future__ import annotations

from dataclasses import dataclass

from ..events import SessionHeader


@dataclass(frozen=True, slots=True, eq=False)
class LogRef:
    """One session's log as the engine sees it: the backend's ``sid``, the
    key that seeds its checks, its header, its parent's log (for a fork's
    inherited prefix) and the parent's chain at ``seed_length - 1``, recorded
    at creation."""

    sid: int
    key: int
    header: SessionHeader
    parent: LogRef | None
    seed_chain: int

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def seed(self) -> int:
        return self.header.seed_length

    def levels(self, upto: int) -> list[tuple[LogRef, int]]:
        """``(log, its last seq that counts)`` for this log up to ``upto`` and
        each ancestor whose own events it inherits, nearest first."""
        out: list[tuple[LogRef, int]] = []
        level: LogRef | None = self
        while level is not None and upto >= 0:
            if upto >= level.seed:
                out.append((level, upto))
                upto = level.seed - 1
            level = level.parent
        return out


@dataclass(frozen=True, slots=True)
class Options:
    """A store's settings, fixed at open."""

    durability: str
    lease_ttl_ms: int
    max_delegation_depth: int
    writer_id: str  # host:pid:token:nonce -- see leases.process_token


__all__ = ["LogRef", "Options"]
