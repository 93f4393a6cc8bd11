"""Search across sessions: the derived event search index, kept off the
caller's durable path.

An append never writes the index.  It is caught up incrementally, session by
session from each one's mark (the last seq indexed) to its committed head:
by every :meth:`Searcher.search` first (so a search sees every event
committed before the instant it read the heads, which its result reports as
``as_of_ms``), by :meth:`Searcher.update` (a host calls it at turn end), or
by an optional background thread (:meth:`Searcher.background`, off by
default).  It is derived: dropped and rebuilt from the logs at will.

What an event's document holds: every string of its data (messages, tool
calls and their results, summaries: whatever text the event carries), cut
at :data:`MAX_TEXT` characters.  An erased event is never indexed (the
tombstones are read in the transaction that writes the documents) and its
documents go in the erasure's own transaction (the backends' tombstone
write), so every erasure, deletion and retention removes its text from the
index; a search also leaves out any document under a tombstone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError, SessionNotFoundError, TrajlogError
from ..event_types import DELETED
from ..events import DATA_CLASSES, Event
from ..storage.base import Backend
from ..storage.search_model import DocRow, SearchFilter
from .reading import LogReader

#: the most characters of an event's text the index holds
MAX_TEXT = 32_768
BATCH = 2_000   # documents a transaction writes: a catch-up's memory stays bounded


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One event that matched: where it is, a snippet with the matched words
    between the result's marks, and how to open it."""

    session_id: str
    seq: int
    type: str
    time: int
    snippet: str
    score: float

    @property
    def command(self) -> str:
        """The command line that prints this event."""
        return f"trajlog show {self.session_id} --from {self.seq} --to {self.seq}"

    @property
    def viewer_anchor(self) -> str:
        """The viewer's anchor of this event's session, at its events view."""
        return f"#session={self.session_id}&view=events&seq={self.seq}"


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The ranked hits of a search (best first), and what it covered: every
    event committed before ``as_of_ms`` (when ``caught_up``), ``indexed``
    of them indexed by this call; ``skipped`` names sessions whose logs
    could not be read (damaged), left out of the index."""

    query: str
    hits: tuple[SearchHit, ...]
    as_of_ms: int
    caught_up: bool
    indexed: int = 0
    skipped: tuple[str, ...] = field(default=())

    def __iter__(self) -> Iterator[SearchHit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> SearchHit:
        return self.hits[i]


def text_of(data: Any, limit: int = MAX_TEXT) -> str:
    """Every string in ``data`` (depth first), joined by newlines, at most
    ``limit`` characters."""
    out: list[str] = []
    size = 0
    stack = [data]
    while stack and size < limit:
        v = stack.pop()
        if isinstance(v, str):
            if v:
                out.append(v)
                size += len(v) + 1
        elif isinstance(v, Mapping):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
    return "\n".join(out)[:limit]


def _name(value: Any, what: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidArgumentError(f"{what} must be a non-empty str, not {value!r}")
    return value


def _ms(value: Any, what: str) -> int | None:
    if value is not None and (type(value) is not int or value < 0):
        raise InvalidArgumentError(f"{what} must be epoch milliseconds (an int >= 0), not "
                                   f"{value!r}")
    return value


class Searcher:
    """A store's search: the catch-up, the search, drop and rebuild, and the
    optional background indexer."""

    def __init__(self, backend: Backend, reading: LogReader) -> None:
        self._backend = backend
        self._reading = reading
        self._lock = threading.Lock()   # one catch-up at a time in this process
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    # -- the index ------------------------------------------------------------

    def update(self) -> tuple[int, int, tuple[str, ...]]:
        """Catch the index up to the committed heads: ``(events indexed, the
        instant the heads were read, sessions skipped as unreadable)``."""
        with self._lock:
            if not self._backend.reader().search_index_exists():
                self._backend.search_index(True)
            as_of = time.time_ns() // 1_000_000
            todo = self._backend.reader().search_behind()
            n = 0
            skipped: list[str] = []
            for sid, first, last in todo:
                try:
                    n += self._session(sid, first, last)
                except SessionNotFoundError:
                    continue
                except TrajlogError as exc:
                    if self._backend.closed:
                        raise
                    skipped.append(f"{sid}: {type(exc).__name__}")
            return n, as_of, tuple(skipped)

    def _session(self, sid: int, first: int, last: int) -> int:
        ref = self._reading.ref_by_sid(sid)
        if self._backend.reader().deletion(ref.id) is not None:
            return self._write(sid, [], first, last)   # deleted: nothing of it is indexed
        meta = ref.header.metadata
        tenant = meta.get("tenant") if isinstance(meta.get("tenant"), str) else None
        user = meta.get("user") if isinstance(meta.get("user"), str) else None
        docs: list[DocRow] = []
        n = 0
        at = first
        for event in self._reading.events(ref, first, last):
            # a deletion's record says why it was deleted: never a hit (the
            # session is gone from search as from every listing)
            text = text_of(event.data) if event.type != DELETED else ""
            if text:
                docs.append(_doc(sid, event, tenant, user, text))
            if len(docs) >= BATCH:
                n += self._write(sid, docs, at, event.seq)
                docs, at = [], event.seq + 1
        return n + self._write(sid, docs, at, last)

    def _write(self, sid: int, docs: list[DocRow], first: int, upto: int) -> int:
        with self._backend.transaction() as w:
            # the tombstone head's lock (held by every erasure until it
            # commits): an erasure either committed before -- its tombstone
            # is read here and its event stays out -- or waits for this
            # commit, and its tombstone write then deletes these documents
            w.max_tid()
            gone = set(w.erased_seqs(sid, first, upto))
            kept = [d for d in docs if d.seq not in gone]
            w.index_events(sid, kept, upto)
        return len(kept)

    def drop(self) -> None:
        """Drop the index (the next search or update makes it again)."""
        with self._lock:
            self._backend.search_index(False)

    def rebuild(self) -> int:
        """Drop the index and make it again from the logs; how many events
        it holds."""
        self.drop()
        self._backend.search_index(True)
        return self.update()[0]

    # -- the background indexer -----------------------------------------------

    def background(self, interval_s: float | None) -> None:
        """Run the catch-up every ``interval_s`` seconds on a thread of its
        own (None: stop it)."""
        if interval_s is not None and (not isinstance(interval_s, (int, float)) or
                                       not 0 < interval_s <= 3600):
            raise InvalidArgumentError(f"interval_s must be seconds in (0, 3600], not "
                                       f"{interval_s!r}")
        if self._stop is not None and self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._stop = self._thread = None
        if interval_s is None:
            return
        stop = self._stop = threading.Event()

        def run() -> None:
            while not stop.wait(interval_s):
                try:
                    self.update()
                except TrajlogError:
                    if self._backend.closed:
                        return
        self._thread = threading.Thread(target=run, name="trajlog-search-index", daemon=True)
        self._thread.start()

    @property
    def background_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        self.background(None)

    # -- the search -----------------------------------------------------------

    def search(self, query: str, *, limit: int, sessions: Sequence[str] | None,
               tenant: str | None, user: str | None, cwd: str | None, since_ms: int | None,
               until_ms: int | None, types: Sequence[str] | None, branch: str | None,
               data_class: str | None, catch_up: bool,
               marks: tuple[str, str]) -> SearchResult:
        if not isinstance(query, str):
            raise TypeError(f"query must be str, not {type(query).__name__}")
        words = query.split()
        if not words:
            raise InvalidArgumentError("a search needs at least one word")
        if type(limit) is not int or not 1 <= limit <= 10_000:
            raise InvalidArgumentError(f"limit must be an int in 1..10000, not {limit!r}")
        if data_class is not None and data_class not in DATA_CLASSES:
            raise InvalidArgumentError(f"data_class must be one of {', '.join(DATA_CLASSES)}")
        if (not isinstance(marks, tuple) or len(marks) != 2 or
                not all(isinstance(m, str) for m in marks)):
            raise InvalidArgumentError("marks must be a (before, after) pair of str")
        f = SearchFilter(self._sids(sessions), _name(tenant, "tenant"), _name(user, "user"),
                         _name(cwd, "cwd"), _ms(since_ms, "since_ms"), _ms(until_ms, "until_ms"),
                         _types(types), _name(branch, "branch"), data_class)
        indexed, skipped = 0, tuple[str, ...]()
        if catch_up:
            indexed, as_of, skipped = self.update()
        else:
            as_of = time.time_ns() // 1_000_000
            if not self._backend.reader().search_index_exists():
                return SearchResult(query, (), as_of, False)
        rows = self._backend.reader().search_events(words, f, limit, marks)
        hits = tuple(SearchHit(r.session_id, r.seq, r.type, r.ms, r.snippet, r.score)
                     for r in rows)
        return SearchResult(query, hits, as_of, catch_up, indexed, skipped)

    def _sids(self, sessions: Sequence[str] | None) -> tuple[int, ...] | None:
        if sessions is None:
            return None
        if isinstance(sessions, str):
            sessions = [sessions]
        reader = self._backend.reader()
        sids = []
        for session_id in sessions:
            if not isinstance(session_id, str):
                raise TypeError(f"session ids must be str, not {type(session_id).__name__}")
            row = reader.session_by_id(session_id)
            if row is None:
                raise SessionNotFoundError(f"no session {session_id!r} in {self._backend.path}")
            sids.append(row.sid)
        return tuple(sids)


def _types(types: Sequence[str] | None) -> tuple[str, ...] | None:
    """Type filters; ``tool/`` or ``tool/*`` names a family."""
    if types is None:
        return None
    if isinstance(types, str):
        types = [types]
    out = []
    for t in types:
        if not isinstance(t, str) or not t:
            raise InvalidArgumentError(f"a type filter is a non-empty str, not {t!r}")
        out.append(t[:-1] if t.endswith("/*") else t)
    return tuple(out)


def _doc(sid: int, event: Event, tenant: str | None, user: str | None, text: str) -> DocRow:
    return DocRow(sid, event.seq, event.time, event.type, event.branch_id, event.data_class,
                  tenant, user, text)


__all__ = ["MAX_TEXT", "SearchHit", "SearchResult", "Searcher", "text_of"]
