"""SDK items as trajlog events and back, and the walk that reads them from the
end of a log honouring ``history/pop`` and ``history/clear``.  A call the host
cancelled (``tool/cancel``) reads back as its output, as the model history
tells it, so the SDK never meets a call left unanswered."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import msgspec

from ... import lifecycle
from ...api import Session
from ...event_types import CALL_EVENTS, CANCELS_CALL, HISTORY, MESSAGES, REQUESTS_CALLS
from ...events import Event
from ...projections.folds import cancelled

#: the events that read back as SDK items: what the model history reads (messages,
#: a call's answer or cancel) and the items trajlog has no type for
_ITEM_TYPES = MESSAGES | HISTORY["tool"] | {"agents/item"}
#: the events that move a call on (what the write path checks an output against)
_CALL_TYPES = REQUESTS_CALLS | CALL_EVENTS
POP, CLEAR = "history/pop", "history/clear"
_REQUESTED, _STARTED = lifecycle.Phase.REQUESTED, lifecycle.Phase.STARTED
#: the types :func:`_synthetic` can hold true of
_CLOSER_TYPES = CANCELS_CALL | {"tool/result"}


# -- items <-> events -----------------------------------------------------------------

def _rest(item: dict[str, Any], *moved: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in moved}


def events_for(item: Any, calls: Callable[[str], tuple[int, str] | None],
                planned: dict[str, tuple[int, str]]) -> list[tuple[str, dict[str, Any]]]:
    """The events that record one SDK item.  ``calls`` says where a call id
    stands in the log; ``planned`` holds what earlier items of this batch do."""
    if not isinstance(item, dict):
        return [("agents/item", {"item": item})]
    kind, role = item.get("type"), item.get("role")
    if kind in (None, "message") and "content" in item:
        content = item["content"]
        if role == "user" and isinstance(content, (str, list)):
            return [("user/message", {"content": content, "sdk": _rest(item, "content")})]
        if role == "assistant" and isinstance(content, (str, list, type(None))):
            return [("assistant/message", {"content": content, "sdk": _rest(item, "content")})]
    elif kind == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if (isinstance(call_id, str) and isinstance(name, str) and "arguments" in item
                and call_id not in planned and calls(call_id) is None):
            planned[call_id] = (_REQUESTED, name)
            return [("assistant/message", {
                "tool_calls": [{"id": call_id, "name": name, "arguments": item["arguments"]}],
                "sdk": _rest(item, "call_id", "name", "arguments")})]
    elif kind == "function_call_output":
        call_id = item.get("call_id")
        known = (planned.get(call_id) or calls(call_id)) if isinstance(call_id, str) else None
        if known is not None and known[0] in (_REQUESTED, _STARTED) and "output" in item:
            out: list[tuple[str, dict[str, Any]]] = []
            if known[0] == _REQUESTED:  # trajlog needs a started call; the SDK never says
                out.append(("tool/call", {"call_id": call_id, "name": known[1], "implied": True}))
            planned[str(call_id)] = (lifecycle.Phase.FINISHED, known[1])
            out.append(("tool/result", {"call_id": call_id, "output": item["output"],
                                        "sdk": _rest(item, "call_id", "output")}))
            return out
    elif kind == "reasoning" and "summary" in item:
        return [("assistant/message", {"reasoning": item["summary"],
                                       "sdk": _rest(item, "summary")})]
    # an item trajlog has no type for, or one its lifecycle would refuse (an
    # output with no open call, a reused call id): carried as it is
    return [("agents/item", {"item": item})]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


#: the output an erased ``function_call_output`` reads as
ERASED_OUTPUT = "[erased]"


def _erased(ev: Event, d: dict[str, Any]) -> list[Any]:
    """What an erased event reads as: nothing, except the half of a call the
    model API needs to pair the other -- a call keeps its id and name with
    empty arguments, an output its call id with :data:`ERASED_OUTPUT` (what
    the erasure keeps: :mod:`trajlog.memory.replacement`)."""
    if ev.type in HISTORY["tool"]:   # (an erased cancel keeps its call id too)
        call = d.get("call_id")
        return [{"type": "function_call_output", "call_id": call, "output": ERASED_OUTPUT}
                ] if isinstance(call, str) else []
    if ev.type == "assistant/message":
        return [{"type": "function_call", "call_id": c["id"], "name": c.get("name") or "erased",
                 "arguments": "{}"} for c in lifecycle.requested_calls(d)]
    return []


def items_of(ev: Event) -> list[Any]:
    """The SDK items an event records (none for markers; an erased event's
    are placeholders that keep a call paired, :func:`_erased`)."""
    d = ev.data
    if not isinstance(d, dict):
        return []
    if isinstance(d.get("erased"), dict):
        return _erased(ev, d)
    if ev.type == "agents/item":
        return [d.get("item")]
    if ev.type in CANCELS_CALL:   # the call's answer, in the model history's words
        return [{"type": "function_call_output", "call_id": d.get("call_id"),
                 "output": cancelled(d)}]
    sdk = d.get("sdk")
    if isinstance(sdk, dict):
        item = dict(sdk)
        if ev.type == "tool/result":
            item["call_id"], item["output"] = d.get("call_id"), d.get("output")
        elif "tool_calls" in d:
            c = d["tool_calls"][0]
            item["call_id"], item["name"], item["arguments"] = c["id"], c["name"], c["arguments"]
        elif "reasoning" in d:
            item["summary"] = d["reasoning"]
        else:
            item["content"] = d.get("content")
        return [item]
    # an event trajlog wrote itself (a recovery closer) or another writer did
    if ev.type == "tool/result":
        return [{"type": "function_call_output", "call_id": d.get("call_id"),
                 "output": _text(d.get("output", ""))}]
    if ev.type == "user/message":
        return [{"role": "user", "content": d.get("content")}]
    items: list[Any] = []
    if d.get("content"):
        items.append({"role": "assistant", "content": d["content"]})
    items.extend({"type": "function_call", "call_id": c["id"], "name": str(c.get("name", "")),
                  "arguments": _text(c.get("arguments", {}))}
                 for c in lifecycle.requested_calls(d))
    return items


def _synthetic(ev: Event) -> bool:
    """An answer the SDK did not write: a recovery closer or a host's cancel."""
    return ev.type in CANCELS_CALL or (ev.type == "tool/result" and isinstance(
        ev.data, dict) and bool(ev.data.get("synthetic")) and "sdk" not in ev.data)


class Visible:
    """Walks a log from its end and keeps the items still visible: a pop hides
    its target, a clear everything up to ``through``.  A recovery closer is
    kept only while the call it answers is visible (a popped or cleared call
    needs no output), and so is a cancel."""

    def __init__(self) -> None:
        self.hidden: set[int] = set()
        self.hidden_calls: set[str] = set()
        self.found: list[tuple[Event, list[Any]]] = []   # newest first
        self.count = 0
        self.closers = False   # a found event may be a closer (see items())
        self.stop = -1   # seqs at or below it are cleared
        # an erased item trajlog has no type for: it may have been the call of a
        # later output (its call id is not kept), see items()
        self.erased_item = False

    def feed(self, ev: Event) -> bool:
        """Take the next event (newer to older); False once nothing older counts."""
        if ev.seq <= self.stop:
            return False
        t, d = ev.type, ev.data
        # (the item types first: nearly every event is one)
        if t in _ITEM_TYPES:
            if ev.seq in self.hidden:
                self.hidden_calls.update(c["id"] for c in lifecycle.requested_calls(d))
            elif items := items_of(ev):
                self.found.append((ev, items))
                self.count += len(items)
                if t in _CLOSER_TYPES and _synthetic(ev):
                    self.closers = True
            elif t == "agents/item" and isinstance(d, dict) and "erased" in d:
                self.erased_item = True
        elif t == POP and isinstance(d, dict) and isinstance(d.get("target"), int):
            self.hidden.add(d["target"])
        elif t == CLEAR and isinstance(d, dict) and isinstance(d.get("through"), int):
            self.stop = max(self.stop, d["through"])
        return ev.seq > self.stop + 1

    def items(self, complete: bool) -> list[Any]:
        """Oldest first.  ``complete``: the walk reached the start (or a clear),
        so a closer whose call was never seen answers nothing visible."""
        if not self.closers:   # (the usual case: no closer to weigh, one pass)
            out = [item for _, items in reversed(self.found) for item in items]
            return _paired(out) if self.erased_item else out
        out = []
        closers = [ev for ev, _ in self.found if _synthetic(ev)]
        # the calls visible items request: only worth collecting when a closer needs them
        seen = {c["id"] for ev, _ in self.found if ev.type == "assistant/message"
                for c in lifecycle.requested_calls(ev.data)} if closers else set()
        for ev, items in reversed(self.found):
            if closers and _synthetic(ev):
                call = ev.data.get("call_id")
                if call in self.hidden_calls or (complete and call not in seen):
                    continue
            out.extend(items)
        return _paired(out) if self.erased_item else out


def _output_of(item: Any) -> str | None:
    """The call id an output item answers (None: not an output)."""
    if isinstance(item, dict) and str(item.get("type", "")).endswith("_output"):
        call = item.get("call_id")
        return call if isinstance(call, str) else None
    return None


def _paired(items: list[Any]) -> list[Any]:
    """``items`` without the outputs no earlier item calls: what an erased
    call of a type trajlog does not know leaves (the model API refuses an
    output without its call)."""
    calls: set[str] = set()
    out = []
    for item in items:
        call = _output_of(item)
        if call is None:
            if isinstance(item, dict) and isinstance(item.get("call_id"), str):
                calls.add(item["call_id"])
        elif call not in calls:
            continue
        out.append(item)
    return out


# -- the call states, an incremental fold ---------------------------------------------

class _CallsState(msgspec.Struct):
    calls: dict[str, tuple[int, str]]


class _CallsFold:
    """Where each tool call of the log stands (what the write path checks)."""

    name: ClassVar[str] = "agents_calls"
    version: ClassVar[int] = 2   # 2: a tool/cancel closes a call
    state_type: ClassVar[Any] = _CallsState
    autosave: ClassVar[bool] = True
    wants = staticmethod(_CALL_TYPES.__contains__)

    def init(self) -> _CallsState:
        return _CallsState({})

    def step(self, state: _CallsState, ev: Event) -> _CallsState:
        for call_id, phase, name in lifecycle.transitions(ev):
            old = state.calls.get(call_id)
            state.calls[call_id] = (int(phase), name or (old[1] if old else ""))
        return state

    def view(self, state: _CallsState) -> dict[str, tuple[int, str]]:
        return state.calls   # read-only by contract: planning overlays its own dict


CALLS = _CallsFold()


def backwards(s: Session, window: int | None, below: int | None = None) -> Iterator[Event]:
    """The log's events newest first: a window from the end (or from
    ``below``, the seq to start at), then windows twice as long before it
    (None: the whole log in one read)."""
    if window is None:
        yield from reversed(list(s.events()))
        return
    if below is None:
        # the first window is a tail (one head read), the next ones end before it
        newest = s.tail(window)
        yield from reversed(newest)
        hi, window = (newest[0].seq - 1 if newest else -1), window * 2
    else:
        hi = below
    while hi >= 0:
        lo = max(0, hi - window + 1)
        yield from reversed(list(s.events(lo, hi)))
        hi, window = lo - 1, window * 2
