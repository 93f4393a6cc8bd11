"""Writing mapped sessions into a store, and :func:`import_path`.

Each :class:`~.mapping.MappedSession` becomes one trajlog session in one
transaction (:meth:`Store.load_session`): its events are streamed in batches,
a refused event or a bad record fails that session only, and nothing of it is
written.  Session ids are deterministic (the source's own UUID, or one derived
from the source identity), so importing the same file twice finds every
session already there with the same events and writes nothing; a source that
grew (a live agent's file) gets only its new events appended.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import (
    ImportConflictError,
    ImportFormatError,
    InvalidArgumentError,
    SessionNotFoundError,
    TrajlogError,
)
from .formats import FORMATS, module
from .mapping import MappedEvent, MappedSession, Notes, Torn, Unmapped, stable_id
from .protocols import Loaded, SessionSpec, StoreLike

#: progress(sessions done, events written so far)
Progress = Callable[[int, int], None]


@dataclass
class SessionResult:
    """One session of an import: ``status`` is ``created``, ``extended``
    (new events appended to a session stored before), ``unchanged``, or
    ``conflict`` (stored with other events; nothing written; ``reason``)."""

    session_id: str
    key: str
    status: str
    events: int
    kept: int
    parent: str | None = None
    reason: str = ""


@dataclass
class ImportReport:
    """What an import did: the sessions it created or extended, the events it
    wrote, every record it could not map (with file, line, offset and why),
    warnings, and torn tails (incomplete last records, not imported)."""

    format: str
    path: str
    sessions: list[SessionResult] = field(default_factory=list)
    unmapped: list[Unmapped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    torn: list[Torn] = field(default_factory=list)
    #: sessions left open by their source and closed by recovery (close=True)
    closed: list[str] = field(default_factory=list)

    @property
    def events(self) -> int:
        """Events written by this import."""
        return sum(s.events for s in self.sessions)

    @property
    def created(self) -> list[str]:
        return [s.session_id for s in self.sessions if s.status == "created"]

    @property
    def conflicts(self) -> list[SessionResult]:
        """Sessions stored with other events than the source's (nothing written)."""
        return [s for s in self.sessions if s.status == "conflict"]

    @property
    def skipped(self) -> list[str]:
        """Sessions already stored with the same events (nothing written)."""
        return [s.session_id for s in self.sessions if s.status == "unchanged"]


def detect(path: Path) -> str:
    """The name of the format of ``path`` (a file or a folder)."""
    for name in FORMATS:
        if module(name).sniff(path):
            return str(module(name).NAME)
    raise ImportFormatError(os.fspath(path), "not a format trajlog can import "
                            f"(tried: {', '.join(FORMATS)})")


def import_path(store: StoreLike, path: str | os.PathLike[str], *, format: str = "auto",
                progress: Progress | None = None, close: bool = False) -> ImportReport:
    """Import everything ``path`` holds into ``store`` (see the module
    docstring).  ``format``: ``"auto"`` or a format name (``trajlog``,
    ``claude-code``, ``codex``, ``inspect-ai``, ``openhands``, ``swe-agent``,
    ``aider``).  A bad record raises :class:`ImportFormatError` (file, line,
    offset); the sessions finished before it stay, and the error's
    ``report`` says which.

    ``close=True``: a session the source left open (a rollout that ends
    mid-turn, a tool call with no result) is then made whole by trajlog's own
    recovery (:meth:`Store.load`: synthetic closers, appended after the
    imported events; listed in ``report.closed``).  A later import of the
    grown source then conflicts where the closers are."""
    where = Path(os.fspath(path)).expanduser()
    if not where.exists():
        raise InvalidArgumentError(f"{where}: no such file or folder")
    name = detect(where) if format == "auto" else format
    try:
        source = module(name)
    except KeyError:
        raise InvalidArgumentError(f"unknown import format {format!r} (known: "
                                   f"{', '.join(FORMATS)})") from None
    notes = Notes()
    report = ImportReport(str(source.NAME), os.fspath(where))
    try:
        import_sessions(store, source.read(where, notes), notes, report, progress)
    except TrajlogError as exc:
        _finish(report, notes)
        exc.report = report  # type: ignore[attr-defined]
        raise
    if close:
        for result in report.sessions:
            if result.status in ("created", "extended"):
                before = store.session(result.session_id).last_seq
                if store.load(result.session_id).last_seq != before:
                    report.closed.append(result.session_id)
    return _finish(report, notes)


def _finish(report: ImportReport, notes: Notes) -> ImportReport:
    report.unmapped, report.warnings, report.torn = notes.unmapped, notes.warnings, notes.torn
    return report


def import_sessions(store: StoreLike, sessions: Iterable[MappedSession], notes: Notes,
                    report: ImportReport | None = None,
                    progress: Progress | None = None) -> ImportReport:
    """Write ``sessions`` into ``store``: each all or nothing, many per commit
    (:meth:`Store.bulk_loader`).  A session already stored with another
    header or other events is reported (status ``conflict``), and so are its
    descendants in this import (never attached to the stored session of that
    id); the import goes on.  Any other error stops it, after committing the
    sessions before it."""
    if report is None:
        report = ImportReport("mapped", "")
    ids: dict[str, str] = {}
    #: keys of this import's sessions that conflicted: a stored session of that
    #: id is not theirs, so their children must not be attached to it
    conflicted: set[str] = set()
    bulk = store.bulk_loader()
    try:
        for mapped in sessions:
            parent_id = None
            if mapped.parent is not None and mapped.parent in conflicted:
                conflicted.add(mapped.key)
                report.sessions.append(SessionResult(
                    mapped.id, mapped.key, "conflict", 0, 0, None,
                    f"its parent {mapped.parent} conflicts with the stored session of its id, "
                    "which is not that parent: not attached to it; nothing was written"))
                continue
            if mapped.parent is not None:
                parent_id = ids.get(mapped.parent) or _stored_parent(store, mapped)
                if parent_id is None and mapped.seed_length:
                    raise ImportFormatError(
                        mapped.key, f"a fork of {mapped.parent} at seq {mapped.seed_length}, "
                        "which is neither in this import nor in the store: import it first "
                        "(or the .zip of its tree)")
                if parent_id is None:
                    notes.warn(f"session {mapped.key}: its parent {mapped.parent} is neither "
                               "in this import nor in the store; imported without a parent")
            spec = SessionSpec(
                session_id=mapped.id, cwd=mapped.cwd or ".", agent_preset=mapped.agent_preset,
                metadata=mapped.metadata, created_ms=mapped.created_ms, parent_id=parent_id,
                seed_length=mapped.seed_length if parent_id is not None else 0,
                origin=mapped.origin if parent_id is not None else None,
                delegation_depth=mapped.delegation_depth if parent_id is not None else 0)
            try:
                loaded = bulk.load(spec, _items(mapped), mapped.check)
            except ImportConflictError as exc:
                conflicted.add(mapped.key)
                report.sessions.append(SessionResult(spec.session_id, mapped.key, "conflict",
                                                     0, 0, parent_id, str(exc)))
                continue
            ids[mapped.key] = loaded.header.id
            status = ("created" if loaded.created else "extended" if loaded.appended
                      else "unchanged")
            report.sessions.append(SessionResult(loaded.header.id, mapped.key, status,
                                                 loaded.appended, loaded.kept, parent_id))
            if progress is not None:
                progress(len(report.sessions), report.events)
        bulk.close()
    except BaseException:
        # the sessions before the failure stay -- unless their commit fails too
        with contextlib.suppress(TrajlogError):
            bulk.close()
        _drop_lost(report, bulk.lost, notes)
        raise
    _drop_lost(report, bulk.lost, notes)
    return report


def _drop_lost(report: ImportReport, lost: Sequence[Loaded], notes: Notes) -> None:
    """Take the sessions whose transaction failed out of the report."""
    if not lost:
        return
    gone = {loaded.header.id for loaded in lost}
    report.sessions = [s for s in report.sessions if s.session_id not in gone]
    notes.warn(f"{len(gone)} session(s) loaded before the failure were rolled back with it")


def _stored_parent(store: StoreLike, mapped: MappedSession) -> str | None:
    """The id of ``mapped``'s parent if the store holds it (imported before)."""
    assert mapped.parent is not None
    candidate = mapped.parent_id or stable_id(mapped.parent)
    try:
        return store.session(candidate).id
    except SessionNotFoundError:
        return None


def _items(mapped: MappedSession) -> Iterator[tuple[str, Any, int, dict[str, Any]]]:
    """``(type, data, time, envelope)`` of each mapped event.  An event
    without a time gets the one before it (or the session's creation time),
    so that importing again yields the same events."""
    last = mapped.created_ms or 0
    seed = mapped.seed_length
    index = -1
    ev: MappedEvent
    for index, ev in enumerate(mapped.events):
        if ev.time is not None:
            last = ev.time
        env: dict[str, Any] = {}
        if ev.source is not None:
            env["source"] = ev.source
        if ev.cause is not None:
            if not 0 <= ev.cause < index:
                raise ImportFormatError(mapped.key, f"event {index} names event {ev.cause} "
                                        "as its cause, which is not before it",
                                        line=ev.line, valid=index)
            env["causal_parent"] = seed + ev.cause
        if ev.envelope:
            env.update(ev.envelope)
        yield ev.type, ev.data, last, env


__all__ = ["ImportReport", "Progress", "SessionResult", "detect", "import_path",
           "import_sessions"]
