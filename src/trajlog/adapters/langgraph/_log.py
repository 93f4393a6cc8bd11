"""How a LangGraph thread lives in a trajlog session: the events the saver
writes, the codec of serialized values, and the per-thread index.

A thread is one session (id ``uuid5(NAMESPACE, thread_id)``).  Its log holds

* ``checkpoint/put`` ``{ns, id, parent, checkpoint, metadata, new_versions}``;
* ``checkpoint/writes`` ``{ns, checkpoint_id, task_id, task_path, replace, writes}``,
  ``writes`` a list of ``[idx, channel, value]``;
* ``checkpoint/delete`` -- the marker of :meth:`TrajlogSaver.delete_thread`:
  everything before it is erased (or hidden) and reads start after it;
* ``checkpoint/forget`` ``{message_id, erased}`` -- the marker of
  :meth:`TrajlogSaver.erase_message`, after the puts and writes it appended
  again without the message's text (each with ``restores``: the seq of the
  erased original; a restored put is the head of its namespace only if no
  put of a greater id is live);
* the mirrored messages (:mod:`._mirror`), which the index ignores.

A serialized value is ``[serde type, "u" | "l", text]``: the serde's bytes as
UTF-8 text when they are valid UTF-8, else as Latin-1 (one character a byte).
Measured against base64 on a 10 KiB msgpack checkpoint: 10.7 KiB against
13.7 KiB stored, 9.6 + 3.6 us against 14.6 + 44.3 us to pack and unpack, and
half the size once compressed.

Under a redaction policy the scanners must not edit that text (a masked span
changes a string's length, and msgpack's length prefixes no longer match: the
value would not decode), so a value the saver can open is stored as
``[serde type, "t", tree]`` instead: the decoded msgpack (or JSON, or bytes)
as a JSON tree whose every string -- map keys included -- is a JSON string
the scanners see and edit in place, and which is encoded again on read:

* str, bool, None, finite float: themselves; an int beyond 2**53 ``{"i": hex}``;
  another float ``{"f": repr}``;
* an array: a list; a map: ``{"m": [[key, value], ...]}``; bytes ``{"b":
  Latin-1 text}``; an extension type ``{"x": [code, tree]}`` when its payload is
  msgpack (LangGraph's are), else ``{"xb": [code, Latin-1 text]}``.

Every dict of a tree is one of these tags, so a tree decodes unambiguously.
"""

from __future__ import annotations

import functools
import math
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...api import Session
from ...events import Event

NAMESPACE = uuid.UUID("6f1d3c52-8f0e-4c59-9d57-2a6c1b0e7a41")
ADAPTER = "langgraph-checkpoint"      # the ``adapter`` metadata of a thread's session
PUT = "checkpoint/put"
WRITES = "checkpoint/writes"
DELETED = "checkpoint/delete"
# after either, the thread starts again: the adapter's marker (a thread whose
# copies read its events), or the store's last event of a deleted session
ENDS = frozenset({DELETED, "session/deleted"})
FORGET = "checkpoint/forget"
_WINDOW = 32          # first window of a backwards scan for a namespace's head
_CACHED = 64          # events kept per thread


@functools.lru_cache(maxsize=4096)
def session_id_of(thread_id: str) -> str:
    """The trajlog session id of a LangGraph thread (deterministic; cached:
    every call of the saver asks, and a uuid5 costs a hash and two objects)."""
    return str(uuid.uuid5(NAMESPACE, thread_id))


def generation_id(thread_id: str, generation: int) -> str:
    """The session id of a thread's ``generation``: the first is
    :func:`session_id_of`; each deletion of the thread (``delete_thread``)
    moves it to the next, a uuid5 in the first's namespace."""
    first = session_id_of(thread_id)
    return first if generation == 0 else str(uuid.uuid5(uuid.UUID(first), str(generation)))


def pack(typed: tuple[str, bytes]) -> list[Any]:
    """A serde's ``(type, bytes)`` as JSON-compatible text."""
    kind, raw = typed
    try:
        return [kind, "u", raw.decode("utf-8")]
    except UnicodeDecodeError:
        return [kind, "l", raw.decode("latin-1")]


def pack_tree(typed: tuple[str, bytes]) -> list[Any] | None:
    """A serde's ``(type, bytes)`` as a tree the scanners may edit (see the
    module docstring), or None if the saver cannot open this type or value."""
    kind, raw = typed
    try:
        if kind == "msgpack":
            return [kind, "t", _node(_MSGPACK.decode(raw))]
        if kind == "json":
            return [kind, "t", _node(msgspec.json.decode(raw))]
        if kind in ("bytes", "bytearray"):
            return [kind, "t", {"b": raw.decode("latin-1")}]
    except (msgspec.DecodeError, _Unsupported, RecursionError):
        pass
    return None


def unpack(value: list[Any]) -> tuple[str, bytes]:
    """The inverse of :func:`pack` and :func:`pack_tree`."""
    kind, enc, body = value
    if enc == "t":
        if kind == "json":
            return kind, msgspec.json.encode(_value(body))
        if kind in ("bytes", "bytearray"):
            return kind, body["b"].encode("latin-1")
        return kind, msgspec.msgpack.encode(_value(body))
    return kind, body.encode("utf-8" if enc == "u" else "latin-1")


class _Unsupported(Exception):
    """A decoded value of a type a tree has no form for."""


@dataclass(frozen=True, slots=True)
class _Ext:
    code: int
    value: Any
    packed: bool        # the payload was msgpack (``value`` decoded) or not (bytes)


def _ext(code: int, data: memoryview) -> _Ext:
    try:
        return _Ext(code, _MSGPACK.decode(data), True)
    except msgspec.DecodeError:
        return _Ext(code, bytes(data), False)


_MSGPACK = msgspec.msgpack.Decoder(ext_hook=_ext)
_SAFE = 2 ** 53


def _node(v: Any) -> Any:
    t = type(v)
    if t is str or t is bool or v is None:
        return v
    if t is int:
        # (in hex: a run of decimal digits could be masked as a card number)
        return v if -_SAFE <= v <= _SAFE else {"i": hex(v)}
    if t is float:
        return v if math.isfinite(v) else {"f": repr(v)}
    if t is list:
        return [_node(x) for x in v]
    if t is dict:
        return {"m": [[_node(k), _node(x)] for k, x in v.items()]}
    if t is bytes:
        return {"b": v.decode("latin-1")}
    if t is _Ext:
        return ({"x": [v.code, _node(v.value)]} if v.packed
                else {"xb": [v.code, v.value.decode("latin-1")]})
    raise _Unsupported(t.__name__)


def _value(n: Any) -> Any:
    if isinstance(n, (list, tuple)):
        return [_value(x) for x in n]
    if not isinstance(n, dict):
        return n
    tag, body = next(iter(n.items()))
    if tag == "m":
        return {_value(k): _value(x) for k, x in body}
    if tag == "b":
        return body.encode("latin-1")
    if tag == "x":
        return msgspec.msgpack.Ext(body[0], msgspec.msgpack.encode(_value(body[1])))
    if tag == "xb":
        return msgspec.msgpack.Ext(body[0], body[1].encode("latin-1"))
    if tag == "i":
        return int(body, 16)
    return float(body)


def _put_key(data: Any) -> tuple[str, str] | None:
    if isinstance(data, dict):
        ns, cid = data.get("ns"), data.get("id")
        if type(ns) is str and type(cid) is str and "checkpoint" in data:
            return ns, cid
    return None     # an erased payload (or not ours): nothing to index


def _writes_key(data: Any) -> tuple[str, str] | None:
    if isinstance(data, dict):
        ns, cid = data.get("ns"), data.get("checkpoint_id")
        if type(ns) is str and type(cid) is str and "writes" in data:
            return ns, cid
    return None


Head = tuple[int, str, list[int]]     # seq of the put, checkpoint id, seqs of its writes


@dataclass
class ThreadLog:
    """What this process knows of one thread's log, kept in step with it.

    Two levels: ``full`` -- every live put and writes event by (ns, id),
    folded from seq 0 (what ``list`` and reads by id need) -- or, before that,
    ``heads``: the newest put of each namespace asked for, found by scanning
    back from the end of the log (what ``get_tuple`` of the latest needs,
    without reading the whole log).  Both are valid as of ``seen``; every read
    first folds the events after it (another process may have appended, or
    deleted the thread: its marker resets the index).
    """

    session: Session
    lock: threading.RLock = field(default_factory=threading.RLock)
    seen: int = -1
    full: bool = False
    base: int = 0                                   # first seq after the last marker
    puts: dict[str, dict[str, int]] = field(default_factory=dict)
    writes: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    newest: dict[str, str] = field(default_factory=dict)    # full: ns -> greatest id
    heads: dict[str, Head | None] = field(default_factory=dict)
    cleared: bool = False                           # heads: a namespace not in it has none
    on_event: Any = None                            # the mirror's fold, in full mode
    # Events of ours this process appended or read, by seq (a get costs a
    # query and a frame check; LangGraph reads the newest checkpoint again and
    # again).  Dropped at a delete marker; bounded.
    cache: OrderedDict[int, Event] = field(default_factory=OrderedDict)

    def get(self, seq: int) -> Event:
        """The event at ``seq``, from the cache or the log."""
        ev = self.cache.get(seq)
        if ev is None:
            ev = self.session.get(seq)
            self._keep(ev)
        return ev

    def _keep(self, ev: Event) -> None:
        self.cache[ev.seq] = ev
        if len(self.cache) > _CACHED:
            self.cache.popitem(last=False)

    # -- folding ---------------------------------------------------------------------

    def fold(self, events: Iterable[Event]) -> None:
        """Fold events that follow ``seen`` (in order)."""
        for ev in events:
            t = ev.type
            if t in (PUT, WRITES):
                self._keep(ev)
            elif t in ENDS:
                self.cache.clear()
            if self.full:
                if t == PUT:
                    key = _put_key(ev.data)
                    if key is not None:
                        self.puts.setdefault(key[0], {})[key[1]] = ev.seq
                        if key[1] > self.newest.get(key[0], ""):
                            self.newest[key[0]] = key[1]
                elif t == WRITES:
                    key = _writes_key(ev.data)
                    if key is not None:
                        self.writes.setdefault(key, []).append(ev.seq)
                elif t in ENDS:
                    self.puts.clear()
                    self.writes.clear()
                    self.newest.clear()
                    self.base = ev.seq + 1
                    if self.on_event is not None:
                        self.on_event(None)
                elif self.on_event is not None:
                    self.on_event(ev)
            elif t == PUT:
                key = _put_key(ev.data)
                if key is not None:
                    cur = self.heads.get(key[0])
                    if "restores" not in ev.data:
                        self.heads[key[0]] = (ev.seq, key[1], [])
                    elif cur is not None and cur[1] <= key[1]:
                        # (the same id again: its writes stay, those still live)
                        self.heads[key[0]] = (ev.seq, key[1], cur[2] if cur[1] == key[1]
                                              else [])
                    elif cur is None and (key[0] in self.heads or self.cleared):
                        self.heads[key[0]] = (ev.seq, key[1], [])
            elif t == WRITES:
                key = _writes_key(ev.data)
                head = self.heads.get(key[0]) if key is not None else None
                if key is not None and head is not None and head[1] == key[1]:
                    head[2].append(ev.seq)
            elif t in ENDS:
                self.heads.clear()
                self.cleared = True
                self.base = ev.seq + 1
            self.seen = ev.seq

    def note(self, events: list[Event]) -> None:
        """Fold events this process just appended, if nothing came between."""
        if events and events[0].seq == self.seen + 1:
            self.fold(events)

    def catch_up(self) -> int:
        """Fold what was appended since ``seen``; returns the last seq."""
        last = self.session.last_seq
        if last > self.seen:
            if self.full or self.heads or self.cleared:
                self.fold(self.session.events(self.seen + 1, last))
            else:
                self.seen = last     # nothing known yet: nothing to bring up to date
        return last

    def ensure_full(self) -> None:
        """Index every live checkpoint (one pass over the log, once a process)."""
        if self.full:
            return
        self.full, self.seen = True, -1
        self.puts.clear()
        self.writes.clear()
        self.newest.clear()
        self.heads.clear()
        self.base = 0
        if self.on_event is not None:
            self.on_event(None)
        self.catch_up()

    # -- lookups -----------------------------------------------------------------------

    def head(self, ns: str) -> Head | None:
        """The newest checkpoint of ``ns`` (greatest id in full mode, the last put
        otherwise: LangGraph's ids grow with time, so they agree)."""
        self.catch_up()
        if self.full:
            cid = self.newest.get(ns)
            if cid is None:
                return None
            return self.puts[ns][cid], cid, list(self.writes.get((ns, cid), ()))
        if ns in self.heads or self.cleared:
            return self.heads.get(ns)
        found = self._scan_back(ns)
        self.heads[ns] = found
        return found

    def _scan_back(self, ns: str) -> Head | None:
        hi, width = self.seen, _WINDOW
        pending: dict[str, list[int]] = {}
        restored: tuple[int, str] | None = None     # the greatest restored put seen
        while hi >= 0:
            lo = max(0, hi - width + 1)
            for ev in reversed(list(self.session.events(lo, hi))):
                t = ev.type
                if t in ENDS:
                    break
                if t == WRITES:
                    key = _writes_key(ev.data)
                    if key is not None and key[0] == ns:
                        pending.setdefault(key[1], []).append(ev.seq)
                elif t == PUT:
                    key = _put_key(ev.data)
                    if key is None or key[0] != ns:
                        continue
                    if "restores" in ev.data:   # put again, perhaps an older id: go on
                        if restored is None or key[1] > restored[1]:
                            restored = ev.seq, key[1]
                        continue
                    if restored is None or key[1] > restored[1]:
                        restored = ev.seq, key[1]
                    return restored[0], restored[1], sorted(pending.get(restored[1], ()))
            else:
                hi, width = lo - 1, width * 4
                continue
            break       # a delete marker: nothing before it is live
        if restored is None:
            return None
        return restored[0], restored[1], sorted(pending.get(restored[1], ()))

    def entry(self, ns: str, cid: str) -> Head | None:
        """The checkpoint ``cid`` of ``ns``, if live.  A put this process
        holds no copy of is read with the head in one statement (the put
        then comes from the cache): the head says whether anything came
        since ``seen``, which the index is valid as of."""
        self.ensure_full()
        seq = self.puts.get(ns, {}).get(cid)
        if seq is not None and seq not in self.cache and seq >= self.session.header.seed_length:
            heads: list[int] = []
            s = self.session
            ev = s._e.reading.event_at(s._ref, seq, heads=heads)
            if ev is not None and heads and heads[-1] == self.seen:
                self._keep(ev)
                return seq, cid, list(self.writes.get((ns, cid), ()))
        self.catch_up()
        seq = self.puts.get(ns, {}).get(cid)
        return None if seq is None else (seq, cid, list(self.writes.get((ns, cid), ())))

    def entries(self, ns: str | None, before: str | None) -> list[tuple[str, str, int]]:
        """Live checkpoints (of ``ns``, or of every namespace) with ids below
        ``before``, as ``(id, ns, seq of the put)``, unordered."""
        self.ensure_full()
        self.catch_up()
        spaces = [ns] if ns is not None else list(self.puts)
        return [(cid, space, seq) for space in spaces
                for cid, seq in self.puts.get(space, {}).items()
                if before is None or cid < before]

    def prefetch(self, seqs: set[int]) -> dict[int, Event]:
        """The events at ``seqs``, read in one verified pass over their range
        (a listing of many checkpoints: one get each costs a query)."""
        if not seqs:
            return {}
        return {ev.seq: ev for ev in self.session.events(min(seqs), max(seqs))
                if ev.seq in seqs}

    def writes_of(self, ns: str, cid: str) -> list[int]:
        """Seqs of the writes events of a checkpoint (as of ``seen``)."""
        return list(self.writes.get((ns, cid), ()))

    def live_seqs(self) -> tuple[int, int]:
        """``(base, last)``: the live part of the log."""
        self.ensure_full()
        return self.base, self.catch_up()


__all__ = ["ADAPTER", "DELETED", "ENDS", "FORGET", "NAMESPACE", "PUT", "WRITES", "Head",
           "ThreadLog", "generation_id", "pack", "pack_tree", "session_id_of", "unpack"]
