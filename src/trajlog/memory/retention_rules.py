"""Store-level retention rules: how long each kind of event payload is kept,
for every session of a store, and when session-scope memory goes.

A session's own ``retention/policy`` (:mod:`.retention`) still holds; the
store's rules apply beside it, whichever removes first.  The kinds (``KINDS``),
each type's the registry's ``retention`` column (:mod:`trajlog.event_types`):
``messages`` (user and assistant messages), ``tool_calls``, ``tool_outputs``
(results, cancels, a subagent's report), ``summaries`` (compactions) and
``other`` (every other type).  Structural markers -- turns,
steps, policies, ``session/closed`` (the registry's ``retention`` column) --
are never a rule's: they keep their payloads, so an expired log still
balances.  Each kind has a :class:`Rule`: kept (the default), a TTL, until
the session closes, or both (whichever comes first).  ``session_memory``:
``"until_closed"`` revokes a session-scope memory item once its session
closes (an item promoted to a wider scope is a new item and stays).

The rules also say how the optional background sweeper runs
(:mod:`trajlog.api.sweeper`): ``sweep_seconds`` between passes (None: no
sweeper) and ``per_pass``, the most events a pass reads and erases.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import RetentionRulesError
from ..event_types import RETENTION_KEEPS, RETENTION_KIND_PREFIXES, RETENTION_KINDS

DAY_MS = 86_400_000
#: the kinds a rule is given for (each type's is the registry's ``retention`` column)
KINDS = ("messages", "tool_calls", "tool_outputs", "summaries", "other")
SESSION_MEMORY = ("kept", "until_closed")
_SPAN = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY_MS}


@dataclass(frozen=True, slots=True)
class Rule:
    """What happens to one kind's payloads: ``ttl_ms`` -- erased once older
    than this; ``until_closed`` -- erased once the session is closed; neither:
    kept."""

    ttl_ms: int | None = None
    until_closed: bool = False

    @property
    def kept(self) -> bool:
        return self.ttl_ms is None and not self.until_closed

    def describe(self) -> str:
        parts = ([f"ttl {self.ttl_ms} ms"] if self.ttl_ms is not None else []) + (
            ["until session/closed"] if self.until_closed else [])
        return " or ".join(parts) or "kept"


KEEP = Rule()


def parse_rule(kind: str, value: Any) -> Rule:
    """A :class:`Rule` from a rule, ``None``/``"kept"``, ``"until_closed"``,
    an int (ms), a span (``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``,
    ``"500ms"``) or a mapping ``{"ttl_ms": n, "until_closed": bool}``."""
    if isinstance(value, Rule):
        rule = value
    elif value is None or value == "kept":
        rule = KEEP
    elif value == "until_closed":
        rule = Rule(until_closed=True)
    elif isinstance(value, str):
        m = _SPAN.match(value.strip())
        if m is None:
            raise RetentionRulesError(kind, f"{value!r} is not a span (7d, 12h, 30m, 90s, "
                                      "500ms), 'kept' or 'until_closed'")
        rule = Rule(ttl_ms=int(m.group(1)) * _UNIT_MS[m.group(2)])
    elif type(value) is int:
        rule = Rule(ttl_ms=value)
    elif isinstance(value, Mapping):
        extra = set(value) - {"ttl_ms", "until_closed"}
        if extra:
            raise RetentionRulesError(kind, f"unknown fields {sorted(extra)}")
        rule = Rule(ttl_ms=value.get("ttl_ms"), until_closed=value.get("until_closed", False))
    else:
        raise RetentionRulesError(kind, f"a rule is a Rule, a span, an int of ms, 'kept' or "
                                  f"'until_closed', not {type(value).__name__}")
    if rule.ttl_ms is not None and (type(rule.ttl_ms) is not int or rule.ttl_ms < 0):
        raise RetentionRulesError(kind, f"ttl_ms must be a non-negative int, not "
                                  f"{rule.ttl_ms!r}")
    if not isinstance(rule.until_closed, bool):
        raise RetentionRulesError(kind, f"until_closed must be bool, not "
                                  f"{rule.until_closed!r}")
    return rule


@dataclass(frozen=True, slots=True)
class RetentionRules:
    """A store's retention rules (see the module docstring).  Build it with
    :meth:`of` from plain values; a bad value is a
    :class:`~trajlog.errors.RetentionRulesError` naming its rule."""

    messages: Rule = KEEP
    tool_calls: Rule = KEEP
    tool_outputs: Rule = KEEP
    summaries: Rule = KEEP
    other: Rule = KEEP
    session_memory: str = "kept"
    sweep_seconds: float | None = None
    per_pass: int = 1000

    def __post_init__(self) -> None:
        for kind in KINDS:
            value = getattr(self, kind)
            if not isinstance(value, Rule):
                raise RetentionRulesError(kind, f"a rule is a Rule (use RetentionRules.of for "
                                          f"spans), not {type(value).__name__}")
            parse_rule(kind, value)
        if self.session_memory not in SESSION_MEMORY:
            raise RetentionRulesError("session_memory", f"one of {SESSION_MEMORY}, not "
                                      f"{self.session_memory!r}")
        s = self.sweep_seconds
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float))
                              or not 0 < s < 2**31):
            raise RetentionRulesError("sweep_seconds", f"a positive number of seconds or "
                                      f"None (no sweeper), not {s!r}")
        if type(self.per_pass) is not int or not 1 <= self.per_pass <= 1_000_000:
            raise RetentionRulesError("per_pass", f"an int in 1..1000000, not "
                                      f"{self.per_pass!r}")

    @classmethod
    def of(cls, rules: Mapping[str, Any] | None = None, **more: Any) -> RetentionRules:
        """Rules from plain values: ``RetentionRules.of(tool_outputs="7d",
        messages="90d", session_memory="until_closed", sweep_seconds=60)``."""
        given = {**(rules or {}), **more}
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise RetentionRulesError(unknown[0], f"no such rule (the rules: {sorted(names)})")
        args: dict[str, Any] = {k: (parse_rule(k, v) if k in KINDS else v)
                                for k, v in given.items()}
        return cls(**args)

    def rule_for(self, type_: str) -> tuple[str, Rule] | None:
        """The kind and rule an event type is under (None: a structural marker,
        always kept)."""
        if type_ in RETENTION_KEEPS:
            return None
        kind = RETENTION_KINDS.get(type_)
        if kind is None:
            kind = next((k for p, k in RETENTION_KIND_PREFIXES.items() if type_.startswith(p)),
                        "other")
        return kind, getattr(self, kind)

    @property
    def active(self) -> bool:
        """Does any rule remove anything?"""
        return self.session_memory != "kept" or any(
            not getattr(self, k).kept for k in KINDS)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (:meth:`of` reads them back)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = ({"ttl_ms": v.ttl_ms, "until_closed": v.until_closed}
                           if isinstance(v, Rule) else v)
        return out


__all__ = ["DAY_MS", "KEEP", "KINDS", "SESSION_MEMORY", "RetentionRules", "Rule", "parse_rule"]
