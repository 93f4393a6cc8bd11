"""Redaction before write, and privacy modes: what a payload becomes before it
is framed.

Every event payload (user and assistant messages, tool calls and results,
any other type) and every memory item's content passes through a
:class:`Redactor` before it is serialized, so a secret it masks never reaches
a frame, a chunk row, the WAL, a projection state, the full-text index or an
export: they are all made from the stored bytes.  The scanners are in
:mod:`.scanners`, the table of trajlog's own fields left unscanned in
:mod:`.machine`; this module holds the policy, the privacy routing and the
pause.

* **Scanners** (:class:`Scanner`): ``scan(value) -> [Finding(kind, path,
  start, end)]`` over a string or a JSON value; ``path`` names the string
  (``$``, ``$.output``, ``$.content[0].text``, ``$["a b"]``) as
  :func:`strings` walks it, ``start``/``end`` the span in it.  The built-in
  :data:`BUILTIN` finds secrets (AWS access keys, GitHub, OpenAI and Slack
  tokens, private-key blocks, bearer tokens, high-entropy ``password=`` /
  ``api_key=`` values) and PII (e-mail addresses, phone numbers, card
  numbers that pass the Luhn check).  JSON held in a string (a tool call's
  ``arguments`` as OpenAI-style hosts store them) is scanned value by value,
  its keys too, and encoded again, so masking never leaves invalid JSON
  (:mod:`.embedded`).  Dict keys are not scanned, nor the
  ids and digests trajlog writes itself (:data:`MACHINE_FIELDS`: a value is
  skipped only at its path in its event type, and only in its format).
  Each rule has a cheap ``trigger`` and a ``min_len``: a rule that cannot
  match a string is not run on it (benchmarks/bench_redaction.py).
* **Policy** (:class:`RedactionPolicy`), per finding kind: ``mask`` (the
  span becomes ``[REDACTED:<kind>]``; the event's data class is raised to at
  least ``internal-redacted``), ``refuse`` (:class:`RedactionRefusedError`
  naming the event type, the path and the kind; nothing is written),
  ``hash`` (the span becomes ``sha256:<hex of the match>``, the data class
  becomes ``restricted`` -- so a context build excludes it -- and the session
  **pauses**: a ``redaction/paused {seq, findings}`` event is appended in
  the same transaction, and until a ``redaction/resumed`` event every
  append of a content type is refused with :class:`RedactionPausedError`;
  markers that close what is open, recovery's synthetic closers,
  ``event/status`` and ``run/*`` / ``redaction/*`` still pass), or
  ``allow``.  A fork or subagent of a paused session starts paused
  (:mod:`trajlog.api.lineage`).  In memory ``hash`` stores the item *provisional* (never
  retrieved until a human activates it): memory has no session to pause.
* **Privacy modes**, per identity (the ``tenant`` / ``user`` metadata of the
  session header, which forks and subagents inherit): ``full`` stores the
  redacted payload; ``metadata`` replaces it by its structural fields (call
  ids, tool names, flags, seq ranges) and ``privacy: {mode, shape, bytes,
  sha256}``; ``none`` keeps the structural fields and ``privacy: {mode,
  sha256}`` only.  Memory follows :class:`~trajlog.memory.Identity`'s own
  ``privacy`` (``none`` writes no memory, ``metadata`` no content).

What ``none`` does **not** cover: the session header (cwd, agent preset,
metadata: written at creation, never scanned), event types and times, the
envelope (``source``, ``workspace_revision``, ``idempotency_key``, ...),
frame and row sizes (they still say roughly how long a payload was), the
structural fields above (call ids and tool names pair calls with results),
memory keys, evidence and decisions, and the SHA-256 of the payload (it
confirms a guessed payload; a short one can be guessed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import msgspec

from ..errors import (
    InvalidArgumentError,
    RedactionPausedError,
    RedactionRefusedError,
    UnredactableValueError,
)
from ..events import DATA_CLASSES, Event
from .embedded import Edit, Opened, apply_spans
from .machine import MACHINE_FIELDS, without_machine
from .scanners import (
    BUILTIN,
    PII_KINDS,
    SECRET_KINDS,
    Finding,
    PatternScanner,
    Rule,
    Scanner,
    key_step,
    strings,
)

_JSON = msgspec.json.Encoder(order="sorted")

ACTIONS = ("mask", "refuse", "hash", "allow")
PRIVACY_MODES = ("full", "metadata", "none")
PAUSED, RESUMED = "redaction/paused", "redaction/resumed"
# The fields that pair and balance a log (lifecycle, compactions, status
# marks): kept by the metadata and none modes, scalar values only.
STRUCTURAL = frozenset({"call_id", "id", "name", "is_error", "status", "interrupted",
                        "synthetic", "from_seq", "to_seq", "op", "seq", "target",
                        "background"})

@dataclass(frozen=True, slots=True)
class RedactionPolicy:
    """What the store does with each finding kind, and the privacy mode of
    each identity.

    ``actions``: kind -> ``mask`` / ``refuse`` / ``hash`` / ``allow``; a kind
    not named gets ``default``.  ``scanners``: run in order on every payload.
    ``privacy``: ``"tenant"`` or ``"tenant/user"`` -> ``full`` / ``metadata``
    / ``none`` (the most specific wins; ``"*"`` is every other identity)."""

    actions: Mapping[str, str] = field(default_factory=dict)
    default: str = "mask"
    scanners: Sequence[Scanner] = (BUILTIN,)
    privacy: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for kind, action in [*self.actions.items(), ("default", self.default)]:
            if action not in ACTIONS:
                raise InvalidArgumentError(f"the action for {kind!r} must be one of "
                                           f"{ACTIONS}, not {action!r}")
        for who, mode in self.privacy.items():
            if mode not in PRIVACY_MODES:
                raise InvalidArgumentError(f"the privacy mode of {who!r} must be one of "
                                           f"{PRIVACY_MODES}, not {mode!r}")
        for s in self.scanners:
            if not callable(getattr(s, "scan", None)):
                raise TypeError(f"a scanner needs a scan() method: {s!r}")


@dataclass(frozen=True, slots=True)
class Outcome:
    """A payload after redaction: what to store, its data class, what was
    found (kind and path, never the text) and whether the session pauses."""

    data: Any
    data_class: str | None
    findings: tuple[tuple[str, str], ...] = ()
    pause: bool = False


def raise_class(current: str | None, floor: str) -> str:
    """``current`` raised to at least ``floor`` on :data:`DATA_CLASSES`."""
    if current is None or DATA_CLASSES.index(current) < DATA_CLASSES.index(floor):
        return floor
    return current


class Redactor:
    """A compiled :class:`RedactionPolicy`: what the write path calls."""

    def __init__(self, policy: RedactionPolicy | None = None) -> None:
        if policy is not None and not isinstance(policy, RedactionPolicy):
            raise TypeError(f"redaction must be a RedactionPolicy, not "
                            f"{type(policy).__name__}")
        self.policy = policy or RedactionPolicy()

    def redact(self, type_: str, data: Any, data_class: str | None) -> Outcome:
        """Scan ``data`` (but not trajlog's own :data:`MACHINE_FIELDS`) and
        apply the policy (``refuse`` raises).  JSON held in a string is
        scanned value by value and encoded again (:mod:`.embedded`)."""
        opened = Opened()
        view = opened.view(without_machine(type_, data))
        scanners = self.policy.scanners
        findings = [f for s in scanners for f in s.scan(view)]
        if not findings:
            return Outcome(data, data_class)
        actions = self.policy.actions
        by_path: dict[str, list[tuple[Finding, str]]] = {}
        inner: dict[str, list[tuple[Edit, str, str]]] = {}
        hashed = False
        for f, emb, index in opened.place(scanners, findings):
            action = actions.get(f.kind, self.policy.default)
            if emb is None:
                if action == "refuse":
                    raise RedactionRefusedError(type_, f.path, f.kind)
                if action == "allow":
                    continue
                if f.path in opened.deep:   # masking its text would corrupt it
                    raise UnredactableValueError(type_, f.path, f.kind, "json")
                by_path.setdefault(f.path, []).append((f, action))
                hashed = hashed or action == "hash"
                continue
            edits = emb.edits(index, f.start, f.end)
            if action == "refuse":
                keyed = {e.trail for e in edits if e.key}
                raise RedactionRefusedError(type_, emb.name(edits[0], keyed) if edits
                                            else emb.path, f.kind)
            if action != "allow" and edits:
                inner.setdefault(emb.path, []).extend((e, f.kind, action) for e in edits)
                hashed = hashed or action == "hash"
        done = [(f.kind, f.path) for spans in by_path.values() for f, _ in spans]
        for path, spans in inner.items():
            emb = opened.by_path[path]
            keyed = {e.trail for e, _, _ in spans if e.key}
            done.extend((kind, emb.name(e, keyed)) for e, kind, _ in spans)
        if not by_path and not inner:
            return Outcome(data, data_class)
        new = _rewrite(data, "$", by_path, inner, opened)
        cls = raise_class(data_class, "restricted" if hashed else "internal-redacted")
        return Outcome(new, cls, tuple(done), hashed)

    def mode(self, metadata: Mapping[str, Any]) -> str:
        """The privacy mode of a session, by its header's identity."""
        privacy = self.policy.privacy
        if not privacy:
            return "full"
        tenant, user = metadata.get("tenant"), metadata.get("user")
        for who in (f"{tenant}/{user}" if tenant is not None and user is not None else None,
                    tenant if isinstance(tenant, str) else None, "*"):
            if who is not None and who in privacy:
                return privacy[who]
        return "full"


def _rewrite(value: Any, path: str, spans: Mapping[str, list[tuple[Finding, str]]],
             inner: Mapping[str, list[tuple[Edit, str, str]]], opened: Opened) -> Any:
    """``value`` with the spans replaced (copied only where something changed);
    a JSON text with edits inside is encoded again from its edited tree."""
    if isinstance(value, str):
        if path in inner:
            return opened.by_path[path].encode(inner[path])
        edits = spans.get(path)
        if not edits:
            return value
        return apply_spans(value, [(f, f.kind, action) for f, action in edits])
    if isinstance(value, dict):
        return {k: _rewrite(v, path + key_step(k), spans, inner, opened)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rewrite(v, f"{path}[{i}]", spans, inner, opened) for i, v in enumerate(value)]
    return value


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


# While paused, only what closes, audits or resumes may be appended.
_PASS_WHEN_PAUSED = frozenset({"turn/end", "step/end", "event/status"})


def passes_pause(type_: str, data: Any) -> bool:
    """May an event of ``type_`` be appended to a paused session?"""
    return (type_ in _PASS_WHEN_PAUSED or type_.startswith(("redaction/", "run/"))
            or (isinstance(data, dict) and data.get("synthetic") is True))


PAUSE_TYPES = frozenset({PAUSED, RESUMED})   # the events that move the pause


def pause_state(type_: str) -> bool | None:
    """What an event does to the pause: True pauses, False resumes, None neither."""
    return True if type_ == PAUSED else False if type_ == RESUMED else None


def check_paused(session: str, paused: bool, first: int,
                 events: Sequence[tuple[str, Any]]) -> bool:
    """Follow the pause over ``events`` (type, data) appended from seq
    ``first``; raise :class:`RedactionPausedError` at the first one a paused
    session refuses.  Returns the pause after them."""
    for i, (type_, data) in enumerate(events):
        change = pause_state(type_)
        if change is not None:
            paused = change
        elif paused and not passes_pause(type_, data):
            raise RedactionPausedError(session, first + i, type_)
    return paused


class RowLike(Protocol):
    """An event ready to be framed, as the write path holds it."""

    @property
    def event(self) -> Event: ...

    @property
    def pause(self) -> tuple[tuple[str, str], ...]: ...


R = TypeVar("R", bound=RowLike)
Remake = Callable[..., R]


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


def pause_rows(session: str, paused: bool, first: int, rows: list[R],
               remake: Remake[R]) -> tuple[list[R], bool]:
    """``rows`` followed by a ``redaction/paused`` event for those whose
    findings pause, after checking that the session takes them; and the
    pause after them."""
    found = [{"seq": first + i, "findings": [list(f) for f in r.pause]}
             for i, r in enumerate(rows) if r.pause]
    if found:
        ev = Event(PAUSED, rows[-1].event.time, {"reason": "hash policy", "events": found},
                   source="trajlog:redaction")
        rows = [*rows, remake(ev)]
    return rows, check_paused(session, paused, first,
                              [(r.event.type, r.event.data) for r in rows])


__all__ = [
    "ACTIONS",
    "BUILTIN",
    "MACHINE_FIELDS",
    "PAUSED",
    "PII_KINDS",
    "PRIVACY_MODES",
    "RESUMED",
    "SECRET_KINDS",
    "Finding",
    "Outcome",
    "PatternScanner",
    "RedactionPolicy",
    "Redactor",
    "Rule",
    "Scanner",
    "check_paused",
    "passes_pause",
    "pause_rows",
    "pause_state",
    "prepare_payload",
    "raise_class",
    "route",
    "route_rows",
    "strings",
]
