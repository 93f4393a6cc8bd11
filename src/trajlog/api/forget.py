"""The store's memory and forgetting: the host a :class:`MemoryView` runs
on, erasure of event payloads (with the cascade into this process's caches),
and retention.

What is erased where: the payload bytes in the chunk row (the
frame header, payload check and chain stay); the saved projection states of
the log and of every fork that inherits the event; this store's chunk cache
and in-memory projection states; free pages (zeroed: the store runs with
``secure_delete``, and the free list is scrubbed); the WAL (checkpointed).
And every copy trajlog itself made of an erased payload in another log,
erased with it (:meth:`Forgetting._copies`): a subagent's answer handed to
its parent by ``finish``, a ``sandbox/mode`` snapshotted into a subagent.

Retention: a session is under the latest ``retention/policy`` its history
shows -- its own log's, else its inherited prefix's, else (a spawned
subagent) its parent's up to ``spawned_at`` -- and it erases the session's
own events (:mod:`trajlog.memory.retention`).
"""

from __future__ import annotations

import bisect
import time
from dataclasses import replace
from typing import Any

from ..errors import ErasureError, InvalidArgumentError
from ..events import Event
from ..memory import retention as rt
from ..memory.model import PurgeReport, RetentionReport
from ..memory.revoke import revoke_item
from ..memory.versions import read_item
from ..storage import Backend
from ..storage.event_index import PREFIXES, SPARSE
from .erasure import Target, erase_events
from .handles import LogRef
from .lineage import _key as finish_key
from .reading import LogReader


def _now() -> int:
    return time.time_ns() // 1_000_000


class Forgetting:
    """One store's memory host, erasure and retention."""

    def __init__(self, backend: Backend, reading: LogReader, views: Any) -> None:
        self.backend = backend
        self._reading = reading
        self._views = views

    # -- MemoryHost ------------------------------------------------------------

    def sid_of(self, session_id: str) -> int:
        return self._reading.ref_by_id(session_id).sid

    def event_type(self, session_id: str, seq: int) -> str:
        ref = self._reading.ref_by_id(session_id)
        event = self._reading.event_at(ref, seq)
        if event is None:
            raise InvalidArgumentError(f"provenance names seq {seq} of session {session_id}, "
                                       "which its log does not hold")
        return event.type

    def after_purge(self) -> None:
        """Every in-memory copy of log content in this store goes."""
        self._reading.cache.clear()
        self._views.states.clear()

    # -- erasure ---------------------------------------------------------------

    def target(self, ref: LogRef, seqs: list[int]) -> Target:
        """The log that holds ``seqs`` (a fork's inherited prefix belongs to
        an ancestor) and every session that reads it."""
        owner = ref
        low = min(seqs)
        while low < owner.seed:
            assert owner.parent is not None
            owner = owner.parent
        if any(s < owner.seed for s in seqs) or (owner is not ref and max(seqs) >= ref.seed):
            raise ErasureError(f"seqs {seqs} of session {ref.id} are held by different logs "
                               "(an inherited prefix and the session's own): erase them apart")
        readers: list[tuple[int, str]] = []
        todo = [owner]
        while todo:
            r = todo.pop()
            readers.append((r.sid, r.id))
            todo.extend(self._reading.children(r))
        last = self._reading.head(owner).last_seq
        return Target(owner.sid, owner.key, owner.id, last, tuple(readers))

    def erase(self, session_id: str, seqs: list[int], *, reason: str, actor: str | None,
              now_ms: int | None = None, purge_now: bool = True) -> PurgeReport:
        if not seqs:
            raise ErasureError("nothing to erase")
        return self.erase_ref(self._reading.ref_by_id(session_id), seqs, reason=reason,
                              actor=actor, now_ms=now_ms, purge_now=purge_now)

    def erase_ref(self, ref: LogRef, seqs: list[int], *, reason: str, actor: str | None,
                  now_ms: int | None = None, purge_now: bool = True) -> PurgeReport:
        """:meth:`erase` of a session's log by its ref (a deleted session's
        too: its id no longer finds it)."""
        for s in seqs:
            if type(s) is not int or s < 0:
                raise ErasureError(f"seq must be a non-negative int, not {s!r}")
        target = self.target(ref, seqs)
        copies = self._copies(ref, seqs)   # (read while the source is still there)
        now = _now() if now_ms is None else now_ms
        try:
            report = erase_events(self.backend, target, seqs, reason=reason, actor=actor,
                                  now_ms=now, purge_now=purge_now)
        finally:
            self.after_purge()
        for parent, seq, source_seq, owner in copies:
            more = self.erase(parent.id, [seq], actor=actor, now_ms=now, purge_now=purge_now,
                              reason=f"{reason} (a copy of seq {source_seq} of session {owner})")
            report = replace(report, frames_blanked=report.frames_blanked + more.frames_blanked,
                             sessions_affected=tuple(dict.fromkeys(
                                 report.sessions_affected + more.sessions_affected)),
                             notes=(*report.notes, f"erased the copy of seq {source_seq} at "
                                    f"seq {seq} of session {parent.id}", *more.notes))
        return report

    def _copies(self, ref: LogRef, seqs: list[int]) -> list[tuple[LogRef, int, int, str]]:
        """The events trajlog itself copied ``seqs`` into, in other logs, as
        ``(log, its seq, the source seq, the source session's id)``: a
        subagent's answer that ``finish`` handed to its parent (the parent's
        ``tool/result`` or ``subagent/notification``), and a parent's
        ``sandbox/mode`` snapshotted into a subagent (its ``snapshot_of``
        names the source).  Erasing the source erases them (and, through
        the same rule, the copies of those): no copy outlives what it copied."""
        owner = ref
        while min(seqs) < owner.seed and owner.parent is not None:
            owner = owner.parent   # the log that holds the seqs
        reader = self.backend.reader()
        wanted = set(seqs)
        found: list[tuple[LogRef, int, int, str]] = []
        modes = {row.seq for row in reader.index_rows(owner.sid, min(seqs) - 1, max(seqs))
                 if row.type == "sandbox/mode" and row.seq in wanted}
        for child in self._reading.children(owner) if modes else ():
            at = None if child.header.origin != "subagent" else reader.marker_after(
                child.sid, "sandbox/mode", child.seed - 1)   # its snapshot, made with it
            data = None if at is None else self._reading.indexed(child, at, "sandbox/mode").data
            of = data.get("snapshot_of") if isinstance(data, dict) else None
            if at is not None and isinstance(of, dict) and of.get("session") == owner.id and (
                    of.get("seq") in modes):
                found.append((child, at, of["seq"], owner.id))
        parent = owner.parent
        if owner.header.origin != "subagent" or parent is None:
            return found
        outputs: dict[str, list[int]] = {}
        for what in ("result", "notification"):
            key = finish_key(owner.id, what)
            seq = reader.seq_of_idempotency_key(parent.sid, key)
            data = None if seq is None else self._reading.indexed(parent, seq, key=key).data
            out = data.get("output") if isinstance(data, dict) else None
            if seq is not None and isinstance(out, str) and out:
                outputs.setdefault(out, []).append(seq)
        for ev in ([] if not outputs else self._reading.events(
                owner, min(seqs), max(seqs), want=lambda t: t == "assistant/message")):
            content = ev.data.get("content") if isinstance(ev.data, dict) else None
            text = content if isinstance(content, str) else str(content or "")
            if ev.seq in wanted:   # (the rule Lineage.final_output copies by)
                found += [(parent, seq, ev.seq, owner.id) for seq in outputs.pop(text, [])]
        return found

    # -- retention -------------------------------------------------------------

    def _indexed(self, ref: LogRef, type_: str) -> list[Event]:
        """The events of ``type_`` in ``ref``'s own log, found by the index and
        read back from their frames."""
        reader = self.backend.reader()
        last = self._reading.head(ref).last_seq
        return [self._reading.indexed(ref, row.seq, type_)
                for row in reader.index_rows(ref.sid, ref.seed - 1, last) if row.type == type_]

    def plan_retention(self, now_ms: int) -> tuple[list[tuple[str, str]],
                                                   list[tuple[str, list[int], str]]]:
        """What retention would remove now: ``(item id, reason)`` and
        ``(session id, seqs, reason)``; nothing is written."""
        refs = {h.id: self._reading.ref_by_id(h.id)
                for h in self._reading.sessions(include_subagents=True) if h.damage is None}
        by_sid = {r.sid: r for r in refs.values()}

        def happened(sid: int, type_: str) -> bool:
            ref = by_sid.get(sid)
            if ref is None:
                return False
            if type_ in SPARSE or type_.startswith(PREFIXES):
                return bool(self._indexed(ref, type_))
            return any(True for _ in self._reading.events(ref, ref.seed, None,
                                                          want=lambda t: t == type_))

        def session_sid(session_id: str) -> int | None:
            ref = refs.get(session_id)
            return None if ref is None else ref.sid

        items = []
        for item_id, why in rt.due_items(self.backend.reader(), now_ms, happened, session_sid):
            versions = read_item(self.backend.reader(), item_id)
            if versions and versions[-1].state != "revoked":
                items.append((item_id, why))
        events = []
        policy_seqs: dict[int, list[int]] = {}   # sid -> its own log's policy seqs

        def policy_of(ref: LogRef) -> dict[str, Any] | None:
            """The latest ``retention/policy`` the session's history shows:
            its own log's, else the one its inherited prefix holds (each
            ancestor's own log up to the cut; for a spawned subagent, its
            parent's history up to the spawn) -- so a fork's own events go
            under the policy its parent's copy goes under."""
            upto = self._reading.head(ref).last_seq
            at: LogRef | None = ref
            while at is not None and upto >= 0:
                seqs = policy_seqs.get(at.sid)
                if seqs is None:
                    last = self._reading.head(at).last_seq
                    seqs = policy_seqs[at.sid] = [
                        row.seq for row in self.backend.reader().index_rows(
                            at.sid, at.seed - 1, last) if row.type == rt.POLICY_EVENT]
                for seq in reversed(seqs[:bisect.bisect_right(seqs, upto)]):
                    d = self._reading.indexed(at, seq, rt.POLICY_EVENT).data
                    if not isinstance(d, dict) or isinstance(d.get("erased"), dict):
                        continue   # an erased policy says nothing: the one before it holds
                    try:
                        return {**d, **rt.check_policy(d.get("ttl_ms"), d.get("until_event"))}
                    except InvalidArgumentError as exc:
                        raise InvalidArgumentError(
                            f"the retention policy at seq {seq} of session {at.id}, which "
                            f"session {ref.id} is under, is malformed ({exc}): append a valid "
                            "one") from None
                if at.seed:
                    upto = at.seed - 1
                else:   # a spawned subagent: its parent's history up to the spawn
                    spawned = at.header.metadata.get("spawned_at")
                    upto = spawned if (at.header.origin == "subagent"
                                       and type(spawned) is int) else -1
                at = at.parent
            return None

        for ref in refs.values():
            policy = policy_of(ref)
            if policy is None:
                continue
            until = policy.get("until_event")
            closed = isinstance(until, str) and happened(ref.sid, until)
            seqs = [s for s in rt.due_seqs(self._reading.events(ref, ref.seed, None), policy,
                                           now_ms, closed)
                    if self.backend.reader().tombstone_for_event(ref.sid, s) is None]
            if seqs:
                events.append((ref.id, seqs, f"retention: until {until}" if closed else
                               f"retention: ttl {policy.get('ttl_ms')} ms"))
        return items, events

    def apply_retention(self, now_ms: int | None = None) -> RetentionReport:
        now = _now() if now_ms is None else now_ms
        items, events = self.plan_retention(now)
        purges: list[PurgeReport] = []
        for item_id, why in items:
            purges.append(revoke_item(self.backend, item_id, reason=why, actor=rt.ACTOR,
                                      now_ms=now, check=lambda item: None))
        erased: list[tuple[str, int]] = []
        for session_id, seqs, why in events:
            purges.append(self.erase(session_id, seqs, reason=why, actor=rt.ACTOR, now_ms=now))
            erased += [(session_id, s) for s in seqs]
        if items:
            self.after_purge()
        return RetentionReport(now, tuple(i for i, _ in items), tuple(erased), tuple(purges))


__all__ = ["Forgetting"]
