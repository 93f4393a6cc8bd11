"""A store's retention rules kept in the store itself, so that every process
that opens it applies the same rules.

They are one global memory item -- type ``policy``, the reserved key
:data:`RULES_KEY` -- so they are versioned, chained and audited like any
deployed item, on every backend, with no table of their own.  Its content is
``{"retention_rules": <RetentionRules.to_dict()> | None}`` (None: the rules
were cleared).  Saving new rules writes the item's next version (the same
rules again write nothing); each version names its actor.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError, RetentionRulesError, StoredRetentionRulesError
from ..storage.base import Backend
from .model import MemoryItem, digest_of
from .retention_rules import RetentionRules
from .versions import open_versions, write_version

#: the key of the global ``policy`` item that holds a store's retention rules
RULES_KEY = "trajlog.retention-rules"
RULES_TYPE = "policy"
_FIELD = "retention_rules"
_GLOBAL = [("global", "")]


def load_rules(backend: Backend) -> RetentionRules | None:
    """The rules stored in the store (None: none stored, or cleared).  A
    stored value that is not rules is a
    :class:`~trajlog.errors.StoredRetentionRulesError` naming the version."""
    reader = backend.reader()
    rows = reader.memory_current("", _GLOBAL, [RULES_TYPE], ["active"], RULES_KEY, 1)
    if not rows:
        return None
    row = rows[-1]
    item = open_versions(reader.memory_versions(row.item_id), False)[-1]
    content = item.content
    if not isinstance(content, Mapping) or set(content) != {_FIELD}:
        raise StoredRetentionRulesError(item.id, item.version, None,
                                        f"the stored value is not {{{_FIELD!r}: ...}}")
    value = content[_FIELD]
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise StoredRetentionRulesError(item.id, item.version, None,
                                        f"the rules are not a mapping but "
                                        f"{type(value).__name__}")
    try:
        return RetentionRules.of(value)
    except RetentionRulesError as exc:
        why = str(exc).split(": ", 1)[-1]
        raise StoredRetentionRulesError(item.id, item.version, exc.rule, why) from None
    except TypeError as exc:   # (a field of the wrong shape for the dataclass)
        raise StoredRetentionRulesError(item.id, item.version, None, str(exc)) from None


def save_rules(backend: Backend, rules: RetentionRules | None, *, actor: str) -> str:
    """Store ``rules`` (None: clear them) as the next version of the rules
    item, in one transaction; returns the item id.  Idempotent."""
    if rules is not None and not isinstance(rules, RetentionRules):
        raise TypeError(f"retention must be RetentionRules, not {type(rules).__name__}")
    if not isinstance(actor, str) or not actor:
        raise InvalidArgumentError("saving retention rules names its actor")
    content: dict[str, Any] = {_FIELD: None if rules is None else rules.to_dict()}
    digest = digest_of(content)
    with backend.transaction() as w:
        rows = w.memory_current("", _GLOBAL, [RULES_TYPE], None, RULES_KEY, 1)
        last = rows[-1] if rows else None
        if last is not None and last.state != "active":
            last = None   # (revoked: its frames are blank; the rules start a new item)
        if last is not None and last.state == "active" and last.digest == digest:
            return last.item_id
        item = MemoryItem(last.item_id if last is not None else str(uuid.uuid4()),
                          last.version + 1 if last is not None else 1, "global", RULES_TYPE,
                          "active", content, "", "", RULES_KEY, None, None, None, "internal",
                          time.time_ns() // 1_000_000, digest.hex(),
                          {"actor": actor, "reason": "retention rules saved",
                           "evidence": None})
        # (no search-index text: the rules are not something to recall)
        write_version(w, item, None, None, last=last)
    return item.id


__all__ = ["RULES_KEY", "RULES_TYPE", "load_rules", "save_rules"]
