"""The folds: the views a model, a person and a debugger each need, each a
pure function of one log (the engine in :mod:`.engine` makes them incremental).

Each projection is a fold over the session's events (its inherited prefix
first, for a fork): ``init() -> state``, ``step(state, event) -> state``,
``view(state) -> result``.  Folding is incremental: the store keeps the state
reached at some seq -- in memory, and from time to time in the derived table
``projection_states`` -- and a later call folds only the events appended since.
Saved states (:func:`checkpoint`; small states save themselves every
``SAVE_EVERY`` events) are keyed by (session, projection, version) and carry
the seq and chain they were computed at: a state whose version differs, or whose chain no
longer matches the log, is ignored and rebuilt.  They are never authoritative;
:func:`rebuild` drops them.

What a view returns is shared with the cached state it was read from, so
every JSON value a fold keeps is frozen as it is folded in
(:func:`~trajlog.events.freeze`: read-only dicts and lists, one shallow copy
per container, once) and again when a saved state is loaded (``loaded``): no
caller can change what the next one reads, and no read pays for a copy.

The projections:

* :func:`model_history` -- user messages, assistant messages (text, reasoning,
  tool calls) and tool results, in order, with ``surface-replace`` compactions
  applied: the range a compaction covers is hidden behind its summary (the raw
  events stay in the log).  :func:`request_config` -- the system prompt, tools
  and parameters of the last ``request/header``.
* :func:`chat` -- message bubbles and tool cards for people.
* :func:`trajectory` -- turns, steps, model requests and tool spans, for debugging.
* :func:`goal` -- the last valid full goal snapshot (malformed ones reported).
* :func:`status` -- what is open now: turn, step, tools running.

Which types each view reads is its column in :mod:`trajlog.event_types`
(``history``, ``chat``, ``trajectory``); a cancelled call (``tool/cancel``) is
answered in the model history by a tool message saying so (a provider needs
every call answered), and ends its chat card and tool span as ``cancelled``.
"""

from __future__ import annotations

import bisect
from typing import Any, ClassVar

import msgspec

from ..event_types import (
    CANCELS_CALL,
    CHAT,
    HISTORY,
    HISTORY_PREFIXES,
    MESSAGES,
    TOOL_CANCELLED,
    TRAJECTORY,
    surface_range,
)
from ..event_types import (
    SURFACE_REPLACE as SURFACE_REPLACE,  # (re-exported: trajlog.projections)
)
from ..events import Event, freeze
from ..lifecycle import Phase, outcome, requested_calls, transitions
from ..recovery import OpenState
from .shapes import (
    ChatNode,
    GoalView,
    Message,
    ModelRequest,
    ModelSwitch,
    RequestConfig,
    RequestRetry,
    StatusView,
    Step,
    ToolSpan,
    Turn,
)


def _json_copy(value: Any) -> Any:
    """A deep copy of a JSON value, for the small views (goal, request config):
    their callers own what they get.  The history-sized views (model_history,
    chat, trajectory) hand out their frozen values instead -- copying them on
    every call would cost far more than the fold (docs/views-and-context.md)."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    return msgspec.msgpack.decode(msgspec.msgpack.encode(value))


def _text(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


_HISTORY_TYPES = HISTORY["user"] | HISTORY["assistant"] | HISTORY["tool"]
# history/pop {target} hides one earlier message, history/clear {through} all up
# to a seq (the Agents SDK's pop_item and clear_session; the log keeps them)
POP, CLEAR = "history/pop", "history/clear"
_CUTS = HISTORY["cut"]
# what the history's one-loop fold hands to step(): cuts, compactions, cancels
_STEPPED = _CUTS | CANCELS_CALL


def cancelled(data: Any) -> str:
    """What the model is told of a call the host cancelled (``tool/cancel``)."""
    reason = data.get("reason") if isinstance(data, dict) else None
    return "The host cancelled this tool call" + (
        f": {reason}" if isinstance(reason, str) and reason else ".")


def _cut(type_: str, data: Any) -> int | None:
    """The seq a valid ``history/pop`` or ``history/clear`` names, else None."""
    key = "target" if type_ == POP else "through" if type_ == CLEAR else None
    value = data.get(key) if key is not None and isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class HistoryState(msgspec.Struct):
    messages: list[Message]
    compactions: list[tuple[int, int]]


class ModelHistory:
    """user / assistant / tool messages with surface-replace compactions."""

    name: ClassVar[str] = "model_history"
    version: ClassVar[int] = 3  # 2: history/pop and history/clear; 3: tool/cancel
    state_type: ClassVar[Any] = HistoryState
    autosave: ClassVar[bool] = False  # the state holds every message: save on request

    @staticmethod
    def wants(type_: str) -> bool:
        return type_ in _HISTORY_TYPES or type_ in _CUTS or type_.startswith(
            HISTORY_PREFIXES)

    def init(self) -> HistoryState:
        return HistoryState([], [])

    def step(self, state: HistoryState, ev: Event) -> HistoryState:
        t, d = ev.type, ev.data
        if not isinstance(d, dict):
            return state
        if t == "user/message":
            state.messages.append(Message("user", freeze(d.get("content")), ev.seq))
        elif t == "assistant/message":
            state.messages.append(Message("assistant", freeze(d.get("content")), ev.seq,
                                          freeze(d.get("tool_calls") or None),
                                          freeze(d.get("reasoning"))))
        elif t == "tool/result":
            state.messages.append(Message("tool", freeze(d.get("output")), ev.seq,
                                          tool_call_id=d.get("call_id"),
                                          is_error=d.get("is_error"), status=d.get("status")))
        elif t in CANCELS_CALL:
            state.messages.append(Message("tool", cancelled(d), ev.seq,
                                          tool_call_id=d.get("call_id"), is_error=True,
                                          status=TOOL_CANCELLED))
        elif (at := _cut(t, d)) is not None:
            msgs = state.messages
            if t == CLEAR:
                del msgs[:bisect.bisect_right(msgs, at, key=lambda m: m.seq)]
            else:
                a = bisect.bisect_left(msgs, at, key=lambda m: m.seq)
                if a < len(msgs) and msgs[a].seq == at and msgs[a].role != "summary":
                    del msgs[a]
        elif (found := surface_range(t, d)) is not None:
            lo, hi = found
            if isinstance(lo, int) and isinstance(hi, int) and lo <= hi:
                msgs = state.messages
                a = bisect.bisect_left(msgs, lo, key=lambda m: m.seq)
                b = bisect.bisect_right(msgs, hi, key=lambda m: m.seq)
                msgs[a:b] = [Message("summary", freeze(d.get("summary")), lo, until=hi)]
                state.compactions.append((lo, hi))
        return state

    def step_many(self, state: HistoryState, events: Any) -> HistoryState:
        """The same fold as :meth:`step`, one loop for a run of events (the hot
        path of a from-scratch build): locals instead of attribute lookups."""
        append = state.messages.append
        new = Message
        fz = freeze
        for ev in events:
            t = ev.type
            if t == "tool/result":
                get = ev.data.get
                out = get("output")
                append(new("tool", out if type(out) is str else fz(out), ev.seq, None, None,
                           get("call_id"), get("is_error"), get("status")))
            elif t == "assistant/message":
                get = ev.data.get
                content, calls, why = get("content"), get("tool_calls"), get("reasoning")
                append(new("assistant", content if type(content) is str else fz(content),
                           ev.seq, fz(calls) if calls else None,
                           why if why is None else fz(why)))
            elif t == "user/message":
                content = ev.data.get("content")
                append(new("user", content if type(content) is str else fz(content), ev.seq))
            elif t in _STEPPED or t.startswith(HISTORY_PREFIXES):
                self.step(state, ev)
        return state

    def view(self, state: HistoryState) -> list[Message]:
        return list(state.messages)

    @staticmethod
    def loaded(state: HistoryState) -> HistoryState:
        """A saved state, decoded: its JSON values frozen as a fold leaves them."""
        replace = msgspec.structs.replace
        state.messages = [
            replace(m, content=freeze(m.content), tool_calls=freeze(m.tool_calls),
                    reasoning=freeze(m.reasoning)) for m in state.messages]
        return state


class RequestConfigFold:
    name: ClassVar[str] = "request_config"
    version: ClassVar[int] = 1
    autosave: ClassVar[bool] = True

    @staticmethod
    def wants(type_: str) -> bool:
        return type_ == "request/header"
    state_type: ClassVar[Any] = RequestConfig | None

    def init(self) -> RequestConfig | None:
        return None

    def step(self, state: RequestConfig | None, ev: Event) -> RequestConfig | None:
        if ev.type != "request/header" or not isinstance(ev.data, dict):
            return state
        d = ev.data
        return RequestConfig(ev.seq, d.get("model"), d.get("system_prompt"),
                             list(d.get("tools") or []), dict(d.get("parameters") or {}))

    def view(self, state: RequestConfig | None) -> RequestConfig | None:
        if state is None:
            return None
        return msgspec.structs.replace(state, system_prompt=_json_copy(state.system_prompt),
                                       tools=_json_copy(state.tools),
                                       parameters=_json_copy(state.parameters))


class ChatState(msgspec.Struct):
    nodes: list[dict[str, Any]]
    cards: dict[str, int]


class Chat:
    name: ClassVar[str] = "chat"
    version: ClassVar[int] = 3  # 2: history/pop and history/clear; 3: tool/cancel
    state_type: ClassVar[Any] = ChatState
    autosave: ClassVar[bool] = False
    wants = staticmethod(CHAT.__contains__)

    def init(self) -> ChatState:
        return ChatState([], {})

    def step(self, state: ChatState, ev: Event) -> ChatState:
        t, d = ev.type, ev.data
        if not isinstance(d, dict):
            return state
        if (at := _cut(t, d)) is not None:
            return self._hide(state, at, t == CLEAR)
        if t in MESSAGES:
            content = d.get("content")
            if content:
                state.nodes.append({"kind": "message", "seq": ev.seq, "role": t.split("/")[0],
                                    "text": _text(content, 2000)})
            for call in requested_calls(d):
                state.cards[call["id"]] = len(state.nodes)
                state.nodes.append({"kind": "tool", "seq": ev.seq, "call_id": call["id"],
                                    "name": call.get("name"),
                                    "arguments": freeze(call.get("arguments")),
                                    "status": "requested"})
            return state
        for _call_id, phase, _name in transitions(ev):
            node = self._card(state, ev, d)
            if phase is Phase.STARTED:
                node["status"] = "running"
            elif phase is Phase.FINISHED:
                node["status"] = outcome(d, t)
                node["output"] = _text(d.get("reason" if t in CANCELS_CALL else "output", ""),
                                       500)
                node["result_seq"] = ev.seq
        return state

    @staticmethod
    def _hide(state: ChatState, at: int, clear: bool) -> ChatState:
        """A clear drops every node up to ``at``; a pop the nodes of event
        ``at``, or, for a popped result, the result on its card."""
        nodes = state.nodes
        a = bisect.bisect_left(nodes, at, key=lambda n: n["seq"])
        b = bisect.bisect_right(nodes, at, key=lambda n: n["seq"])
        if clear:
            a = 0
        elif a == b:
            for node in reversed(nodes):
                if node.get("result_seq") == at:
                    node["status"], node["result_seq"] = "running", None
                    node.pop("output", None)
                    break
            return state
        del nodes[a:b]
        state.cards = {k: i for k, i in state.cards.items() if i < a}
        for i in range(a, len(nodes)):
            if nodes[i]["kind"] == "tool":
                state.cards[nodes[i]["call_id"]] = i
        return state

    @staticmethod
    def _card(state: ChatState, ev: Event, d: dict[str, Any]) -> dict[str, Any]:
        call_id = d.get("call_id")
        index = state.cards.get(call_id) if isinstance(call_id, str) else None
        if index is None:  # a call the log never requested: show it anyway
            state.cards[str(call_id)] = index = len(state.nodes)
            state.nodes.append({"kind": "tool", "seq": ev.seq, "call_id": str(call_id),
                                "name": d.get("name"), "arguments": freeze(d.get("arguments")),
                                "status": "requested"})
        return state.nodes[index]

    def view(self, state: ChatState) -> list[ChatNode]:
        return [ChatNode(**n) for n in state.nodes]

    @staticmethod
    def loaded(state: ChatState) -> ChatState:
        """A saved state, decoded: its JSON values frozen as a fold leaves them."""
        for node in state.nodes:
            if "arguments" in node:
                node["arguments"] = freeze(node["arguments"])
        return state


def _noted(notes: Any) -> tuple[list[ModelSwitch], list[RequestRetry]]:
    def of(kind: str, cls: Any) -> list[Any]:
        return [cls(**{k: v for k, v in n.items() if k != "type"}) for n in notes
                if n["type"] == kind]
    return of("model/switch", ModelSwitch), of("request/retry", RequestRetry)


class TrajectoryState(msgspec.Struct):
    turns: list[dict[str, Any]]
    calls: dict[str, list[int]]      # call id -> [turn index, step index, tool index]
    last_request: dict[str, Any] | None
    pending: list[dict[str, Any]] = []   # notes outside a turn, for the next one


# events noted on their turn: type -> (the Turn field, the fields kept)
_NOTES = {"model/switch": ("switches", ("old", "new", "reason", "context_version", "run_id")),
          "request/retry": ("retries", ("idempotency_key", "original", "attempt", "outcome"))}


class Trajectory:
    name: ClassVar[str] = "trajectory"
    version: ClassVar[int] = 4  # 2: model switches; 3: retried requests; 4: tool/cancel
    state_type: ClassVar[Any] = TrajectoryState
    autosave: ClassVar[bool] = False
    wants = staticmethod(frozenset().union(*TRAJECTORY.values()).__contains__)

    def init(self) -> TrajectoryState:
        return TrajectoryState([], {}, None, [])

    @staticmethod
    def _open_turn(state: TrajectoryState) -> dict[str, Any]:
        if not state.turns or state.turns[-1]["end_seq"] is not None:
            state.turns.append({"start_seq": None, "end_seq": None, "interrupted": None,
                                "steps": []})
        return state.turns[-1]

    def step(self, state: TrajectoryState, ev: Event) -> TrajectoryState:
        t, d = ev.type, ev.data if isinstance(ev.data, dict) else {}
        if t == "turn/start":
            state.turns.append({"start_seq": ev.seq, "end_seq": None, "interrupted": None,
                                "steps": [], "time": ev.time, "notes": state.pending})
            state.pending = []
        elif t in _NOTES:
            note = {"type": t, "seq": ev.seq, **{k: freeze(d.get(k)) for k in _NOTES[t][1]}}
            open_turn = state.turns and state.turns[-1]["end_seq"] is None
            (state.turns[-1].setdefault("notes", []) if open_turn
             else state.pending).append(note)
        elif t == "turn/end":
            turn = self._open_turn(state)
            turn["end_seq"], turn["interrupted"] = ev.seq, bool(d.get("interrupted"))
            if turn["steps"] and turn["steps"][-1]["end_seq"] is None:
                turn["steps"][-1]["end_seq"] = ev.seq
        elif t == "step/start":
            self._open_turn(state)["steps"].append({"start_seq": ev.seq, "end_seq": None,
                                                    "requests": [], "tools": []})
        elif t == "step/end":
            steps = self._open_turn(state)["steps"]
            if steps and steps[-1]["end_seq"] is None:
                steps[-1]["end_seq"] = ev.seq
        elif t == "request/header":
            state.last_request = {"seq": ev.seq, "time": ev.time, "model": d.get("model")}
        elif t == "assistant/message":
            step = self._current_step(state)
            usage: dict[str, Any] = d["usage"] if isinstance(d.get("usage"), dict) else {}
            req = state.last_request or {}
            latency = d.get("latency_ms")
            if latency is None and req.get("time") is not None:
                latency = ev.time - req["time"]
            calls = requested_calls(d)
            # (figures as written: a container where a number belongs is frozen too)
            step["requests"].append({
                "seq": ev.seq, "model": freeze(d.get("model", req.get("model"))),
                "latency_ms": freeze(latency), "ttft_ms": freeze(d.get("ttft_ms")),
                "tokens_in": freeze(usage.get("input_tokens")),
                "tokens_out": freeze(usage.get("output_tokens")),
                "tool_calls": len(calls)})
            state.last_request = None
            turn_i = len(state.turns) - 1
            step_i = len(state.turns[-1]["steps"]) - 1
            for c in calls:
                state.calls[c["id"]] = [turn_i, step_i, len(step["tools"])]
                step["tools"].append({
                    "call_id": c["id"], "name": c.get("name"),
                    "arguments": freeze(c.get("arguments")), "requested_seq": ev.seq,
                    "started_seq": None, "started_time": None, "result_seq": None,
                    "duration_ms": None, "error": None, "status": "requested",
                    "result_summary": None})
            return state
        for call_id, phase, _name in transitions(ev):
            span = self._span(state, call_id)
            if span is None:
                continue
            if phase is Phase.STARTED:
                span["started_seq"], span["started_time"] = ev.seq, ev.time
                span["status"] = "running"
            else:
                span["result_seq"] = ev.seq
                if span["started_time"] is not None:
                    span["duration_ms"] = ev.time - span["started_time"]
                span["error"] = bool(d.get("is_error"))
                span["status"] = outcome(d, t)
                span["result_summary"] = _text(
                    d.get("reason" if t in CANCELS_CALL else "output", ""), 120)
        return state

    def _current_step(self, state: TrajectoryState) -> dict[str, Any]:
        turn = self._open_turn(state)
        if not turn["steps"] or turn["steps"][-1]["end_seq"] is not None:
            turn["steps"].append({"start_seq": None, "end_seq": None, "requests": [],
                                  "tools": []})
        step: dict[str, Any] = turn["steps"][-1]
        return step

    @staticmethod
    def _span(state: TrajectoryState, call_id: Any) -> dict[str, Any] | None:
        where = state.calls.get(call_id) if isinstance(call_id, str) else None
        if where is None:
            return None
        span: dict[str, Any] = state.turns[where[0]]["steps"][where[1]]["tools"][where[2]]
        return span

    def view(self, state: TrajectoryState) -> list[Turn]:
        out = []
        for t in state.turns:
            steps = [Step(s["start_seq"], s["end_seq"],
                          [ModelRequest(**r) for r in s["requests"]],
                          [ToolSpan(**{k: v for k, v in x.items() if k != "started_time"})
                           for x in s["tools"]]) for s in t["steps"]]
            out.append(Turn(t["start_seq"], t["end_seq"], t["interrupted"], steps,
                            *_noted(t.get("notes", ()))))
        if state.pending:
            out.append(Turn(None, None, None, [], *_noted(state.pending)))
        return out

    @staticmethod
    def loaded(state: TrajectoryState) -> TrajectoryState:
        """A saved state, decoded: its JSON values frozen as a fold leaves them."""
        for t in state.turns:
            for s in t["steps"]:
                for r in s["requests"]:
                    r.update({k: freeze(v) for k, v in r.items()})
                for x in s["tools"]:
                    x["arguments"] = freeze(x["arguments"])
            for note in t.get("notes", ()):
                note.update({k: freeze(v) for k, v in note.items()})
        for note in state.pending:
            note.update({k: freeze(v) for k, v in note.items()})
        return state


class GoalState(msgspec.Struct):
    goal: Any
    revision: int | None
    seq: int | None
    cleared: bool
    skipped: list[dict[str, Any]]


class Goal:
    """``goal/change {revision, goal: {...}}`` sets a full snapshot;
    ``goal/change {revision, cleared: true}`` is the tombstone that clears it.
    A snapshot that is malformed (no int revision, not newer than the current
    one, no dict goal) is skipped and reported, never fatal."""

    name: ClassVar[str] = "goal"
    version: ClassVar[int] = 1
    autosave: ClassVar[bool] = True

    @staticmethod
    def wants(type_: str) -> bool:
        return type_ == "goal/change"
    state_type: ClassVar[Any] = GoalState

    def init(self) -> GoalState:
        return GoalState(None, None, None, False, [])

    def step(self, state: GoalState, ev: Event) -> GoalState:
        if ev.type != "goal/change":
            return state
        d = ev.data
        reason = None
        if not isinstance(d, dict):
            reason = "data is not an object"
        elif not isinstance(d.get("revision"), int) or isinstance(d.get("revision"), bool):
            reason = "no integer revision"
        elif state.revision is not None and d["revision"] <= state.revision:
            reason = f"revision {d['revision']} is not newer than {state.revision}"
        elif d.get("cleared") is True:
            state.goal, state.revision = None, d["revision"]
            state.seq, state.cleared = ev.seq, True
            return state
        elif not isinstance(d.get("goal"), dict):
            reason = "no full goal snapshot (an object)"
        if reason is not None:
            state.skipped.append({"seq": ev.seq, "reason": reason})
            return state
        state.goal, state.revision = d["goal"], d["revision"]
        state.seq, state.cleared = ev.seq, False
        return state

    def view(self, state: GoalState) -> GoalView:
        return GoalView(_json_copy(state.goal), state.revision, state.seq, state.cleared,
                        _json_copy(state.skipped))


class Status:
    """What is open now -- the same one-pass analysis recovery uses."""

    name: ClassVar[str] = "status"
    version: ClassVar[int] = 3  # 2: the lifecycle's phases; 3: tool/cancel closes a call
    autosave: ClassVar[bool] = True
    state_type: ClassVar[Any] = OpenState

    def init(self) -> OpenState:
        return OpenState()

    def step(self, state: OpenState, ev: Event) -> OpenState:
        state.feed(ev)
        return state

    def view(self, state: OpenState) -> StatusView:
        return StatusView(state.turn_start, state.step_start,
                          [c for c, (p, _) in state.open_calls.items() if p is Phase.STARTED],
                          [c for c, (p, _) in state.open_calls.items() if p is Phase.REQUESTED],
                          state.last_seq)


FOLDS: dict[str, Any] = {f.name: f for f in (ModelHistory(), RequestConfigFold(), Chat(),
                                             Trajectory(), Goal(), Status())}
