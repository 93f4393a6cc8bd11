"""The viewer's document: a compact, JSON-able model of a session tree.

Every event is embedded once, as a row ``[seq, type, time, source, data, env,
refs]`` (``type`` and ``source`` are indexes into shared string tables,
``source`` -1 when unset; ``env``, the other envelope fields, and ``refs`` only
when there are some).  With a :class:`Sink`, the strings of 96 characters or
more leave ``data`` (None in their place) for the sink, which the page gzips
into blobs; ``refs`` lists them as ``[path, chunk, byte offset, byte length]``
-- the bulk of a log is its text, and compressed it loads several times
faster than as JSON.  The views refer
to events by seq and never copy their content: the page takes a message's
text, a tool's arguments and output from the event rows, so a 60 KiB tool
output is in the page once however many views show it.  A fork whose parent
is in the document holds only its own events (``base`` = its seed length) and
reads its inherited prefix through ``inh``, the index of its parent -- as the
store itself does.

The shapes (short keys; the page's script, ``assets/*.js``, is their only reader):

* ``chat``: ``[0, seq, role]`` bubble, ``[2, seq, role]`` erased bubble,
  ``[1, seq, call_id, name, status, result_seq]`` tool card;
* ``traj``: turns ``[start, end, interrupted, steps]``, steps
  ``[start, end, requests, tools]``, requests ``[seq, model, latency_ms,
  ttft_ms, tokens_in, tokens_out, tool_calls]``, tools ``[call_id, name,
  requested_seq, started_seq, result_seq, duration_ms, error, status]``;
* ``hist``: ``[role, seq]`` (role ``u``/``a``/``t``) or ``["s", from, to,
  summary]`` for a compacted range;
* ``ctx``: seqs of ``context/injection`` events; ``goals``: seqs of
  ``goal/change`` events; ``skipped``: ``{seq: reason}`` of the malformed ones;
* ``runs``: the run envelopes (:func:`trajlog.projections.runs`, derived:
  integrity verdicts and cost are not in any one event), each ``[run_id,
  model, state, integrity, integrity_detail, started_seq, finalized_seq,
  parent_run, cost, started_at, finalized_at, error, switches]``;
* ``marks``: ``{"cp": checkpoints, "rec": recovery attempts, "fork": forks}``
  as :func:`trajlog.projections.checkpoint_marks.read_marks` gives them (small dicts).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from .. import projections
from ..api import Session, Store
from ..errors import InvalidArgumentError, TrajlogError
from ..event_types import HISTORY
from ..events import SessionHeader
from ..projections.checkpoint_marks import Marks
from ..projections.envelopes import RUNS, RunEnvelope, settle
from ..projections.reader_views import ReaderView, for_session, view_events

VERSION = 1
_ROLES = {"user": "u", "assistant": "a", "tool": "t"}
#: a message's type -> its role (the tombstone of an erased one names it)
_ROLE = {t: role for role in ("user", "assistant") for t in HISTORY[role]}
_ENV = ("causal_parent", "workspace_revision", "data_class", "idempotency_key", "supersedes",
        "branch_id")


class _Tables:
    """Shared string tables for event types and sources."""

    def __init__(self) -> None:
        self.types: dict[str, int] = {}
        self.sources: dict[str, int] = {}

    def type_id(self, name: str) -> int:
        found = self.types.get(name)
        if found is None:
            found = self.types[name] = len(self.types)
        return found

    def source_id(self, name: str | None) -> int:
        if name is None:
            return -1
        found = self.sources.get(name)
        if found is None:
            found = self.sources[name] = len(self.sources)
        return found


def _header(h: SessionHeader) -> dict[str, Any]:
    return {"id": h.id, "parent": h.parent_session, "origin": h.origin, "seed": h.seed_length,
            "depth": h.delegation_depth, "preset": h.agent_preset, "cwd": h.cwd,
            "created": h.created_at, "meta": dict(h.metadata), "damage": h.damage}


def _erased(data: Any) -> bool:
    """An erased event's replacement (the test every trajlog reader uses):
    ``data["erased"]`` is the tombstone's record, not any value of that key."""
    return isinstance(data, dict) and isinstance(data.get("erased"), dict) and (
        "tombstone" in data["erased"])


# JavaScript numbers hold integers exactly only up to 2**53: larger ones are
# embedded as their decimal strings, so that the page shows the stored value.
_SAFE_INT = 2**53


class Sink:
    """Where the long strings of event data go (the page compresses them):
    chunks of UTF-8, a string referred to by (chunk, byte offset, length)."""

    def __init__(self, threshold: int = 96, chunk_bytes: int = 4 << 20) -> None:
        self.threshold = threshold
        self.chunk_bytes = chunk_bytes
        self.chunks: list[list[bytes]] = [[]]
        self._size = 0

    def put(self, text: str) -> tuple[int, int, int]:
        raw = text.encode()
        if self._size + len(raw) > self.chunk_bytes and self._size:
            self.chunks.append([])
            self._size = 0
        self.chunks[-1].append(raw)
        at = self._size
        self._size += len(raw)
        return len(self.chunks) - 1, at, len(raw)

    def extract(self, value: Any, path: list[Any], refs: list[list[Any]]) -> Any:
        """``value`` with its long strings moved here (None in their place),
        their places recorded in ``refs`` as [path, chunk, offset, length];
        ``value`` itself (not a copy) when it holds none.  Integers beyond
        what a JavaScript number holds exactly become their decimal strings."""
        if type(value) is int and not -_SAFE_INT < value < _SAFE_INT:
            return str(value)
        if isinstance(value, str):
            if len(value) < self.threshold:
                return value
            refs.append([list(path), *self.put(value)])
            return None
        if isinstance(value, dict):
            out: dict[str, Any] | None = None
            for k, v in value.items():
                if (isinstance(v, (str, dict, list)) and not (
                        type(v) is str and len(v) < self.threshold)) or (
                        type(v) is int and not -_SAFE_INT < v < _SAFE_INT):
                    path.append(k)
                    new = self.extract(v, path, refs)
                    path.pop()
                    if new is not v:
                        if out is None:
                            out = dict(value)
                        out[k] = new
            return value if out is None else out
        if isinstance(value, list):
            items: list[Any] | None = None
            for i, v in enumerate(value):
                if isinstance(v, (str, dict, list)) or (
                        type(v) is int and not -_SAFE_INT < v < _SAFE_INT):
                    path.append(i)
                    new = self.extract(v, path, refs)
                    path.pop()
                    if new is not v:
                        if items is None:
                            items = list(value)
                        items[i] = new
            return value if items is None else items
        return value


_VIEW_FOLDS = ("chat", "trajectory", "model_history", "goal")


def _session_model(s: Session, tables: _Tables, inh: int, sink: Sink | None,
                   view: ReaderView | None = None) -> dict[str, Any]:
    """One session's part of the document (``inh`` -1: every event embedded),
    as ``view`` shows its events (None: as stored)."""
    base = s.header.seed_length if inh >= 0 else 0
    rows: list[list[Any]] = []
    ctx: list[int] = []
    goals: list[int] = []
    erased_msgs: list[list[Any]] = []
    type_id, source_id = tables.type_id, tables.source_id
    # One pass over the log feeds the rows and the four folds the views need
    # (the pure folds of trajlog.projections, stepped here rather than through
    # the engine, which would read the whole log again for each of them).
    folds = [projections.FOLDS[name] for name in _VIEW_FOLDS]
    states = [f.init() for f in folds]
    wants = [f.wants for f in folds]
    # runs and checkpoints in the same pass (the runs fold reads every event:
    # its integrity chain covers them all)
    runs_state, marks = RUNS.init(), Marks()
    for ev in (s.events(0) if view is None else view_events(s, view)):
        t, d = ev.type, ev.data
        for i, fold in enumerate(folds):
            if wants[i](t):
                states[i] = fold.step(states[i], ev)
        runs_state = RUNS.step(runs_state, ev)
        marks.feed(ev)
        # the prefix a fork inherits is read for the folds and the session-level
        # lists (context, goals, erased bubbles) but embedded only in its parent
        if ev.seq >= base:
            refs: list[list[Any]] = []
            if sink is not None:
                d = sink.extract(d, [], refs)
            row: list[Any] = [ev.seq, type_id(t), ev.time, source_id(ev.source), d]
            # getattr with a default: supersedes / branch_id are newer envelope fields
            env = {k: v for k in _ENV if (v := getattr(ev, k, None)) is not None}
            if env or refs:
                row.append(env or 0)
            if refs:
                row.append(refs)
            rows.append(row)
        if t == "context/injection":
            ctx.append(ev.seq)
        elif t == "goal/change":
            goals.append(ev.seq)
        elif t in _ROLE and _erased(d):
            erased_msgs.append([2, ev.seq, _ROLE[t]])
    chat_view, traj_view, hist_view, goal = (
        f.view(st) for f, st in zip(folds, states, strict=True))
    chat: list[list[Any]] = []
    for node in chat_view:
        if node.kind == "message":
            chat.append([0, node.seq, node.role])
        else:
            chat.append([1, node.seq, node.call_id, node.name, node.status,
                         -1 if node.result_seq is None else node.result_seq])
    if erased_msgs:   # the chat fold skips a message without content: show its tombstone
        chat = sorted(chat + erased_msgs, key=lambda n: (n[1], n[0] == 1))
    traj = [[t.start_seq, t.end_seq, t.interrupted,
             [[st.start_seq, st.end_seq,
               [[r.seq, r.model, r.latency_ms, r.ttft_ms, r.tokens_in, r.tokens_out,
                 r.tool_calls] for r in st.requests],
               [[x.call_id, x.name, x.requested_seq, x.started_seq, x.result_seq,
                 x.duration_ms, x.error, x.status] for x in st.tools]]
              for st in t.steps]]
            for t in traj_view]
    hist: list[list[Any]] = []
    for m in hist_view:
        if m.role == "summary":
            hist.append(["s", m.seq, m.until, m.content])
        else:
            hist.append([_ROLES.get(m.role, m.role), m.seq])
    # a subagent's task, read through its header's pointer (the header holds no text)
    return {**_header(s.header), "task": s.task(), "inh": inh, "base": base,
            "last": s.last_seq, "ev": rows, "chat": chat, "traj": traj, "hist": hist,
            "ctx": ctx, "goals": goals,
            "skipped": {str(x["seq"]): x.get("reason") for x in goal.skipped},
            "goal_rev": goal.revision, "runs": [_run_row(r) for r in settle(RUNS.view(runs_state),
                                                                     s._chain_at)],
            "marks": {"cp": marks.checkpoints, "rec": marks.recoveries, "fork": marks.forks}}


def _run_row(r: RunEnvelope) -> list[Any]:
    return [r.run_id, r.model, r.state, r.integrity, r.integrity_detail, r.started_seq,
            r.finalized_seq, r.parent_run, r.cost, r.started_at, r.finalized_at, r.error,
            r.switches]


def build_document(store: Store, session_id: str, *, sink: Sink | None = None,
                   view: ReaderView | str | None = None) -> dict[str, Any]:
    """The document of ``session_id`` and all its descendants (forks and
    subagents), parents before children; the first session is the one asked
    for, and ``root_parent`` notes its own parent's id when it has one.  With
    a ``sink``, long strings of event data go there (rows then carry their
    references); without, the data is as stored.  ``view``: every session
    as that reader view shows it (:mod:`trajlog.projections.reader_views`;
    the document's ``view`` names it)."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidArgumentError("a session id is needed to build a view")
    root = store.session(session_id)
    # named before the walk: a session that fails to read is flagged, a bad view refused
    reader = for_session(view, root)
    tables = _Tables()
    sessions: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    children: dict[str, list[str]] = {}
    for _depth, h in root.tree().walk():
        if h.parent_session is not None:
            children.setdefault(h.parent_session, []).append(h.id)
        # a child's inherited prefix is its parent's log: embed it once, there
        parent = index.get(h.parent_session or "", -1) if h.seed_length > 0 else -1
        model = None
        if h.damage is None:
            try:   # a session that cannot be read (a damaged ancestor) is flagged, not fatal
                model = _session_model(store.session(h.id), tables, parent, sink, reader)
            except TrajlogError as exc:
                h = replace(h, damage=f"{type(exc).__name__}: {exc}")
        if model is None:
            model = {**_header(h), "inh": -1, "base": 0, "last": -1, "ev": [], "chat": [],
                     "traj": [], "hist": [], "ctx": [], "goals": [], "skipped": {},
                     "goal_rev": None, "runs": [], "marks": {"cp": [], "rec": [], "fork": []}}
        index[h.id] = len(sessions)
        sessions.append(model)
    for model in sessions:
        model["kids"] = [index[c] for c in children.get(model["id"], []) if c in index]
    return {"v": VERSION, "view": None if reader is None else reader.role, "root": root.id,
            "root_parent": root.header.parent_session,
            "generated": time.time_ns() // 1_000_000, "types": list(tables.types),
            "sources": list(tables.sources), "sessions": sessions}


__all__ = ["VERSION", "Sink", "build_document"]
