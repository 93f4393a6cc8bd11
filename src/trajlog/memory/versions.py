"""Memory versions and tombstones as stored records: framing them, reading
them back verified, and the tombstone's view of an erased event.

Every version is a MEMORY frame chained to the item's versions before it;
every tombstone a TOMBSTONE frame chained to the tombstones before it
(:mod:`trajlog.codec.memory_frames`).  The row's columns are copies for queries; a
read checks them against the frame, so a row edited behind trajlog's back is
a :class:`CorruptionError`, never a silently different memory.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .._format import FrameType
from ..codec.memory_frames import (
    TOMBSTONE_KEY,
    chain_of_record,
    encode_record,
    encode_record_end,
    item_key,
    open_record,
    record_at,
)
from ..errors import StoreError, record_damaged
from ..events import decode_event
from ..storage.base import MemoryReader, MemoryRow, Reader, TombstoneRow, Writer
from ..storage.event_index import entry
from .model import MemoryItem
from .replacement import indexed, replacement_defect

# The columns a version row copies from its frame, checked on every read.
_COPIED = ("item", "version", "tenant", "scope", "scope_key", "type", "state", "key")


def record_of(item: MemoryItem, source_sid: int | None) -> dict[str, Any]:
    return {
        "item": item.id, "version": item.version, "tenant": item.tenant, "scope": item.scope,
        "scope_key": item.scope_key, "type": item.type, "state": item.state, "key": item.key,
        "content": item.content, "digest": item.digest,
        "source": None if item.source is None else [item.source[0], item.source[1]],
        "source_sid": source_sid, "retention": item.retention, "expires_ms": item.expires_ms,
        "sensitivity": item.sensitivity, "created_ms": item.created_ms,
        "decision": item.decision, "conflicts_with": list(item.conflicts_with),
        "promoted_from": item.promoted_from, "stored": item.stored,
    }


class VersionWriter:
    """Writes versions inside one transaction: frames each (chained to the
    item's version before it), inserts it, and keeps the full-text index on
    every item's active version only -- the index's changes made together
    at :meth:`flush`, in one savepoint, so a damaged derived index never
    fails a write (it costs recall: search checks every hit against its
    canonical version and falls back to the canonical rows; a rebuild makes
    the index whole)."""

    def __init__(self, w: Writer) -> None:
        self._w = w
        self._next_mid = w.memory_max_mid() + 1
        self._indexed = w.memory_index_exists()
        self._unindex: list[int] = []
        self._index: list[tuple[MemoryRow, str]] = []
        self.written: list[tuple[MemoryRow, int]] = []   # (row, where its payload ends)

    def write(self, item: MemoryItem, source_sid: int | None, text: str | None,
              prev: Sequence[MemoryRow] | None = None,
              last: MemoryRow | None = None) -> MemoryRow:
        """Version ``item.version`` of ``item``; ``prev`` = the item's stored
        versions (read here when neither they nor ``last``, the latest of
        them, are given; none for a new item)."""
        w = self._w
        if last is not None:
            if last.item_id != item.id or last.version != item.version - 1:
                raise record_damaged(f"memory item {item.id}: version {item.version} cannot "
                                     f"follow version {last.version}")
            prev = [last]
        else:
            if prev is None:
                prev = w.memory_versions(item.id) if item.version > 1 else []
            if len(prev) != item.version - 1:
                raise record_damaged(f"memory item {item.id} has {len(prev)} version(s); "
                                     f"version {item.version} cannot follow")
        key = item_key(item.id)
        chain = chain_of_record(prev[-1].frame) if prev else key
        frame, _, end = encode_record_end(record_of(item, source_sid), key, item.version - 1,
                                          chain, FrameType.MEMORY)
        row = MemoryRow(self._next_mid, item.id, item.version, item.tenant, item.scope,
                        item.scope_key, item.type, item.state, item.key,
                        bytes.fromhex(item.digest), source_sid,
                        None if item.source is None else item.source[1], item.expires_ms,
                        None if item.retention is None else item.retention.get("until_event"),
                        item.sensitivity, item.created_ms, frame)
        w.insert_memory(row)
        self.written.append((row, end))
        self._next_mid += 1
        if self._indexed:
            if prev:
                self._unindex.append(prev[-1].mid)
            if item.state == "active" and text:
                self._index.append((row, text))
        return row

    def publish(self, verified: VerifiedRows) -> None:
        """(After the transaction committed.)  The versions written, as
        verified: each frame was made here, chained to a verified version
        (a read that meets these exact bytes again has nothing to check)."""
        for row, end in self.written:
            verified.add(row, end)
        self.written = []

    def flush(self) -> None:
        if not (self._unindex or self._index):
            return
        try:
            with self._w.savepoint():
                if self._unindex:
                    self._w.unindex_memory(self._unindex)
                for row, text in self._index:
                    self._w.index_memory(row, text)
        except StoreError:
            pass   # (see the class docstring)
        self._unindex, self._index = [], []


def write_version(w: Writer, item: MemoryItem, source_sid: int | None,
                  text: str | None, last: MemoryRow | None = None) -> MemoryRow:
    """One version, with its index change (see :class:`VersionWriter`);
    ``last``: the item's latest stored version, when the caller has it."""
    writer = VersionWriter(w)
    row = writer.write(item, source_sid, text, last=last)
    writer.flush()
    return row


def item_of(row: MemoryRow, record: dict[str, Any] | None) -> MemoryItem:
    """The item a version row holds (from its frame; from the row's columns
    when the frame was blanked by a revocation)."""
    if record is None:
        return MemoryItem(row.item_id, row.version, row.scope, row.type, row.state, None,
                          row.tenant, row.scope_key, row.key, None, None, row.expires_ms,
                          row.sensitivity, row.created_ms, row.digest.hex(), stored="erased")
    source = record.get("source")
    return MemoryItem(
        row.item_id, row.version, row.scope, row.type, row.state, record.get("content"),
        row.tenant, row.scope_key, row.key,
        None if source is None else (str(source[0]), int(source[1])), record.get("retention"),
        record.get("expires_ms"), str(record.get("sensitivity")),
        int(record.get("created_ms") or 0), str(record.get("digest")), record.get("decision"),
        tuple(record.get("conflicts_with") or ()), record.get("promoted_from"),
        str(record.get("stored", "full")))


class VerifiedRows:
    """The version rows one store has verified, each whole (every column
    and every byte of its frame) with where its payload ends: a row read
    again byte for byte equal to one verified is opened by decoding its
    payload, without its checks, its earlier versions, its chain or its
    tombstone read again (a version is immutable but for the blanking of a
    revoked item's payload, which changes its frame).  A row that differs in
    any byte -- a version tampered with, a column edited -- is not found, and
    is verified in full.  Bounded: the oldest entries go first.  A
    revocation in this store drops the item's rows (no erased content stays
    here)."""

    def __init__(self, size: int = 8192) -> None:
        self.size = size
        self._ends: dict[MemoryRow, int] = {}
        self._items: dict[str, list[MemoryRow]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ends)

    def record(self, row: MemoryRow) -> dict[str, Any] | None:
        """The record of ``row`` if this exact row was verified, else None."""
        end = self._ends.get(row)
        return None if end is None else record_at(row.frame, end)

    def add(self, row: MemoryRow, end: int) -> None:
        with self._lock:
            ends = self._ends
            if row in ends:
                return
            if len(ends) >= self.size:
                old = next(iter(ends))
                del ends[old]
                rows = self._items[old.item_id]
                rows.remove(old)
                if not rows:
                    del self._items[old.item_id]
            ends[row] = end
            self._items.setdefault(row.item_id, []).append(row)

    def discard(self, item_id: str) -> None:
        """Forget every row of one item."""
        with self._lock:
            for row in self._items.pop(item_id, ()):
                del self._ends[row]

    def clear(self) -> None:
        with self._lock:
            self._ends.clear()
            self._items.clear()


_VERIFIED: weakref.WeakKeyDictionary[Any, VerifiedRows] = weakref.WeakKeyDictionary()
_VERIFIED_LOCK = threading.Lock()


def verified_rows(backend: Any) -> VerifiedRows:
    """The :class:`VerifiedRows` of a store's backend (one per backend)."""
    found = _VERIFIED.get(backend)
    if found is None:
        with _VERIFIED_LOCK:
            found = _VERIFIED.setdefault(backend, VerifiedRows())
    return found


def open_versions(rows: Sequence[MemoryRow], revoked: bool,
                  verified: VerifiedRows | None = None) -> list[MemoryItem]:
    """Verify an item's version rows (contiguous, chained, each frame's
    checks, columns equal to the frame) and return them as items.  Blank
    frames are accepted only for a revoked item (``revoked``: its tombstone
    exists).  Each version that holds its payload goes into ``verified``."""
    if not rows:
        return []
    item_id = rows[0].item_id
    key = item_key(item_id)
    chain = key
    out = []
    for i, row in enumerate(rows):
        where = f"memory item {item_id} version {row.version}"
        if row.version != i + 1 or row.item_id != item_id:
            raise record_damaged(f"{where}: versions are not contiguous from 1")
        opened = open_record(row.frame, key, i, chain, FrameType.MEMORY, may_be_blank=revoked)
        if opened.defect is not None:
            raise record_damaged(f"{where}: {opened.defect}")
        record = opened.record
        if record is not None:
            copied = (row.item_id, row.version, row.tenant, row.scope, row.scope_key,
                      row.type, row.state, row.key)
            if tuple(record.get(k) for k in _COPIED) != copied or record.get(
                    "digest") != row.digest.hex() or record.get("expires_ms") != row.expires_ms:
                raise record_damaged(f"{where}: the row's columns differ from its frame")
            if verified is not None:
                verified.add(row, opened.end)
        chain = opened.chain
        out.append(item_of(row, record))
    return out


def read_item(reader: MemoryReader, item_id: str,
              verified: VerifiedRows | None = None) -> list[MemoryItem]:
    """Every version of an item, verified (an unknown id gives [])."""
    rows = reader.memory_versions(item_id)
    if not rows:
        return []
    revoked = reader.tombstone_for_item(item_id) is not None
    return open_versions(rows, revoked, verified)


def current_item(reader: MemoryReader, row: MemoryRow, verified: VerifiedRows) -> MemoryItem:
    """The item whose latest version ``row`` is: opened from ``verified``
    when this exact row was verified before, else read and verified whole
    (every version; the latest one read then is returned)."""
    record = verified.record(row)
    if record is not None:
        return item_of(row, record)
    versions = read_item(reader, row.item_id, verified)
    if not versions:
        raise record_damaged(f"memory item {row.item_id} has no versions any more")
    return versions[-1]


# -- tombstones ---------------------------------------------------------------

class TombstoneWriter:
    """The next tombstones of one write transaction: the last tid and its
    chain are read once, then carried from one tombstone to the next (the
    transaction holds the write lock; the schema's trigger still refuses a
    tid that is not the next one)."""

    def __init__(self, w: Writer) -> None:
        self._w = w
        self.tid = w.max_tid()
        prev = w.tombstones(self.tid - 1, 1) if self.tid > 0 else []
        self.chain = chain_of_record(prev[0].frame) if prev else TOMBSTONE_KEY

    def write(self, make: Callable[[int], dict[str, Any]], *, kind: str, sid: int | None,
              seq: int | None, item: str | None, reason: str, actor: str | None,
              now_ms: int) -> TombstoneRow:
        """Frame and insert the next tombstone; ``make(tid)`` gives its record."""
        tid = self.tid + 1
        record = {**make(tid), "tid": tid, "kind": kind, "reason": reason, "actor": actor,
                  "time": now_ms}
        frame, chain = encode_record(record, TOMBSTONE_KEY, tid - 1, self.chain,
                                     FrameType.TOMBSTONE)
        row = TombstoneRow(tid, kind, sid, seq, item, reason, actor, now_ms, frame)
        self._w.insert_tombstone(row)
        self.tid, self.chain = tid, chain
        return row


def write_tombstone(w: Writer, make: Callable[[int], dict[str, Any]], *, kind: str,
                    sid: int | None, seq: int | None, item: str | None, reason: str,
                    actor: str | None, now_ms: int) -> TombstoneRow:
    """Frame and insert the next tombstone; ``make(tid)`` gives its record."""
    return TombstoneWriter(w).write(make, kind=kind, sid=sid, seq=seq, item=item,
                                    reason=reason, actor=actor, now_ms=now_ms)


def open_tombstone(row: TombstoneRow, prev_chain: int) -> tuple[dict[str, Any], int]:
    opened = open_record(row.frame, TOMBSTONE_KEY, row.tid - 1, prev_chain,
                         FrameType.TOMBSTONE, may_be_blank=False)
    if opened.defect is not None or opened.record is None:
        raise record_damaged(f"tombstone {row.tid}: {opened.defect}")
    r = opened.record
    if (r.get("tid"), r.get("kind"), r.get("reason"), r.get("actor"), r.get("time")) != (
            row.tid, row.target_kind, row.reason, row.actor, row.created_ms) or (
            r.get("seq") != row.target_seq if row.target_kind == "event"
            else r.get("item") != row.target_item):
        raise record_damaged(f"tombstone {row.tid}: the row's columns differ from its frame")
    return r, opened.chain


def tombstone_record(reader: MemoryReader, row: TombstoneRow) -> dict[str, Any]:
    """A tombstone's verified record (its chain continued from the stored
    chain of the tombstone before it, as a read from the middle of a log)."""
    prev = reader.tombstones(row.tid - 2, 1) if row.tid > 1 else []
    return open_tombstone(row, chain_of_record(prev[0].frame) if prev else TOMBSTONE_KEY)[0]


def checked_replacement(reader: Reader, row: TombstoneRow,
                        record: dict[str, Any]) -> bytes:
    """The replacement payload of an event's tombstone, verified to be exactly
    what the erasure writes for it (:mod:`.replacement`) -- and, for an event
    with an index row, to carry that row's type, time and envelope."""
    payload = record.get("replacement")
    sid, seq = row.target_sid, row.target_seq
    assert sid is not None and seq is not None
    defect = replacement_defect(payload, record, tid=row.tid, seq=seq, reason=row.reason,
                                actor=row.actor, at=row.created_ms)
    if defect is None:
        assert isinstance(payload, bytes)
        ev = decode_event(payload, seq)
        if indexed(ev):
            stored = [r for r in reader.index_rows(sid, seq - 1, seq) if r.seq == seq]
            if stored != [entry(ev, seq)]:
                defect = ("its replacement's type, time or envelope is not its index row's"
                          if stored else "its replacement names an index row there is not")
    if defect is not None:
        raise record_damaged(f"tombstone {row.tid} of seq {seq}: {defect}", seq=seq)
    assert isinstance(payload, bytes)
    return payload


def erased_lookup(reader: Reader, sid: int) -> Callable[[int], bytes | None]:
    """For the stream reader: seq -> the payload readers see instead of an
    erased event's (None: no tombstone, so a failed check is damage).  A
    tombstone that does not verify, or whose replacement the erasure did not
    write, raises :class:`CorruptionError`."""
    def lookup(seq: int) -> bytes | None:
        row = reader.tombstone_for_event(sid, seq)
        if row is None:
            return None
        return checked_replacement(reader, row, tombstone_record(reader, row))
    return lookup


__all__ = [
    "TombstoneWriter",
    "VerifiedRows",
    "VersionWriter",
    "checked_replacement",
    "current_item",
    "erased_lookup",
    "item_of",
    "open_tombstone",
    "open_versions",
    "read_item",
    "record_of",
    "tombstone_record",
    "verified_rows",
    "write_tombstone",
    "write_version",
]
