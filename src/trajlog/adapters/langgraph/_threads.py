"""A thread's session across deletions, for :class:`TrajlogSaver`.

A thread maps to a session by its id's generation (:func:`._log.generation_id`):
the first is ``uuid5(thread_id)``; each ``delete_thread`` deletes the
generation's session (``Store.delete_session``: purged, unlisted, recorded,
never written again) and a later ``put`` makes the next one -- so the thread
goes on under its id and the deleted session never comes back.  A thread
whose copies (``copy_thread``: forks) read its events cannot be deleted: its
own events are erased and a ``checkpoint/delete`` marker after which the
thread starts again is appended instead.
"""

from __future__ import annotations

from typing import Any

from ...api import Session
from ...errors import DependentSessionsError, SessionDeletedError, SessionNotFoundError
from ._log import DELETED, generation_id

REASON, ACTOR = "langgraph delete_thread", "langgraph"


def open_thread(saver: Any, thread_id: str) -> tuple[str, int, Session | None]:
    """The session that holds the thread now (None: not made yet), its id and
    generation: the first, or past each deleted one the next."""
    n = saver._generations.get(thread_id, 0)
    while True:
        sid = generation_id(thread_id, n)
        try:
            return sid, n, saver.store.session(sid)
        except SessionNotFoundError:
            return sid, n, None
        except SessionDeletedError:
            n += 1
            with saver._lock:
                saver._generations[thread_id] = n


def forget_thread(saver: Any, thread_id: str, sid: str) -> None:
    """Drop what this process keeps of a deleted session of the thread: its
    next use opens (or makes) the thread's next generation."""
    with saver._lock:
        saver._threads.pop(sid, None)
        saver._mirrors.pop(sid, None)
        n = saver._generations.get(thread_id, 0)
        if generation_id(thread_id, n) == sid:
            saver._generations[thread_id] = n + 1


def delete_thread(saver: Any, thread_id: str) -> None:
    """Delete the thread's session; while copies read its events, erase them
    and append the marker instead."""
    t = saver._thread(thread_id, create=False)
    if t is None:
        return
    store = saver.store
    with t.lock:
        try:
            store.delete_session(t.session.id, reason=REASON, actor=ACTOR)
        except DependentSessionsError:
            pass                # copies read its events: erased and hidden below
        else:
            forget_thread(saver, thread_id, t.session.id)
            return
        base, last = t.live_seqs()
        if base > last:
            return              # nothing live: nothing to delete
        sid = t.session.id
        # a copy (fork) still reads our events below its seed: hide, never erase, them
        kept = max((h.seed_length for h in store.dependents(sid)), default=0)
        lo = max(base, t.session.header.seed_length, kept)
        if lo <= last:
            store.erase(sid, list(range(lo, last + 1)), reason=REASON, actor=ACTOR)
        t.note([t.session.append(DELETED, {"thread_id": thread_id, "from_seq": base,
                                           "erased_from": lo, "to_seq": last})])


__all__ = ["delete_thread", "forget_thread", "open_thread"]
