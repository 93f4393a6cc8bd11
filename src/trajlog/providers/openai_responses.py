"""A view as the request of OpenAI's Responses API
(``client.responses.create(**to_openai_responses(view, model=...))``).

System texts (the caller's ``system=``, a build's header) are the request's
``instructions``; a build's governance blocks are ``developer`` input items
at the head of ``input``.  An assistant turn is an assistant message (its
text) and one ``function_call`` item per call; each call is answered by a
``function_call_output`` item with the same ``call_id`` right after it.  User
content blocks become ``input_text`` and ``input_image`` parts (an inline
image as a ``data:`` URL); any other block passes through as it is."""

from __future__ import annotations

from typing import Any

from .common import Turn, arguments_text, blocks, read, text_in


def to_openai_responses(view: Any, *, system: str | None = None,
                        **params: Any) -> dict[str, Any]:
    """The keyword arguments of ``responses.create``: ``input`` (and
    ``instructions`` when there are system texts) made from ``view`` (a
    context build or a model history), then ``params`` as given."""
    conv = read(view, system)
    items: list[dict[str, Any]] = [{"role": "developer", "content": text}
                                   for text in conv.context]
    for t in conv.turns:
        items += _items(t)
    out: dict[str, Any] = {"input": items}
    if conv.system:
        out["instructions"] = "\n\n".join(conv.system)
    return {**out, **params}


def _items(t: Turn) -> list[dict[str, Any]]:
    if t.role == "tool":
        return [{"type": "function_call_output", "call_id": t.call_id,
                 "output": text_in(t.content)}]
    if t.role == "assistant":
        text = text_in(t.content)
        head = [{"role": "assistant", "content": text}] if text else []
        return head + [{"type": "function_call", "call_id": c.id, "name": c.name,
                        "arguments": arguments_text(c.arguments)} for c in t.calls]
    if isinstance(t.content, str):
        return [{"role": "user", "content": t.content}]
    parts: list[Any] = []
    for kind, value in blocks(t.content):
        if kind == "text":
            parts.append({"type": "input_text", "text": value})
        elif kind == "image":
            parts.append({"type": "input_image", "image_url": value, "detail": "auto"})
        else:
            parts.append(value)
    return [{"role": "user", "content": parts}]


__all__ = ["to_openai_responses"]
