"""JSON held in a string -- a tool call's ``arguments`` as OpenAI-style hosts
write them, a tool's JSON output -- scanned value by value and encoded again.

A span of the text itself must never be cut: a match can swallow an escape
or a quote (``password=x\\"y`` ends at the quote, after the backslash) and the
masked text is no longer JSON.  So a string that opens with ``{`` or ``[``
(after white space, at most :data:`MAX_TEXT` characters) and decodes as an
object or an array is shown to the scanners as the list of its texts, one
per value: a string, a number's digits (a card number may be a number), a
key alone when its value is an object or an array, and ``key: value`` when
it is a string or a number (so a ``password`` key names its value as it
does in the text).  A finding is mapped back to the value or the key it
covers, the edited values set in the decoded tree, and the tree encoded
again: valid JSON, the same structure (a masked number becomes a string, a
masked key stays a distinct key).  Paths name the value inside:
``$.tool_calls[0].arguments.env.KEY``; a member whose key holds a finding is
named by its position, ``.<key 2>`` (the key) and ``.<member 2>`` (what is
under it), never by its text.

A text with no finding is stored exactly as written.  A longer text is
scanned as text, and opened only if that finds something; one too deep to
decode (or a text that is no JSON) is scanned as text, and a finding to mask
in a deep one is refused (:class:`~trajlog.errors.UnredactableValueError`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .scanners import Finding, key_step

#: the longest text opened before scanning (a longer one is opened only if
#: its text holds a finding)
MAX_TEXT = 1 << 20
_OPENERS = frozenset("{[")
_LEAD = re.compile(r"\s*[\[{]")
_ENCODE = msgspec.json.Encoder()   # (keeps the order of the keys)
# a member's step: (its position, its key); a list item's: its index
Step = tuple[int, str] | int
_VALUE, _KEY, _PAIR = 0, 1, 2


def opens_json(text: str) -> bool:
    """Does ``text`` start like a JSON object or array (the cheap test)?"""
    c = text[:1]
    return c in _OPENERS or (c.isspace() and _LEAD.match(text) is not None)


class TooDeep(Exception):
    """The text is JSON nested deeper than the decoder goes."""


def decode(text: str) -> Any:
    """The object or array ``text`` holds, or None (not JSON, or a scalar).
    Raises :class:`TooDeep` for one nested too deep to decode."""
    try:
        value = msgspec.json.decode(text)
    except RecursionError:
        raise TooDeep() from None
    except (msgspec.DecodeError, UnicodeError):
        return None
    return value if isinstance(value, (dict, list)) else None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(slots=True)
class Edit:
    """A span to replace in a value (``key``: in the member's key)."""

    trail: tuple[Step, ...]
    key: bool
    start: int
    end: int


class Embedded:
    """One JSON text: its decoded tree and the texts the scanners see."""

    __slots__ = ("path", "texts", "tree", "where")

    def __init__(self, path: str, tree: Any) -> None:
        self.path, self.tree = path, tree
        self.texts: list[str] = []
        # per text: (trail, what it is, where the value starts in it)
        self.where: list[tuple[tuple[Step, ...], int, int]] = []
        stack: list[tuple[tuple[Step, ...], Any]] = [((), tree)]
        while stack:   # (no recursion: the decoder allows deeper nesting than Python)
            trail, value = stack.pop()
            if isinstance(value, dict):
                for i, (k, v) in enumerate(value.items()):
                    step = (*trail, (i, k))
                    if isinstance(v, str) or _number(v):
                        text = v if isinstance(v, str) else _ENCODE.encode(v).decode()
                        self._add(f"{k}: {text}", step, _PAIR, len(k) + 2)
                    else:
                        self._add(k, step, _KEY, 0)
                        stack.append((step, v))
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, str):
                        self._add(v, (*trail, i), _VALUE, 0)
                    elif _number(v):
                        self._add(_ENCODE.encode(v).decode(), (*trail, i), _VALUE, 0)
                    elif isinstance(v, (dict, list)):
                        stack.append(((*trail, i), v))

    def _add(self, text: str, trail: tuple[Step, ...], what: int, offset: int) -> None:
        self.texts.append(text)
        self.where.append((trail, what, offset))

    def edits(self, index: int, start: int, end: int) -> list[Edit]:
        """The key and value spans a finding in text ``index`` covers."""
        trail, what, offset = self.where[index]
        if what == _VALUE:
            return [Edit(trail, False, start, end)]
        if what == _KEY:
            return [Edit(trail, True, start, end)]
        out = []
        if start < offset - 2:
            out.append(Edit(trail, True, start, min(end, offset - 2)))
        if end > offset:
            out.append(Edit(trail, False, max(start, offset) - offset, end - offset))
        return out

    def name(self, edit: Edit, keyed: set[tuple[Step, ...]]) -> str:
        """The path of an edit; a member whose key is in ``keyed`` (has a
        finding) is named by its position."""
        out = [self.path]
        for n, step in enumerate(edit.trail):
            if isinstance(step, int):
                out.append(f"[{step}]")
            elif edit.key and n == len(edit.trail) - 1:
                out.append(f".<key {step[0]}>")
            elif edit.trail[:n + 1] in keyed:
                out.append(f".<member {step[0]}>")
            else:
                out.append(key_step(step[1]))
        return "".join(out)

    def encode(self, edits: Sequence[tuple[Edit, str, str]]) -> str:
        """The text with ``edits`` (edit, kind, action) applied to the tree."""
        values: dict[tuple[Step, ...], list[tuple[Edit, str, str]]] = {}
        keys: dict[tuple[Step, ...], list[tuple[Edit, str, str]]] = {}
        for e in edits:
            (keys if e[0].key else values).setdefault(e[0].trail, []).append(e)
        for trail, spans in values.items():
            parent, step = _parent(self.tree, trail)
            slot = step if isinstance(step, int) else step[1]
            old = parent[slot]
            text = old if isinstance(old, str) else _ENCODE.encode(old).decode()
            parent[slot] = apply_spans(text, spans)
        # deepest first: a renamed key would not find what is under it
        for trail, spans in sorted(keys.items(), key=lambda kv: -len(kv[0])):
            parent, step = _parent(self.tree, trail)
            assert isinstance(step, tuple) and isinstance(parent, dict)
            new = apply_spans(step[1], spans)
            taken = set(parent) - {step[1]}
            unique, n = new, 1
            while unique in taken:   # two masked keys stay two keys
                n += 1
                unique = f"{new}#{n}"
            renamed = {unique if k == step[1] else k: v for k, v in parent.items()}
            parent.clear()
            parent.update(renamed)
        return _ENCODE.encode(self.tree).decode()


def _parent(tree: Any, trail: tuple[Step, ...]) -> tuple[Any, Step]:
    node = tree
    for step in trail[:-1]:
        node = node[step if isinstance(step, int) else step[1]]
    return node, trail[-1]


def token(kind: str, action: str, match: str) -> str:
    """What a masked (``[REDACTED:kind]``) or hashed span becomes."""
    if action == "hash":
        return f"sha256:{hashlib.sha256(match.encode()).hexdigest()}"
    return f"[REDACTED:{kind}]"


def apply_spans(text: str, spans: Sequence[tuple[Any, str, str]]) -> str:
    """``text`` with each (span with ``start``/``end``, kind, action) replaced,
    from the last to the first."""
    for span, kind, action in sorted(spans, key=lambda s: -s[0].start):
        text = text[:span.start] + token(kind, action, text[span.start:span.end]) \
            + text[span.end:]
    return text


class Opened:
    """The JSON texts of a payload the scanners see opened, by path."""

    def __init__(self) -> None:
        self.by_path: dict[str, Embedded] = {}
        self.deep: set[str] = set()     # JSON-looking texts too deep to decode
        self.long: dict[str, str] = {}  # texts over MAX_TEXT, scanned as text

    def view(self, value: Any, path: str = "$") -> Any:
        """``value`` with each JSON text replaced by the list of its texts
        (copied only along the paths that change)."""
        if isinstance(value, str):
            return self._text(value, path) if opens_json(value) else value
        if isinstance(value, dict):
            out = value
            for k, v in value.items():
                if isinstance(v, str):
                    if not opens_json(v):
                        continue
                    new = self._text(v, path + key_step(k))
                else:
                    if not isinstance(v, (dict, list, tuple)):
                        continue
                    new = self.view(v, path + key_step(k))
                if new is not v:
                    out = dict(out) if out is value else out
                    out[k] = new
            return out
        if isinstance(value, (list, tuple)):
            items = value
            for i, v in enumerate(value):
                if isinstance(v, str):
                    if not opens_json(v):
                        continue
                    new = self._text(v, f"{path}[{i}]")
                elif isinstance(v, (dict, list, tuple)):
                    new = self.view(v, f"{path}[{i}]")
                else:
                    continue
                if new is not v:
                    items = list(items) if items is value else items
                    items[i] = new
            return items
        return value

    def _text(self, text: str, path: str) -> Any:
        if len(text) > MAX_TEXT:
            self.long[path] = text
            return text
        try:
            tree = decode(text)
        except TooDeep:
            self.deep.add(path)
            return text
        if tree is None:
            return text
        emb = Embedded(path, tree)
        self.by_path[path] = emb
        return emb.texts

    def reopen(self, scanners: Sequence[Any], findings: list[Finding]) -> list[Finding]:
        """Findings in a long JSON text, found scanning it as text, made
        again on it opened (its text is never cut)."""
        hit = {f.path for f in findings if f.path in self.long}
        if not hit:
            return findings
        out = [f for f in findings if f.path not in hit]
        for path in hit:
            text = self.long.pop(path)
            try:
                tree = decode(text)
            except TooDeep:
                self.deep.add(path)
                tree = None
            if tree is None:
                out.extend(f for f in findings if f.path == path)
                continue
            emb = Embedded(path, tree)
            self.by_path[path] = emb
            out.extend(Finding(f.kind, f"{path}{f.path[1:]}", f.start, f.end)
                       for s in scanners for f in s.scan(emb.texts))
        return out

    def locate(self, f: Finding) -> tuple[Embedded, int] | None:
        """The JSON text a finding is in and the index of its text there."""
        if not self.by_path:
            return None
        cut = f.path.rfind("[")
        emb = self.by_path.get(f.path[:cut]) if cut > 0 else None
        if emb is None or not f.path.endswith("]"):
            return None
        index = f.path[cut + 1:-1]
        return (emb, int(index)) if index.isdigit() else None


__all__ = ["MAX_TEXT", "Edit", "Embedded", "Opened", "TooDeep", "apply_spans", "decode",
           "opens_json", "token"]
