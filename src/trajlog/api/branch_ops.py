"""Branches of investigation, the session's side: each method appends one
``branch/*`` event (what they mean and the rules they follow:
:mod:`trajlog.projections.branches`; the rules are checked inside the
append's transaction, :mod:`trajlog.api.branch_checks`).  An event of a
branch is an ordinary append with ``branch_id=<name>``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..errors import ArgumentTypeError
from ..events import Event
from ..projections.branches import (
    ABANDONED,
    MERGED,
    REBASED,
    STARTED,
    Branch,
    fold,
    gate_status,
    merger_class,
)
from ..projections.evidence import branch_of

#: data classes from the least to the most sensitive: a merge summarising a
#: branch is as sensitive as the most sensitive event it summarises
SENSITIVITY = ("public", "internal-redacted", "internal", "restricted")


class _Session(Protocol):
    @property
    def id(self) -> str: ...

    def append(self, type: str, data: Any = None, *, source: str | None = None,
               data_class: str | None = None) -> Event: ...

    def events(self, from_seq: int = 0, to_seq: int | None = None) -> Any: ...


def _claims(name: str, value: Sequence[Any] | None) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ArgumentTypeError(f"{name} must be a list, not {type(value).__name__}")
    return list(value)


def _dicts(name: str, value: Sequence[Any] | None) -> list[Any]:
    """A merge's list of claims, each a dict (what else it holds: the write check's)."""
    items = _claims(name, value)
    for i, c in enumerate(items):
        if not isinstance(c, Mapping):
            raise ArgumentTypeError(f"{name}[{i}] must be a {{subject, value}} dict, not "
                                    f"{type(c).__name__}")
    return [dict(c) for c in items]


def start(session: _Session, name: str, *, from_seq: int,
          workspace_revision: str | None = None, data_samples: Sequence[str] = (),
          tool_versions: Mapping[str, str] | None = None,
          permissions: Sequence[str] = (), source: str = "system") -> Event:
    """Append ``branch/started``: the branch ``name`` starts from the
    main-line event ``from_seq``, its start frozen as given."""
    if tool_versions is not None and not isinstance(tool_versions, Mapping):
        raise ArgumentTypeError(f"tool_versions must be a dict, not "
                                f"{type(tool_versions).__name__}")
    frozen = {"workspace_revision": workspace_revision,
              "data_samples": _claims("data_samples", data_samples),
              "tool_versions": dict(tool_versions or {}),
              "permissions": _claims("permissions", permissions)}
    return session.append(STARTED, {"name": name, "from_seq": from_seq, "frozen": frozen},
                          source=source)


def rebase(session: _Session, name: str, *, onto_seq: int, reason: str,
           source: str = "system") -> Event:
    """Append ``branch/rebased``: the branch now starts from ``onto_seq``."""
    return session.append(REBASED, {"name": name, "onto_seq": onto_seq, "reason": reason},
                          source=source)


def merge(session: _Session, name: str, *, common_facts: Sequence[Mapping[str, Any]] = (),
          adopted: Sequence[Mapping[str, Any]] = (), rejected: Sequence[Mapping[str, Any]] = (),
          unresolved: Sequence[str] = (), sample: Sequence[str] | None = None,
          check: Mapping[str, Any] | None = None, code_version: str | None = None,
          decision: Mapping[str, Any] | None = None, source: str = "system",
          data_class: str | None = None) -> Event:
    """Append ``branch/merged`` with the status its gate gives: ``fact``
    when the gate has a reproducible ``sample`` (ids), a deterministic
    ``check`` (``{name, result}``) that passed, a ``code_version`` hash and
    a human ``decision`` (``{by: "human:<who>", verdict: "accept"}``)
    recorded by a ``source`` that may decide (a person, or the host: see
    :data:`trajlog.projections.branches.DECIDERS`); else
    ``reference-only``, naming the missing parts.  ``data_class``: the
    merge's; by default the most sensitive of the branch's events."""
    gate: dict[str, Any] = {}
    if sample is not None:
        gate["sample"] = {"ids": _claims("sample", sample)}
    for key, value in (("check", check), ("decision", decision)):
        if value is not None:
            if not isinstance(value, Mapping):
                raise ArgumentTypeError(f"{key} must be a dict, not {type(value).__name__}")
            gate[key] = dict(value)
    if code_version is not None:
        gate["code_version"] = code_version
    status, missing = gate_status(gate, merger_class(source))
    if data_class is None:
        data_class = _most_sensitive(session, name)
    return session.append(MERGED, {
        "name": name, "common_facts": _dicts("common_facts", common_facts),
        "adopted": _dicts("adopted", adopted), "rejected": _dicts("rejected", rejected),
        "unresolved": _claims("unresolved", unresolved), "gate": gate, "status": status,
        "missing": missing}, source=source, data_class=data_class)


def _most_sensitive(session: _Session, name: str) -> str | None:
    """The most sensitive data class among the events of branch ``name``
    (None when none is classified)."""
    found = {ev.data_class for ev in session.events() if branch_of(ev) == name}
    ranked = [c for c in SENSITIVITY if c in found]
    return ranked[-1] if ranked else None


def abandon(session: _Session, name: str, *, reason: str, source: str = "system") -> Event:
    """Append ``branch/abandoned``: the branch is given up; its events stay."""
    return session.append(ABANDONED, {"name": name, "reason": reason}, source=source)


def branches(session: _Session) -> dict[str, Branch]:
    """Each branch of the session, by name, as its events leave it."""
    return fold(session.events(), session.id)


__all__ = ["abandon", "branches", "merge", "rebase", "start"]
