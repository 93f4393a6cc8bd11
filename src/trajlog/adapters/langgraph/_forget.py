"""What :meth:`TrajlogSaver.erase_message` needs: a message's text, found by
its id, and the stored values of a checkpoint or a write with that text
replaced.

A LangGraph checkpoint copies the text of a message out of the events
trajlog can erase: the input checkpoint's ``__start__`` channel and the
writes of the task that took it (both before the message has an id), then
every later checkpoint of the thread, each a serialized value of its own.
Erasing the mirrored event alone leaves all of these; the saver finds them
by the text (every string equal to one of the message's texts) and writes
them again without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage

from ._log import pack_tree, unpack

ERASED = "[erased]"     # what an erased message's text becomes


class Opaque(Exception):
    """A stored value the saver cannot open holds the text."""


def texts_of(content: Any) -> frozenset[str]:
    """The strings of a message's content (a string, or blocks with text)."""
    if isinstance(content, str):
        return frozenset({content} if content else ())
    out: set[str] = set()
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str) and block:
            out.add(block)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str) and block["text"]:
            out.add(block["text"])
    return frozenset(out)


def find_message(value: Any, message_id: str, depth: int = 0) -> BaseMessage | None:
    """The message of ``message_id`` in a decoded channel value (a message,
    or lists and mappings of them)."""
    if isinstance(value, BaseMessage):
        return value if value.id == message_id else None
    if depth > 8:
        return None
    items: Iterable[Any] = (value.values() if isinstance(value, Mapping)
                            else value if isinstance(value, (list, tuple)) else ())
    for v in items:
        found = find_message(v, message_id, depth + 1)
        if found is not None:
            return found
    return None


def thaw(value: Any) -> Any:
    """A stored event's data as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def _scrub(node: Any, texts: frozenset[str], tree: bool) -> Any:
    """A tree (or plain JSON) with every string in ``texts`` replaced."""
    if type(node) is str:
        return ERASED if node in texts else node
    if isinstance(node, (list, tuple)):
        return [_scrub(x, texts, tree) for x in node]
    if isinstance(node, Mapping):
        if tree and ("i" in node or "f" in node):
            return node         # a number's text, not a string of the value
        return {k: _scrub(v, texts, tree) for k, v in node.items()}
    return node


def scrub_value(packed: Any, texts: frozenset[str],
                repack: Callable[[tuple[str, bytes]], list[Any]]) -> list[Any] | None:
    """A stored serialized value without ``texts`` (``repack`` stores the new
    bytes), or None if it does not hold them.  :class:`Opaque` if it holds one
    of them but the saver cannot open it."""
    value = thaw(packed)
    tree = value if value[1] == "t" else pack_tree(unpack(value))
    if tree is None:
        body = value[2]
        if any(t in body for t in texts):
            raise Opaque(value[0])
        return None
    new = _scrub(tree[2], texts, True)
    if new == tree[2]:
        return None
    return repack(unpack([tree[0], "t", new]))


def scrub_json(value: Any, texts: frozenset[str]) -> Any:
    """Plain JSON (a checkpoint's metadata) without ``texts``."""
    return _scrub(thaw(value), texts, False)


__all__ = ["ERASED", "Opaque", "find_message", "scrub_json", "scrub_value", "texts_of",
           "thaw"]
