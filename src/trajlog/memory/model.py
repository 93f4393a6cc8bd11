"""The values of the memory layer: identities, items, decisions, reports.

Scope (who may see an item) x type (what it is) x state (how far it is
trusted):

* scopes: ``global`` (written at deploy time, read-only at run time),
  ``tenant``, ``user``, ``session``;
* types: ``policy``, ``preference``, ``fact``, ``episode``, ``trajectory``;
* states: ``provisional`` (replayable, not retrieved), ``active`` (retrieved),
  ``quarantined`` (suspected poisoning or a contradiction: never retrieved,
  always resolvable), ``revoked`` (a tombstone: its content is gone).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import InvalidArgumentError, MemoryAccessError

SCOPES = ("global", "tenant", "user", "session")
TYPES = ("policy", "preference", "fact", "episode", "trajectory")
STATES = ("provisional", "active", "quarantined", "revoked")
PRIVACY = ("full", "metadata", "none")
SENSITIVITY = ("public", "internal", "internal-redacted", "restricted")
# Verification evidence a tenant-scope fact may carry (a human
# approval, a trusted record system, or independent corroboration).
EVIDENCE_KINDS = ("human_approval", "record_system", "corroboration")

_JSON = msgspec.json.Encoder(order="sorted")


def _name(value: Any, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > 256 or value != value.strip():
        raise InvalidArgumentError(f"{what} must be a non-empty string of at most 256 "
                                   f"characters without surrounding spaces, not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a memory view acts for: a tenant, optionally a user and a session.

    ``privacy`` routes before any write: ``"full"`` keeps content,
    ``"metadata"`` keeps items without their content (scope, type,
    provenance, digest), ``"none"`` writes no memory at all."""

    tenant: str
    user: str | None = None
    session: str | None = None
    privacy: str = "full"

    def __post_init__(self) -> None:
        _name(self.tenant, "tenant")
        _name(self.user, "user", optional=True)
        _name(self.session, "session", optional=True)
        if self.privacy not in PRIVACY:
            raise InvalidArgumentError(f"privacy must be one of {PRIVACY}, not "
                                       f"{self.privacy!r}")

    def scopes(self) -> list[tuple[str, str]]:
        """(scope, scope key) of every scope this identity may read."""
        out = [("global", ""), ("tenant", self.tenant)]
        if self.user is not None:
            out.append(("user", self.user))
        if self.session is not None:
            out.append(("session", self.session))
        return out

    def scope_key(self, scope: str) -> str:
        """The key of one of this identity's scopes (a typed error if it has none)."""
        if scope not in SCOPES:
            raise InvalidArgumentError(f"scope must be one of {SCOPES}, not {scope!r}")
        key = {"global": "", "tenant": self.tenant, "user": self.user,
               "session": self.session}[scope]
        if key is None:
            raise MemoryAccessError(f"identity {self} names no {scope}: it cannot use "
                                    f"{scope} scope")
        return key


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One version of a memory item, as a view returns it.

    ``content`` is None when the item is revoked (its content erased) or was
    kept as metadata only.  ``source`` is the ``(session id, seq)`` it came
    from; ``decision`` says who changed it, why, and on what evidence."""

    id: str
    version: int
    scope: str
    type: str
    state: str
    content: Any
    tenant: str
    scope_key: str
    key: str | None = None
    source: tuple[str, int] | None = None
    retention: dict[str, Any] | None = None
    expires_ms: int | None = None
    sensitivity: str = "internal"
    created_ms: int = 0
    digest: str = ""
    decision: dict[str, Any] | None = None
    conflicts_with: tuple[str, ...] = ()
    promoted_from: str | None = None
    stored: str = "full"


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What an erasure or a revocation removed, layer by layer."""

    target: str
    tombstone: int | None
    already: bool = False
    frames_blanked: int = 0
    chunk_rows_rewritten: int = 0
    memory_versions_blanked: int = 0
    index_rows_removed: int = 0
    projection_states_dropped: int = 0
    caches_cleared: bool = False
    #: what the backend's purge removed of the bytes' physical copies (free
    #: pages zeroed, the write-ahead log emptied, dead row versions vacuumed)
    purged: tuple[str, ...] = ()
    #: the copies it could not reach, and when they go (a write-ahead log a
    #: reader still needs, dead tuples until VACUUM, archives, replicas, backups)
    residues: tuple[str, ...] = ()
    sessions_affected: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What :meth:`Store.apply_retention` did: items revoked and events
    erased, each under its own tombstone, with the purges."""

    now_ms: int
    items_revoked: tuple[str, ...] = ()
    events_erased: tuple[tuple[str, int], ...] = ()
    purges: tuple[PurgeReport, ...] = field(default_factory=tuple)


def digest_of(content: Any) -> bytes:
    """The merge identity's content digest: SHA-256 of the canonical JSON."""
    try:
        return hashlib.sha256(_JSON.encode(content)).digest()
    except (TypeError, msgspec.EncodeError) as exc:
        raise InvalidArgumentError(f"memory content must be JSON-compatible: {exc}") from None


def text_of(content: Any, key: str | None = None) -> str:
    """The words the full-text index holds for an item: its key and every
    string (and number) in its content."""
    out: list[str] = [] if key is None else [key]

    def walk(v: Any, depth: int = 0) -> None:
        if depth > 64:
            return
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, bool) or v is None:
            return
        elif isinstance(v, (int, float)):
            out.append(str(v))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x, depth + 1)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x, depth + 1)

    walk(content)
    return " ".join(out)


__all__ = ["EVIDENCE_KINDS", "PRIVACY", "SCOPES", "SENSITIVITY", "STATES", "TYPES", "Identity",
           "MemoryItem", "PurgeReport", "RetentionReport", "digest_of", "text_of"]
