"""A view as the request of Anthropic's Messages API
(``client.messages.create(**to_anthropic(view, model=..., max_tokens=...))``).

System texts and a build's governance blocks are the top-level ``system``
text blocks.  An assistant turn is its text and one ``tool_use`` block per
call (arguments as a JSON object); the results follow as ``tool_result``
blocks (``is_error`` kept) in the next user message.  Consecutive turns of
one role are merged into one message, as the API requires roles to
alternate.  Content blocks become ``text`` and ``image`` blocks (a ``data:``
URL as a base64 source, any other URL as a url source); any other block
passes through as it is."""

from __future__ import annotations

from typing import Any

from .common import Turn, arguments_object, blocks, data_url, read


def to_anthropic(view: Any, *, system: str | None = None, **params: Any) -> dict[str, Any]:
    """The keyword arguments of ``messages.create``: ``messages`` (and
    ``system`` when there are system texts) made from ``view`` (a context
    build or a model history), then ``params`` (``model``, ``max_tokens``,
    ``tools``, ...) as given."""
    conv = read(view, system)
    messages: list[dict[str, Any]] = []
    for t in conv.turns:
        role = "assistant" if t.role == "assistant" else "user"
        content = _content(t)
        if not content:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += content
        else:
            messages.append({"role": role, "content": content})
    out: dict[str, Any] = {"messages": messages}
    texts = conv.system + conv.context
    if texts:
        out["system"] = [{"type": "text", "text": text} for text in texts]
    return {**out, **params}


def _content(t: Turn) -> list[dict[str, Any]]:
    if t.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": t.call_id}
        if content := _blocks(t.content):
            result["content"] = content
        if t.is_error:
            result["is_error"] = True
        return [result]
    content = _blocks(t.content)
    content += [{"type": "tool_use", "id": c.id, "name": c.name,
                 "input": arguments_object(c.arguments)} for c in t.calls]
    return content


def _blocks(content: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for kind, value in blocks(content):
        if kind == "text":
            if value.strip():   # the API refuses empty text blocks
                out.append({"type": "text", "text": value})
        elif kind == "image":
            inline = data_url(value)
            out.append({"type": "image", "source": {
                "type": "base64", "media_type": inline[0], "data": inline[1]}
                if inline else {"type": "url", "url": value}})
        else:
            out.append(value)
    return out


__all__ = ["to_anthropic"]
