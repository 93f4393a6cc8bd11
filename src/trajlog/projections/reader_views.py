"""Reader views: the same log, read by role and data class.

A view maps each event of a log to what one kind of reader may see of it --
and keeps its seq, type, time and envelope, so every view cites the same
event ids (``#seq``, ``[TOOL-12]``) as the unfiltered log.  Nothing is
silently left out: an event a view hides is still there, its payload
replaced by ``{"withheld": {"view", "reason"}}`` (plus the fields that pair
tool calls, and a ``content`` / ``output`` text saying so, so that the chat
and the history show the gap where it was).

* ``developer`` -- code and tool state; a ``restricted`` event is withheld
  (``data_class.restricted``) and secrets are masked (``[REDACTED:<kind>]``,
  the built-in scanners of :mod:`trajlog.redaction`: a log written without
  redaction is not shown raw).
* ``auditor`` -- the decisions, not the content: permission events
  (approvals, grants and their expiry, denials, policies), statuses, model
  policies and switches, runs and context builds in full; every other
  payload withheld (``auditor.content``) but its data class and source kept.
  A grant is annotated ``audit: {expires_at, expired}``; a
  ``context/injection`` ``audit: {target_model, data_classes,
  read_data_classes, memory_data_classes}`` -- the seqs it selected for its
  target model, by data class (``unclassified``: none stated); how many
  events of each class the build sends (selected, or cited by its summary;
  None for a build recorded before this count); and
  the memory items it showed, by sensitivity (``unrecorded``: an older
  build).
* ``external-model`` -- only what a model's allowed data classes admit (its
  ``model/policy``, below), secrets masked.

**Model data-class policy.**  A ``model/policy`` event ``{model,
allowed_data_classes, unclassified?}`` records which data classes a model
may receive (the latest for a model wins; ``unclassified``, default
``internal``, is the class an event without a ``data_class`` counts as).  A
model with no recorded policy may receive every class but ``restricted``
(what the default context policy sends).  It is in the log, so a replay sees
it: :func:`~trajlog.projections.context.build_context` with that
``target_model`` excludes what the model may not receive
(``data_class.not_allowed_for_model``) and masks secrets in what it sends
(as the external-model view shows them: :func:`mask_text`), and :meth:`trajlog.Session.switch_model`
refuses (:class:`~trajlog.errors.ModelDataClassError`, nothing written) to
switch to a model the context to be re-injected holds a class it may not
receive.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from ..errors import InvalidArgumentError, ModelDataClassError
from ..event_types import AUDITED, AUDITED_PREFIXES, GRANTS, KEEPS
from ..events import DATA_CLASSES, Event, now_ms
from ..redaction import RedactionPolicy, Redactor
from .evidence import expires_at
from .folds import FOLDS

VIEWS = ("developer", "auditor", "external-model")
MODEL_POLICY = "model/policy"
#: the build's exclusion reason (and the view's withheld reason)
NOT_ALLOWED = "data_class.not_allowed_for_model"
#: what a model with no recorded policy may receive
DEFAULT_ALLOWED = frozenset(c for c in DATA_CLASSES if c != "restricted")
#: the text field each reading shows, by type
_TEXT = {"user/message": "content", "assistant/message": "content", "tool/result": "output",
         "file/snapshot": "content", "subagent/result": "output", "subagent/output": "output"}
_MASK = Redactor(RedactionPolicy(default="mask"))


class _Log(Protocol):
    @property
    def id(self) -> str: ...

    def events(self, from_seq: int = 0, to_seq: int | None = None) -> Iterator[Event]: ...


@dataclass(frozen=True, slots=True)
class ModelPolicy:
    """The data classes one model may receive (a ``model/policy`` event, or
    the default: ``seq`` None)."""

    model: str
    allowed: frozenset[str] = DEFAULT_ALLOWED
    unclassified: str = "internal"
    seq: int | None = None

    def admits(self, ev: Event) -> bool:
        """Whether the model may receive ``ev`` (by its data class)."""
        return self.admits_class(ev.data_class)

    def admits_class(self, data_class: str | None) -> bool:
        """Whether the model may receive data of ``data_class`` (None:
        unclassified) -- an event's class or a memory item's sensitivity."""
        return (data_class or self.unclassified) in self.allowed


def _policy_of(ev: Event) -> ModelPolicy | None:
    """The policy a ``model/policy`` event states; one naming its model but
    malformed otherwise admits nothing (it denies, never widens); None
    without a model name."""
    d = ev.data if isinstance(ev.data, dict) else {}
    model, allowed = d.get("model"), d.get("allowed_data_classes")
    unclassified = d.get("unclassified", "internal")
    if not isinstance(model, str):
        return None
    if not isinstance(allowed, list) or unclassified not in DATA_CLASSES:
        return ModelPolicy(model, frozenset(), "internal", ev.seq)
    return ModelPolicy(model, frozenset(c for c in allowed if c in DATA_CLASSES),
                       unclassified, ev.seq)


def model_policy(events: Iterable[Event], model: str | None) -> ModelPolicy | None:
    """The latest recorded policy of ``model`` among ``events``: the default
    (nothing recorded) or None when ``model`` is None."""
    if model is None:
        return None
    found = ModelPolicy(model)
    for ev in events:
        if ev.type == MODEL_POLICY and (p := _policy_of(ev)) is not None and p.model == model:
            found = p
    return found


def recorded_policy(events: Iterable[Event], model: str | None) -> ModelPolicy | None:
    """The latest ``model/policy`` of ``model`` among ``events``, or None when
    none is recorded (what a build and a switch honour: a model without one
    is treated as before)."""
    found = model_policy(events, model)
    return None if found is None or found.seq is None else found


def model_exclusion(ev: Event, policy: ModelPolicy | None) -> str | None:
    """:data:`NOT_ALLOWED` when ``policy`` keeps ``ev`` from its model."""
    return None if policy is None or policy.admits(ev) else NOT_ALLOWED


def check_switch(events: list[Event], build: Any, new: str) -> None:
    """Refuse (:class:`ModelDataClassError`) to switch to ``new`` when a
    context build (a :class:`~trajlog.projections.context.ContextBuild`) --
    what the switch re-injects -- holds an event ``new`` may not receive:
    its selected events, those its summary read or cites and the memory
    items it showed (by their sensitivity)."""
    policy = recorded_policy(events, new)
    if policy is None:
        return
    read = set(getattr(build, "read", ())) | {it.seq for it in build.selected} | {
        x.seq for x in build.excluded if x.reason.startswith(_SUMMARY_READ)}
    refused: list[tuple[int | str, str]] = []
    refused += sorted((ev.seq, ev.data_class or "unclassified") for ev in events
                      if ev.seq in read and not policy.admits(ev))
    memory = getattr(build, "memory", None)
    refused += [(u.ref, u.item.sensitivity) for u in (memory.used if memory else ())
                if not policy.admits_class(u.item.sensitivity)]
    if refused:
        raise ModelDataClassError(new, refused, sorted(policy.allowed))


#: exclusions that still let an event feed the summary (it was admitted)
_SUMMARY_READ = ("budget.", "limit.", "not.included.", "model.plan.stale")


@dataclass(frozen=True, slots=True)
class ReaderView:
    """A reader's view: ``role`` (one of :data:`VIEWS`), the ``model`` an
    ``external-model`` view is for, the time (``now``, epoch ms) grants are
    checked against."""

    role: str
    model: str | None = None
    now: int | None = None

    def __post_init__(self) -> None:
        if self.role not in VIEWS:
            raise InvalidArgumentError(f"view must be one of {', '.join(VIEWS)}, not "
                                       f"{self.role!r}")
        if self.model is not None and (not isinstance(self.model, str) or not self.model):
            raise InvalidArgumentError(f"model must be a non-empty str, not {self.model!r}")


def as_view(view: ReaderView | str | None) -> ReaderView | None:
    """``view`` as a :class:`ReaderView` (a role name is one), or None."""
    if view is None or isinstance(view, ReaderView):
        return view
    if not isinstance(view, str):
        raise InvalidArgumentError(f"view must be one of {', '.join(VIEWS)} or a "
                                   f"ReaderView, not {type(view).__name__}")
    return ReaderView(view)


def for_session(view: ReaderView | str | None, session: _Log) -> ReaderView | None:
    """``view`` with its model named: an ``external-model`` view without one
    is for ``session``'s current model (its last ``model/switch`` or
    ``run/started``); none known: :class:`InvalidArgumentError`."""
    v = as_view(view)
    if v is None or v.role != "external-model" or v.model is not None:
        return v
    model = _default_model(session.events())
    if model is None:
        raise InvalidArgumentError(f"session {session.id} names no model: say which model "
                                   "the external-model view is for")
    return ReaderView(v.role, model, v.now)


def _withheld(ev: Event, role: str, reason: str) -> Event:
    d = ev.data if isinstance(ev.data, dict) else {}
    kept: dict[str, Any] = {}
    for name in KEEPS.get(ev.type, {}):
        value = d.get(name)
        if name == "tool_calls" and isinstance(value, list):
            value = [{k: c[k] for k in ("id", "name") if k in c}
                     for c in value if isinstance(c, dict)]
        if value is not None:
            kept[name] = value
    if ev.type in _TEXT:
        kept[_TEXT[ev.type]] = f"[withheld from the {role} view: {reason}]"
    kept["withheld"] = {"view": role, "reason": reason}
    return msgspec.structs.replace(ev, data=kept)


def _masked(ev: Event) -> Event:
    out = _MASK.redact(ev.type, ev.data, ev.data_class)
    if not out.findings:
        return ev
    return msgspec.structs.replace(ev, data=out.data, data_class=out.data_class)


def mask_text(text: str) -> str:
    """``text`` with the secrets the built-in scanners find masked
    (``[REDACTED:<kind>]``): what the external-model view shows, and what a
    build for a model with a recorded policy sends."""
    out = _MASK.redact("user/message", {"content": text}, None)
    return str(out.data["content"]) if out.findings else text


def _annotated(ev: Event, note: dict[str, Any]) -> Event:
    d = dict(ev.data) if isinstance(ev.data, dict) else {"value": ev.data}
    return msgspec.structs.replace(ev, data={**d, "audit": note})


def _default_model(events: Iterable[Event]) -> str | None:
    model = None
    for ev in events:
        d = ev.data if isinstance(ev.data, dict) else {}
        if ev.type == "model/switch" and isinstance(d.get("new"), str):
            model = d["new"]
        elif ev.type == "run/started" and isinstance(d.get("model"), str):
            model = d["model"]
    return model


def view_events(session: _Log, view: ReaderView | str, from_seq: int = 0,
                to_seq: int | None = None) -> Iterator[Event]:
    """``session``'s events ``from_seq..to_seq`` as ``view`` shows them: one
    per seq, none left out (module docstring).  An ``external-model`` view
    without a model is for the session's current one (its last
    ``model/switch`` or ``run/started``); none known: InvalidArgumentError."""
    v = for_session(view, session)
    if v is None:
        raise InvalidArgumentError("a view is needed: one of " + ", ".join(VIEWS))
    now = now_ms() if v.now is None else v.now
    policy = model_policy(session.events(), v.model) if v.role == "external-model" else None
    classes: dict[int, str] = {}   # seq -> data class, for the auditor's egress
    for ev in session.events():
        if v.role == "auditor" and ev.data_class is not None:
            classes[ev.seq] = ev.data_class
        if ev.seq < from_seq:
            continue
        if to_seq is not None and ev.seq > to_seq:
            break
        yield _one(ev, v.role, policy, classes, now)


def _one(ev: Event, role: str, policy: ModelPolicy | None, classes: Mapping[int, str],
         now: int) -> Event:
    if isinstance(ev.data, dict) and isinstance(ev.data.get("erased"), dict):
        return ev   # an erased event's tombstone already says so
    if role == "developer":
        if ev.data_class == "restricted":
            return _withheld(ev, role, "data_class.restricted")
        return _masked(ev)
    if role == "external-model":
        assert policy is not None
        return _masked(ev) if policy.admits(ev) else _withheld(ev, role, NOT_ALLOWED)
    if ev.type not in AUDITED and not ev.type.startswith(AUDITED_PREFIXES):
        # content: withheld, unless there is none (a turn's or step's mark)
        return _withheld(ev, role, "auditor.content") if ev.data else ev
    if ev.type in GRANTS:
        lapse = expires_at(ev)
        return _annotated(ev, {"expires_at": lapse,
                               "expired": lapse is not None and lapse <= now})
    if ev.type == "context/injection" and isinstance(ev.data, dict):
        sent: dict[str, list[int]] = {}
        for q in ev.data.get("selected") or ():
            if type(q) is int:
                sent.setdefault(classes.get(q, "unclassified"), []).append(q)
        memory: dict[str, list[str]] = {}
        for m in ev.data.get("memory") or ():
            if isinstance(m, dict):
                memory.setdefault(str(m.get("sensitivity", "unrecorded")), []).append(
                    f"MEM-{m.get('id')}@v{m.get('version')}")
        read = ev.data.get("read_data_classes")
        return _annotated(ev, {"target_model": ev.data.get("target_model"),
                               "data_classes": dict(sorted(sent.items())),
                               "read_data_classes": read if isinstance(read, dict) else None,
                               "memory_data_classes": dict(sorted(memory.items()))})
    return ev


def view_fold(session: _Log, name: str, view: ReaderView | str) -> Any:
    """The projection ``name`` (``chat``, ``model_history``, ``trajectory``,
    ... of :data:`trajlog.projections.FOLDS`) folded over ``view``'s events."""
    fold = FOLDS.get(name)
    if fold is None:
        raise InvalidArgumentError(f"no projection named {name!r}")
    state = fold.init()
    for ev in view_events(session, view):
        if fold.wants(ev.type):
            state = fold.step(state, ev)
    return fold.view(state)


__all__ = ["DEFAULT_ALLOWED", "MODEL_POLICY", "NOT_ALLOWED", "VIEWS", "ModelPolicy",
           "ReaderView", "as_view", "check_switch", "for_session", "mask_text",
           "model_exclusion", "model_policy", "recorded_policy", "view_events", "view_fold"]
