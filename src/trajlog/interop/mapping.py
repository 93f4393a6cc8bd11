"""What an importer produces: sessions of mapped events, and the notes on
what could not be mapped.

Every source format (``interop/sources/*.py``) turns a file into a stream of
:class:`MappedSession` -- a header and a *lazy* iterator of
:class:`MappedEvent` -- and writes into :class:`Notes` every record it could
not map (with file, line, byte offset and why), every warning, and a torn
tail.  :mod:`.importer` writes the sessions into a store, one transaction
per session.  Nothing here touches a store.

The shared readers live here too: :func:`jsonl_records` (a JSONL file, line
by line, with the torn-tail rule), :func:`json_document`, :func:`epoch_ms`
(timestamps), :func:`stable_id` (deterministic session ids, so that importing
the same file twice creates nothing new) and :class:`CallBook` (the tool-call
lifecycle every importer must respect: a result answers a call that was
requested and started).
"""

from __future__ import annotations

import datetime as _dt
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import ImportFormatError
from . import bounded

#: uuid5 namespace of imported session ids (a fixed random UUID; never change it:
#: the ids of everything ever imported derive from it).
NAMESPACE = uuid.UUID("3f1f6f5e-9b0c-4d1e-8a55-0c2f3e7a9b14")



@dataclass(slots=True)
class MappedEvent:
    """One event to append: a trajlog ``type`` and its ``data`` (a JSON
    object), the source's time (epoch ms, None: the time of the import) and
    envelope fields.  ``cause`` is the *index* (0-based, in this session's own
    mapped events) of the event that caused it -- a ``tool/result``'s
    ``tool/call`` -- turned into a ``causal_parent`` seq when written."""

    type: str
    data: dict[str, Any]
    time: int | None = None
    source: str | None = None
    cause: int | None = None
    line: int | None = None   # where it came from (for errors)
    #: other envelope fields as stored (workspace_revision, data_class,
    #: idempotency_key, supersedes, branch_id: every name of
    #: ``trajlog.events.ENVELOPE_FIELDS``; an import of a trajlog export
    #: carries them all, seqs included, so ``supersedes`` still names its target)
    envelope: dict[str, Any] | None = None


@dataclass(slots=True)
class MappedSession:
    """A session to create.  ``key`` is its identity in the source
    (``"claude-code:<sessionId>"``); ``session_id`` the trajlog id (derived
    from ``key`` by :func:`stable_id` when the source has no UUID of its own).
    ``parent`` is the ``key`` of a session yielded earlier by the same import.
    ``events`` is consumed once, lazily (bounded memory)."""

    key: str
    events: Iterator[MappedEvent]
    cwd: str = "."
    session_id: str | None = None
    created_ms: int | None = None
    agent_preset: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    parent: str | None = None
    #: the parent's trajlog id when the source names it (a trajlog export);
    #: else it is the id of ``parent`` in this import, or ``stable_id(parent)``
    parent_id: str | None = None
    origin: str | None = None
    delegation_depth: int = 0
    seed_length: int = 0
    #: sees (seq, chain) after each written batch: an import of a trajlog
    #: export compares them with the source's and refuses a difference
    check: Callable[[int, int], None] | None = None

    @property
    def id(self) -> str:
        return self.session_id or stable_id(self.key)


@dataclass(frozen=True, slots=True)
class Unmapped:
    """A record that produced no event, and why."""

    file: str
    line: int | None
    offset: int | None
    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class Torn:
    """An incomplete last record (a file cut by a crash or still being
    written): everything before ``offset`` was imported, the rest was not."""

    file: str
    line: int
    offset: int
    size: int   # bytes dropped


@dataclass
class Notes:
    """What an import noticed besides its events (one per import)."""

    unmapped: list[Unmapped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    torn: list[Torn] = field(default_factory=list)

    def skip(self, file: str | os.PathLike[str], line: int | None, offset: int | None,
             kind: str, reason: str) -> None:
        """Record a record that produced no event."""
        self.unmapped.append(Unmapped(os.fspath(file), line, offset, kind, reason))

    def warn(self, text: str) -> None:
        self.warnings.append(text)


def stable_id(key: str) -> str:
    """A session id derived from a source identity: the same source gives the
    same id in every store, on every import."""
    return str(uuid.uuid5(NAMESPACE, key))


def uuid_or_stable(value: Any, key: str) -> str:
    """``value`` if it is a UUID string (the source's own id), else the
    :func:`stable_id` of ``key``."""
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    return stable_id(key)


def epoch_ms(value: Any) -> int | None:
    """Epoch milliseconds of an ISO 8601 timestamp (``Z`` or an offset; naive
    means UTC), or of a number of seconds; None if there is none."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        seconds = float(value)
        if seconds > 1e11:  # already milliseconds
            return int(seconds)
        return round(seconds * 1000) if seconds >= 0 else None
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    ms = round(when.timestamp() * 1000)
    return ms if ms >= 0 else None


def jsonl_records(path: str | os.PathLike[str], notes: Notes,
                  ) -> Iterator[tuple[int, int, Any]]:
    """``(line number, byte offset, parsed value)`` of each non-blank line of
    a JSONL file, read in bounded memory (:mod:`.bounded`: a regular file,
    lines of at most ``LINE_LIMIT`` bytes, each decoding to a bounded value;
    each blank line is noted as skipped).

    A last line that does not parse and has no newline after it is a torn
    tail (the writer was cut off): it is noted in ``notes.torn`` and not
    yielded.  Any other line that does not parse raises
    :class:`ImportFormatError` with the file, line and offset.
    """
    name = os.fspath(path)
    valid = number = start = 0
    limit, decode = bounded.LINE_LIMIT, bounded.decode
    with bounded.open_regular(path, name) as f:
        # bounded.lines, inlined: this loop runs once per record of every file
        readline = f.readline
        while raw := readline(limit):
            number += 1
            if len(raw) >= limit and raw[-1:] != b"\n":
                raise ImportFormatError(name, f"a line longer than {limit} bytes",
                                        line=number, offset=start, valid=max(0, number - 1))
            # the common record line, "{...}\n", is decoded as read (its newline
            # is JSON whitespace); any other is stripped first, as it always was
            body = raw if raw[:1] == b"{" and raw[-2:] == b"}\n" else raw.strip()
            if not body:
                if raw.endswith(b"\n") or f.read(1):
                    notes.skip(name, number, start, "blank", "a blank line")
                start += len(raw)
                continue
            try:
                value = decode(body, name, line=number, offset=start, valid=valid)
            except ImportFormatError:
                if not raw.endswith(b"\n") and not f.read(1):
                    notes.torn.append(Torn(name, number, start, len(raw)))
                    return
                raise
            valid += 1
            yield number, start, value
            start += len(raw)


def json_document(path: str | os.PathLike[str], data: bytes | None = None) -> Any:
    """The JSON value of a whole-document file (at most
    ``bounded.DOCUMENT_LIMIT`` bytes, decoding to a bounded value); a
    truncated or malformed one raises :class:`ImportFormatError` with the
    line and byte offset where parsing failed."""
    name = os.fspath(path)
    if data is None:
        data = bounded.read_document(path, name)
    why = bounded.over(data)
    if why is not None:
        raise ImportFormatError(name, why, line=1, offset=0)
    value = bounded.try_decode(data)
    if value is not bounded.INVALID:
        return value
    try:
        bounded.decode(data, name)
    except ImportFormatError as exc:
        message = exc.reason
    offset = _error_offset(message, len(data))
    line = data.count(b"\n", 0, offset) + 1 if offset is not None else None
    reason = ("the document ends early (truncated)" if offset is not None and
              offset >= len(data.rstrip()) else message)
    raise ImportFormatError(name, reason, line=line, offset=offset) from None


def _error_offset(message: str, size: int) -> int | None:
    # msgspec: "... - at `$...`" or "JSON is malformed: ... (byte 123)"
    marker = "(byte "
    at = message.rfind(marker)
    if at < 0:
        return size if "truncated" in message else None
    digits = message[at + len(marker):].split(")", 1)[0]
    return int(digits) if digits.isdigit() else None


def parsed_json(value: Any) -> Any:
    """A string holding a JSON object, parsed (sources that nest JSON in
    strings: tool arguments, outputs); anything else -- or a string that
    does not decode within the bounds of :mod:`.bounded` -- as it is."""
    if isinstance(value, str) and value[:1] == "{":
        parsed = bounded.try_decode(value)
        return value if parsed is bounded.INVALID else parsed
    return value


def without(record: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``record`` less ``keys`` (what an event keeps of a source record that
    it did not map)."""
    return {k: v for k, v in record.items() if k not in keys}


class CallBook:
    """The tool-call lifecycle of one mapped session, as the store enforces it:
    an ``assistant/message`` *requests* calls (``tool_calls``), a ``tool/call``
    *starts* one, a ``tool/result`` *finishes* one that was started.

    Importers ask it before emitting: :meth:`request` reserves an id (a reused
    id is refused: the caller renames or carries the record as its own type),
    :meth:`start` returns False when the call was not requested, :meth:`finish`
    returns the index of the call's ``tool/call`` event (its cause) or None for
    an orphan result, which must then be carried as its own type."""

    def __init__(self) -> None:
        self.requested: dict[str, int] = {}   # id -> index of its assistant/message
        self.started: dict[str, int] = {}     # id -> index of its tool/call
        self.finished: set[str] = set()

    def used(self, call_id: str) -> bool:
        return call_id in self.requested or call_id in self.started or call_id in self.finished

    def request(self, call_id: str, index: int) -> bool:
        if self.used(call_id):
            return False
        self.requested[call_id] = index
        return True

    def start(self, call_id: str, index: int) -> bool:
        if self.requested.pop(call_id, None) is None:
            return False
        self.started[call_id] = index
        return True

    def finish(self, call_id: str) -> int | None:
        index = self.started.pop(call_id, None)
        if index is not None:
            self.finished.add(call_id)
        return index

    def open(self) -> list[str]:
        """Calls requested or started and not finished, in order."""
        return [*self.requested, *self.started]


class AliasedCalls(CallBook):
    """A :class:`CallBook` for sources that reuse call ids: a reused source id
    gets a fresh one (``<id>#2``, ``#3``...: :meth:`fresh`), :meth:`ask`
    requests it under both names, and :meth:`resolve` finds the oldest open
    call the source knows by its id -- the one a result answers."""

    def __init__(self) -> None:
        super().__init__()
        self.alias: dict[str, list[str]] = {}   # source id -> its open calls
        self.source: dict[str, str] = {}
        self.names: dict[str, str] = {}

    def fresh(self, source_id: str, taken: set[str]) -> str:
        call_id, n = source_id, 1
        while self.used(call_id) or call_id in taken:
            n += 1
            call_id = f"{source_id}#{n}"
        return call_id

    def ask(self, source_id: str, call_id: str, name: str, index: int) -> None:
        self.request(call_id, index)
        self.alias.setdefault(source_id, []).append(call_id)
        self.source[call_id], self.names[call_id] = source_id, name

    def resolve(self, source_id: Any) -> str | None:
        """The oldest open call the source knows as ``source_id``."""
        ids = self.alias.get(source_id) if isinstance(source_id, str) else None
        return ids[0] if ids else None

    def is_open(self, call_id: Any) -> bool:
        return call_id in self.requested or call_id in self.started

    def finish(self, call_id: str) -> int | None:
        index = super().finish(call_id)
        if index is not None:
            self.names.pop(call_id, None)
            ids = self.alias.get(self.source.pop(call_id, call_id), [])
            if call_id in ids:
                ids.remove(call_id)
        return index


__all__ = ["NAMESPACE", "AliasedCalls", "CallBook", "MappedEvent", "MappedSession", "Notes", "Torn",
           "Unmapped", "epoch_ms", "json_document", "jsonl_records", "parsed_json", "stable_id",
           "uuid_or_stable", "without"]
