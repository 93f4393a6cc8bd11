"""JSON held in a string -- a tool call's ``arguments`` as OpenAI-style hosts
write them, a tool's JSON output -- scanned value by value and encoded again.

A span of the text itself must never be cut: a match can swallow an escape
or a quote (``password=x\\"y`` ends at the quote, after the backslash) and the
masked text is no longer JSON.  So a string that opens with ``{`` or ``[``
(after white space) and decodes as an object or an array is shown to the
scanners as its texts, one per value, joined by quotes (which no built-in
rule matches across): a string; a number's digits (a card number may be a
number); a key alone when its value is an object or an array, and
``key: value`` when it is a string or a number (so a ``password`` key names
its value as it does in the text).  A finding is mapped back to the value or
the key it covers, the edited values set in the decoded tree, and the tree
encoded again: valid JSON of the same structure (a masked number becomes a
string, a masked key stays a distinct key).  Paths name the value inside:
``$.tool_calls[0].arguments.env.KEY``; a member whose key holds a finding is
named by its position, ``.<key 2>`` (the key) and ``.<member 2>`` (what is
under it), never by its text.

A text with no finding is stored exactly as written.  A text without a
backslash is scanned as text first, and opened only if that finds something
(its values are pieces of the text: the built-in rules find nothing in them
they do not find in it); so is a text longer than :data:`MAX_TEXT` (where an
escape, ``\\u0040``, can hide an address).  A text that is no JSON is
scanned as text; in one too deep to decode, a finding to mask is refused
(:class:`~trajlog.errors.UnredactableValueError`).
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .scanners import Finding, _path, key_step

#: the longest text opened before scanning (a longer one is opened only if
#: its text holds a finding)
MAX_TEXT = 1 << 20
_OPENERS = frozenset("{[")
_LEAD = re.compile(r"\s*[\[{]")
_ENCODE = msgspec.json.Encoder()   # (keeps the order of the keys)
SEP = '"'   # between the texts of a JSON text, as the scanners see them
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

    __slots__ = ("joined", "path", "starts", "texts", "tree", "where")

    def __init__(self, path: str, tree: Any) -> None:
        self.path, self.tree = path, tree
        self.texts: list[str] = []
        self.starts: list[int] = []   # where each text starts in ``joined``
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
        # one string for the scanners (one pass of each rule, not one per
        # value): the texts between quotes, which no built-in rule matches
        # across (a private key's block can: see Opened.place)
        self.joined = SEP.join(self.texts)
        at = 0
        for text in self.texts:
            self.starts.append(at)
            at += len(text) + 1

    def _add(self, text: str, trail: tuple[Step, ...], what: int, offset: int) -> None:
        self.texts.append(text)
        self.where.append((trail, what, offset))

    def text_at(self, start: int, end: int) -> tuple[int, int, int] | None:
        """The text a span of ``joined`` lies in and the span there (None:
        it crosses from one text into another)."""
        i = bisect_right(self.starts, start) - 1
        first = self.starts[i]
        if end > first + len(self.texts[i]):
            return None
        return i, start - first, end - first

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
        # JSON-looking texts scanned as text, opened only if that finds
        # something: those over MAX_TEXT, and those without an escape (their
        # values are pieces of the text, between quotes: no built-in rule
        # finds in them what it does not find in the text)
        self.deferred: list[tuple[tuple[str | int, ...], str]] = []

    def view(self, value: Any, trail: tuple[str | int, ...] = ()) -> Any:
        """``value`` with each JSON text replaced by its texts joined
        (copied only along the paths that change; a path is spelled out only
        for a JSON text).  On every payload: kept lean."""
        if isinstance(value, str):
            return self._text(value, trail) if opens_json(value) else value
        if isinstance(value, dict):
            out = value
            for k, v in value.items():
                t = type(v)
                if t is str or isinstance(v, str):
                    c = v[:1]
                    if c != "{" and c != "[" and not (c.isspace() and _LEAD.match(v)):
                        continue
                    new = self._text(v, (*trail, k))
                elif t is dict or t is list or isinstance(v, (dict, list, tuple)):
                    new = self.view(v, (*trail, k))
                else:
                    continue
                if new is not v:
                    out = dict(out) if out is value else out
                    out[k] = new
            return out
        if isinstance(value, (list, tuple)):
            items: Any = value
            for i, v in enumerate(value):
                t = type(v)
                if t is str or isinstance(v, str):
                    c = v[:1]
                    if c != "{" and c != "[" and not (c.isspace() and _LEAD.match(v)):
                        continue
                    new = self._text(v, (*trail, i))
                elif t is dict or t is list or isinstance(v, (dict, list, tuple)):
                    new = self.view(v, (*trail, i))
                else:
                    continue
                if new is not v:
                    items = list(items) if items is value else items
                    items[i] = new
            return items
        return value

    def _text(self, text: str, trail: tuple[str | int, ...]) -> Any:
        if len(text) > MAX_TEXT or "\\" not in text:
            self.deferred.append((trail, text))
            return text
        emb = self._open(text, _path(trail))
        return text if emb is None else emb.joined

    def _open(self, text: str, path: str) -> Embedded | None:
        try:
            tree = decode(text)
        except TooDeep:
            self.deep.add(path)
            return None
        if tree is None:
            return None
        emb = self.by_path[path] = Embedded(path, tree)
        return emb

    def place(self, scanners: Sequence[Any], findings: list[Finding]
              ) -> list[tuple[Finding, Embedded | None, int]]:
        """Each finding with the JSON text it is in and the index of its text
        there, its span made that text's (``None, -1``: an ordinary string).
        A deferred JSON text that holds a finding is opened and scanned again; one
        whose finding crosses from one of its texts into another (a private
        key's block left open) is scanned again text by text."""
        if self.deferred:   # (their paths spelled out only now)
            deferred = {_path(trail): text for trail, text in self.deferred}
            for path in {f.path for f in findings if f.path in deferred}:
                emb = self._open(deferred[path], path)
                if emb is not None:
                    findings = [f for f in findings if f.path != path] + [
                        Finding(f.kind, path, f.start, f.end)
                        for sc in scanners for f in sc.scan(emb.joined)]
        out: list[tuple[Finding, Embedded | None, int]] = []
        again: set[str] = set()
        for f in findings:
            emb = self.by_path.get(f.path) if self.by_path else None
            if emb is None:
                out.append((f, None, -1))
                continue
            at = emb.text_at(f.start, f.end)
            if at is None:
                again.add(f.path)
            elif f.path not in again:
                out.append((Finding(f.kind, f.path, at[1], at[2]), emb, at[0]))
        for path in again:
            emb = self.by_path[path]
            out = [o for o in out if o[1] is not emb]
            for i, text in enumerate(emb.texts):
                out.extend((Finding(f.kind, path, f.start, f.end), emb, i)
                           for sc in scanners for f in sc.scan(text))
        return out


__all__ = ["MAX_TEXT", "Edit", "Embedded", "Opened", "TooDeep", "apply_spans", "decode",
           "opens_json", "token"]
