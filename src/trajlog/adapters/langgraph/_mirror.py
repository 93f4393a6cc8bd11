"""The thread's conversation, mirrored as trajlog's own event shapes.

A checkpoint holds LangGraph's state, opaque to trajlog's views.  When the
root namespace's state has a messages channel (``MessagesState``), each
message that no earlier checkpoint of the thread held is appended beside the
checkpoint, in the same transaction, as

* ``HumanMessage`` -> ``user/message {content}``;
* ``AIMessage`` -> ``assistant/message {content, tool_calls: [{id, name,
  arguments}], model, usage}``;
* ``ToolMessage`` -> ``tool/call {call_id, name, arguments}`` then ``tool/result
  {call_id, output, is_error}`` -- when the call was requested by a mirrored
  ``AIMessage`` and has not started; otherwise, like any other message,
* ``langgraph/message {role, content}``,

each with the message's ``message_id``, so that ``trajlog chat`` /
``trajectory`` / ``model_history`` show the thread.  The checkpoints stay the
authority: the mirror is never read back by the saver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ...event_types import ANSWERS_CALL, MESSAGES
from ...events import Event
from ._log import FORGET

#: the events that mirror a LangGraph message: the conversation's messages, a call's
#: answer, and a message of another kind
MIRRORED = MESSAGES | ANSWERS_CALL | {"langgraph/message"}


@dataclass
class Mirror:
    """Which messages of a thread are mirrored, and the state of their tool calls."""

    seen: set[str] = field(default_factory=set)
    requested: dict[str, str] = field(default_factory=dict)     # call id -> tool name
    used: set[str] = field(default_factory=set)                 # call ids ever requested

    def fold(self, ev: Event | None) -> None:
        """Follow one event of the log (None: the thread was deleted)."""
        if ev is None:
            self.seen.clear()
            self.requested.clear()
            return
        t, d = ev.type, ev.data
        if not isinstance(d, dict):
            return
        # (an erased message stays mirrored: the saver's marker names it)
        if (t in MIRRORED or t == FORGET) and type(d.get("message_id")) is str:
            self.seen.add(d["message_id"])
        if t == "assistant/message":
            for call in d.get("tool_calls") or ():
                if isinstance(call, dict) and type(call.get("id")) is str:
                    self.requested[call["id"]] = str(call.get("name", ""))
                    self.used.add(call["id"])
        elif t == "tool/call" and type(d.get("call_id")) is str:
            self.requested.pop(d["call_id"], None)

    def items(self, messages: Any) -> list[tuple[str, dict[str, Any]]]:
        """The events that mirror the messages not mirrored yet (nothing changes
        here: the appended events are folded once they are durable)."""
        if not isinstance(messages, list):
            return []
        out: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        requested = dict(self.requested)
        used = set(self.used)
        for m in messages:
            if not isinstance(m, BaseMessage) or not isinstance(m.id, str):
                continue
            if m.id in self.seen or m.id in seen:
                continue
            seen.add(m.id)
            content = m.content
            if isinstance(m, HumanMessage):
                out.append(("user/message", {"content": content, "message_id": m.id}))
            elif isinstance(m, AIMessage):
                calls: list[dict[str, Any]] = [
                    {"id": c["id"], "name": c["name"], "arguments": c["args"]}
                    for c in m.tool_calls if isinstance(c.get("id"), str)]
                # a call id the log has seen cannot be requested again (trajlog refuses it)
                if any(c["id"] in used for c in calls):
                    out.append(("langgraph/message", {"role": m.type, "content": content,
                                                      "message_id": m.id}))
                    continue
                data: dict[str, Any] = {"content": content, "tool_calls": calls,
                                        "message_id": m.id}
                model = m.response_metadata.get("model_name")
                if isinstance(model, str):
                    data["model"] = model
                if m.usage_metadata:
                    data["usage"] = {"input_tokens": m.usage_metadata.get("input_tokens"),
                                     "output_tokens": m.usage_metadata.get("output_tokens")}
                out.append(("assistant/message", data))
                for c in calls:
                    requested[c["id"]] = c["name"]
                    used.add(c["id"])
            elif isinstance(m, ToolMessage) and str(m.tool_call_id) in requested:
                call_id = str(m.tool_call_id)
                name = requested.pop(call_id)
                out.append(("tool/call", {"call_id": call_id, "name": name}))
                out.append(("tool/result", {"call_id": call_id, "output": content,
                                            "is_error": m.status == "error",
                                            "message_id": m.id}))
            else:
                out.append(("langgraph/message", {"role": m.type, "content": content,
                                                  "message_id": m.id}))
        return out


__all__ = ["MIRRORED", "Mirror"]
