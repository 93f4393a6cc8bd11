"""The redaction pause: after a ``hash`` finding a session is paused
(``redaction/paused``) until ``redaction/resumed``, and refuses content in
between (:class:`~trajlog.errors.RedactionPausedError`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from ..errors import RedactionPausedError
from ..event_types import PASS_PREFIXES_WHEN_PAUSED, PASS_WHEN_PAUSED
from ..event_types import PAUSED as PAUSED  # (re-exported: trajlog.redaction)
from ..event_types import RESUMED as RESUMED
from ..events import Event

# While paused, only what closes, audits or resumes may be appended (each
# type's ``pause`` column in trajlog.event_types).
_PASS_WHEN_PAUSED = PASS_WHEN_PAUSED
_PASS_PREFIXES = PASS_PREFIXES_WHEN_PAUSED


def passes_pause(type_: str, data: Any) -> bool:
    """May an event of ``type_`` be appended to a paused session?"""
    return (type_ in _PASS_WHEN_PAUSED or type_.startswith(_PASS_PREFIXES)
            or (isinstance(data, dict) and data.get("synthetic") is True))


PAUSE_TYPES = frozenset({PAUSED, RESUMED})   # the events that move the pause


def pause_state(type_: str) -> bool | None:
    """What an event does to the pause: True pauses, False resumes, None neither."""
    return True if type_ == PAUSED else False if type_ == RESUMED else None


def check_paused(session: str, paused: bool, first: int,
                 events: Sequence[tuple[str, Any]]) -> bool:
    """Follow the pause over ``events`` (type, data) appended from seq
    ``first``; raise :class:`RedactionPausedError` at the first one a paused
    session refuses.  Returns the pause after them."""
    for i, (type_, data) in enumerate(events):
        change = pause_state(type_)
        if change is not None:
            paused = change
        elif paused and not passes_pause(type_, data):
            raise RedactionPausedError(session, first + i, type_)
    return paused


class RowLike(Protocol):
    """An event ready to be framed, as the write path holds it."""

    @property
    def event(self) -> Event: ...

    @property
    def pause(self) -> tuple[tuple[str, str], ...]: ...


R = TypeVar("R", bound=RowLike)
Remake = Callable[..., R]


def pause_rows(session: str, paused: bool, first: int, rows: list[R],
               remake: Remake[R]) -> tuple[list[R], bool]:
    """``rows`` followed by a ``redaction/paused`` event for those whose
    findings pause, after checking that the session takes them; and the
    pause after them."""
    found = [{"seq": first + i, "findings": [list(f) for f in r.pause]}
             for i, r in enumerate(rows) if r.pause]
    if found:
        ev = Event(PAUSED, rows[-1].event.time, {"reason": "hash policy", "events": found},
                   source="trajlog:redaction")
        rows = [*rows, remake(ev)]
    return rows, check_paused(session, paused, first,
                              [(r.event.type, r.event.data) for r in rows])
