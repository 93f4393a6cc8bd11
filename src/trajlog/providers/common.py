"""What the three request shapes share: a view (a context build or a model
history) read into one neutral conversation, tool calls paired with their
results by id, and content blocks read into text, images and the rest.

The provider modules (:mod:`.openai_chat`, :mod:`.openai_responses`,
:mod:`.anthropic_messages`) only write this conversation out in their API's
shape; every rule about *what* is sent lives here:

* **system**: the caller's ``system=`` text first, then a build's header (its
  policy line and six-block summary);
* **context**: a build's governance blocks -- the items it renders under role
  ``context`` (task contract, human decisions, file snapshots, the plan) --
  in seq order, each with its source reference;
* **turns**: user, assistant and tool turns in seq order.  Each tool result
  follows the assistant turn that requested it, directly (the order every
  provider requires); a call with no result in the view is dropped from its
  turn (a provider refuses an unanswered call), and a result whose call is
  not in the view (a build kept the evidence, not the old message that asked
  for it; a compaction folded the call away) becomes user text at its place;
  an assistant turn left with no text and no call is dropped.  A compaction's
  summary is a user turn.  Reasoning is not sent (each provider wants its
  own signed or encrypted form, which a log of another provider's turns does
  not hold).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import msgspec

from ..errors import ArgumentTypeError
from ..event_types import CANCELS_CALL
from ..projections.context import ContextBuild
from ..projections.context_summary import text_of
from ..projections.shapes import Message


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call an assistant turn requests (``arguments`` as recorded:
    a JSON object or the JSON text of one)."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class Turn:
    """A user, assistant or tool turn; ``content`` a str or a list of blocks."""

    role: str
    content: Any
    calls: tuple[Call, ...] = ()
    call_id: str | None = None
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Conversation:
    """A view read for a provider: system texts, governance blocks, turns."""

    system: tuple[str, ...]
    context: tuple[str, ...]
    turns: tuple[Turn, ...]


def plain(value: Any) -> Any:
    """``value`` with every (read-only) dict and list a plain one: what a
    client serialises and a caller may change."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def read(view: Any, system: str | None = None) -> Conversation:
    """``view`` -- a :class:`~trajlog.projections.context.ContextBuild` or the
    list :func:`trajlog.projections.model_history` returns -- as a
    conversation, ``system`` (the caller's system prompt) first."""
    if system is not None and not isinstance(system, str):
        raise ArgumentTypeError(f"system must be a str or None, not {type(system).__name__}")
    head = (system,) if system else ()
    if isinstance(view, ContextBuild):
        return _from_build(view, head)
    if isinstance(view, Sequence) and not isinstance(view, (str, bytes)) and all(
            isinstance(m, Message) for m in view):
        return _pair(head, (), [_from_message(m) for m in view], labelled=False)
    raise ArgumentTypeError(f"a provider request is made from a context build or a model "
                            f"history (a list of Message), not {type(view).__name__}")


def _from_build(build: ContextBuild, head: tuple[str, ...]) -> Conversation:
    system = head + tuple(m["content"] for m in build.messages if m["role"] == "system")
    context: list[str] = []
    turns: list[Turn] = []
    for it in build.selected:
        ev = it.event
        d = ev.data if ev is not None and isinstance(ev.data, dict) else {}
        if it.role == "context" or ev is None:
            context.append(it.text)
        elif it.role == "tool":
            turns.append(Turn("tool", it.text, call_id=_id(d.get("call_id")),
                              is_error=bool(d.get("is_error")) or ev.type in CANCELS_CALL))
        else:
            content = d.get("content")
            # blocks (images...) pass through after the item's reference;
            # plain text is the rendered text, reference included; a turn
            # with no text stays empty (it is dropped if no call is left)
            body: Any = [{"type": "text", "text": f"[{it.ref}]"}, *content] if isinstance(
                content, list) and content else it.text if text_in(content).strip() else ""
            turns.append(Turn(it.role, body, _calls(d.get("tool_calls"))
                              if it.role == "assistant" else ()))
    return _pair(system, tuple(context), turns, labelled=True)


def _from_message(m: Message) -> Turn:
    if m.role == "assistant":
        return Turn("assistant", m.content, _calls(m.tool_calls))
    if m.role == "tool":
        return Turn("tool", m.content, call_id=m.tool_call_id, is_error=bool(m.is_error))
    if m.role == "summary":
        return Turn("user", f"Summary of the earlier conversation: {text_of(m.content)}")
    return Turn("user", m.content)


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _calls(value: Any) -> tuple[Call, ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(Call(c["id"], str(c.get("name") or ""), c.get("arguments"))
                 for c in value if isinstance(c, Mapping) and _id(c.get("id")))


def _pair(system: tuple[str, ...], context: tuple[str, ...], turns: list[Turn], *,
          labelled: bool) -> Conversation:
    """Each call with its result right after it (see the module docstring);
    ``labelled``: a result's text already names its source (a build's)."""
    first: dict[str, int] = {}
    for i, t in enumerate(turns):
        if t.role == "tool" and t.call_id is not None:
            first.setdefault(t.call_id, i)
    out: list[Turn] = []
    placed: set[int] = set()
    for i, t in enumerate(turns):
        if t.role == "assistant":
            kept = tuple(c for c in t.calls if first.get(c.id, -1) > i
                         and first[c.id] not in placed)
            if not kept and not text_in(t.content).strip():
                continue
            out.append(replace(t, calls=kept))
            for c in kept:
                placed.add(first[c.id])
                out.append(turns[first[c.id]])
        elif t.role == "tool":
            if i not in placed:
                text = text_in(t.content)
                out.append(Turn("user", text if labelled else
                                f"Result of tool call {t.call_id}: {text}"))
        elif any(kind != "text" or value.strip() for kind, value in blocks(t.content)):
            out.append(t)   # (an erased message -- no content -- is left out, not sent empty)
    return Conversation(system, context, tuple(out))


# --- content blocks -------------------------------------------------------------

def blocks(content: Any) -> list[tuple[str, Any]]:
    """``content`` (a str or a list of blocks in any of the three APIs'
    shapes) as ``("text", str)``, ``("image", url)`` (a ``data:`` URL for
    inline bytes) and ``("other", block)`` pieces."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    if content is None:
        return []
    if not isinstance(content, (list, tuple)):
        return [("text", text_of(plain(content)))]
    out: list[tuple[str, Any]] = []
    for b in content:
        if isinstance(b, str):
            out.append(("text", b))
            continue
        kind = b.get("type") if isinstance(b, Mapping) else None
        if kind in ("text", "input_text", "output_text") and isinstance(b.get("text"), str):
            out.append(("text", b["text"]))
        elif (url := _image_url(b, kind)) is not None:
            out.append(("image", url))
        else:
            out.append(("other", plain(b)))
    return out


def _image_url(b: Any, kind: Any) -> str | None:
    if kind == "image_url":
        inner = b.get("image_url")
        url = inner.get("url") if isinstance(inner, Mapping) else inner
        return url if isinstance(url, str) else None
    if kind == "input_image":
        url = b.get("image_url")
        return url if isinstance(url, str) else None
    if kind == "image" and isinstance(src := b.get("source"), Mapping):
        if src.get("type") == "url" and isinstance(src.get("url"), str):
            return str(src["url"])
        if src.get("type") == "base64" and isinstance(src.get("data"), str):
            media = src.get("media_type") or "image/png"
            return f"data:{media};base64,{src['data']}"
    return None


def data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a ``data:...;base64,`` URL, else None."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    media, _, data = url[5:].partition(";base64,")
    return media or "application/octet-stream", data


def text_in(content: Any) -> str:
    """The text of ``content``: its text blocks joined, anything else as JSON."""
    return "\n".join(v if k == "text" else text_of(v) for k, v in blocks(content)
                     if k != "image")


def arguments_text(arguments: Any) -> str:
    """A call's arguments as the JSON text OpenAI's APIs carry."""
    if isinstance(arguments, str):
        return arguments
    return msgspec.json.encode(plain(arguments) if arguments is not None else {}).decode()


def arguments_object(arguments: Any) -> dict[str, Any]:
    """A call's arguments as the JSON object Anthropic's ``tool_use`` carries
    (JSON text decoded; anything not an object under ``"arguments"``)."""
    value = plain(arguments)
    if isinstance(value, str):
        with contextlib.suppress(msgspec.DecodeError):   # not JSON: kept as text
            value = msgspec.json.decode(value)
    if value is None:
        return {}
    return value if isinstance(value, dict) else {"arguments": value}


__all__ = ["Call", "Conversation", "Turn", "arguments_object", "arguments_text", "blocks",
           "data_url", "plain", "read", "text_in"]
