"""Replay a recorded run: rebuild the exact model input from the log, call a
model on it, and say what drifted and why (:func:`replay`).

What a run's model input is.  A run (``Session.run``) answers each model
call with an ``assistant/message`` that follows a ``context/injection`` (the
record :func:`~trajlog.projections.context.build_context` appends).  The input of that call is
rebuilt from the log alone:

* the **context**: the builder is run again over the events before the
  injection, under the policy the injection recorded (``policy_config``),
  for the revision, branch, target model and time it recorded, appending nothing
  (``record=False``).  The SHA-256 of the rebuilt messages must equal the
  recorded ``messages_sha256`` -- then the input is *exact*; otherwise the
  log under the run changed (an erased event, a damaged or rewritten log)
  and the replay says so rather than pass a different input off as the old;
* the **request**: system prompt, tools and parameters of the latest
  ``request/header`` before the injection;
* the **model** and its parameters from ``run/started``, the model replaced
  by any ``model/switch`` of the run before the call;
* the **pinned artifacts** (``run/started`` ``artifacts``: name -> id).

What drifts, and its cause.  Each call yields up to three comparisons:

* ``output`` -- the model's answer to the exact recorded input against the
  recorded answer (content and tool calls; tool-call ids and usage are not
  compared: they are not the model's decision).  Cause ``model``: the input
  was the same, so the model (or its sampling) is what changed;
* ``context`` -- the context the policy given now (default: the recorded
  one) builds at the same point against the recorded one: seqs added and
  removed, with the reason the other build excluded each.  Cause ``policy``
  (the policy's configuration differs: the fields are named), ``builder``
  (same policy, same events, different choice: the builder's code changed;
  see :data:`~trajlog.projections.context.BUILDER_VERSION`) or ``log``;
* ``artifacts`` -- pinned artifact ids the caller says are current now
  (``artifacts=``) that differ from the pinned ones (cause ``artifact``:
  e.g. a retrieval index rebuilt);
* ``input`` -- the rebuilt input is not the recorded one: cause ``log`` (an
  event before the call was erased since) or ``builder`` (the same intact
  events build another context: the builder's code changed).

When the context or the artifacts drifted, the model is also called on the
input as it would be built now, and ``output_now`` says how its answer
differs from the recorded one: the end-to-end effect of the change.

A call with no recorded answer to compare with -- the run ended or built
its context again before the answer was recorded, or the answer was erased
since -- is *unverifiable*: it is listed in ``unverifiable`` and the result
is not ``same``, whatever the model answers now.

A replay reads; it never appends to the session (the builder runs with
``record=False``), so replaying a run twice gives the same result.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from ..errors import ArgumentTypeError, InvalidArgumentError, ReplayError
from ..events import Event, SessionHeader
from . import replay_causes as rc
from .context import BUILDER_VERSION, ContextBuild, ContextPolicy, build_context, messages_digest
from .envelopes import FINALIZED, STARTED, SWITCH, is_erased
from .replay_causes import NEW_CAUSES

INJECTION, ANSWER, HEADER = "context/injection", "assistant/message", "request/header"
CAUSES = ("model", "policy", "builder", "log", "artifact", *NEW_CAUSES)


class _Log(Protocol):
    @property
    def id(self) -> str: ...

    header: SessionHeader

    def events(self, from_seq: int = 0, to_seq: int | None = None) -> Any: ...

    def append(self, type: str, data: Any = None, *, source: str | None = None) -> Event: ...


class ModelInput(msgspec.Struct, frozen=True):
    """What the model was given for one call of a run, rebuilt from the log."""

    run_id: str
    #: 0 for the run's first model call, 1 for the next, ...
    call: int
    #: the logical model (``run/started``, or the last ``model/switch`` before)
    model: str | None
    #: the model's parameters recorded in ``run/started``
    params: dict[str, Any]
    #: from the latest ``request/header`` before the call (None: no header)
    system_prompt: Any
    tools: list[Any]
    parameters: dict[str, Any]
    #: the context messages (system summary first), as the builder renders them
    messages: list[dict[str, Any]]
    #: pinned artifact ids (name -> id)
    artifacts: dict[str, str]
    injection_seq: int


class Drift(msgspec.Struct, frozen=True):
    """One difference a replay found: ``kind`` (output, output_now, context,
    artifacts, input), ``cause`` (one of :data:`CAUSES`), the call it is in,
    and what it is in words."""

    kind: str
    cause: str
    call: int
    detail: str


class ContextDiff(msgspec.Struct, frozen=True):
    """The recorded context against the one the given policy builds now."""

    #: selected now, not then: seq -> why the recorded build left it out
    added: dict[int, str]
    #: selected then, not now: seq -> why the build now leaves it out
    removed: dict[int, str]
    #: the messages differ (also when only the rendering or the summary does)
    messages_changed: bool
    #: policy fields that differ: name -> [then, now]
    policy_changes: dict[str, list[Any]]


class CallReplay(msgspec.Struct, frozen=True):
    """One model call of the run, replayed."""

    call: int
    injection_seq: int
    #: the recorded answer's seq (None: the call was never answered)
    output_seq: int | None
    input: ModelInput
    #: the rebuilt input is the recorded one (its digest matched)
    input_exact: bool
    #: the recorded answer (None: never recorded, or erased since)
    recorded: dict[str, Any] | None
    replayed: dict[str, Any]
    #: unified diff, recorded -> replayed (empty: the same answer)
    output_diff: list[str]
    context: ContextDiff
    #: the answer on the input as built now (None: the same input as recorded)
    replayed_now: dict[str, Any] | None
    output_now_diff: list[str]


class Unverifiable(msgspec.Struct, frozen=True):
    """A model call whose replayed answer cannot be checked: there is no
    recorded answer to compare it with (``detail`` says why)."""

    call: int
    detail: str


class ReplayResult(msgspec.Struct, frozen=True):
    """What :func:`replay` found; ``same`` when nothing drifted and every
    call had a recorded answer to compare with."""

    session_id: str
    run_id: str
    model: str | None
    calls: list[CallReplay]
    drift: list[Drift]
    #: calls with no recorded answer: neither the same nor drifted
    unverifiable: list[Unverifiable] = []

    @property
    def same(self) -> bool:
        return not self.drift and not self.unverifiable

    @property
    def causes(self) -> list[str]:
        """The distinct causes, in :data:`CAUSES` order."""
        found = {d.cause for d in self.drift}
        return [c for c in CAUSES if c in found]

    def report(self) -> str:
        """The drift in words, with the output diffs (for people and CI logs)."""
        head = f"replay of run {self.run_id} ({len(self.calls)} model call(s)): "
        if self.same:
            return head + "no drift"
        found = [f"drift, cause {', '.join(self.causes)}"] if self.drift else ["no drift"]
        if self.unverifiable:
            found.append(f"{len(self.unverifiable)} call(s) unverifiable")
        lines = [head + "; ".join(found)]
        for d in self.drift:
            lines.append(f"  call {d.call} {d.kind} [{d.cause}]: {d.detail}")
        for u in self.unverifiable:
            lines.append(f"  call {u.call} unverifiable: {u.detail}")
        for c in self.calls:
            for name, diff in (("output", c.output_diff), ("output now", c.output_now_diff)):
                if diff:
                    lines.append(f"  call {c.call} {name} diff:")
                    lines += [f"    {line}" for line in diff]
        return "\n".join(lines)


Model = Callable[[ModelInput], "str | Mapping[str, Any]"]


def replay(session: _Log, run_id: str, model: Model, *, policy: ContextPolicy | None = None,
           artifacts: Mapping[str, str] | None = None,
           model_name: str | None = None, memory: Any = None, static_prefix: Any = None,
           now: int | None = None) -> ReplayResult:
    """Replay run ``run_id`` of ``session``: for each of its model calls,
    rebuild the exact recorded input, call ``model`` on it and compare (see
    the module docstring).

    ``model``: a callable taking a :class:`ModelInput` and returning the
    answer, a str (the content) or a mapping like an ``assistant/message``
    payload (``content``, ``tool_calls``).  ``policy``: the context policy
    in force now (default: the one each call recorded -- a pure
    reproduction).  ``artifacts``: artifact ids current now, by name (default:
    the pinned ones).  ``model_name``: the logical name of ``model``, to name
    the change when the output drifts.  ``memory``: the
    :class:`~trajlog.memory.MemoryView` a call's memory layers are rebuilt
    from (the recorded versions) and compared with (as it is now);
    ``static_prefix``: the static prefix in force now, compared with the
    run's recorded hash; ``now``: the time (epoch ms) the context is built
    at now, to see what lapsed since (default: the time each call recorded).
    Causes memory, static_prefix and lifecycle: :mod:`.replay_causes`.
    Raises :class:`ReplayError` for an unknown run or one with no model call
    recorded.
    """
    if not callable(getattr(session, "events", None)):
        raise ArgumentTypeError(f"session must be a trajlog Session, not "
                                f"{type(session).__name__}")
    if not isinstance(run_id, str):
        raise ArgumentTypeError(f"run_id must be a str, not {type(run_id).__name__}")
    if not callable(model):
        raise ArgumentTypeError(f"model must be callable, not {type(model).__name__}")
    if policy is not None and not isinstance(policy, ContextPolicy):
        raise ArgumentTypeError(f"policy must be a ContextPolicy or None, not "
                                f"{type(policy).__name__}")
    if model_name is not None and not isinstance(model_name, str):
        raise ArgumentTypeError(f"model_name must be a str or None, not "
                                f"{type(model_name).__name__}")
    events = list(session.events())
    started, end = _bounds(session, events, run_id)
    run_data = started.data
    pinned = _artifacts(run_data.get("artifacts"))
    now_artifacts = pinned if artifacts is None else {**pinned, **_artifacts(artifacts)}
    calls: list[CallReplay] = []
    drift: list[Drift] = []
    unverifiable: list[Unverifiable] = []
    logical = run_data.get("model")
    header: Event | None = None
    for ev in events[:started.seq]:
        if ev.type == HEADER:
            header = ev
    pending: Event | None = None
    answered: list[tuple[Event, Event | None]] = []
    for ev in events[started.seq:end + 1]:
        if ev.type == INJECTION:
            if pending is not None:
                answered.append((pending, None))
            pending = ev
        elif ev.type == ANSWER and pending is not None:
            answered.append((pending, ev))
            pending = None
    if pending is not None:
        answered.append((pending, None))
    if now is not None and (type(now) is not int or now < 0):
        raise InvalidArgumentError(f"now must be an int >= 0 or None, not {now!r}")
    shared = _Replay(session, events, run_id, run_data, pinned, now_artifacts, model, policy,
                     model_name, memory, rc.static_prefix_drift(run_data, static_prefix), now)
    if not answered:
        raise ReplayError(session.id, run_id, started.seq,
                          "the run recorded no context/injection: there is no model input "
                          "to rebuild (build the context with "
                          "trajlog.projections.context.build_context inside the run)")
    switches = [ev for ev in events[started.seq:end + 1] if ev.type == SWITCH]
    headers = [ev for ev in events[started.seq:end + 1] if ev.type == HEADER]
    for index, (injection, answer) in enumerate(answered):
        for sw in switches:
            if sw.seq < injection.seq and isinstance(sw.data, dict) and sw.data.get("new"):
                logical = sw.data["new"]
        for h in headers:
            if h.seq < injection.seq:
                header = h
        call, found = _replay_call(shared, index, injection, answer, logical, header)
        calls.append(call)
        drift += found
        if call.recorded is None:
            unverifiable.append(Unverifiable(index, _why_unverifiable(injection, answer)))
    return ReplayResult(session.id, run_id, run_data.get("model"), calls, drift, unverifiable)


def _why_unverifiable(injection: Event, answer: Event | None) -> str:
    if answer is not None:
        return (f"no recorded answer to compare with: the answer at seq {answer.seq} was "
                "erased")
    return (f"no recorded answer to compare with: the run recorded none after the "
            f"context/injection at seq {injection.seq}")


def _bounds(session: _Log, events: list[Event], run_id: str) -> tuple[Event, int]:
    """The run's ``run/started`` and the seq of its last event."""
    started = next((ev for ev in events if ev.type == STARTED and isinstance(ev.data, dict)
                    and ev.data.get("run_id") == run_id), None)
    if started is None:
        raise ReplayError(session.id, run_id, None, "the session holds no such run")
    end = next((ev.seq for ev in events[started.seq:] if ev.type == FINALIZED
                and isinstance(ev.data, dict) and ev.data.get("run_id") == run_id),
               len(events) - 1)
    return started, end


def _artifacts(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ArgumentTypeError("artifacts must map names to ids (str -> str)")
    return dict(value)


def _recorded_policy(session: _Log, run_id: str, injection: Event,
                     fallback: ContextPolicy | None) -> ContextPolicy:
    config = injection.data.get("policy_config")
    if isinstance(config, dict):
        return ContextPolicy.from_config(config)
    # an injection written before policies were recorded in full: the caller's
    # policy (or the default) stands in if it is the one named
    guess = fallback or ContextPolicy()
    if (guess.name, guess.version) == (injection.data.get("policy"),
                                       injection.data.get("policy_version")):
        return guess
    raise ReplayError(session.id, run_id, injection.seq,
                      f"the context/injection records policy {injection.data.get('policy')!r} "
                      f"v{injection.data.get('policy_version')} without its configuration; "
                      "pass that policy as policy=")


def _build(session: _Log, injection: Event, policy: ContextPolicy, memory: Any = None,
           at: int | None = None) -> ContextBuild:
    d = injection.data
    return build_context(session, policy, target_model=d.get("target_model"),
                         workspace_revision=d.get("workspace_revision"),
                         branch=d.get("branch"), upto=injection.seq, record=False,
                         now=_at(injection) if at is None else at, memory=memory,
                         memory_query=d.get("memory_query"))


def _at(injection: Event) -> int:
    now = injection.data.get("now")
    return now if isinstance(now, int) else injection.time


def _input(run_id: str, index: int, injection: Event, logical: Any, run_data: dict[str, Any],
           header: Event | None, messages: list[dict[str, Any]],
           artifacts: dict[str, str]) -> ModelInput:
    h = header.data if header is not None and isinstance(header.data, dict) else {}
    return ModelInput(run_id, index, logical, dict(run_data.get("params") or {}),
                      h.get("system_prompt"), list(h.get("tools") or []),
                      dict(h.get("parameters") or {}), messages, dict(artifacts),
                      injection.seq)


@dataclass(frozen=True)
class _Replay:
    """What every call of one replay shares."""

    session: _Log
    events: list[Event]
    run_id: str
    run_data: dict[str, Any]
    pinned: dict[str, str]
    now_artifacts: dict[str, str]
    model: Model
    policy: ContextPolicy | None
    model_name: str | None
    memory: Any   # (the view; memory, static prefix and lifecycle: replay_causes.py)
    prefix_moved: str | None
    at: int | None


def _replay_call(r: _Replay, index: int, injection: Event, answer: Event | None,
                 logical: Any, header: Event | None) -> tuple[CallReplay, list[Drift]]:
    session, events, run_id, run_data = r.session, r.events, r.run_id, r.run_data
    pinned, now_artifacts, model, policy = r.pinned, r.now_artifacts, r.model, r.policy
    d = injection.data if isinstance(injection.data, dict) else {}
    found: list[Drift] = []
    then_policy = _recorded_policy(session, run_id, injection, policy)
    pinned_memory = rc.pinned(r.memory, d)
    then = _build(session, injection, then_policy, pinned_memory)
    recorded_digest = d.get("messages_sha256")
    rebuilt_digest = messages_digest(then.messages)
    if isinstance(recorded_digest, str):
        exact = rebuilt_digest == recorded_digest
    else:   # older record: the selection is what it kept
        exact = [it.seq for it in then.selected] == d.get("selected")
    inexact = None if exact else (rc.unpinned(d, pinned_memory, r.memory)
                                  or _inexact(events, injection))
    if inexact is not None:
        found.append(Drift("input", inexact[0], index, inexact[1]))
    given = _input(run_id, index, injection, logical, run_data, header, then.messages, pinned)
    replayed = _normal(model(given))
    # an erased answer is no answer: its tombstone is not what the model said
    recorded = (_normal(answer.data) if answer is not None and not is_erased(answer)
                else None)
    output_diff = _diff(recorded, replayed, answer) if recorded is not None else []
    if output_diff:
        found.append(Drift("output", "model" if inexact is None else inexact[0], index,
                           _why_output(logical, r.model_name, exact)))

    now_policy = policy or then_policy
    live = r.memory if pinned_memory is not None else None
    now = then if (now_policy, live, r.at) == (then_policy, None, None) else _build(
        session, injection, now_policy, live, r.at)
    context = _context_diff(d, then, now, then_policy, now_policy)
    memory_found = rc.memory_drift(live, d, now, _at(injection) if r.at is None else r.at)
    found += [Drift("memory", cause, index, detail) for cause, detail in memory_found]
    if r.prefix_moved is not None:
        found.append(Drift("static_prefix", "static_prefix", index, r.prefix_moved))
    moved_by = rc.context_cause(context.removed, memory_found)
    if context.added or context.removed or context.messages_changed:
        cause = ("policy" if context.policy_changes else moved_by or
                 (inexact[0] if inexact is not None else "builder"))
        found.append(Drift("context", cause, index, _why_context(context, d)))
    moved = {k: [pinned.get(k), v] for k, v in now_artifacts.items() if pinned.get(k) != v}
    if moved:
        found.append(Drift("artifacts", "artifact", index, "; ".join(
            f"{k}: {old} -> {new}" for k, (old, new) in sorted(moved.items()))))
    replayed_now = None
    output_now_diff: list[str] = []
    if now is not then or moved:
        now_input = _input(run_id, index, injection, logical, run_data, header, now.messages,
                           now_artifacts)
        if now_input != given:
            replayed_now = _normal(model(now_input))
            if recorded is not None:
                output_now_diff = _diff(recorded, replayed_now, answer, "replayed now")
            if output_now_diff:
                found.append(Drift("output_now", "policy" if now is not then and
                                   context.policy_changes else moved_by or ("artifact" if
                                   moved else "builder"), index, "the answer on the input "
                                   "built now differs from the recorded one"))
    return CallReplay(index, injection.seq, None if answer is None else answer.seq, given,
                      exact, recorded, replayed, output_diff, context, replayed_now,
                      output_now_diff), found


def _normal(out: Any) -> dict[str, Any]:
    """The part of an answer that is the model's decision: its content and
    its tool calls (name and arguments; ids are transport, usage is cost)."""
    if isinstance(out, str):
        return {"content": out, "tool_calls": []}
    if not isinstance(out, Mapping):
        raise TypeError(f"the model returned {type(out).__name__}: a str or a mapping "
                        "(content, tool_calls) is expected")
    calls = []
    for c in out.get("tool_calls") or ():
        if isinstance(c, Mapping):
            calls.append({"name": c.get("name"), "arguments": c.get("arguments")})
    return {"content": out.get("content"), "tool_calls": calls}


def _diff(recorded: dict[str, Any], replayed: dict[str, Any], answer: Event | None,
          name: str = "replayed") -> list[str]:
    if recorded == replayed:
        return []
    def lines(v: dict[str, Any]) -> list[str]:
        return json.dumps(v, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    where = f"recorded@{answer.seq}" if answer is not None else "recorded"
    return list(difflib.unified_diff(lines(recorded), lines(replayed), where, name,
                                     lineterm=""))


def _why_output(logical: Any, model_name: str | None, exact: bool) -> str:
    basis = "the exact recorded input" if exact else "the rebuilt input"
    if model_name is not None and model_name != logical:
        return f"model changed: {logical} -> {model_name}; a different answer to {basis}"
    return (f"{logical} gave a different answer to {basis} (the model behind the name "
            "changed, or its sampling is not deterministic)")


def _inexact(events: list[Event], injection: Event) -> tuple[str, str]:
    """Why the rebuilt input is not the recorded one: (cause, detail).  The
    events were read verified (a damaged frame raises before this), so either
    an event before the call was erased under a tombstone since (``log``) or
    the same intact events now build differently (``builder``)."""
    erased = [ev for ev in events[:injection.seq] if is_erased(ev)]
    if erased:
        return rc.erasure_cause(erased), (f"the events before the call changed since it was "
                                          f"recorded: seq(s) {[ev.seq for ev in erased]} "
                                          "erased")
    return "builder", (f"the intact events before seq {injection.seq} build another context "
                       f"than the recorded one: the context builder changed (v"
                       f"{injection.data.get('builder_version')} recorded, v{BUILDER_VERSION} "
                       "now)")


def _context_diff(recorded: dict[str, Any], then: ContextBuild, now: ContextBuild,
                  then_policy: ContextPolicy, now_policy: ContextPolicy) -> ContextDiff:
    before = set(recorded.get("selected") or ())
    after = {it.seq for it in now.selected}
    why_then = {x.seq: x.reason for x in then.excluded}
    why_now = {x.seq: x.reason for x in now.excluded}
    added = {s: why_then.get(s, "not a candidate then") for s in sorted(after - before)}
    removed = {s: why_now.get(s, "not a candidate now") for s in sorted(before - after)}
    changed = messages_digest(now.messages) != recorded.get("messages_sha256", (
        messages_digest(then.messages)))
    old, new = then_policy.config(), now_policy.config()
    policy_changes = {k: [old[k], new[k]] for k in old if old[k] != new[k]}
    return ContextDiff(added, removed, changed, policy_changes)


def _change(name: str, then: Any, now: Any) -> str:
    """One policy field's change; a list as what left and what joined it."""
    if isinstance(then, list) and isinstance(now, list):
        gone = [x for x in then if x not in now]
        new = [x for x in now if x not in then]
        if gone or new:
            return f"{name} " + " ".join([*(f"-{x}" for x in gone), *(f"+{x}" for x in new)])
    return f"{name}: {then!r} -> {now!r}"


def _why_context(c: ContextDiff, recorded: dict[str, Any]) -> str:
    parts = []
    if c.policy_changes:
        parts.append("policy " + ", ".join(_change(k, then, now)
                                           for k, (then, now) in c.policy_changes.items()))
    elif recorded.get("builder_version") != BUILDER_VERSION:
        parts.append(f"builder v{recorded.get('builder_version')} -> v{BUILDER_VERSION}")
    if c.added:
        parts.append("now admitted " + ", ".join(f"{s} (then {r})" for s, r in c.added.items()))
    if c.removed:
        parts.append("now left out " + ", ".join(f"{s} ({r})" for s, r in c.removed.items()))
    if not (c.added or c.removed):
        parts.append("the same events, rendered differently")
    return "; ".join(parts)


__all__ = ["CAUSES", "CallReplay", "ContextDiff", "Drift", "ModelInput", "ReplayResult",
           "Unverifiable", "replay"]
