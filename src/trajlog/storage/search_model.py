"""The rows the derived event search index takes and gives at the storage
seam (both backends): a document per indexed event, the filters a search
applies in its statement, and a hit."""

from __future__ import annotations

from typing import NamedTuple


class DocRow(NamedTuple):
    """One event's document: its text and what filters read."""

    sid: int
    seq: int
    ms: int
    type: str
    branch: str | None
    data_class: str | None
    tenant: str | None
    user: str | None
    text: str


class SearchFilter(NamedTuple):
    """What a search keeps, in the statement before the rank (None: any).
    ``types`` entries ending in ``/`` name a family."""

    sids: tuple[int, ...] | None = None
    tenant: str | None = None
    user: str | None = None
    cwd: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    types: tuple[str, ...] | None = None
    branch: str | None = None
    data_class: str | None = None


class SearchRow(NamedTuple):
    """One hit as stored: higher ``score`` is better."""

    sid: int
    session_id: str
    seq: int
    ms: int
    type: str
    snippet: str
    score: float


__all__ = ["DocRow", "SearchFilter", "SearchRow"]
