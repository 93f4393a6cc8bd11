"""Stored-event state <-> an eventsourcing event's payload (what the recorders
of :mod:`trajlog.adapters.eventsourcing` write and read back): UTF-8 state as
text, other bytes as base64; under a redaction policy that finds something,
decoded JSON or hex (see that module)."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from typing import Any, cast

from eventsourcing.persistence import StoredEvent

from ..errors import ErasedEventError, UnredactableValueError
from ..events import Event
from ..redaction import RedactionPolicy
from ._es_versions import field as _field
from ._plain import thaw

EVENT, NOTIFICATION = "eventsourcing/event", "eventsourcing/notification"
_SAFE = 2 ** 53       # ints a JSON state keeps exactly through an event payload
_NOT_JSON = object()


def _found(policy: RedactionPolicy | None, text: str) -> str | None:
    """The kind of the first finding the policy would act on in ``text``."""
    for scanner in () if policy is None else policy.scanners:
        for f in scanner.scan(text):
            if policy is not None and policy.actions.get(f.kind, policy.default) != "allow":
                return f.kind
    return None


def _plain(value: Any) -> bool:
    """Does a decoded JSON value survive an event payload as it is?"""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return -_SAFE <= value <= _SAFE
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    return False


def to_payload(state: bytes, policy: RedactionPolicy | None = None,
               event_type: str = EVENT) -> dict[str, Any]:
    """The payload fields that hold a stored event's ``state`` (refused with
    :class:`UnredactableValueError`, naming ``event_type``, when the policy
    finds something in UTF-8 state it cannot mask in place)."""
    try:
        text = state.decode("utf-8")
        if policy is None:
            return {"state": text}
    except UnicodeDecodeError:
        b64 = base64.b64encode(state).decode("ascii")
        if _found(policy, b64) is not None:
            return {"state_hex": "h" + state.hex()}
        return {"state_b64": b64}
    kind = _found(policy, text)
    if kind is None:
        return {"state": text}
    try:
        value = json.loads(text)
    except ValueError:
        value = _NOT_JSON
    if value is _NOT_JSON or not _plain(value):
        raise UnredactableValueError(event_type, "$.state", kind, "UTF-8 state, not JSON")
    return {"state_json": value}


def noted(key: str, payload: dict[str, Any], stored: StoredEvent,
           policy: RedactionPolicy | None) -> dict[str, Any]:
    """The notification of a stored event whose event carries ``payload``:
    the same state (decoded JSON is made again: no value shared between two
    payloads)."""
    if "state_json" in payload:
        return {"originator_id": key, "v": stored.originator_version, "topic": stored.topic,
                **to_payload(stored.state, policy, NOTIFICATION)}
    return {"originator_id": key, **payload}


def stored_bytes(ev: Event, session_id: str) -> bytes:
    """The state bytes an event's payload holds (:class:`ErasedEventError`
    when it holds none)."""
    data = ev.data
    text = data.get("state")
    if text is not None:
        return cast(str, text).encode("utf-8")
    if "state_json" in data:
        return json.dumps(thaw(data["state_json"]), ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8")
    if "state_hex" in data:
        return bytes.fromhex(data["state_hex"][1:])
    if "state_b64" in data:
        return base64.b64decode(data["state_b64"])
    raise ErasedEventError(session_id, ev.seq, "its stored event's state is gone")


def erased(session_id: str, events: Sequence[Event], names: Sequence[str]) -> None:
    """Raise :class:`ErasedEventError` for the first of ``events`` that lacks
    one of ``names`` (a read that failed on a missing field)."""
    for ev in events:
        for name in names:
            _field(ev, session_id, name)


__all__ = ["EVENT", "NOTIFICATION", "erased", "noted", "stored_bytes", "to_payload"]
