"""The incremental engine: fold a log once, then only what was appended since.

The engine keeps, per (session, projection), the state a fold reached at some
seq together with the chain of that frame -- in memory (:class:`StateCache`,
one per store), and from time to time in the store's derived table of saved
states.  A later call resumes from the newest state whose seq is still in the
log with the same chain; any other state (another version, a chain that no
longer matches, bytes that do not decode) is ignored and rebuilt.  States are
never authoritative.

The engine reads a session through :class:`FoldSource` (``Session.fold_source()``),
so a custom fold -- any object with ``name``, ``version``, ``state_type``,
``autosave``, ``init``, ``step``, ``view`` and optionally ``wants``,
``step_many`` and ``loaded`` (a saved state, just decoded -> the state to
fold on) -- runs with :func:`project` like the built-in ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from ..events import Event

SAVE_EVERY = 5000   # persist a small state after this many newly folded events


@dataclass
class Cached:
    """A fold's state at ``seq`` (whose frame carries ``chain``)."""

    seq: int
    chain: int
    state: Any
    saved_seq: int


class StateCache:
    """The in-memory states of one store's projections -- the most recently
    used ``max_states`` of them: a host that views thousands of sessions
    once keeps only the last ones (an evicted state resumes from its saved
    copy, or is folded again) -- and the locks that keep two readers from
    folding into one state at once (striped: a fixed number, whatever the
    number of sessions)."""

    LOCKS = 64

    def __init__(self, max_states: int = 128) -> None:
        self.states = _LRU(max_states)
        self._locks = [threading.Lock() for _ in range(self.LOCKS)]

    def lock(self, key: tuple[Any, str]) -> threading.Lock:
        return self._locks[hash(key) % self.LOCKS]

    def forget(self, session_key: Any, names: Any) -> None:
        for name in names:
            self.states.pop((session_key, name), None)


class _LRU(OrderedDict[tuple[Any, str], Cached]):
    """A dict that keeps its ``limit`` most recently used entries (only the
    operations the engine uses)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self._mutex = threading.Lock()

    def get(self, key: tuple[Any, str],  # type: ignore[override,unused-ignore]
            default: Any = None) -> Any:
        with self._mutex:
            hit = super().get(key, default)
            if hit is not default:
                self.move_to_end(key)
            return hit

    def __setitem__(self, key: tuple[Any, str], value: Cached) -> None:
        with self._mutex:
            super().__setitem__(key, value)
            self.move_to_end(key)
            while len(self) > self.limit:
                self.popitem(last=False)

    def pop(self, key: tuple[Any, str],  # type: ignore[override,unused-ignore]
            default: Any = None) -> Any:
        with self._mutex:
            return super().pop(key, default)


class FoldSource(Protocol):
    """What the engine reads of one session."""

    @property
    def cache_key(self) -> Any:
        """Identifies the session within its store's :class:`StateCache`."""
        ...

    @property
    def cache(self) -> StateCache: ...

    def position(self) -> tuple[int, int]:
        """The last durable seq and the chain of that frame (the key for -1)."""
        ...

    def chain_at(self, seq: int) -> int:
        """The chain stored in frame ``seq`` (an ancestor's, in a fork's prefix)."""
        ...

    def events(self, first: int, last: int,
               want: Callable[[str], bool] | None) -> Iterator[Event]:
        """Verified events ``first .. last``; ``want`` filters by type."""
        ...

    def saved_state(self, name: str, version: int) -> tuple[int, int, bytes] | None: ...

    def save_state(self, name: str, version: int, seq: int, chain: int,
                   state: bytes) -> None: ...

    def drop_states(self) -> None: ...


class Projectable(Protocol):
    """Anything the views can be computed for (a :class:`trajlog.Session`)."""

    def fold_source(self) -> FoldSource: ...


def project(source: FoldSource, fold: Any) -> Any:
    """Fold the log with ``fold``, resuming from the newest valid state (in
    memory, else saved), and return the view."""
    key = (source.cache_key, fold.name)
    with source.cache.lock(key):
        return fold.view(_project(source, fold, key).state)


def _project(source: FoldSource, fold: Any, key: tuple[Any, str]) -> Cached:
    """The fold's state at the log's end (cached for the next call)."""
    cache = source.cache.states
    last, last_chain = source.position()
    hit: Cached | None = cache.get(key)
    if hit is not None and not _valid(source, hit.seq, hit.chain, last):
        hit = None
    if hit is None:
        hit = _load_saved(source, fold, last)
    if hit is None:
        hit = Cached(-1, 0, fold.init(), -1)
    state = hit.state
    if hit.seq < last:
        cache.pop(key, None)  # a fold that fails half-way leaves a state nobody may reuse
        events = source.events(hit.seq + 1, last, getattr(fold, "wants", None))
        step_many = getattr(fold, "step_many", None)
        if step_many is not None:
            state = step_many(state, events)
        else:
            for ev in events:
                state = fold.step(state, ev)
        hit = Cached(last, last_chain, state, hit.saved_seq)
        if fold.autosave and last - hit.saved_seq >= SAVE_EVERY:
            _save(source, fold, hit)
            hit.saved_seq = last
    cache[key] = hit
    return hit


def _valid(source: FoldSource, seq: int, chain: int, last: int) -> bool:
    """A state is usable if the log still holds its seq with its chain."""
    if seq > last:
        return False
    return seq < 0 or source.chain_at(seq) == chain


def _load_saved(source: FoldSource, fold: Any, last: int) -> Cached | None:
    row = source.saved_state(fold.name, fold.version)
    if row is None:
        return None
    seq, chain, blob = row
    if not _valid(source, seq, chain, last):
        return None
    try:
        state = msgspec.msgpack.decode(blob, type=fold.state_type)
    except msgspec.DecodeError:
        return None  # derived and never authoritative: rebuild it
    loaded = getattr(fold, "loaded", None)
    if loaded is not None:
        state = loaded(state)
    return Cached(seq, chain, state, seq)


def _save(source: FoldSource, fold: Any, hit: Cached) -> None:
    source.save_state(fold.name, fold.version, hit.seq, hit.chain,
                      msgspec.msgpack.encode(hit.state))


def checkpoint(source: FoldSource, folds: dict[str, Any]) -> list[str]:
    """Save the current state of every fold in ``folds`` (computing it if
    needed); returns their names."""
    saved = []
    for name, fold in folds.items():
        key = (source.cache_key, name)
        with source.cache.lock(key):
            hit = _project(source, fold, key)
            if hit.saved_seq != hit.seq:
                _save(source, fold, hit)
                hit.saved_seq = hit.seq
        saved.append(name)
    return saved


def rebuild(source: FoldSource, folds: dict[str, Any]) -> None:
    """Drop every saved and cached state of the session."""
    source.cache.forget(source.cache_key, folds)
    source.drop_states()


def from_scratch(events: Any, fold: Any) -> Any:
    """Fold an event iterable without any saved state (tests, tools)."""
    state = fold.init()
    for ev in events:
        state = fold.step(state, ev)
    return fold.view(state)


__all__ = ["SAVE_EVERY", "Cached", "FoldSource", "Projectable", "StateCache", "checkpoint",
           "from_scratch", "project", "rebuild"]
