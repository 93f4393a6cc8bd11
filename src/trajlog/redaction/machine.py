"""The fields trajlog's own API writes -- run ids, session ids, digests,
revisions -- which redaction does not scan (:data:`MACHINE_FIELDS`): a value
is skipped only at its path in its event type, and only in its format."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..event_types import MACHINE

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# a digest or a VCS revision: hex with at least one letter (an all-digit value
# could be a card number), optionally named ("sha256:...")
_HEX = r"(?:[a-z0-9-]{1,16}:)?(?=[0-9]*[a-f])[0-9a-f]{7,128}"
_ID = re.compile(_UUID)
_DIGEST = re.compile(_HEX)
#: a tool call's id as hosts and providers write it (``call_abc``,
#: ``toolu_01...``): letters, digits and ``_ . : -``, with a letter and no run
#: of 13 digits (a card number), at most 128 characters
_CALL = re.compile(r"(?=.*[A-Za-z])(?!.*[0-9]{13})[A-Za-z0-9_.:-]{1,128}")
_FORMS = {"uuid": _ID, "digest": _DIGEST, "call id": _CALL}
#: event type -> {path (the keys down to it): format}, from each type's
#: ``machine`` column in :mod:`trajlog.event_types`.  What trajlog's own API
#: writes there is an id (a UUID), a digest/revision (hex) or a tool call's
#: id.  A value is skipped only if it has that format -- so an id cannot hold
#: text a built-in rule finds, and anything else (a user's run id, a reason,
#: an error message, a model name) is scanned like any payload.
MACHINE_FIELDS: Mapping[str, Mapping[tuple[str, ...], re.Pattern[str]]] = {
    type_: {path: _FORMS[form] for path, form in spec.items()}
    for type_, spec in MACHINE.items()}


def without_machine(type_: str, data: Any) -> Any:
    """``data`` with trajlog's machine fields for ``type_`` set to None (a
    copy along their paths only; keys and list positions kept, so that the
    scanners' paths name the same strings), or ``data`` itself."""
    spec = MACHINE_FIELDS.get(type_)
    if spec is None or not isinstance(data, dict):
        return data
    out = data
    for path, form in spec.items():
        out = _drop(out, path, form)
    return out


def _drop(value: Any, path: tuple[str, ...], form: re.Pattern[str]) -> Any:
    if not path:
        return None if isinstance(value, str) and form.fullmatch(value) else value
    key, rest = path[0], path[1:]
    if not isinstance(value, dict) or key not in value:
        return value
    new = _drop(value[key], rest, form)
    return value if new is value[key] else {**value, key: new}


__all__ = ["MACHINE_FIELDS", "without_machine"]
