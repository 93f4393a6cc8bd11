"""The redaction policy and the redactor: what a payload becomes before it is
framed.  Every event payload and every memory item's content passes through a
:class:`Redactor` (compiled from a :class:`RedactionPolicy`) before it is
serialized; see :mod:`trajlog.redaction` for the whole picture (scanners,
actions, privacy modes, the pause)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    InvalidArgumentError,
    RedactionRefusedError,
    UnredactableValueError,
)
from ..events import DATA_CLASSES
from .embedded import Edit, Opened, apply_spans
from .machine import without_machine
from .scanners import BUILTIN, Finding, Scanner, key_step

ACTIONS = ("mask", "refuse", "hash", "allow")
PRIVACY_MODES = ("full", "metadata", "none")


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
