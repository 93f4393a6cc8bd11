"""Privacy modes: what a session's identity lets the store keep of a payload
(``full``, ``metadata``, ``none``), and the write path's redaction hook
(:func:`prepare_payload`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec

from ..events import DATA_CLASSES
from .pause import R, Remake
from .policy import Redactor

_JSON = msgspec.json.Encoder(order="sorted")

# The fields that pair and balance a log (lifecycle, compactions, status
# marks): kept by the metadata and none modes, scalar values only.
STRUCTURAL = frozenset({"call_id", "id", "name", "is_error", "status", "interrupted",
                        "synthetic", "from_seq", "to_seq", "op", "seq", "target",
                        "background"})


def _shape(value: Any, depth: int = 0) -> Any:
    """A value's shape without its text: types, string lengths, list sizes."""
    if isinstance(value, str):
        return f"str:{len(value)}"
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    if isinstance(value, (int, float)):
        return type(value).__name__
    if depth >= 4:
        return "..."
    if isinstance(value, dict):
        return {k: _shape(v, depth + 1) for k, v in list(value.items())[:64]}
    return [f"list:{len(value)}", *(_shape(v, depth + 1) for v in list(value)[:8])]


def route(mode: str, type_: str, data: Any) -> Any:
    """The data a privacy ``mode`` stores for an event (``full``: ``data``)."""
    if mode == "full":
        return data
    kept: dict[str, Any] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            if k in STRUCTURAL and (v is None or isinstance(v, (bool, int, float)) or (
                    isinstance(v, str) and len(v) <= 256)):
                kept[k] = v
        calls = data.get("tool_calls")
        if isinstance(calls, list):
            kept["tool_calls"] = [{"id": c.get("id"), "name": c.get("name")}
                                  for c in calls if isinstance(c, dict)]
    if type_ == "user/message":
        kept["content"] = ""   # (the known shape needs one)
    raw = _JSON.encode(data)
    info: dict[str, Any] = {"mode": mode}
    if mode == "metadata":
        info["shape"] = _shape(data)
        info["bytes"] = len(raw)
    info["sha256"] = hashlib.sha256(raw).hexdigest()
    kept["privacy"] = info
    return kept


def prepare_payload(redactor: Redactor, type_: str, data: Any, envelope: Mapping[str, Any],
                    ) -> tuple[Any, Mapping[str, Any], tuple[tuple[str, str], ...]]:
    """The write path's hook (before serialization): the data to store, the
    envelope with its data class raised, and the findings that pause."""
    given = envelope.get("data_class")
    out = redactor.redact(type_, data, given if given in DATA_CLASSES else None)
    if out.data is data:
        return data, envelope, ()
    if given is None or given in DATA_CLASSES:   # (an invalid one is refused later)
        envelope = {**envelope, "data_class": out.data_class}
    return out.data, envelope, out.findings if out.pause else ()


def route_rows(redactor: Redactor, metadata: Mapping[str, Any], rows: list[R],
               remake: Remake[R]) -> list[R]:
    """``rows`` as the session's privacy mode stores them."""
    mode = redactor.mode(metadata)
    if mode == "full":
        return rows
    return [remake(msgspec.structs.replace(r.event, data=route(mode, r.event.type,
                                                               r.event.data)), r.pause)
            for r in rows]
