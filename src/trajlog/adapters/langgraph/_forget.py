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
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from ...api import Session
from ...errors import ErasureError
from ...events import Event
from .._plain import thaw
from ._log import ADAPTER, DELETED, FORGET, PUT, WRITES, pack_tree, unpack
from ._mirror import MIRRORED

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


@dataclass(frozen=True)
class MessageErasure:
    """What :meth:`TrajlogSaver.erase_message` did: the seqs it erased in the
    thread's log (as the thread reads it), the seqs it appended there (the
    checkpoints and writes again, then the marker), and every thread whose
    log held the message (the thread, its copies and its source)."""

    message_id: str
    erased: tuple[int, ...]
    appended: tuple[int, ...]
    threads: tuple[str, ...]



def forget_message(saver: Any, thread_id: str, message_id: str, *, reason: str,
                   actor: str | None) -> MessageErasure:
    """:meth:`TrajlogSaver.erase_message` (``saver``)."""
    t = saver._thread(str(thread_id), create=False)
    if t is None:
        raise ErasureError(f"there is no thread {thread_id!r}: nothing was erased")
    with t.lock:
        family = _family(saver.store, t.session)
        views = {s.id: list(s.events()) for s in family}
        texts = _message_texts(saver.serde, views, message_id)
        if not texts:
            raise ErasureError(f"thread {thread_id!r} holds no message {message_id!r} "
                               "(or only an empty one): nothing was erased")
        erase: dict[str, set[int]] = {}             # owning log -> seqs
        appends: dict[str, list[tuple[str, Any]]] = {}
        seen: dict[str, list[int]] = {}
        for s in family:
            base = max((ev.seq + 1 for ev in views[s.id] if ev.type == DELETED), default=0)
            for ev in views[s.id]:
                redo = _without(saver, ev, message_id, texts, s)
                if redo is None:
                    continue
                erase.setdefault(_owner(saver.store, s, ev.seq), set()).add(ev.seq)
                seen.setdefault(s.id, []).append(ev.seq)
                if isinstance(redo, tuple) and ev.seq >= base:
                    appends.setdefault(s.id, []).append(redo)
        appended: list[int] = []
        for s in family:       # first the new copies: a failure loses nothing
            if s.id not in seen:
                continue
            items = [*appends.get(s.id, ()), (FORGET, {"message_id": message_id,
                                                       "erased": seen[s.id]})]
            events = s.append_batch(items)
            if s.id == t.session.id:
                appended = [ev.seq for ev in events]
            known = saver._threads.get(s.id)
            if known is not None:
                with known.lock:
                    known.note(events)
        for owner, seqs in erase.items():
            saver.store.erase(owner, sorted(seqs), reason=reason, actor=actor)
        for s in family:       # events this process read before the erasure
            known = saver._threads.get(s.id)
            if known is not None:
                with known.lock:
                    known.cache.clear()
    return MessageErasure(message_id, tuple(seen.get(t.session.id, ())), tuple(appended),
                          tuple(str(s.header.metadata.get("thread_id")) for s in family
                                if s.id in seen))



def _family(store: Any, session: Session) -> list[Session]:
    """The thread's session, the threads it was copied from and every copy
    of them (sessions that read the same events), oldest first."""
    root = session
    while root.header.parent_session is not None and root.header.seed_length > 0:
        parent = store.session(root.header.parent_session)
        if parent.header.metadata.get("adapter") != ADAPTER:
            break
        root = parent
    out, todo = [], [root]
    while todo:
        s = todo.pop(0)
        out.append(s)
        todo += [store.session(h.id) for h in store.dependents(s.id)
                 if h.metadata.get("adapter") == ADAPTER]
    return out

def _owner(store: Any, session: Session, seq: int) -> str:
    """The session whose own log holds ``seq`` of ``session``'s view."""
    header = session.header
    while seq < header.seed_length and header.parent_session is not None:
        header = store.session(header.parent_session).header
    return header.id

def _message_texts(serde: Any, views: dict[str, list[Event]],
                   message_id: str) -> frozenset[str]:
    """The texts of the message: from its mirrored event, else from the
    newest checkpoint or write that holds it."""
    events = [ev for evs in views.values() for ev in evs]
    for ev in events:
        d = ev.data
        if (ev.type in MIRRORED and isinstance(d, Mapping)
                and d.get("message_id") == message_id and "content" in d):
            return texts_of(d["content"])
    for ev in sorted(events, key=lambda e: -e.seq):
        d = ev.data
        if not isinstance(d, Mapping):
            continue
        values = ([d["checkpoint"]] if ev.type == PUT and "checkpoint" in d else
                  [w[2] for w in d["writes"]] if ev.type == WRITES and "writes" in d
                  else [])
        for packed in values:
            try:
                value = serde.loads_typed(unpack(packed))
            except Exception:       # (a value this serde cannot read holds nothing)
                continue
            found = find_message(value, message_id)
            if found is not None:
                return texts_of(found.content)
    return frozenset()

def _without(saver: Any, ev: Event, message_id: str, texts: frozenset[str],
             session: Session) -> tuple[str, Any] | bool | None:
    """What becomes of an event when the message goes: None (it does not
    hold it), False (erase it: a mirrored event of the message) or the
    event to append again without the text (a put or a write)."""
    d = ev.data
    if not isinstance(d, Mapping) or isinstance(d.get("erased"), Mapping):
        return None
    if ev.type in MIRRORED:
        return False if d.get("message_id") == message_id else None
    if ev.type not in (PUT, WRITES):
        return None

    def repack(typed: tuple[str, bytes]) -> list[Any]:
        return list(saver._pack(typed, ev.type, "$"))

    try:
        if ev.type == PUT and "checkpoint" in d:
            new = thaw(d)
            changed = False
            for name in ("checkpoint", "metadata_typed"):
                if name in d:
                    value = scrub_value(d[name], texts, repack)
                    if value is not None:
                        new[name], changed = value, True
            if "metadata" in d:
                md = scrub_json(d["metadata"], texts)
                if md != new["metadata"]:
                    new["metadata"], changed = md, True
        elif ev.type == WRITES and "writes" in d:
            new = thaw(d)
            changed = False
            for w in new["writes"]:
                value = scrub_value(w[2], texts, repack)
                if value is not None:
                    w[2], changed = value, True
        else:
            return None
    except Opaque as exc:
        raise ErasureError(
            f"seq {ev.seq} of thread {session.header.metadata.get('thread_id')!r} holds "
            f"the message in a {exc.args[0]!r} value the saver cannot open: nothing "
            "was erased") from None
    if not changed:
        return None
    new["restores"] = ev.seq
    return ev.type, new


__all__ = ["ERASED", "MessageErasure", "Opaque", "find_message", "forget_message", "scrub_json",
           "scrub_value", "texts_of", "thaw"]
