"""What export and import ask of a store, and the plain values they hand it.

Interop sits below the API (``tests/project/test_architecture.py``, ``LAYERS``): it
never imports :mod:`trajlog.api`.  It works on any object with the shape of
:class:`StoreLike` -- :class:`trajlog.Store` is one, and its ``export`` and
``import_path`` methods pass themselves in.  The header of a session to load
(:class:`SessionSpec`) and what loading it did (:class:`Loaded`) are plain
values, defined here so that both sides can name them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..codec.stream import FrameRun
from ..events import SessionHeader

#: ``(type, data, time, envelope)``; envelope: source, causal_parent, ...
Item = tuple[str, Any, int, Mapping[str, Any]]
#: called after each batch with (last seq written, chain of that frame)
ChainCheck = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class SessionSpec:
    """The header of a session to load."""

    session_id: str
    cwd: str = "."
    agent_preset: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_ms: int | None = None
    parent_id: str | None = None
    seed_length: int = 0
    origin: str | None = None
    delegation_depth: int = 0


@dataclass(frozen=True, slots=True)
class Loaded:
    """What loading one session did: ``created`` (a new session), ``appended``
    events written, ``kept`` events that were already stored."""

    header: SessionHeader
    created: bool
    appended: int
    kept: int


class StoredSession(Protocol):
    """A session handle as export reads it (:class:`trajlog.Session`)."""

    @property
    def id(self) -> str: ...

    @property
    def header(self) -> SessionHeader: ...

    @property
    def last_seq(self) -> int: ...

    @property
    def seed_chain(self) -> int: ...

    def frames(self) -> Iterator[FrameRun]: ...

    def children(self, *, include_subagents: bool = True) -> Sequence[StoredSession]: ...


class BulkLoad(Protocol):
    """Many sessions loaded with few commits (:class:`trajlog.api.bulk.Bulk`)."""

    @property
    def lost(self) -> Sequence[Loaded]: ...

    def load(self, spec: SessionSpec, items: Iterable[Item],
             check: ChainCheck | None = None) -> Loaded: ...

    def close(self) -> None: ...


class StoreLike(Protocol):
    """A store as export and import use it (:class:`trajlog.Store`)."""

    def session(self, session_id: str) -> StoredSession: ...

    def load(self, session_id: str) -> StoredSession: ...

    def bulk_loader(self) -> BulkLoad: ...


__all__ = ["BulkLoad", "ChainCheck", "Item", "Loaded", "SessionSpec", "StoreLike",
           "StoredSession"]
