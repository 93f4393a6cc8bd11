"""The scanners redaction runs on every payload: :class:`Scanner` (the
protocol), :class:`PatternScanner` (rules of a regular expression, an
optional check -- Luhn, entropy -- a cheap ``trigger`` and a ``min_len``) and
:data:`BUILTIN`, the secret and PII rules (see :mod:`trajlog.redaction`).
A finding names the string by its JSON path (:func:`strings`) and the span in
it; what becomes of it is the policy's business, not the scanner's."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

_JSON = msgspec.json.Encoder(order="sorted")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Finding:
    """One match: its ``kind``, the ``path`` of the string holding it and
    the span ``start:end`` in that string."""

    kind: str
    path: str
    start: int
    end: int


class Scanner(Protocol):
    """Anything that finds sensitive spans in a string or a JSON value."""

    def scan(self, value: Any) -> list[Finding]:
        """The findings in ``value`` (paths as :func:`strings` names them)."""
        ...


def strings(value: Any, path: str = "$") -> Iterator[tuple[str, str]]:
    """(path, string) of every string value inside ``value``, depth first."""
    for trail, text in _leaves(value, ()):
        yield path + _path(trail)[1:], text


@dataclass(frozen=True, slots=True)
class Rule:
    """A pattern for one kind; ``check`` vets a match's text (the value
    group ``v`` if the pattern has one, else the whole match)."""

    kind: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None
    #: a cheap necessary condition (substring tests): False means the
    #: pattern cannot match, so it is not run (None: always run)
    trigger: Callable[[str], bool] | None = None
    #: the shortest text the pattern can match (shorter strings are skipped)
    min_len: int = 0


def _entropy(text: str) -> float:
    counts = {c: text.count(c) for c in set(text)}
    n = len(text)
    return -sum(k / n * math.log2(k / n) for k in counts.values())


def _luhn(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _phone(text: str) -> bool:
    return 9 <= sum(c.isdigit() for c in text) <= 15


class PatternScanner:
    """A scanner made of :class:`Rule` patterns; overlapping matches keep the
    earlier rule's (rules are tried in order).  Per string, a rule runs only
    if its ``trigger`` holds and the string is at least its ``min_len``
    long; a string's path is only spelled out for a finding."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self._min = min((r.min_len for r in self.rules), default=0)

    def scan(self, value: Any) -> list[Finding]:
        """Every rule over every string of ``value``."""
        out: list[Finding] = []
        shortest = self._min
        for trail, text in _leaves(value, ()):
            if len(text) < shortest:
                continue
            taken: list[tuple[int, int]] = []
            path: str | None = None
            for rule in self.rules:
                if len(text) < rule.min_len or (rule.trigger is not None
                                                 and not rule.trigger(text)):
                    continue
                for m in rule.pattern.finditer(text):
                    group = "v" if "v" in rule.pattern.groupindex and m.group("v") else 0
                    start, end = m.span(group)
                    if rule.check is not None and not rule.check(m.group(group)):
                        continue
                    if any(s < end and start < e for s, e in taken):
                        continue
                    taken.append((start, end))
                    path = _path(trail) if path is None else path
                    out.append(Finding(rule.kind, path, start, end))
        return out


def _leaves(value: Any, trail: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...],
                                                                       str]]:
    """(keys and indices, string) of every string in ``value``: :func:`strings`
    without building a path per string."""
    if isinstance(value, str):
        yield trail, value
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str):
                yield (*trail, k), v
            elif isinstance(v, (dict, list, tuple)):
                yield from _leaves(v, (*trail, k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, str):
                yield (*trail, i), v
            elif isinstance(v, (dict, list, tuple)):
                yield from _leaves(v, (*trail, i))


def key_step(key: str) -> str:
    """The path step of a dict key: ``.key`` for an identifier, else ``["key"]``."""
    return f".{key}" if _IDENT.fullmatch(key) else f"[{_JSON.encode(key).decode()}]"


def _path(trail: Sequence[str | int]) -> str:
    """The path :func:`strings` names for ``trail``."""
    return "$" + "".join(f"[{k}]" if isinstance(k, int) else key_step(k) for k in trail)


def _has(*needles: str) -> Callable[[str], bool]:
    return lambda text: any(n in text for n in needles)


_DIGITS3 = re.compile(r"\d[ -]?\d[ -]?\d")   # card numbers and phone numbers need this
_CREDENTIAL_WORDS = ("pass", "pwd", "secret", "key", "token")   # in every _SECRET_WORDS
_CREDENTIAL_TAIL = re.compile(r"[\w-]*[\"']?\s*[:=]")   # the rest of the word, then : or =


def _credential_trigger(text: str) -> bool:
    """A secret word followed by ``:`` or ``=`` (what the rule needs before
    its costly case-insensitive alternation runs at every position)."""
    if "=" not in text and ":" not in text:
        return False
    low = text.lower()
    for word in _CREDENTIAL_WORDS:
        i = low.find(word)
        while i >= 0:
            if _CREDENTIAL_TAIL.match(low, i + len(word)):
                return True
            i = low.find(word, i + 1)
    return False


_SECRET_WORDS = (r"password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?token|"
                 r"auth[_-]?token|client[_-]?secret|private[_-]?key")
SECRET_RULES = (
    Rule("private_key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
                                   r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.*\Z)",
                                   re.DOTALL), trigger=_has("-----BEGIN "), min_len=27),
    Rule("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
         trigger=_has("AKIA", "ASIA", "ABIA", "ACCA"), min_len=20),
    Rule("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|"
                                    r"github_pat_[A-Za-z0-9_]{22,255})\b"),
         trigger=_has("gh", "github_pat_"), min_len=33),
    Rule("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
         trigger=_has("sk-"), min_len=23),
    Rule("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), trigger=_has("xox"),
         min_len=15),
    Rule("bearer_token", re.compile(r"\b[Bb]earer\s+(?P<v>[A-Za-z0-9._~+/=-]{16,})"),
         trigger=_has("earer"), min_len=23),
    # a credential assigned in text or config; low-entropy values (a
    # placeholder, "changeme", "${PASSWORD}") are left alone
    Rule("credential", re.compile(rf"(?i)\b(?:{_SECRET_WORDS})\b[\"']?\s*[:=]\s*[\"']?"
                                  r"(?P<v>[^\s\"',;&$<{%*][^\s\"',;&]{7,})"),
         lambda v: _entropy(v) >= 3.0, trigger=_credential_trigger, min_len=12),
)
PII_RULES = (
    Rule("email", re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
                             r"\.[A-Za-z]{2,}\b"), trigger=_has("@"), min_len=6),
    # delimited by non-word characters: a run of digits inside a hex digest or
    # an id (a run's integrity hash, a uuid) is not a card number
    Rule("credit_card", re.compile(r"(?<![\w-])(?:\d[ -]?){12,18}\d(?![\w-])"), _luhn,
         trigger=lambda t: _DIGITS3.search(t) is not None, min_len=13),
    # international (+cc ...), (area) nnn-nnnn or nnn-nnn-nnnn; never a piece
    # of a longer run of digit groups (a card number, an id)
    Rule("phone", re.compile(r"(?<![\w+-])(?<!\d )(?:\+\d{1,3}[ -]?(?:\(\d{1,4}\)|\d{1,4})"
                             r"[ -]?\d{3,4}[ -]?\d{3,4}|\(\d{3}\) ?\d{3}[ -]\d{4}|"
                             r"\d{3}-\d{3}-\d{4})(?![\w-]| \d)"), _phone,
         trigger=lambda t: _DIGITS3.search(t) is not None, min_len=10),
)
SECRET_KINDS = frozenset(r.kind for r in SECRET_RULES)
PII_KINDS = frozenset(r.kind for r in PII_RULES)
#: The built-in scanner: secrets first (a key inside a URL is a key, not an
#: e-mail address), then PII.
BUILTIN = PatternScanner(SECRET_RULES + PII_RULES)


__all__ = ["BUILTIN", "PII_KINDS", "PII_RULES", "SECRET_KINDS", "SECRET_RULES", "Finding",
           "PatternScanner", "Rule", "Scanner", "key_step", "strings"]
