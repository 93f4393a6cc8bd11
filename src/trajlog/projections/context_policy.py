"""The context policy: the versioned, recorded rules a context build runs
under (:mod:`trajlog.projections.context` reads it; a ``context/injection``
records it as :meth:`ContextPolicy.config`, and a replay rebuilds it with
:meth:`ContextPolicy.from_config`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..errors import ArgumentTypeError, InvalidArgumentError
from ..events import ENVELOPE_FIELDS, check_text

#: what :meth:`ContextPolicy.strict` requires of evidence
STRICT_REQUIRE = ("workspace_revision", "source", "data_class")
#: the memory layers a build reads, in order (projections/context_memory.py)
MEMORY_LAYERS = ("constitution", "tenant_policy", "preferences", "retrieved")


@dataclass(frozen=True, slots=True)
class ContextPolicy:
    """A versioned context policy (the names follow the seed article's
    ``context_policy`` example).  Budgets are in characters.  The default
    admits a tool result or file snapshot that states no provenance (an
    ordinary host's); :meth:`strict` requires ``workspace_revision``,
    ``source`` and ``data_class`` on them."""

    name: str = "coding-default"
    version: int = 4   # 4: require nothing by default (3 required provenance)
    include: tuple[str, ...] = ("task.contract", "human.decision", "tool.result.active",
                                "file.snapshot.current", "model.plan.latest",
                                "conversation.recent")
    exclude: tuple[str, ...] = ("event.status.rejected", "event.status.expired",
                                "event.status.superseded", "event.status.audit-only",
                                "branch.other", "data_class.restricted", "source.untrusted",
                                "permission.expired")
    max_events: int = 60
    max_tool_output_chars: int = 12_000
    max_file_snippets: int = 16
    recent_messages: int = 12
    require: tuple[str, ...] = ()
    require_for: tuple[str, ...] = ("tool.result.active", "file.snapshot.current")
    budget_chars: int = 48_000
    reserved_chars: int = 8_000
    layer_shares: tuple[tuple[str, float], ...] = (("evidence", 0.6), ("plan", 0.1),
                                                   ("conversation", 0.3))
    #: memory layers (``build_context(memory=...)``, projections/context_memory.py):
    #: each layer's share of ``budget_chars``; the policy layers' shares are
    #: reserved from session noise; at most ``memory_retrieve`` retrieved items
    memory_shares: tuple[tuple[str, float], ...] = (("constitution", 0.08),
                                                    ("tenant_policy", 0.08),
                                                    ("preferences", 0.04),
                                                    ("retrieved", 0.12))
    memory_retrieve: int = 8

    def __post_init__(self) -> None:
        # Every field is checked here, where the caller made the policy: a
        # field a build only reads later (or a replay records) must not fail
        # there with an untyped error, or be stored as something else.
        self._check_names()
        for field_name in ("version", "max_events", "max_tool_output_chars",
                           "max_file_snippets", "recent_messages", "budget_chars",
                           "reserved_chars", "memory_retrieve"):
            value = getattr(self, field_name)
            # budgets are counts: NaN, infinities, floats and bools would make
            # every comparison false and the budget no budget
            if type(value) is not int or value < 0:
                raise InvalidArgumentError(f"{field_name} must be a non-negative int, not "
                                           f"{value!r}")
        for layer, share in self.layer_shares:
            if type(share) not in (int, float) or not 0.0 <= share <= 1.0:
                raise InvalidArgumentError(f"layer share {layer!r}: {share!r} is not a "
                                           "fraction between 0 and 1")
        if sum(share for _, share in self.layer_shares) > 1.0 + 1e-9:
            raise InvalidArgumentError("the layer shares add up to more than the budget")
        for layer, share in self.memory_shares:
            if layer not in MEMORY_LAYERS:
                raise InvalidArgumentError(f"memory_shares names {layer!r}; the memory layers "
                                           f"are {', '.join(MEMORY_LAYERS)}")
            if type(share) not in (int, float) or not 0.0 <= share <= 1.0:
                raise InvalidArgumentError(f"memory share {layer!r}: {share!r} is not a "
                                           "fraction between 0 and 1")
        if sum(share for _, share in self.memory_shares) > 1.0 + 1e-9:
            raise InvalidArgumentError("the memory shares add up to more than the budget")
        if not self.name or self.version < 1:
            raise InvalidArgumentError("a context policy needs a name and a version >= 1")
        if self.reserved_chars > self.budget_chars or self.budget_chars <= 0:
            raise InvalidArgumentError("reserved_chars must be within budget_chars")
        unknown = [n for n in self.require if n not in ENVELOPE_FIELDS]
        if unknown:
            raise InvalidArgumentError(
                f"require names unknown envelope field(s) {', '.join(map(repr, unknown))}; "
                f"one of {', '.join(ENVELOPE_FIELDS)}")

    @classmethod
    def strict(cls, **changes: Any) -> ContextPolicy:
        """The policy ``coding-strict``: evidence (tool results, file
        snapshots) enters only with its workspace revision, source and data
        class stated; ``changes`` override any other field."""
        fixed: dict[str, Any] = {"name": "coding-strict", "version": 1,
                                 "require": STRICT_REQUIRE}
        return cls(**{**fixed, **changes})

    def _check_names(self) -> None:
        """The text fields: str, storable (no lone surrogate); the name lists
        tuples of them (a list is taken as one); ``layer_shares`` (name,
        share) pairs."""
        if not isinstance(self.name, str):
            raise ArgumentTypeError(f"a context policy's name must be a str, not "
                                    f"{type(self.name).__name__}")
        check_text(self.name, "name")
        for field_name in ("include", "exclude", "require", "require_for"):
            value = getattr(self, field_name)
            if not isinstance(value, (tuple, list)):
                raise ArgumentTypeError(f"{field_name} must be a tuple of str, not "
                                        f"{type(value).__name__}")
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    raise ArgumentTypeError(f"{field_name}[{i}] must be a str, not "
                                            f"{type(item).__name__}")
                check_text(item, f"{field_name}[{i}]")
            object.__setattr__(self, field_name, tuple(value))
        for field_name in ("layer_shares", "memory_shares"):
            shares = getattr(self, field_name)
            if not isinstance(shares, (tuple, list)):
                raise ArgumentTypeError(f"{field_name} must be a tuple of (layer, share) "
                                        f"pairs, not {type(shares).__name__}")
            pairs = []
            for i, pair in enumerate(shares):
                if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    raise ArgumentTypeError(f"{field_name}[{i}] must be a (layer, share) "
                                            f"pair, not {pair!r}")
                if not isinstance(pair[0], str):
                    raise ArgumentTypeError(f"{field_name}[{i}]: the layer must be a str, "
                                            f"not {type(pair[0]).__name__}")
                check_text(pair[0], f"{field_name}[{i}]")
                pairs.append((pair[0], pair[1]))
            object.__setattr__(self, field_name, tuple(pairs))

    def config(self) -> dict[str, Any]:
        """Every field as JSON values: what a ``context/injection`` records so
        that a replay can rebuild the policy the build ran under."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ContextPolicy:
        """The policy :meth:`config` described (lists back to tuples); a field
        this version does not know raises :class:`InvalidArgumentError`."""
        if not isinstance(config, dict):
            raise ArgumentTypeError(f"a policy config is a dict, not {type(config).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise InvalidArgumentError(f"policy config names unknown field(s) {unknown}")
        return cls(**{k: _tupled(v) for k, v in config.items()})


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, tuple) else value


def _tupled(value: Any) -> Any:
    return tuple(_tupled(v) for v in value) if isinstance(value, list) else value


__all__ = ["MEMORY_LAYERS", "STRICT_REQUIRE", "ContextPolicy"]
