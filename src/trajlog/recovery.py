"""Crash recovery: what a log left open, the synthetic closers that balance it,
and the repair of torn frame files.

A crash can stop a session anywhere.  Recovery keeps every committed event and
appends closers only for what is really open:

* ``tool/result {status: TOOL_NOT_STARTED}`` for a call an assistant message
  requested but the host never started (no ``tool/call``);
* ``tool/result {status: TOOL_OUTCOME_UNKNOWN}`` for a call that started but has
  no result -- the tool may have run, so the guidance says to check first;
* ``step/end`` if a step is open, then ``turn/end {interrupted: true}`` if a turn
  is open.

Closers carry ``synthetic: true`` and the time of the last real event.  Tool
closers come in the order the calls were requested.  What is open is decided
by the one lifecycle state machine (:mod:`trajlog.lifecycle`): a call a
``tool/cancel`` closed is not open.  Which type closes what is each type's
``closer`` in :mod:`trajlog.event_types`.  Nothing here
touches the database: :meth:`trajlog.Session.inspect` and
:meth:`trajlog.Store.load` use it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import codec
from ._format import Cursor
from .codec import ScanReport, Verdict, Watermark
from .event_types import CALL_CLOSER, STEP_CLOSER, TURN_CLOSER
from .events import Event
from .lifecycle import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, Phase, Tracker, boundary_defect

RECOVERY_SOURCE = "trajlog.recovery"
GUIDANCE = {
    TOOL_NOT_STARTED: ("The session ended before this tool call was started, so it did not "
                       "run. It is safe to request it again."),
    TOOL_OUTCOME_UNKNOWN: ("The session ended while this tool call was running: the tool may "
                           "have run. Check the real state before retrying; read-only and "
                           "idempotent tools are safe to retry."),
}


@dataclass
class OpenState(Tracker):
    """What a log leaves open, tracked in one pass (the lifecycle
    :class:`~trajlog.lifecycle.Tracker`), with the count, last seq and last
    time of the events seen."""

    last_time: int | None = None       # time of the last real event
    last_seq: int = -1
    events: int = 0
    defect: tuple[int, str] | None = None  # the first marker that does not nest

    def feed(self, ev: Event) -> None:
        """Advance over one event of the log."""
        self.events += 1
        self.last_seq = ev.seq
        self.last_time = ev.time
        if self.defect is None:
            found = boundary_defect(self, ev)
            if found is not None:
                self.defect = (ev.seq, found)
        Tracker.feed(self, ev)


def analyze(events: Iterable[Event]) -> OpenState:
    """One pass over a log's events."""
    state = OpenState()
    for ev in events:
        state.feed(ev)
    return state


def closers(state: OpenState) -> list[tuple[str, dict[str, Any]]]:
    """The synthetic events that balance ``state``, in order, as (type, data)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for call_id, (phase, name) in state.open_calls.items():
        kind = TOOL_NOT_STARTED if phase is Phase.REQUESTED else TOOL_OUTCOME_UNKNOWN
        out.append((CALL_CLOSER, {"call_id": call_id, "name": name, "status": kind,
                                    "synthetic": True, "is_error": True,
                                    "output": GUIDANCE[kind]}))
    if state.step_start is not None:
        out.append((STEP_CLOSER, {"synthetic": True, "interrupted": True}))
    if state.turn_start is not None:
        out.append((TURN_CLOSER, {"synthetic": True, "interrupted": True}))
    return out


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What inspect() found, or what load() did.

    ``outcome`` is ``"balanced"`` (nothing to do), ``"repair"`` (closers needed,
    not written: inspect), ``"repaired"`` (closers written: load) or
    ``"refused"`` (``refusal`` says why; nothing written).
    """

    session: str
    outcome: str
    events: int
    last_seq: int
    closers: tuple[Event, ...]
    open_turn_seq: int | None
    open_step_seq: int | None
    refusal: BaseException | None = None


# ---------------------------------------------------------------------------
# Frame files: keep a .broken copy, then cut a torn tail above the watermark.

def _fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _keep_evidence(path: str, data: bytes) -> str:
    """Write ``data`` to a new ``<path>.broken`` (``.broken.1``, ``.2``, ...
    if taken) and fsync it: an earlier copy is never overwritten, and a
    symlink planted at the name is never followed (O_EXCL | O_NOFOLLOW)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for n in range(10_000):
        broken = path + ".broken" + (f".{n}" if n else "")
        try:
            fd = os.open(broken, flags, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return broken
    raise FileExistsError(f"{path}.broken .. .broken.9999 all exist: nothing was cut")


def repair_file(path: str, key: int, cursor: Cursor | None = None, *,
                watermark: Watermark | int | None = None, session: str | None = None,
                ) -> ScanReport:
    """Verify a file of frames and cut a torn tail; never repair corruption.

    Clean: nothing changes.  Torn (FORMAT.md section 6): the original is first
    copied to a new ``<path>.broken`` (never over an earlier one, never
    through a symlink) and fsynced, then the file is truncated to the
    end of its last valid frame and fsynced, and so is the directory.  Corrupt:
    the typed error is raised and the file is untouched.
    """
    with open(path, "rb") as f:
        data = f.read()
    report = codec.scan(data, key, cursor, watermark=watermark)
    if report.verdict is Verdict.CORRUPT:
        raise report.error(session)
    if report.verdict is Verdict.TORN:
        _keep_evidence(path, data)
        with open(path, "rb+") as f:
            f.truncate(report.valid_len)
            os.fsync(f.fileno())
        _fsync_dir(path)
    return report


__all__ = ["GUIDANCE", "TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN", "OpenState",
           "RecoveryReport", "analyze", "closers", "repair_file"]
