"""Erasure of event payloads under tombstones (FORMAT.md 2.2, 7.3).

An erased event keeps its frame header -- seq, lengths, payload check,
chain -- and loses its payload bytes (zeroed in its chunk row, which is
stored again; its marks, copies of its call ids, stay).  The log still
verifies: the chain covers the payload *check*, not the payload, and the
stored check is the proof of what was erased.  A tombstone (a TOMBSTONE
frame, chained to the ones before it) records who erased what and why, and
carries what readers get instead: the event's type, time and envelope, what
:mod:`trajlog.memory.replacement` keeps of its data (the ids that pair its tool calls, in a
bounded form), and the tombstone.  The purge then reaches every copy:
projection states of the session and of every fork that inherits the event,
the process's caches (by the caller), free pages (zeroed) and the WAL
(checkpointed).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..codec.chunks import ZSTD, ChunkCompressor, blank_payloads, open_chunk, pack
from ..codec.compression import Compressor
from ..codec.stream import decode_events
from ..errors import ErasureError, record_damaged
from ..events import Event
from ..memory.model import PurgeReport
from ..memory.replacement import replacement
from ..memory.versions import erased_lookup, write_tombstone
from ..storage.base import Backend, Writer


@dataclass(frozen=True, slots=True)
class Target:
    """The log that physically holds the frames (for a fork's inherited
    prefix: the ancestor's), and the sessions that read them."""

    sid: int
    key: int
    session_id: str
    last_seq: int
    readers: tuple[tuple[int, str], ...]   # (sid, id) of the log and every descendant


def erase_events(backend: Backend, target: Target, seqs: Sequence[int], *, reason: str,
                 actor: str | None, now_ms: int) -> PurgeReport:
    """Erase the payloads of ``seqs`` (of ``target``'s own log) in one
    transaction -- each under its own tombstone, each chunk row rewritten
    once and verified before it is stored -- then checkpoint the WAL.
    Events already erased are left as they are (idempotent)."""
    if not isinstance(reason, str) or not reason.strip():
        raise ErasureError("an erasure says why (reason=...)")
    for seq in seqs:
        if type(seq) is not int or not 0 <= seq <= target.last_seq:
            raise ErasureError(f"session {target.session_id} has no event {seq!r} to erase "
                               f"(its log ends at seq {target.last_seq})")
    chunks = ChunkCompressor()
    blanked = rewritten = dropped = 0
    tids: list[int] = []
    with backend.transaction() as w:
        todo = sorted({s for s in seqs if w.tombstone_for_event(target.sid, s) is None})
        lookup = erased_lookup(w, target.sid)
        at = 0
        while at < len(todo):
            row = w.chunk_at(target.sid, todo[at])
            if row is None:
                raise ErasureError(f"session {target.session_id} holds no stored row for "
                                   f"seq {todo[at]}")
            # todo is sorted: this row's seqs are the run from ``at`` (linear overall)
            end = bisect.bisect_right(todo, row.last_seq, at)
            here, at = todo[at:end], end
            opened = open_chunk(target.key, row, chunks, erased=lookup)
            if not isinstance(opened, tuple):
                raise record_damaged(f"session {target.session_id}: the row holding seq "
                                      f"{here[0]} does not verify ({opened.reason}); nothing "
                                      "was erased")
            raw, table = opened
            for seq in here:
                i = seq - row.first_seq
                event = decode_events(raw, table, i, i + 1, Compressor(),
                                      target.session_id)[0]
                check = table[i].payload_check
                stone = write_tombstone(w, _record(target.session_id, seq, event, check,
                                                   reason, actor, now_ms),
                                        kind="event", sid=target.sid, seq=seq, item=None,
                                        reason=reason, actor=actor, now_ms=now_ms)
                tids.append(stone.tid)
            body = blank_payloads(bytes(raw), table, here)
            stored = chunks.compress([body])[0] if row.codec == ZSTD else None
            new = pack(target.key, body, row.first_seq, row.n, row.seed_chain, row.last_chain,
                       stored)
            check_row = open_chunk(target.key, new, chunks, erased=lookup)
            if not isinstance(check_row, tuple):
                raise record_damaged(f"session {target.session_id}: the erased row does not "
                                      f"verify ({check_row.reason}); nothing was erased")
            w.rewrite_chunk(target.sid, new)
            blanked += len(here)
            rewritten += 1
        dropped = _drop_states(w, target)
        scrubbed = w.scrub_free_pages()
    checkpointed = backend.checkpoint()
    first = tids[0] if tids else None
    return PurgeReport(f"event:{target.session_id}:{','.join(map(str, seqs))}", first,
                       already=not tids, frames_blanked=blanked, chunk_rows_rewritten=rewritten,
                       projection_states_dropped=dropped, caches_cleared=True,
                       free_pages_scrubbed=scrubbed, wal_checkpointed=checkpointed,
                       sessions_affected=tuple(i for _, i in target.readers),
                       notes=(() if checkpointed else (
                           "the WAL could not be checkpointed (another connection holds a "
                           "read snapshot); its old pages go at the next checkpoint",)))


def _record(session_id: str, seq: int, event: Event, check: int, reason: str,
            actor: str | None, now_ms: int) -> Callable[[int], dict[str, Any]]:
    """The record of an event's tombstone, given its tid."""
    def make(tid: int) -> dict[str, Any]:
        return {"session": session_id, "seq": seq, "type": event.type, "payload_check": check,
                "replacement": replacement(event, tid, reason, actor, now_ms)}
    return make


def _drop_states(w: Writer, target: Target) -> int:
    return sum(w.drop_projection_states(sid) for sid, _ in target.readers)


__all__ = ["Target", "erase_events"]
