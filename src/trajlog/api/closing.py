"""Closing a session: ``session/closed`` ends its log.

A closed log takes no more events (:class:`~trajlog.errors.SessionClosedError`
from the write path); closing is final -- there is no reopen: a host that
wants to go on forks the closed session (a fork's own log decides, so a fork
is open).  A session closes only balanced (no turn, step or tool call open:
recovery could not close them after the end).  What waits for the end --
retention's "until the session closes" rules, session-scope memory, ``trajlog
tail -f`` -- reads the index row of the log's last event.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError, SessionClosedError
from ..event_types import CLOSED
from ..events import Event
from ..storage import Reader
from .handles import LogRef
from .reading import LogReader
from .writer import WriteEngine


def closed_at(reading: LogReader, reader: Reader, ref: LogRef) -> int | None:
    """The seq of ``ref``'s ``session/closed`` (its own log's), or None: one
    index row read, as nothing follows a ``session/closed`` (the write path
    refuses it; a log written before that rule that went on after one is open)."""
    last = reading.head(ref, reader).last_seq
    if last < ref.seed:
        return None
    rows = reader.index_rows(ref.sid, last - 1, last)
    return last if rows and rows[-1].seq == last and rows[-1].type == CLOSED else None


def close(reading: LogReader, reader: Reader, writer: WriteEngine, ref: LogRef,
          reason: str | None) -> Event:
    """Append ``session/closed`` (with ``reason``) and return it; a session
    already closed returns its ``session/closed`` (idempotent, also when
    another process closed it first)."""
    if reason is not None and not isinstance(reason, str):
        raise InvalidArgumentError(f"reason must be str or None, not {type(reason).__name__}")
    at = closed_at(reading, reader, ref)
    if at is None:
        try:
            row = writer.prepare(CLOSED, {} if reason is None else {"reason": reason}, None, {})
            return writer.submit(ref, [row])[0]
        except SessionClosedError as exc:   # (closed meanwhile, by another writer)
            at = exc.closed_at
    return reading.indexed(ref, at, CLOSED)


__all__ = ["close", "closed_at"]
