"""The fields trajlog's own API writes -- run ids, session ids, digests,
revisions -- which redaction does not scan (:data:`MACHINE_FIELDS`): a value
is skipped only at its path in its event type, and only in its format."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# a digest or a VCS revision: hex with at least one letter (an all-digit value
# could be a card number), optionally named ("sha256:...")
_HEX = r"(?:[a-z0-9-]{1,16}:)?(?=[0-9]*[a-f])[0-9a-f]{7,128}"
_ID = re.compile(_UUID)
_DIGEST = re.compile(_HEX)
_RUN = ("run_id",)
#: event type -> {path (the keys down to it): format}.  What
#: trajlog's own API writes there is an id (a UUID) or a digest/revision
#: (hex).  A value is skipped only if it has that format -- so an id cannot
#: hold text a built-in rule finds, and anything else (a user's run id, a
#: reason, an error message, a model name) is scanned like any payload.
MACHINE_FIELDS: Mapping[str, Mapping[tuple[str, ...], re.Pattern[str]]] = {
    "run/started": {_RUN: _ID, ("parent_run",): _ID, ("identity", "session"): _ID,
                    ("static_prefix_hash",): _DIGEST},
    "run/finalized": {_RUN: _ID, ("integrity", "digest"): _DIGEST,
                      ("integrity", "chain"): _DIGEST},
    "model/switch": {_RUN: _ID},
    "run/resume": {_RUN: _ID}, "run/restart": {_RUN: _ID}, "run/paused": {_RUN: _ID},
    "run/fork": {_RUN: _ID, ("parent_session",): _ID, ("child_session",): _ID},
    "checkpoint/stage": {_RUN: _ID, ("workspace_revision",): _DIGEST},
    "checkpoint/invalidated": {("recorded_revision",): _DIGEST,
                               ("current_revision",): _DIGEST},
    "recovery/check": {_RUN: _ID},
    "context/injection": {("summary_sha256",): _DIGEST, ("messages_sha256",): _DIGEST,
                          ("workspace_revision",): _DIGEST},
    "redaction/paused": {("inherited", "session"): _ID},
    # a subagent's answer and notification (trajlog.api.lineage)
    "tool/result": {("child_session",): _ID, ("job_id",): _ID},
    "subagent/notification": {("child_session",): _ID, ("job_id",): _ID},
}


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
