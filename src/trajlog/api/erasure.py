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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..codec.chunks import Chunk, ChunkCompressor, blank_payloads, open_chunk, pack
from ..codec.compression import Compressor
from ..codec.stream import decode_events
from ..errors import ErasureError, record_damaged
from ..events import Event
from ..memory.model import PurgeReport
from ..memory.replacement import replacement
from ..memory.versions import TombstoneWriter, erased_lookup
from ..storage.base import Backend, Purge, Writer

_PAGE = 64   # rows fetched at a time: an erasure's memory stays bounded whatever it erases
_DEFERRED = Purge((), ("purged by the caller after its last erasure",))


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
                 actor: str | None, now_ms: int, purge_now: bool = True) -> PurgeReport:
    """Erase the payloads of ``seqs`` (of ``target``'s own log) in one
    transaction -- each under its own tombstone, each chunk row rewritten
    once and verified before it is stored -- then purge (``purge_now=False``:
    the caller runs ``backend.purge()`` once after several erasures).
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
        wanted = sorted(set(seqs))
        # what it reads is proportional to what it erases: one statement for
        # the tombstones already there, one for the rows of each run of seqs
        gone = set(w.erased_seqs(target.sid, wanted[0], wanted[-1])) if wanted else set()
        todo = [s for s in wanted if s not in gone]
        lookup = erased_lookup(w, target.sid)
        stones = TombstoneWriter(w)
        made: dict[int, bytes] = {}      # seq -> the replacement its tombstone just took

        def erased(seq: int) -> bytes | None:
            # (the new row's check: what this erasure wrote, else what is stored)
            found = made.get(seq)
            return found if found is not None else lookup(seq)

        for run in _runs(todo):
            rows: Iterator[Chunk] = iter(())
            at = 0
            while at < len(run):
                row = next((r for r in rows if r.last_seq >= run[at]), None)
                if row is None:   # (the next rows of the run, a bounded page at a time)
                    rows = iter(w.chunks(target.sid, run[at], run[-1], _PAGE))
                    row = next((r for r in rows if r.last_seq >= run[at]), None)
                if row is None or row.first_seq > run[at]:
                    raise ErasureError(f"session {target.session_id} holds no stored row for "
                                       f"seq {run[at]}")
                # run is sorted: this row's seqs are the stretch from ``at``
                end = bisect.bisect_right(run, row.last_seq, at)
                here, at = run[at:end], end
                opened = open_chunk(target.key, row, chunks, erased=lookup)
                if not isinstance(opened, tuple):
                    raise record_damaged(f"session {target.session_id}: the row holding seq "
                                          f"{here[0]} does not verify ({opened.reason}); "
                                          "nothing was erased")
                raw, table = opened
                lo = here[0] - row.first_seq
                events = decode_events(raw, table, lo, here[-1] - row.first_seq + 1,
                                       Compressor(), target.session_id)
                for seq in here:
                    event = events[seq - row.first_seq - lo]
                    check = table[seq - row.first_seq].payload_check
                    stone = stones.write(_record(target.session_id, seq, event, check, reason,
                                                 actor, now_ms, made),
                                         kind="event", sid=target.sid, seq=seq, item=None,
                                         reason=reason, actor=actor, now_ms=now_ms)
                    tids.append(stone.tid)
                body = blank_payloads(bytes(raw), table, here)
                # (compressed whatever it was: blanked payloads are zeros, and the
                # space they took is returned -- a deleted session's above all)
                stored = chunks.compress([body])[0]
                new = pack(target.key, body, row.first_seq, row.n, row.seed_chain,
                           row.last_chain, stored)
                check_row = open_chunk(target.key, new, chunks, erased=erased)
                if not isinstance(check_row, tuple):
                    raise record_damaged(f"session {target.session_id}: the erased row does "
                                          f"not verify ({check_row.reason}); nothing was "
                                          "erased")
                w.rewrite_chunk(target.sid, new)
                blanked += len(here)
                rewritten += 1
        dropped = _drop_states(w, target)
    purge = backend.purge() if purge_now else _DEFERRED
    first = tids[0] if tids else None
    return PurgeReport(f"event:{target.session_id}:{','.join(map(str, seqs))}", first,
                       already=not tids, frames_blanked=blanked, chunk_rows_rewritten=rewritten,
                       projection_states_dropped=dropped, caches_cleared=True,
                       purged=purge.done, residues=purge.residues,
                       sessions_affected=tuple(i for _, i in target.readers))


def _record(session_id: str, seq: int, event: Event, check: int, reason: str,
            actor: str | None, now_ms: int,
            made: dict[int, bytes]) -> Callable[[int], dict[str, Any]]:
    """The record of an event's tombstone, given its tid (its replacement
    noted in ``made``)."""
    def make(tid: int) -> dict[str, Any]:
        made[seq] = payload = replacement(event, tid, reason, actor, now_ms)
        return {"session": session_id, "seq": seq, "type": event.type, "payload_check": check,
                "replacement": payload}
    return make


def _runs(seqs: Sequence[int]) -> list[list[int]]:
    """Sorted ``seqs`` cut into runs of consecutive seqs."""
    runs: list[list[int]] = []
    for seq in seqs:
        if runs and runs[-1][-1] == seq - 1:
            runs[-1].append(seq)
        else:
            runs.append([seq])
    return runs


def _drop_states(w: Writer, target: Target) -> int:
    return sum(w.drop_projection_states(sid) for sid, _ in target.readers)


__all__ = ["Target", "erase_events"]
