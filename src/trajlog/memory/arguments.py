"""The arguments of a memory view's calls, checked: names from a fixed set,
limits, retention, and the ownership of a session an identity names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidArgumentError, MemoryAccessError, SessionNotFoundError
from .model import Identity

MAX_LIMIT = 10_000


def check_owner(identity: Identity,
                session_metadata: Callable[[str], Mapping[str, Any]]) -> None:
    """The identity may use its session's scope: the session exists, and the
    tenant and user its header names (metadata, inherited by forks and
    subagents) are the identity's.  A header naming neither claims nobody."""
    sid = identity.session
    assert sid is not None
    try:
        meta = session_metadata(sid)
    except SessionNotFoundError:
        raise MemoryAccessError(f"identity {identity} names session {sid!r}, which this "
                                "store does not hold: no session scope without its "
                                "session") from None
    for field in ("tenant", "user"):
        if field in meta and meta[field] != getattr(identity, field):
            raise MemoryAccessError(f"session {sid} belongs to {field} {meta[field]!r}; "
                                    f"identity {identity} cannot use its session scope")


def names(values: Any, allowed: tuple[str, ...], what: str) -> list[str] | None:
    """``values`` (one name or several) as a list, each one of ``allowed``; None stays None."""
    if values is None:
        return None
    out = [values] if isinstance(values, str) else list(values)
    for v in out:
        if v not in allowed:
            raise InvalidArgumentError(f"{what} must be one of {allowed}, not {v!r}")
    return out


def limit_of(limit: Any) -> int:
    """``limit``, an int from 1 to :data:`MAX_LIMIT`."""
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(f"limit must be an int from 1 to {MAX_LIMIT}, not {limit!r}")
    return limit


def retention_of(retention: Any, now: int) -> tuple[dict[str, Any] | None, int | None]:
    """``(retention, expires_ms)`` of a ``{"ttl_ms": n}`` or ``{"until_event": type}``
    counted from ``now``; None gives none."""
    if retention is None:
        return None, None
    if not isinstance(retention, Mapping) or len(retention) != 1:
        raise InvalidArgumentError("retention is {'ttl_ms': n} or {'until_event': type}")
    if "ttl_ms" in retention:
        ttl = retention["ttl_ms"]
        if type(ttl) is not int or ttl < 0:
            raise InvalidArgumentError(f"ttl_ms must be a non-negative int, not {ttl!r}")
        return {"ttl_ms": ttl}, now + ttl
    if "until_event" in retention and isinstance(retention["until_event"], str):
        return {"until_event": retention["until_event"]}, None
    raise InvalidArgumentError("retention is {'ttl_ms': n} or {'until_event': type}")


__all__ = ["MAX_LIMIT", "check_owner", "limit_of", "names", "retention_of"]
