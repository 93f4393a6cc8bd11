"""Crash recovery: what a log left open, the synthetic closers that balance it,
and the repair of torn frame files.

A crash can stop a session anywhere.  Recovery keeps every committed event and
appends closers only for what is really open (DESIGN.md section 7):

* ``tool/result {status: TOOL_NOT_STARTED}`` for a call an assistant message
  requested but the host never started (no ``tool/call``);
* ``tool/result {status: TOOL_OUTCOME_UNKNOWN}`` for a call that started but has
  no result -- the tool may have run, so the guidance says to check first;
* ``step/end`` if a step is open, then ``turn/end {interrupted: true}`` if a turn
  is open.

Closers carry ``synthetic: true`` and the time of the last real event.  Tool
closers come in the order the calls were requested.  Nothing here touches the
database: :meth:`trajlog.Session.inspect` and :meth:`trajlog.Store.load` use it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import codec
from ._format import Cursor
from .codec import ScanReport, Verdict, Watermark
from .events import Event

TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
RECOVERY_SOURCE = "trajlog.recovery"
GUIDANCE = {
    TOOL_NOT_STARTED: ("The session ended before this tool call was started, so it did not "
                       "run. It is safe to request it again."),
    TOOL_OUTCOME_UNKNOWN: ("The session ended while this tool call was running: the tool may "
                           "have run. Check the real state before retrying; read-only and "
                           "idempotent tools are safe to retry."),
}


@dataclass(slots=True)
class OpenState:
    """What a log leaves open, tracked in one pass: open calls in the order
    they were requested, plus the ids of finished calls (one short string per
    call, so that a writer seeded from this state still refuses a reused id)."""

    turn_start: int | None = None      # seq of the open turn's turn/start
    step_start: int | None = None      # seq of the open step's step/start
    calls: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (state, name)
    last_time: int | None = None       # time of the last real event
    last_seq: int = -1
    events: int = 0
    finished: set[str] = field(default_factory=set)  # ids of calls that have a result

    def feed(self, ev: Event) -> None:
        """Advance over one event of the log."""
        self.events += 1
        self.last_seq = ev.seq
        self.last_time = ev.time
        t, data = ev.type, ev.data
        if t == "turn/start":
            self.turn_start = ev.seq
        elif t == "turn/end":
            self.turn_start = self.step_start = None
        elif t == "step/start":
            self.step_start = ev.seq
        elif t == "step/end":
            self.step_start = None
        elif not isinstance(data, dict):
            return
        elif t == "assistant/message":
            for call in data.get("tool_calls") or ():
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    self.calls[call["id"]] = ("requested", str(call.get("name", "")))
        elif t == "tool/call":
            call_id = data.get("call_id")
            if isinstance(call_id, str):
                name = self.calls[call_id][1] if call_id in self.calls else data.get("name", "")
                self.calls[call_id] = ("started", str(name))
        elif t == "tool/result":
            call_id = data.get("call_id")
            if isinstance(call_id, str):
                self.calls.pop(call_id, None)
                self.finished.add(call_id)

    @property
    def balanced(self) -> bool:
        return self.turn_start is None and self.step_start is None and not self.calls


def analyze(events: Iterable[Event]) -> OpenState:
    """One pass over a log's events."""
    state = OpenState()
    for ev in events:
        state.feed(ev)
    return state


def closers(state: OpenState) -> list[tuple[str, dict[str, Any]]]:
    """The synthetic events that balance ``state``, in order, as (type, data)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for call_id, (status, name) in state.calls.items():
        kind = TOOL_NOT_STARTED if status == "requested" else TOOL_OUTCOME_UNKNOWN
        out.append(("tool/result", {"call_id": call_id, "name": name, "status": kind,
                                    "synthetic": True, "is_error": True,
                                    "output": GUIDANCE[kind]}))
    if state.step_start is not None:
        out.append(("step/end", {"synthetic": True, "interrupted": True}))
    if state.turn_start is not None:
        out.append(("turn/end", {"synthetic": True, "interrupted": True}))
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


def repair_file(path: str, key: int, cursor: Cursor | None = None, *,
                watermark: Watermark | int | None = None, session: str | None = None,
                ) -> ScanReport:
    """Verify a file of frames and cut a torn tail; never repair corruption.

    Clean: nothing changes.  Torn (FORMAT.md section 6): the original is first
    copied to ``<path>.broken`` and fsynced, then the file is truncated to the
    end of its last valid frame and fsynced, and so is the directory.  Corrupt:
    the typed error is raised and the file is untouched.
    """
    with open(path, "rb") as f:
        data = f.read()
    report = codec.scan(data, key, cursor, watermark=watermark)
    if report.verdict is Verdict.CORRUPT:
        raise report.error(session)
    if report.verdict is Verdict.TORN:
        broken = path + ".broken"
        shutil.copyfile(path, broken)
        with open(broken, "rb+") as f:
            os.fsync(f.fileno())
        with open(path, "rb+") as f:
            f.truncate(report.valid_len)
            os.fsync(f.fileno())
        _fsync_dir(path)
    return report


__all__ = ["GUIDANCE", "TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN", "OpenState",
           "RecoveryReport", "analyze", "closers", "repair_file"]
