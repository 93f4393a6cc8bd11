"""Event schemas have versions: how a reader takes an event written under an
older (or a newer) schema of its type (docs/event-schemas.md).

Each known type declares the version of its schema in the registry
(:attr:`trajlog.event_types.EventType.version`, default 1).  An event of a
type whose version is above 1 records it in its envelope's
``schema_version`` (absent: 1 -- a version-1 event costs no byte).

Reading an older event, two ways, both here or named from here:

* **the rules of its version** -- :func:`trajlog.projections.evidence.branch_of`
  and :func:`~trajlog.projections.evidence.supersedes_of` read a version-1
  event as logs were written then (the envelope, else ``data.branch_id`` /
  ``data.branch`` / ``data.supersedes``) and a later one from its envelope
  alone;
* **a recorded migration** -- :data:`UPGRADES` holds one upgrade function per
  ``(type, from_version)``; :func:`record_migration` appends a
  ``schema/migration`` event naming the upgrade and the seq range it applies
  to (no committed event is rewritten), and :func:`read` -- which the context
  builder, hence replay, reads through -- applies exactly the recorded
  upgrades to the events of their range.

An event of a version newer than this reader knows for its type raises
:class:`~trajlog.errors.SchemaVersionError` naming session, seq and type: it
is never read with rules that were not written for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from ..errors import InvalidArgumentError, SchemaVersionError, ValidationError
from ..event_types import VERSIONS
from ..events import Event
from .evidence import branch_of, supersedes_of

#: the event recording a migration applied to a range of a log
MIGRATION = "schema/migration"


def version_of(ev: Any) -> int:
    """The schema version ``ev`` was written under (absent: 1)."""
    v = ev.schema_version
    return 1 if v is None else int(v)


def known(type_: str) -> int:
    """The newest schema version of ``type_`` this reader knows."""
    return VERSIONS.get(type_, 1)


def check(ev: Any, session: str | None) -> None:
    """Raise :class:`SchemaVersionError` if ``ev`` is newer than this reader."""
    if ev.schema_version is not None and version_of(ev) > known(ev.type):
        raise SchemaVersionError(session, ev.seq, ev.type, version_of(ev))


def _lift_branch(ev: Event) -> Event:
    """``workspace/revision`` 1 -> 2: the branch and the superseded seq a
    version-1 reader finds (envelope, else data) become the envelope's."""
    branch, target = branch_of(ev), supersedes_of(ev)
    return msgspec.structs.replace(
        ev, branch_id=branch if isinstance(branch, str) else None,
        supersedes=target if type(target) is int else None, schema_version=2)


#: (type, from_version) -> the function taking an event to from_version + 1
UPGRADES: dict[tuple[str, int], Callable[[Event], Event]] = {
    ("workspace/revision", 1): _lift_branch,
}


def upgrade_name(type_: str, from_version: int) -> str:
    """The name a recorded migration gives an upgrade (``type@version``)."""
    return f"{type_}@{from_version}"


def upgrade(ev: Event, session: str | None = None) -> Event:
    """``ev`` taken through the upgrades to its type's current version."""
    check(ev, session)
    v = version_of(ev)
    while v < known(ev.type):
        ev = UPGRADES[(ev.type, v)](ev)
        v += 1
    return ev


class _Log(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def last_seq(self) -> int: ...

    def append(self, type: str, data: Any = None) -> Event: ...


def record_migration(session: _Log, type_: str, from_version: int = 1,
                     first_seq: int = 0, last_seq: int | None = None) -> Event:
    """Append ``schema/migration``: the upgrade of ``type_`` from
    ``from_version`` applies to its events of that version in ``first_seq ..
    last_seq`` (default: the log so far).  Readers through :func:`read`
    apply it from then on; the events themselves are not rewritten."""
    if (type_, from_version) not in UPGRADES:
        raise InvalidArgumentError(f"no upgrade of {type_} from schema version "
                                   f"{from_version} (known: {sorted(UPGRADES)})")
    last = session.last_seq if last_seq is None else last_seq
    if not 0 <= first_seq <= last <= session.last_seq:
        raise InvalidArgumentError(f"range {first_seq}..{last} is not in session "
                                   f"{session.id} (last seq {session.last_seq})")
    return session.append(MIGRATION, {
        "type": type_, "from_version": from_version, "to_version": from_version + 1,
        "upgrade": upgrade_name(type_, from_version), "first_seq": first_seq,
        "last_seq": last})


def _check_migration(m: Event, d: dict[str, Any], session: str | None) -> None:
    """Raise :class:`ValidationError` naming session and seq if the
    ``schema/migration`` ``m`` is malformed (its shape is checked at append;
    a log written before that, or imported, may still hold one)."""
    if isinstance(d.get("erased"), dict):
        return
    ints: list[Any] = [d.get(k) for k in ("from_version", "to_version", "first_seq", "last_seq")]
    if not isinstance(d.get("type"), str) or not all(type(v) is int for v in ints):
        raise ValidationError(f"the {MIGRATION} at seq {m.seq} of session {session} is "
                              "malformed: it needs str type and int from_version, "
                              "to_version, first_seq and last_seq")
    frm, to, first, last = ints
    if to != frm + 1 or not 0 <= first <= last < m.seq:
        raise ValidationError(f"the {MIGRATION} at seq {m.seq} of session {session} is "
                              f"malformed: version {frm} -> {to} over seqs {first}..{last}")


def read(events: list[Event], session: str | None) -> list[Event]:
    """``events`` (a log, oldest first) as a reader of this version takes
    them: each checked against the versions it knows, and the recorded
    migrations applied to their ranges.  A log with neither versions nor
    migrations is returned as it is (one pass over the envelopes)."""
    migrations = []
    for ev in events:
        if ev.schema_version is not None:
            check(ev, session)
        elif ev.type == MIGRATION:
            migrations.append(ev)
    if not migrations:
        return events
    rules: list[tuple[int, int, str, int]] = []
    for m in migrations:
        d = m.data if isinstance(m.data, dict) else {}
        _check_migration(m, d, session)
        key = (d.get("type"), d.get("from_version"))
        if key not in UPGRADES or d.get("upgrade") != upgrade_name(*key):
            # recorded by a newer trajlog: applying anything else would misread
            raise SchemaVersionError(session, m.seq, f"{MIGRATION} {d.get('upgrade')!r}",
                                     int(d.get("to_version") or 0))
        rules.append((d["first_seq"], d["last_seq"], key[0], key[1]))
    out = list(events)
    for i, ev in enumerate(out):
        for first, last, type_, v in rules:
            if ev.type == type_ and first <= ev.seq <= last and version_of(ev) == v:
                ev = out[i] = UPGRADES[(type_, v)](ev)
    return out


__all__ = ["MIGRATION", "UPGRADES", "check", "known", "read", "record_migration", "upgrade",
           "upgrade_name", "version_of"]
