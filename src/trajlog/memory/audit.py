"""verify() of the memory layer: every memory version and every tombstone,
and the purge each tombstone promises.

* each item's versions: contiguous from 1, every frame's checks, one chain
  from the item's key, the row's columns equal to the frame; blank frames
  only for a revoked item;
* the tombstone log: contiguous, every check, one chain; each event
  tombstone's replacement exactly what the erasure writes for it;
* what a tombstone promises: the event's frame in its chunk row is blank
  (zeroed payload, header kept, stored payload check equal to the one the
  tombstone recorded); a revoked item's versions hold no content and none is
  in the full-text index.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ..codec.chunks import ChunkCompressor, open_chunk
from ..codec.memory_frames import TOMBSTONE_KEY
from ..errors import CorruptionError, StoreError
from ..storage.base import MemoryRow, Reader, TombstoneRow
from .versions import checked_replacement, erased_lookup, open_tombstone, open_versions

BATCH = 2000


@dataclass(frozen=True, slots=True)
class MemoryAudit:
    """What :meth:`Store.verify_memory` found; ``ok`` when ``defects`` is empty."""

    items: int = 0
    versions: int = 0
    tombstones: int = 0
    defects: tuple[str, ...] = field(default_factory=tuple)
    #: what is wrong with derived copies only (the full-text index): never a defect
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.defects


def audit(reader: Reader) -> MemoryAudit:
    defects: list[str] = []
    last_mid, last_tid, versions_stored, tombstones_stored = reader.memory_head()
    if last_mid != versions_stored:
        defects.append(f"the memory head names {last_mid} version(s); {versions_stored} are "
                       "stored")
    if last_tid != tombstones_stored:
        defects.append(f"the memory head names {last_tid} tombstone(s); {tombstones_stored} "
                       "are stored")
    revoked: set[str] = set()
    tombstones = _tombstones(reader, defects, revoked)
    notes: list[str] = []
    items, versions = _versions(reader, defects, revoked, notes)
    return MemoryAudit(items, versions, tombstones, tuple(defects), tuple(dict.fromkeys(notes)))


def _versions(reader: Reader, defects: list[str], revoked: set[str],
              notes: list[str]) -> tuple[int, int]:
    groups: dict[str, list[MemoryRow]] = {}
    after = count = 0
    gap = False
    while True:
        rows = reader.memory_all(after, BATCH)
        if not rows:
            break
        for row in rows:
            if row.mid != count + 1 and not gap:
                gap = True
                defects.append(f"memory version row {count + 1} is missing (the next is "
                               f"{row.mid})")
            count += 1
            groups.setdefault(row.item_id, []).append(row)
        after = rows[-1].mid
    indexed = reader.memory_index_exists()
    for item_id, rows in groups.items():
        try:
            items = open_versions(sorted(rows, key=lambda r: r.version), item_id in revoked)
        except CorruptionError as exc:
            defects.append(str(exc))
            continue
        if item_id in revoked:
            if items[-1].state != "revoked" or any(i.content is not None for i in items):
                defects.append(f"memory item {item_id} is tombstoned but still holds content")
            try:
                still = indexed and reader.memory_indexed([r.mid for r in rows])
            except StoreError:
                still = False   # a damaged index is dropped by the next revocation
                notes.append("the full-text index is damaged: rebuild_memory_index()")
            if still:
                defects.append(f"memory item {item_id} is tombstoned but still indexed")
    return len(groups), count


def _tombstones(reader: Reader, defects: list[str], revoked: set[str]) -> int:
    """Walk the tombstone log (contiguous, every check, one chain; each event
    tombstone's replacement exactly what the erasure writes), then check the
    frames the event tombstones name, each chunk row opened once -- so the
    audit is linear in the tombstones, however many share a row."""
    after, chain, n = 0, TOMBSTONE_KEY, 0
    sessions: dict[int, str | None] = {}       # sid -> session id (None: no such session)
    named: dict[int, dict[int, tuple[int, object]]] = {}   # sid -> seq -> (tid, check)
    walking = True
    while walking:
        rows = reader.tombstones(after, BATCH)
        if not rows:
            break
        for row in rows:
            n += 1
            if row.tid != after + 1:
                defects.append(f"tombstone {after + 1} is missing")
                walking = False
                break
            try:
                record, chain = open_tombstone(row, chain)
            except CorruptionError as exc:
                defects.append(str(exc))
                walking = False
                break
            after = row.tid
            if row.target_kind == "memory" and row.target_item is not None:
                revoked.add(row.target_item)
            elif row.target_sid is not None and row.target_seq is not None:
                problem = _event_tombstone(reader, row, record, sessions)
                if problem:
                    defects.append(problem)
                named.setdefault(row.target_sid, {})[row.target_seq] = (
                    row.tid, record.get("payload_check"))
    chunks = ChunkCompressor()
    for sid, seqs in named.items():
        defects.extend(_erased_frames(reader, sid, seqs, chunks))
    return n


def _event_tombstone(reader: Reader, row: TombstoneRow, record: dict[str, object],
                     sessions: dict[int, str | None]) -> str | None:
    """What is wrong with an event tombstone's record (None: nothing)."""
    assert row.target_sid is not None
    if row.target_sid not in sessions:
        found = reader.session_by_sid(row.target_sid)
        sessions[row.target_sid] = None if found is None else found.id
    session = sessions[row.target_sid]
    if session is not None and record.get("session") != session:
        return (f"tombstone {row.tid}: its record names session {record.get('session')!r}, "
                f"its row session {session}")
    try:
        checked_replacement(reader, row, record)
    except CorruptionError as exc:
        return str(exc)
    return None


def _erased_frames(reader: Reader, sid: int, seqs: dict[int, tuple[int, object]],
                   chunks: ChunkCompressor) -> list[str]:
    """Why the frames tombstones name in session ``sid`` are not erased as
    promised: each blank in its row (the row opened once for all of its
    seqs), its stored payload check the one its tombstone recorded."""
    out: list[str] = []
    session = reader.session_by_sid(sid)
    todo = sorted(seqs)
    at = 0
    while at < len(todo):
        seq = todo[at]
        tid = seqs[seq][0]
        row = None if session is None else reader.chunk_at(sid, seq)
        if session is None or row is None:
            out.append(f"tombstone {tid}: the erased event {seq} of internal session {sid} "
                       "is not stored")
            at += 1
            continue
        end = bisect.bisect_right(todo, row.last_seq, at)
        here, at = todo[at:end], end
        opened = open_chunk(session.key, row, chunks, erased=erased_lookup(reader, sid))
        if not isinstance(opened, tuple):
            out.append(f"tombstone {tid}: the row holding erased seq {seq} does not verify "
                       f"({opened.reason})")
            continue
        table = opened[1]
        for s in here:
            tid, check = seqs[s]
            if table.erased is None or s not in table.erased:
                out.append(f"tombstone {tid}: seq {s} of session {session.id} still holds "
                           "its payload")
            elif table[s - row.first_seq].payload_check != check:
                out.append(f"tombstone {tid}: seq {s}: the frame's payload check differs "
                           "from the tombstone's record")
    return out


__all__ = ["MemoryAudit", "audit"]
