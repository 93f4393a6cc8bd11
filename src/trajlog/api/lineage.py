"""Forks and subagents: new sessions that share a parent's prefix without copying it.

Three kinds of child (docs/forks-and-subagents.md):

* **user fork** -- ``session.fork(at_seq)``: an ordinary session whose first
  ``seed_length`` events are the parent's, cut at the end of the turn that
  contains ``at_seq``.  An open turn cannot be cut: :class:`ForkUnavailableError`,
  never a silent fall-back to an earlier turn.
* **spawned subagent** -- ``session.spawn_subagent(task)``: ``origin="subagent"``,
  no seed, one more level of delegation, the task as its first user message.
  The header points at that message (``task_seq``) and never holds its
  text: a header is not scanned by redaction and cannot be erased, so a copy
  there would outlive both (:meth:`Session.task` reads it through the
  pointer).  ``spawned_at`` is the parent's last seq at the spawn: the
  history whose ``retention/policy`` the subagent is under until it sets one.
* **forked subagent** -- ``session.fork_subagent(task)``: the same, seeded with the
  parent's prefix up to its last *completed* turn (never the turn in progress,
  which holds the spawning call); its approval policy is fixed to ``never``.

No child stores its inherited prefix: reading it walks the parent's frames
``0 .. seed_length - 1``, then its own, and its chain continues the parent's.
Finding a turn's end or the latest sandbox settings uses small partial indexes,
so creating a child costs the same whatever the parent's length.

What a child inherits: identity (the ``identity``, ``tenant`` and ``user``
metadata keys), cwd and agent preset.  What it never inherits: one-time
approvals (``approval/grant`` with ``scope: "once"`` in the prefix do not count
for the child).  Subagents get the parent's explicit sandbox settings (its last
``sandbox/mode`` event, or ``sandbox=`` given at spawn) snapshotted into their
own log at creation, so a later change in the parent does not reach them.

A child of a session paused by the redaction policy (a ``redaction/paused``
with no ``redaction/resumed`` after it, up to the cut) starts paused: its
log gets a ``redaction/paused`` copy carrying the parent's ``reason`` and
``events`` (the hashed findings) and ``inherited: {session, seq}`` naming
the pause it copies -- for a subagent after its task message, so the
child exists but takes no content until a ``redaction/resumed`` in its own
log.  The pause is per log: resuming the parent does not resume a child
already made (it was forked from paused content; a human clears each
branch), and resuming the child does not resume the parent.

Results flow back without merging logs: :meth:`Session.finish` on a foreground
subagent appends exactly one ``tool/result`` for the spawning call to the parent;
a background subagent's spawn appends a ``tool/result`` carrying the job id at
once, and ``finish`` appends a ``subagent/notification`` when it settles (best
effort: :meth:`Session.missed_notifications` finds children that settled
without one; the child's own log is the authority).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    DelegationLimitError,
    ForkUnavailableError,
    InvalidArgumentError,
    InvalidStateError,
    index_mismatch,
)
from ..event_types import CLOSES_TURN, OPENS_TURN
from ..events import Event, SessionHeader
from ..redaction import PAUSED
from ..storage import Backend, Reader, Writer
from . import closing, run_scope
from .handles import LogRef, Options
from .reading import LogReader
from .writer import WriteEngine

INHERITED_METADATA = ("identity", "tenant", "user")
DEFAULT_MAX_DEPTH = 4
_FORK_KEYS = frozenset({"forked_at"})
# ("task" stays reserved: older stores' headers held the task text there)
_SPAWN_KEYS = frozenset({"task", "task_seq", "spawned_at", "background", "kind",
                         "parent_call_id", "approval_policy", "parent_run",
                         "parent_run_seq"})
_TURN_MARKERS = OPENS_TURN | CLOSES_TURN


@dataclass(frozen=True, slots=True)
class SessionTree:
    """A session and its descendants (``tree()``)."""

    header: SessionHeader
    children: tuple[SessionTree, ...] = field(default_factory=tuple)

    def walk(self, depth: int = 0) -> Iterator[tuple[int, SessionHeader]]:
        """(depth, header) for this node and every descendant, parents first."""
        yield depth, self.header
        for child in self.children:
            yield from child.walk(depth + 1)


class Lineage:
    """Forks, subagents and the results that flow back, for one store."""

    def __init__(self, backend: Backend, reading: LogReader, writer: WriteEngine,
                 options: Options) -> None:
        self._backend = backend
        self._reading = reading
        self._writer = writer
        self._options = options

    # -- turn boundaries across a lineage (indexed look-ups only) ------------------
    # The look-ups return the index's copy; each caller then reads the frames
    # the decision rests on once (:meth:`_check_markers`), which confirms every
    # hit and every marker in between in one read.

    def _marker_le(self, ref: LogRef, type_: str, seq: int, reader: Reader) -> int | None:
        """The last ``type_`` marker at or before ``seq``, looking into
        ancestors, as the index has it (the caller confirms it)."""
        seed = ref.seed
        if seq >= seed:
            found = reader.marker_at_or_before(ref.sid, type_, seq)
            if found is not None and found >= seed:
                return found
            seq = seed - 1
        if seq < 0 or ref.parent is None:
            return None
        return self._marker_le(ref.parent, type_, seq, reader)

    def _marker_gt(self, ref: LogRef, type_: str, seq: int, last_seq: int,
                   reader: Reader) -> int | None:
        """The first ``type_`` marker after ``seq`` and at most ``last_seq``,
        as the index has it (the caller confirms it)."""
        seed = ref.seed
        if seq < seed - 1 and ref.parent is not None:
            found = self._marker_gt(ref.parent, type_, seq, seed - 1, reader)
            if found is not None:
                return found
            seq = seed - 1
        found = reader.marker_after(ref.sid, type_, seq)
        if found is None or found > last_seq:
            return None
        return found

    def turn_end_of(self, ref: LogRef, at_seq: int, reader: Reader | None = None) -> int:
        """The seq to cut after: the ``turn/end`` of the turn containing
        ``at_seq``, or ``at_seq`` itself when it lies outside any turn.
        ``reader``: the transaction that creates the child (the cut and the
        child are then one snapshot)."""
        reader = reader or self._backend.reader()
        last_seq = self._reading.head(ref, reader).last_seq
        if not isinstance(at_seq, int) or isinstance(at_seq, bool):
            raise TypeError(f"at_seq must be int, not {type(at_seq).__name__}")
        if not 0 <= at_seq <= last_seq:
            raise InvalidArgumentError(f"session {ref.id} has no event {at_seq} "
                                       f"(last seq {last_seq})")
        start = self._marker_le(ref, "turn/start", at_seq, reader)
        end = self._marker_le(ref, "turn/end", at_seq, reader)
        if start is None or (end is not None and end > start):
            # outside any turn (or exactly at a turn/end): the turn/end the cut
            # rests on, and no marker after it up to the cut
            self._check_markers(ref, -1 if end is None else end, at_seq,
                                {} if end is None else {end: "turn/end"}, reader)
            return at_seq
        closing = self._marker_gt(ref, "turn/end", at_seq, last_seq, reader)
        if closing is None:
            self._check_markers(ref, start, last_seq, {start: "turn/start"}, reader)
            raise ForkUnavailableError(
                f"the turn of session {ref.id} that contains seq {at_seq} (started at seq "
                f"{start}) is still open: fork after it ends, or at an earlier completed turn")
        self._check_markers(ref, start, closing, {start: "turn/start", closing: "turn/end"},
                            reader)
        return closing

    def _check_markers(self, ref: LogRef, after: int, upto: int,
                       expected: dict[int, str], reader: Reader) -> None:
        """The turn markers the frames ``after .. upto`` really hold (``after``
        itself excluded unless expected) must be exactly ``expected``: a cut
        is decided by the index, then confirmed by the log -- a marker
        relabelled away, dropped from the index or forged into it is
        corruption, not a cut in the middle of a turn.  Reads one turn (or
        the events since the last marker); only the markers are decoded."""
        first = min([after + 1, *expected])
        found = {ev.seq: ev.type for ev in self._reading.events(
            ref, max(first, 0), upto, want=_TURN_MARKERS.__contains__, reader=reader)}
        if found != expected:
            seq = min(set(found.items()) ^ set(expected.items()))[0]
            raise index_mismatch(ref.id, seq, f"the log holds {found.get(seq)!r} there, the "
                                 f"index {expected.get(seq)!r}")

    def last_completed_turn(self, ref: LogRef, reader: Reader | None = None) -> int:
        """Seq of the last ``turn/end`` of the session (ancestors included), or -1."""
        reader = reader or self._backend.reader()
        last_seq = self._reading.head(ref, reader).last_seq
        found = self._marker_le(ref, "turn/end", last_seq, reader)
        end = -1 if found is None else found
        # no later turn/end the index lost (a turn/start after it is fine: the open turn)
        start = self._marker_gt(ref, "turn/start", end, last_seq, reader)
        self._check_markers(ref, end, last_seq,
                            {**({end: "turn/end"} if found is not None else {}),
                             **({start: "turn/start"} if start is not None else {})}, reader)
        return end

    # -- creating children ------------------------------------------------------------

    def _sandbox_snapshot(self, parent: LogRef, upto: int, sandbox: Mapping[str, Any] | None,
                          reader: Reader) -> dict[str, Any] | None:
        if sandbox is not None:
            return {**dict(sandbox), "snapshot_of": {"session": parent.id, "explicit": True}}
        seq = self._marker_le(parent, "sandbox/mode", upto, reader) if upto >= 0 else None
        if seq is None:
            return None
        ev = next(iter(self._reading.events(parent, seq, seq, reader=reader)), None)
        if ev is None or ev.type != "sandbox/mode":   # (the index hit, checked by its frame)
            raise index_mismatch(parent.id, seq, "indexed as 'sandbox/mode', the frame is "
                                 f"{None if ev is None else ev.type!r}")
        settings = ev.data
        if not isinstance(settings, Mapping):
            # any JSON value is valid data for an unshaped type: kept whole under "value"
            settings = {"value": settings}
        return {**settings, "snapshot_of": {"session": parent.id, "seq": seq}}

    def fork(self, parent: LogRef, at_seq: int,
             metadata: Mapping[str, Any] | None = None,
             session_id: str | None = None) -> LogRef:
        meta = _inherited_metadata(parent, {**_caller_metadata(metadata, _FORK_KEYS),
                                            "forked_at": at_seq})
        # The cut, the pause and the child in one transaction: one snapshot, and
        # the statements the child's first append runs are compiled once, on
        # the write connection.
        with self._writer.transaction() as tx:
            cut = self.turn_end_of(parent, at_seq, tx)
            paused = self._pause_copy(tx, parent, cut)
            child = self._writer.create(
                cwd=parent.header.cwd, agent_preset=parent.header.agent_preset, metadata=meta,
                session_id=session_id, parent=parent, seed_length=cut + 1, origin=None,
                delegation_depth=parent.header.delegation_depth, initial=paused, tx=tx)
            if not paused:   # (no turn open at the cut: just confirmed)
                self._writer.begin_at_cut(child)
            return child

    def _paused_at(self, tx: Writer, ref: LogRef, upto: int) -> tuple[LogRef, Event] | None:
        """The ``redaction/paused`` in force in ``ref``'s log at seq ``upto``
        (and the log holding it), or None.  A child made paused holds its own
        copy, so a log's own events decide; the pause markers' index finds it
        (O(log n)), and only then is the pause event itself read."""
        found = self._writer.pause_in_force(tx, ref, upto)
        if found is None:
            return None
        owner, seq = found
        return owner, next(iter(self._reading.events(owner, seq, seq, reader=tx)))

    def _pause_copy(self, tx: Writer, parent: LogRef, upto: int,
                    ) -> list[tuple[str, Any, Mapping[str, Any]]]:
        """The ``redaction/paused`` a child of ``parent`` cut at ``upto`` starts
        with ([] when that point is not paused)."""
        at = self._paused_at(tx, parent, upto)
        if at is None:
            return []
        owner, ev = at
        d = ev.data if isinstance(ev.data, dict) else {}
        return [(PAUSED, {"reason": d.get("reason"), "events": d.get("events", []),
                          "inherited": {"session": owner.id, "seq": ev.seq}},
                 {"source": "trajlog:redaction"})]

    def spawn(self, parent: LogRef, task: str, agent_preset: str | None, *, seeded: bool,
              call_id: str | None, background: bool, sandbox: Mapping[str, Any] | None,
              metadata: Mapping[str, Any] | None) -> LogRef:
        """Create a subagent session (spawned, or forked when ``seeded``)."""
        if not isinstance(task, str) or not task:
            raise TypeError("task must be a non-empty str")
        depth = parent.header.delegation_depth + 1
        limit = self._options.max_delegation_depth
        if depth > limit:
            raise DelegationLimitError(
                f"a subagent of session {parent.id} would be at delegation depth {depth}; "
                f"the store allows {limit} (trajlog.open(max_delegation_depth=))")
        if call_id is not None and not isinstance(call_id, str):
            raise TypeError("call_id must be str or None")
        if sandbox is not None and not isinstance(sandbox, Mapping):
            raise TypeError(f"sandbox must be a mapping, not {type(sandbox).__name__}")
        extra = _caller_metadata(metadata, _SPAWN_KEYS)
        extra.update({"background": bool(background), "kind": "forked" if seeded else "spawned"})
        if call_id is not None:
            extra["parent_call_id"] = call_id
        if seeded:
            extra["approval_policy"] = "never"
        running = run_scope.current_run(parent.id)
        if running is not None:   # the run the child's runs are delegated from (api/delegation.py)
            extra["parent_run"] = running.id   # (and where its run/started lies: read there)
            extra["parent_run_seq"] = running.started.seq
        child_id = str(uuid.uuid4())
        # the parent read where the child is made: one snapshot, one transaction
        with self._writer.transaction() as tx:
            last = self._reading.head(parent, tx).last_seq
            seed = self.last_completed_turn(parent, tx) + 1 if seeded else 0
            if not seeded:  # where it joins its parent's history (the retention policy it is under)
                extra["spawned_at"] = last
            initial: list[tuple[str, dict[str, Any]]] = []
            if seeded:
                initial.append(("approval/policy", {"policy": "never", "fixed": True}))
            snapshot = self._sandbox_snapshot(parent, last, sandbox, tx)
            if snapshot is not None:
                initial.append(("sandbox/mode", snapshot))
            initial.append(("user/message", {"content": task}))
            # The header points at the task; a copy of its text there would escape
            # redaction (headers are not scanned) and erasure (headers are immutable).
            extra["task_seq"] = seed + len(initial) - 1
            answer: list[tuple[str, Any, Mapping[str, Any]]] = []
            if background and call_id is not None:
                # The job result answers the parent's call in the child's creating
                # transaction: if the parent refuses it, no child is left behind.
                answer.append(("tool/result", {
                    "call_id": call_id, "job_id": child_id, "child_session": child_id,
                    "status": "running",
                    "output": f"subagent {child_id} started in the background",
                    "is_error": False}, {"source": f"session:{child_id}",
                                         "idempotency_key": _key(child_id, "job")}))
            # a subagent of a paused session starts paused (after its task)
            return self._writer.create(
                cwd=parent.header.cwd, agent_preset=agent_preset or parent.header.agent_preset,
                metadata=_inherited_metadata(parent, extra), parent=parent, seed_length=seed,
                origin="subagent", delegation_depth=depth, session_id=child_id,
                initial=[*((t, d, {"source": f"session:{parent.id}"}) for t, d in initial),
                         *self._pause_copy(tx, parent, last)],
                parent_events=answer, tx=tx)

    def task(self, ref: LogRef) -> str | None:
        """A subagent's task, read from the event its header points at
        (``task_seq``): as stored, so masked by redaction; None once that
        event is erased, and for a session that is not a subagent."""
        seq = ref.header.metadata.get("task_seq")
        if type(seq) is not int or seq < ref.seed:
            return None
        ev = self._reading.event_at(ref, seq)
        if ev is None or ev.type != "user/message" or not isinstance(ev.data, dict):
            return None
        content = ev.data.get("content")   # (an erased event's replacement has none)
        return content if isinstance(content, str) else None

    # -- results flowing back -----------------------------------------------------------

    def final_output(self, child: LogRef) -> str:
        """The child's last assistant message content ('' when it has none).
        Only the child's own events count: a forked child's inherited prefix
        holds the parent's messages, not its answer."""
        own = child.seed
        last = self._reading.head(child).last_seq
        tail = list(self._reading.events(child, max(own, last - 199), None))
        for ev in reversed(tail):
            if ev.type == "assistant/message" and isinstance(ev.data, dict):
                content = ev.data.get("content")
                return content if isinstance(content, str) else str(content or "")
        for ev in reversed(list(self._reading.events(child, own, None))):
            if ev.type == "assistant/message" and isinstance(ev.data, dict):
                content = ev.data.get("content")  # rare: a long tail of other events
                return content if isinstance(content, str) else str(content or "")
        return ""

    def finish(self, child: LogRef, status: str = "done") -> Event:
        """Report a settled subagent to its parent; idempotent (exactly one event)."""
        if child.header.origin != "subagent" or child.parent is None:
            raise InvalidStateError(f"session {child.id} is not a subagent")
        meta = child.header.metadata
        parent = child.parent
        output = self.final_output(child)
        if meta.get("background"):
            return self._append(parent, "subagent/notification", {
                "job_id": child.id, "child_session": child.id, "status": status,
                "output": output}, {"source": f"session:{child.id}",
                                    "idempotency_key": _key(child, "notification")})
        call_id = meta.get("parent_call_id")
        if call_id is None:
            raise InvalidStateError(f"subagent {child.id} was spawned without a call_id: "
                                    "there is no parent tool call to answer")
        return self._append(parent, "tool/result", {
            "call_id": call_id, "output": output, "child_session": child.id,
            "status": status, "is_error": status != "done"},
            {"source": f"session:{child.id}", "idempotency_key": _key(child, "result")})

    def report(self, child: LogRef, data: dict[str, Any]) -> Event:
        """Append a subagent's typed result (``api/delegation.py``) to its
        parent, classed by its sensitivity: input from a subagent, never system."""
        if child.parent is None:
            raise InvalidStateError(f"session {child.id} is not a subagent")
        return self._append(child.parent, "subagent/result", data, {
            "source": f"subagent:{child.id}", "data_class": data["sensitivity"]})

    def _append(self, ref: LogRef, type_: str, data: Any, envelope: dict[str, Any]) -> Event:
        rows = self._writer.prepare_items(ref.header, [(type_, data, envelope)])
        return self._writer.submit(ref, rows)[0]

    def running_background(self, parent: LogRef) -> list[LogRef]:
        """Background children that have not reported to ``parent`` yet (no
        notification) and are not closed themselves: closing the parent now
        would refuse their ``finish``."""
        reader = self._backend.reader()
        return [child for child in self._reading.children(parent)
                if child.header.origin == "subagent" and child.header.metadata.get("background")
                and reader.seq_of_idempotency_key(parent.sid, _key(child, "notification")) is None
                and closing.closed_at(self._reading, reader, child) is None]

    def missed_notifications(self, parent: LogRef) -> list[LogRef]:
        """Background children whose log has settled (its last turn ended) but
        whose parent holds no notification for them."""
        out = []
        reader = self._backend.reader()
        for child in self._reading.children(parent):
            if child.header.origin != "subagent" or not child.header.metadata.get("background"):
                continue
            last = self._reading.head(child).last_seq
            if last < 0 or next(iter(self._reading.events(child, last, last))).type != "turn/end":
                continue
            key = _key(child, "notification")
            seq = reader.seq_of_idempotency_key(parent.sid, key)
            if seq is None:
                out.append(child)
            else:
                self._reading.indexed(parent, seq, key=key)
        return out

    def effective_approvals(self, ref: LogRef) -> list[Event]:
        """The ``approval/grant`` events in force for this session: its own, and
        the inherited ones except one-time grants (``scope: "once"``).  A forked
        subagent has none: its policy is fixed to never."""
        if ref.header.metadata.get("approval_policy") == "never":
            return []
        grants = []
        for ev in self._reading.events(ref, 0, None):
            if ev.type != "approval/grant":
                continue
            once = isinstance(ev.data, dict) and ev.data.get("scope") == "once"
            if ev.seq < ref.seed and once:
                continue  # a one-time approval is never inherited
            grants.append(ev)
        return grants

    def tree(self, ref: LogRef) -> SessionTree:
        return SessionTree(ref.header, tuple(self.tree(c) for c in self._reading.children(ref)))


def _inherited_metadata(parent: LogRef, extra: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: parent.header.metadata[k] for k in INHERITED_METADATA
            if k in parent.header.metadata}
    meta.update(extra)
    return meta


def _caller_metadata(metadata: Mapping[str, Any] | None,
                     reserved: frozenset[str]) -> dict[str, Any]:
    """The caller's metadata for a new session; keys trajlog sets itself are
    refused, so that nobody can, say, lift a forked subagent's fixed policy."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping, not {type(metadata).__name__}")
    taken = sorted(reserved.intersection(metadata))
    if taken:
        raise InvalidArgumentError(f"metadata key(s) {', '.join(taken)} are set by trajlog "
                                   "and cannot be given")
    return dict(metadata)


def _key(child: LogRef | str, what: str) -> str:
    return f"subagent:{child if isinstance(child, str) else child.id}:{what}"


__all__ = ["DEFAULT_MAX_DEPTH", "INHERITED_METADATA", "Lineage", "SessionTree"]
