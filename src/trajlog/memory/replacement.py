"""What an erasure keeps of an event: the one definition (:data:`KEEPS`), the
payload readers get instead of an erased event's (:func:`replacement`), and
the check every reader applies to a stored one (:func:`replacement_defect`).

An erased event keeps its type, time and envelope, and of its data only what
pairs tool calls and keeps the log balanced -- per event type, each value in
a machine form: a call's id, a run's id, a tool's name, the recovery
closers' enumerated ``status`` values, booleans.  Anything else, and any of
those values outside its form, is blanked; of its envelope, the free text
(source, workspace revision, idempotency key) only where the event's index
row holds it anyway.  A call id is kept as written (any
string): the row's marks copy every call id for forks and recovery, so
dropping it here would blank nothing and unpair the call.

A stored replacement is accepted only if it is byte for byte what
:func:`replacement` makes of itself for its tombstone: a row rewritten behind
trajlog's back (even one re-framed under the public tombstone key) cannot
make an erased event read back with other data (an indexed one's envelope is
also compared with its index row, :func:`trajlog.memory.versions.checked_replacement`).
What no copy binds -- the time of an event without an index row, the type
among types that keep the same fields -- is as good as the tombstone log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ..errors import TrajlogError
from ..event_types import KEEPS as KEPT_FORMS
from ..event_types import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from ..events import Event, check_envelope, check_type, decode_event
from ..storage.event_index import entry

# A value's kept form, or _DROP (the field is blanked).
_DROP: Any = object()
Form = Callable[[Any], Any]

#: a run's id: printable ASCII without spaces, at most 128 characters
ID = re.compile(r"[A-Za-z0-9_.:@/+=-]{1,128}")
#: a tool's name
TOOL_NAME = re.compile(r"[A-Za-z0-9_.:@/-]{1,128}")
#: the ``status`` values of recovery's synthetic ``tool/result`` closers
CLOSER_STATUSES = (TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN)


def _text(form: re.Pattern[str]) -> Form:
    return lambda v: v if type(v) is str and form.fullmatch(v) else _DROP


def _flag(v: Any) -> Any:
    return v if type(v) is bool else _DROP


def _closer(v: Any) -> Any:
    return v if type(v) is str and v in CLOSER_STATUSES else _DROP


def _call_id(v: Any) -> Any:
    # as written: the marks and the call index hold it too (module docstring)
    return v if type(v) is str else _DROP


_ID, _NAME = _text(ID), _text(TOOL_NAME)


def _calls(v: Any) -> Any:
    """An assistant message's requested calls: ``{id, name}`` each (the
    entries the marks record: a dict with a str id), a name out of form left
    out."""
    if type(v) is not list:
        return _DROP
    out = []
    for c in v:
        if type(c) is not dict or type(c.get("id")) is not str:
            continue
        entry = {"id": c["id"]}
        if _NAME(c.get("name")) is not _DROP:
            entry["name"] = c["name"]
        out.append(entry)
    return out


_FORMS: Mapping[str, Form] = {"call id": _call_id, "tool name": _NAME, "run id": _ID,
                               "closer status": _closer, "flag": _flag, "calls": _calls}
#: event type -> {data field: its kept form}, in the order a replacement holds
#: them (each type's ``keeps`` column in :mod:`trajlog.event_types`; a run
#: keeps its id: projections.envelopes pairs its two events by it).  A type not
#: listed keeps no data field at all.
KEEPS: Mapping[str, Mapping[str, Form]] = {
    type_: {name: _FORMS[form] for name, form in spec.items()}
    for type_, spec in KEPT_FORMS.items()}


def kept(type_: str, data: Any) -> dict[str, Any]:
    """What an erasure of an event of ``type_`` keeps of ``data``."""
    spec = KEEPS.get(type_)
    if spec is None or type(data) is not dict:
        return {}
    out = {}
    for name, form in spec.items():
        if name in data:
            value = form(data[name])
            if value is not _DROP:
                out[name] = value
    return out


def stone(tid: int, reason: str, actor: str | None, at: int) -> dict[str, Any]:
    """``data["erased"]`` of a replacement: the tombstone, who, why, when."""
    return {"tombstone": tid, "reason": reason, "actor": actor, "at": at}


def indexed(ev: Event) -> bool:
    """Whether ``ev`` has an index row (which copies its type, time, source,
    workspace revision, data class and idempotency key)."""
    return entry(ev, 0) is not None


def replacement(ev: Event, tid: int, reason: str, actor: str | None, at: int) -> bytes:
    """The payload readers get for the erased ``ev`` under tombstone ``tid``:
    its type and time; its envelope's seqs (``causal_parent``, ``supersedes``)
    and ``data_class``; its free-text envelope fields (``source``,
    ``workspace_revision``, ``idempotency_key``) only when it has an index row,
    which holds them anyway (a retry of its key still finds it); its
    ``branch_id`` in the form of an id; :func:`kept` of its data; the tombstone."""
    data = kept(ev.type, ev.data)
    data["erased"] = stone(tid, reason, actor, at)
    free = indexed(ev)
    branch = ev.branch_id if type(ev.branch_id) is str and ID.fullmatch(ev.branch_id) else None
    return msgspec.msgpack.encode(Event(
        ev.type, ev.time, data, ev.source if free else None, ev.causal_parent,
        ev.workspace_revision if free else None, ev.data_class,
        ev.idempotency_key if free else None, ev.supersedes, branch))


def replacement_defect(payload: Any, record: Mapping[str, Any], *, tid: int, seq: int,
                       reason: str, actor: str | None, at: int) -> str | None:
    """Why ``payload``, stored in tombstone ``tid``'s ``record`` for ``seq``,
    is not exactly what the erasure writes (None: it is)."""
    if record.get("seq") != seq:
        return f"its record names seq {record.get('seq')!r}, its row seq {seq}"
    if type(payload) is not bytes:
        return "it holds no replacement payload"
    try:
        ev = decode_event(payload, seq)
        check_type(ev.type)
        check_envelope(ev.source, ev.causal_parent, ev.workspace_revision, ev.data_class,
                       ev.idempotency_key, ev.supersedes, ev.branch_id)
    except (msgspec.DecodeError, TypeError, TrajlogError) as exc:
        return f"its replacement is not an event payload ({exc})"
    if ev.type != record.get("type"):
        return (f"its replacement is a {ev.type!r} event; the erased one was "
                f"{record.get('type')!r}")
    if replacement(ev, tid, reason, actor, at) == payload:
        return None
    data = ev.data if type(ev.data) is dict else {}
    extra = [k for k in data if k != "erased" and k not in kept(ev.type, data)]
    if extra:
        return (f"its replacement keeps {', '.join(map(repr, extra))}, which an erased "
                f"{ev.type} does not keep")
    if data.get("erased") != stone(tid, reason, actor, at):
        return "its replacement names another tombstone, reason, actor or time"
    return "its replacement is not in the form the erasure writes"


__all__ = ["CLOSER_STATUSES", "ID", "KEEPS", "TOOL_NAME", "indexed", "kept", "replacement",
           "replacement_defect", "stone"]
