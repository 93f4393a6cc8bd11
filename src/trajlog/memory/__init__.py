"""Scoped, typed memory and the ability to forget.

:class:`Identity` binds a :class:`MemoryView` (``store.memory(identity)``) to
a tenant, a user and a session; every query carries its scope predicates.
Writes pass the gates of :mod:`.gates`; every change is a new, framed and
chained version (:mod:`.versions`); revocation and erasure are tombstones that
purge every copy (:mod:`.revoke`, :mod:`trajlog.api.erasure`); retention applies
recorded policies (:mod:`.retention`) and a store's rules by kind
(:mod:`.retention_rules`); :mod:`.audit` is their verify().
"""

from __future__ import annotations

from .audit import MemoryAudit
from .model import (
    PRIVACY,
    SCOPES,
    STATES,
    TYPES,
    Identity,
    MemoryItem,
    PurgeReport,
    RetentionReport,
)
from .retention_rules import RetentionRules, Rule
from .view import PRECEDENCE, MemoryView, Resolution

__all__ = ["PRECEDENCE", "PRIVACY", "SCOPES", "STATES", "TYPES", "Identity", "MemoryAudit",
           "MemoryItem", "MemoryView", "PurgeReport", "Resolution", "RetentionReport",
           "RetentionRules", "Rule"]
