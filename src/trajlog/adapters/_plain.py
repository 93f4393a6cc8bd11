"""Stored event data as the plain values a host library expects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def thaw(value: Any) -> Any:
    """A stored event's data as plain dicts and lists (a read-only view's
    mappings and tuples included)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


__all__ = ["thaw"]
