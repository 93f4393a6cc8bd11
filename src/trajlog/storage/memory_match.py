"""What a merge of memory writes finds, whichever backend read the rows: one
home for the rule both backends' ``memory_merge_matches`` apply."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .base import MemoryRow

# (digest, tenant, scope, scope_key, type, key): what makes two writes the same item
MergeKey = tuple[bytes, str, str, str, str, str | None]


def pick_matches(found: Iterable[Sequence[Any]], wanted: set[MergeKey],
                 latest_of: Callable[[str], MemoryRow | None]) -> dict[MergeKey, MemoryRow]:
    """Of the rows ``(mid, item_id, digest, tenant, scope, scope_key, type,
    key)`` found by digest, in mid order, the first item of each wanted key
    whose latest version is still that content and not revoked."""
    out: dict[MergeKey, MemoryRow] = {}
    for _mid, item_id, digest, tenant, scope, scope_key, type_, key in found:
        k = (bytes(digest), tenant, scope, scope_key, type_, key)
        if k not in wanted or k in out:
            continue
        latest = latest_of(item_id)
        if latest is not None and latest.state != "revoked" and latest.digest == k[0]:
            out[k] = latest
    return out


__all__ = ["MergeKey", "pick_matches"]
