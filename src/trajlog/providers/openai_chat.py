"""A view as the request of OpenAI's Chat Completions API
(``client.chat.completions.create(**to_openai_chat(view, model=...))``).

System texts and a build's governance blocks are ``system`` (or, with
``system_role="developer"``, ``developer``) messages at the top; an assistant
turn carries its ``tool_calls`` (arguments as JSON text) and each is answered
by a ``tool`` message with its ``tool_call_id`` right after it; user content
blocks become ``text`` and ``image_url`` parts (an inline image as a
``data:`` URL), any other block passes through as it is."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from .common import Turn, arguments_text, blocks, read, text_in


def to_openai_chat(view: Any, *, system: str | None = None, system_role: str = "system",
                   **params: Any) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create``: ``messages``
    made from ``view`` (a context build or a model history), then ``params``
    (``model``, ``tools``, ...) as given."""
    if system_role not in ("system", "developer"):
        raise InvalidArgumentError(f"system_role must be 'system' or 'developer', not "
                                   f"{system_role!r}")
    conv = read(view, system)
    messages: list[dict[str, Any]] = [{"role": system_role, "content": text}
                                      for text in conv.system + conv.context]
    messages += [_message(t) for t in conv.turns]
    return {"messages": messages, **params}


def _message(t: Turn) -> dict[str, Any]:
    if t.role == "tool":
        return {"role": "tool", "tool_call_id": t.call_id, "content": text_in(t.content)}
    if t.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": text_in(t.content) or None}
        if t.calls:
            out["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.name, "arguments": arguments_text(c.arguments)}} for c in t.calls]
        return out
    if isinstance(t.content, str):
        return {"role": "user", "content": t.content}
    parts: list[Any] = []
    for kind, value in blocks(t.content):
        if kind == "text":
            parts.append({"type": "text", "text": value})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": value}})
        else:
            parts.append(value)
    return {"role": "user", "content": parts}


__all__ = ["to_openai_chat"]
