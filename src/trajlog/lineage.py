"""Forks and subagents: new sessions that share a parent's prefix without copying it.

Three kinds of child (DESIGN.md section 7):

* **user fork** -- ``session.fork(at_seq)``: an ordinary session whose first
  ``seed_length`` events are the parent's, cut at the end of the turn that
  contains ``at_seq``.  An open turn cannot be cut: :class:`ForkUnavailableError`,
  never a silent fall-back to an earlier turn.
* **spawned subagent** -- ``session.spawn_subagent(task)``: ``origin="subagent"``,
  no seed, one more level of delegation, the task as its first user message.
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
from typing import TYPE_CHECKING, Any

from . import storage
from .errors import (
    DelegationLimitError,
    ForkUnavailableError,
    InvalidArgumentError,
    InvalidStateError,
    ValidationError,
)
from .events import Event

if TYPE_CHECKING:
    from .store import Session, SessionHeader

INHERITED_METADATA = ("identity", "tenant", "user")
DEFAULT_MAX_DEPTH = 4


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


# ---------------------------------------------------------------------------
# Turn boundaries across a lineage (indexed lookups only).

def _marker_le(session: Session, type_: str, seq: int) -> int | None:
    """The last ``type_`` marker at or before ``seq``, looking into ancestors."""
    conn = session._store._reader()
    seed = session.header.seed_length
    if seq >= seed:
        with storage.translate():
            found = storage.marker_at_or_before(conn, session._sid, type_, seq)
        if found is not None and found >= seed:
            return found
        seq = seed - 1
    if seq < 0 or session._parent is None:
        return None
    return _marker_le(session._parent, type_, seq)


def _marker_gt(session: Session, type_: str, seq: int, last_seq: int) -> int | None:
    """The first ``type_`` marker after ``seq`` and at most ``last_seq``."""
    seed = session.header.seed_length
    if seq < seed - 1 and session._parent is not None:
        found = _marker_gt(session._parent, type_, seq, seed - 1)
        if found is not None:
            return found
        seq = seed - 1
    with storage.translate():
        found = storage.marker_after(session._store._reader(), session._sid, type_, seq)
    return found if found is not None and found <= last_seq else None


def turn_end_of(session: Session, at_seq: int) -> int:
    """The seq to cut after: the ``turn/end`` of the turn containing ``at_seq``,
    or ``at_seq`` itself when it lies outside any turn."""
    last_seq = session.last_seq
    if not isinstance(at_seq, int) or isinstance(at_seq, bool):
        raise TypeError(f"at_seq must be int, not {type(at_seq).__name__}")
    if not 0 <= at_seq <= last_seq:
        raise InvalidArgumentError(f"session {session.id} has no event {at_seq} "
                                   f"(last seq {last_seq})")
    start = _marker_le(session, "turn/start", at_seq)
    end = _marker_le(session, "turn/end", at_seq)
    if start is None or (end is not None and end > start):
        return at_seq  # outside any turn (or exactly at a turn/end)
    closing = _marker_gt(session, "turn/end", at_seq, last_seq)
    if closing is None:
        raise ForkUnavailableError(
            f"the turn of session {session.id} that contains seq {at_seq} (started at seq "
            f"{start}) is still open: fork after it ends, or at an earlier completed turn")
    return closing


def last_completed_turn(session: Session) -> int:
    """Seq of the last ``turn/end`` of the session (ancestors included), or -1."""
    found = _marker_le(session, "turn/end", session.last_seq)
    return -1 if found is None else found


# ---------------------------------------------------------------------------
# Creating children.

def _inherited_metadata(parent: Session, extra: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: parent.header.metadata[k] for k in INHERITED_METADATA
            if k in parent.header.metadata}
    meta.update(extra)
    return meta


def _sandbox_snapshot(parent: Session, upto: int,
                      sandbox: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if sandbox is not None:
        return {**dict(sandbox), "snapshot_of": {"session": parent.id, "explicit": True}}
    seq = _marker_le(parent, "sandbox/mode", upto) if upto >= 0 else None
    if seq is None:
        return None
    settings = parent.get(seq).data
    return {**settings, "snapshot_of": {"session": parent.id, "seq": seq}}


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


_FORK_KEYS = frozenset({"forked_at"})
_SPAWN_KEYS = frozenset({"task", "background", "kind", "parent_call_id", "approval_policy"})


def fork(parent: Session, at_seq: int, metadata: Mapping[str, Any] | None = None) -> Session:
    meta = _inherited_metadata(parent, {**_caller_metadata(metadata, _FORK_KEYS),
                                        "forked_at": at_seq})
    cut = turn_end_of(parent, at_seq)
    return parent._store._create(
        cwd=parent.header.cwd, agent_preset=parent.header.agent_preset, metadata=meta,
        parent=parent, seed_length=cut + 1, origin=None,
        delegation_depth=parent.header.delegation_depth)


def spawn(parent: Session, task: str, agent_preset: str | None, *, seeded: bool,
          call_id: str | None, background: bool, sandbox: Mapping[str, Any] | None,
          metadata: Mapping[str, Any] | None) -> Session:
    """Create a subagent session (spawned, or forked when ``seeded``)."""
    store = parent._store
    if not isinstance(task, str) or not task:
        raise TypeError("task must be a non-empty str")
    depth = parent.header.delegation_depth + 1
    if depth > store.max_delegation_depth:
        raise DelegationLimitError(
            f"a subagent of session {parent.id} would be at delegation depth {depth}; the "
            f"store allows {store.max_delegation_depth} (trajlog.open(max_delegation_depth=))")
    if call_id is not None and not isinstance(call_id, str):
        raise TypeError("call_id must be str or None")
    if sandbox is not None and not isinstance(sandbox, Mapping):
        raise TypeError(f"sandbox must be a mapping, not {type(sandbox).__name__}")
    extra = _caller_metadata(metadata, _SPAWN_KEYS)
    extra.update({"task": task, "background": bool(background),
                  "kind": "forked" if seeded else "spawned"})
    if call_id is not None:
        extra["parent_call_id"] = call_id
    if seeded:
        extra["approval_policy"] = "never"
    last = parent.last_seq
    seed = last_completed_turn(parent) + 1 if seeded else 0
    initial: list[tuple[str, dict[str, Any]]] = []
    if seeded:
        initial.append(("approval/policy", {"policy": "never", "fixed": True}))
    snapshot = _sandbox_snapshot(parent, last, sandbox)
    if snapshot is not None:
        initial.append(("sandbox/mode", snapshot))
    initial.append(("user/message", {"content": task}))
    child_id = str(uuid.uuid4())
    answer: list[tuple[str, Any, Mapping[str, Any]]] = []
    if background and call_id is not None:
        # The job result answers the parent's call in the child's creating
        # transaction: if the parent refuses it, no child is left behind.
        answer.append(("tool/result", {
            "call_id": call_id, "job_id": child_id, "child_session": child_id,
            "status": "running", "output": f"subagent {child_id} started in the background",
            "is_error": False}, {"source": f"session:{child_id}",
                                 "idempotency_key": _key(child_id, "job")}))
    return store._create(
        cwd=parent.header.cwd, agent_preset=agent_preset or parent.header.agent_preset,
        metadata=_inherited_metadata(parent, extra), parent=parent, seed_length=seed,
        origin="subagent", delegation_depth=depth, session_id=child_id,
        initial=[(t, d, {"source": f"session:{parent.id}"}) for t, d in initial],
        parent_events=answer)


def _key(child: Session | str, what: str) -> str:
    return f"subagent:{child if isinstance(child, str) else child.id}:{what}"


def final_output(child: Session) -> str:
    """The child's last assistant message content ('' when it has none).  Only
    the child's own events count: a forked child's inherited prefix holds the
    parent's messages, not its answer."""
    own = child.header.seed_length
    for ev in reversed(child.tail(200)):
        if ev.seq >= own and ev.type == "assistant/message" and isinstance(ev.data, dict):
            content = ev.data.get("content")
            return content if isinstance(content, str) else str(content or "")
    for ev in reversed(list(child.events(own))):  # rare: a long tail of other events
        if ev.type == "assistant/message" and isinstance(ev.data, dict):
            content = ev.data.get("content")
            return content if isinstance(content, str) else str(content or "")
    return ""


def finish(child: Session, status: str = "done") -> Event:
    """Report a settled subagent to its parent; idempotent (exactly one event)."""
    if child.header.origin != "subagent" or child._parent is None:
        raise InvalidStateError(f"session {child.id} is not a subagent")
    meta = child.header.metadata
    parent = child._parent
    output = final_output(child)
    if meta.get("background"):
        return parent.append("subagent/notification", {
            "job_id": child.id, "child_session": child.id, "status": status,
            "output": output}, source=f"session:{child.id}",
            idempotency_key=_key(child, "notification"))
    call_id = meta.get("parent_call_id")
    if call_id is None:
        raise InvalidStateError(f"subagent {child.id} was spawned without a call_id: "
                                "there is no parent tool call to answer")
    return parent.append("tool/result", {
        "call_id": call_id, "output": output, "child_session": child.id,
        "status": status, "is_error": status != "done"}, source=f"session:{child.id}",
        idempotency_key=_key(child, "result"))


def missed_notifications(parent: Session) -> list[Session]:
    """Background children whose log has settled (its last turn ended) but
    whose parent holds no notification for them."""
    out = []
    conn = parent._store._reader()
    for child in parent.children(include_subagents=True):
        if child.header.origin != "subagent" or not child.header.metadata.get("background"):
            continue
        last = child.last_seq
        if last < 0 or child.get(last).type != "turn/end":
            continue
        with storage.translate():
            found = storage.event_by_idempotency_key(conn, parent._sid,
                                                     _key(child, "notification"))
        if found is None:
            out.append(child)
    return out


def check_approval_append(session: Session, type_: object) -> None:
    """A forked subagent's approval policy is fixed to never."""
    if isinstance(type_, str) and type_.startswith("approval/") and session.header.metadata.get(
            "approval_policy") == "never" and session.header.origin == "subagent":
        raise ValidationError(f"session {session.id} is a forked subagent: its approval "
                              "policy is fixed to never and cannot change")


def effective_approvals(session: Session) -> list[Event]:
    """The ``approval/grant`` events in force for this session: its own, and the
    inherited ones except one-time grants (``scope: "once"``).  A forked
    subagent has none: its policy is fixed to never."""
    if session.header.metadata.get("approval_policy") == "never":
        return []
    seed = session.header.seed_length
    grants = []
    for ev in session.events():
        if ev.type != "approval/grant":
            continue
        once = isinstance(ev.data, dict) and ev.data.get("scope") == "once"
        if ev.seq < seed and once:
            continue  # a one-time approval is never inherited
        grants.append(ev)
    return grants


def tree(session: Session) -> SessionTree:
    return SessionTree(session.header, tuple(tree(c) for c in
                                             session.children(include_subagents=True)))


__all__ = ["DEFAULT_MAX_DEPTH", "INHERITED_METADATA", "SessionTree", "effective_approvals"]
