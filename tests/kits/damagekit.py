"""Byte-level damage to a closed store file, and who it can hurt.

Used by ``tests/integrity/test_integrity_damage.py``.  Three parts:

* :func:`build_store` -- a template store with several kinds of session (plain
  single appends, turns with tool calls and idempotency keys, compressed
  batches, repacked rows, a fork, a subagent, an open turn left by a crash,
  saved projection states), checkpointed into the main file and closed.
* :class:`PageMap` -- the file read as SQLite b-trees by a small parser of
  its own (checked against the ``dbstat`` virtual table): every byte of the
  file is given a *role* and the set of sessions whose rows it belongs to.
* :func:`make_damage` -- a random damage (a zeroed page, a truncation, bit
  flips, a scribbled run of bytes) and :meth:`PageMap.blame`, what that damage
  touched: shared structure, or the rows of which sessions.

The roles (the rule the test enforces is written in its module docstring):

``header``   the 100-byte database header;
``schema``   page 1 and every page of ``sqlite_schema``;
``interior`` an interior page of any b-tree (keys and child pointers);
``struct``   a leaf page's header, its cell pointer array, a cell's length
             and rowid varints, a freeblock header: the page's structure, so
             every row on the page and the rows that border it in key order
             (a seek for a neighbour's range lands on this page) are hurt;
``cell``     the payload of one table row (its record, its overflow pointer,
             its overflow pages): only that row is hurt;
``index``    any used byte of an index leaf page (the keys steer the
             binary search of every look-up that lands there);
``free``     bytes no read consults: unallocated space in a page, free
             pages, the structure of the (empty) tables trajlog never reads.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import apsw

import trajlog
from trajlog import projections

# -- the template store -----------------------------------------------------------

T0 = 1_700_000_000_000
PLAIN, TURNS, BATCHES, CRASHED = (f"00000000-0000-4000-8000-0000000000{x}"
                                 for x in ("0a", "0b", "0c", "0d"))
SHARED_ROLES = ("header", "schema", "interior", "gate")
# Tables every listing and look-up reads, whatever the session: damage there is
# shared ("gate"), as the schema's is -- the deleted sessions (a look-up asks
# whether its session was deleted).
GATES = ("deleted_sessions",)
# Sessions whose header rows are large, so that the sessions table spans
# several leaf pages (damage to one leaf then spares the sessions of the others).
_NOTES = "n" * 1400


@dataclass
class Template:
    """The store the damaged copies are made from, and what it holds."""

    path: str
    ids: list[str]                       # every session, oldest first
    parents: dict[str, str | None]       # session -> parent session (forks, subagents)
    fork_at: dict[str, int]              # a seq each session can be forked at
    kinds: dict[str, str] = field(default_factory=dict)


def build_store(path: str) -> Template:
    """Write the template store at ``path``: checkpointed, closed, no WAL left."""
    clock = [T0]

    def tick() -> int:
        clock[0] += 7
        return clock[0]

    with trajlog.open(path, repack=False) as st:
        plain = st.create_session(cwd="/repo/plain", agent_preset="coder-v1",
                                  metadata={"title": "plain", "notes": _NOTES},
                                  session_id=PLAIN)
        for i in range(14):
            plain.append("user/message", {"content": f"plain message {i}"}, time=tick())
        turns = st.create_session(cwd="/repo/turns", metadata={
            "title": "turns", "identity": "alice", "notes": _NOTES}, session_id=TURNS)

        def one_turn(n: int) -> None:
            turns.append("turn/start", {}, time=tick())
            turns.append("user/message", {"content": f"task {n}"}, time=tick())
            turns.append("request/header", {"system": "be brief", "model": "m1",
                                            "tools": [{"name": "read"}]}, time=tick())
            turns.append("step/start", {}, time=tick())
            call = f"call-{n}"
            turns.append("assistant/message", {"content": "reading", "tool_calls": [
                {"id": call, "name": "read", "arguments": {"path": f"f{n}.py"}}]},
                time=tick())
            turns.append("tool/call", {"call_id": call, "name": "read",
                                       "arguments": {"path": f"f{n}.py"}},
                         time=tick(), idempotency_key=f"tool-call-{n}")
            turns.append("tool/result", {"call_id": call, "output": f"{n}:" + "x" * 300,
                                         "is_error": n == 2},
                         time=tick(), source="read", workspace_revision="git:7d31a9c",
                         idempotency_key=f"tool-result-{n}")
            turns.append("step/end", {}, time=tick())
            turns.append("goal/set", {"goal": f"goal {n}"}, time=tick())
            turns.append("assistant/message", {"content": f"done {n}"}, time=tick())
            turns.append("turn/end", {"interrupted": False}, time=tick())

        for n in range(3):
            one_turn(n)
        batches = st.create_session(cwd="/repo/batches", metadata={"title": "batches",
                                                                     "notes": _NOTES},
                                    session_id=BATCHES)
        for k in range(3):
            batches.append_batch([
                ("user/message", {"content": f"batch {k} line {i} " + "lorem ipsum " * 8},
                 {"time": tick()}) for i in range(100)])
        batches.append_batch([("assistant/message", {"content": f"short {i}"},
                               {"time": tick(), "idempotency_key": f"b-{i}"})
                              for i in range(3)])
        st.repack(PLAIN)
        st.repack(TURNS)           # the first turns as full rows, later ones single rows
        fork = turns.fork(turns.last_seq - 2, metadata={"notes": _NOTES})
        fork.append("user/message", {"content": "forked on"}, time=tick())
        one_turn(3)
        turns.append("turn/start", {}, time=tick())
        turns.append("assistant/message", {"content": "delegating", "tool_calls": [
            {"id": "sub-1", "name": "agent", "arguments": {"task": "review"}}]}, time=tick())
        turns.append("tool/call", {"call_id": "sub-1", "name": "agent",
                                   "arguments": {"task": "review"}}, time=tick())
        sub = turns.spawn_subagent("review auth.ts", call_id="sub-1",
                                   metadata={"notes": _NOTES})
        sub.append("assistant/message", {"content": "looks fine"}, time=tick())
        sub.finish()
        turns.append("turn/end", {"interrupted": False}, time=tick())
        for s in (plain, turns, batches, fork, sub):
            projections.checkpoint(s)
        crashed = st.create_session(cwd="/repo/crashed", metadata={"notes": _NOTES},
                                    session_id=CRASHED)
        crashed.append("turn/start", {}, time=tick())
        crashed.append("user/message", {"content": "left open by a crash"}, time=tick())
        crashed.append("step/start", {}, time=tick())
        crashed.append("assistant/message", {"content": "calling", "tool_calls": [
            {"id": "k1", "name": "run", "arguments": {}}]}, time=tick())
        crashed.append("tool/call", {"call_id": "k1", "name": "run", "arguments": {}},
                       time=tick())
        projections.checkpoint(crashed)
        ids = [PLAIN, TURNS, BATCHES, fork.id, sub.id, CRASHED]
        template = Template(path, ids, {PLAIN: None, TURNS: None, BATCHES: None,
                                        fork.id: TURNS, sub.id: TURNS, CRASHED: None},
                            {PLAIN: 0, TURNS: 3, BATCHES: 5, fork.id: 1, sub.id: 0,
                             CRASHED: 0},
                            {PLAIN: "plain", TURNS: "turns", BATCHES: "batches",
                             fork.id: "fork", sub.id: "subagent", CRASHED: "crashed"})
    checkpoint(path)
    return template


def checkpoint(path: str) -> None:
    """Move everything into the main file and leave no WAL behind."""
    conn = apsw.Connection(path)
    try:
        busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
        assert busy == 0
    finally:
        conn.close()
    for tail in ("-wal", "-shm"):
        if os.path.exists(path + tail):
            assert tail == "-shm" or os.path.getsize(path + tail) == 0
            os.remove(path + tail)


# -- the file as b-trees --------------------------------------------------------------

ROLES = ("header", "schema", "interior", "struct", "cell", "index", "free")


@dataclass(frozen=True)
class _Leaf:
    pgno: int
    is_index: bool
    cells: list[tuple[int, int, int, list[int]]]   # (start, prefix end, end, overflow pages)
    sids: list[int | None]                         # each cell's session, in key order


@dataclass(frozen=True)
class Segment:
    lo: int                  # file offsets [lo, hi)
    hi: int
    role: str
    owners: frozenset[int]   # sids hurt when these bytes change
    table: str               # the b-tree (or "freelist", "header")


def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = 0
    for k in range(8):
        c = b[i + k]
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i + k + 1
    return (v << 8) | b[i + 8], i + 9


def _u16(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 2], "big")


def _u32(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 4], "big")


def _record(payload: bytes) -> list[Any]:
    """The fields of an SQLite record (ints, floats as None, text and blobs)."""
    n, i = _varint(payload, 0)
    types, j = [], i
    while j < n:
        t, j = _varint(payload, j)
        types.append(t)
    out: list[Any] = []
    pos = n
    for t in types:
        size = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8, 8: 0, 9: 0}.get(
            t, (t - 12) // 2 if t >= 12 else 0)
        raw = payload[pos:pos + size]
        if 1 <= t <= 6:
            out.append(int.from_bytes(raw, "big", signed=True))
        elif t in (8, 9):
            out.append(t - 8)
        elif t >= 12:
            out.append(bytes(raw))
        else:
            out.append(None)
        pos += size
    return out


class PageMap:
    """Every byte of a (pristine) store file, with its role and owners."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            self.data = data = f.read()
        self.size = len(data)
        ps = _u16(data, 16)
        self.page_size = 65536 if ps == 1 else ps
        self.usable = self.page_size - data[20]
        self.pages = self.size // self.page_size
        self._segments: dict[int, list[Segment]] = {}
        self.page_table: dict[int, str] = {}
        self.page_kind: dict[int, str] = {}
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        try:
            objects = conn.execute("SELECT type, name, tbl_name, rootpage FROM sqlite_schema "
                                   "WHERE rootpage > 0").fetchall()
            self._ps_sid = dict(conn.execute("SELECT rowid, sid FROM projection_states"))
            self.session_ids: dict[int, str] = {int(sid): str(i) for sid, i in conn.execute(
                "SELECT sid, id FROM sessions")}
            stat = {int(p): (str(n), str(t)) for n, p, t in conn.execute(
                "SELECT name, pageno, pagetype FROM dbstat")}
        finally:
            conn.close()
        self._walk_tree("sqlite_schema", "sqlite_schema", 1)
        for _type, name, table, root in objects:
            self._walk_tree(str(name), str(table), int(root))
        self._freelist()
        for pgno in range(1, self.pages + 1):
            if pgno not in self._segments:   # (a page no structure reaches)
                self._add(pgno, 0, self.page_size, "free", frozenset(), "unreached")
        # the parser must see the file as SQLite does
        for pgno, (name, kind) in stat.items():
            assert self.page_table.get(pgno) == name, (pgno, name, self.page_table.get(pgno))
            assert self.page_kind.get(pgno) == kind, (pgno, kind, self.page_kind.get(pgno))
        self.tables = sorted(set(self.page_table.values()))

    # -- building -------------------------------------------------------------

    def _add(self, pgno: int, lo: int, hi: int, role: str, owners: frozenset[int],
             table: str) -> None:
        if role != "free" and any(gate in table for gate in GATES):
            role = "gate"
        if hi > lo:
            base = (pgno - 1) * self.page_size
            self._segments.setdefault(pgno, []).append(
                Segment(base + lo, base + hi, role, owners, table))

    def _sid_of(self, table: str, rowid: int) -> int | None:
        if table in ("sessions", "session_heads"):
            return rowid
        if table in ("chunks", "event_index"):
            return rowid >> 32
        if table == "projection_states":
            return self._ps_sid.get(rowid)
        return None

    def _local(self, payload: int, table_leaf: bool) -> tuple[int, bool]:
        u = self.usable
        x = u - 35 if table_leaf else ((u - 12) * 64 // 255) - 23
        if payload <= x:
            return payload, False
        m = ((u - 12) * 32 // 255) - 23
        k = m + ((payload - m) % (u - 4))
        return (k if k <= x else m), True

    def _overflow(self, first: int, need: int) -> tuple[list[int], bytes]:
        pages, out = [], bytearray()
        pgno = first
        while pgno and need > 0:
            pages.append(pgno)
            base = (pgno - 1) * self.page_size
            take = min(need, self.usable - 4)
            out += self.data[base + 4:base + 4 + take]
            need -= take
            pgno = _u32(self.data, base)
        return pages, bytes(out)

    def _walk_tree(self, name: str, table: str, root: int) -> None:
        """Parse one b-tree: every page's segments, its leaves in key order."""
        leaves: list[_Leaf] = []
        stack = [root]
        while stack:   # depth first, left to right: leaves come in key order
            children = self._page(stack.pop(), name, table, leaves)
            stack.extend(reversed(children))
        for k, leaf in enumerate(leaves):
            around = set(leaf.sids)
            if k > 0 and leaves[k - 1].sids:
                around.add(leaves[k - 1].sids[-1])
            if k + 1 < len(leaves) and leaves[k + 1].sids:
                around.add(leaves[k + 1].sids[0])
            self._leaf_segments(leaf, frozenset(s for s in around if s is not None), name)

    def _page(self, pgno: int, name: str, table: str, leaves: list[_Leaf]) -> list[int]:
        d = self.data
        base = (pgno - 1) * self.page_size
        h = base + (100 if pgno == 1 else 0)
        kind = d[h]
        assert kind in (0x02, 0x05, 0x0A, 0x0D), (pgno, kind)
        self.page_table[pgno] = name
        ncells = _u16(d, h + 3)
        interior = kind in (0x02, 0x05)
        is_index = kind in (0x02, 0x0A)
        ptrs = [_u16(d, h + (12 if interior else 8) + 2 * i) for i in range(ncells)]
        if pgno == 1:
            self._add(1, 0, 100, "header", frozenset(), "header")
        if interior:
            self.page_kind[pgno] = "internal"
            role = "schema" if table == "sqlite_schema" else "interior"
            self._add(pgno, 100 if pgno == 1 else 0, self.page_size, role, frozenset(), name)
            children = []
            for p in ptrs:
                children.append(_u32(d, base + p))
                if is_index:   # an interior index cell holds a whole key, maybe overflowing
                    size, i = _varint(d, base + p + 4)
                    local, over = self._local(size, False)
                    if over:
                        for op in self._overflow(_u32(d, i + local), size - local)[0]:
                            self._mark_overflow(op, role, frozenset(), name)
            children.append(_u32(d, h + 8))
            return children
        self.page_kind[pgno] = "leaf"
        cells: list[tuple[int, int, int, list[int]]] = []
        sids: list[int | None] = []
        for p in ptrs:
            at = base + p
            size, i = _varint(d, at)
            rowid = None
            if not is_index:
                rowid, i = _varint(d, i)
            prefix_end = i
            local, over = self._local(size, not is_index)
            payload = d[i:i + local]
            pages: list[int] = []
            end = i + local
            if over:
                pages, rest = self._overflow(_u32(d, end), size - local)
                payload += rest
                end += 4
            if table == "call_index":   # (WITHOUT ROWID: the key is (sid, call_id))
                sid = int(_record(payload)[0])
            elif is_index:   # the rowid is the key's last field
                sid = self._sid_of(table, int(_record(payload)[-1]))
            else:
                assert rowid is not None
                sid = self._sid_of(table, rowid)
            cells.append((at - base, prefix_end - base, end - base, pages))
            sids.append(sid)
        leaves.append(_Leaf(pgno, is_index, cells, sids))
        return []

    def _mark_overflow(self, pgno: int, role: str, owners: frozenset[int], table: str) -> None:
        self.page_table[pgno] = table
        self.page_kind[pgno] = "overflow"
        self._add(pgno, 0, self.page_size, role, owners, table)

    def _leaf_segments(self, leaf: _Leaf, around: frozenset[int], name: str) -> None:
        d = self.data
        pgno, is_index, cells, sids = leaf.pgno, leaf.is_index, leaf.cells, leaf.sids
        base = (pgno - 1) * self.page_size
        top = 100 if pgno == 1 else 0
        h = base + top
        schema = name == "sqlite_schema"
        whole = "schema" if schema else "index" if is_index else "struct"
        ncells = _u16(d, h + 3)
        ptr_end = top + 8 + 2 * ncells
        self._add(pgno, top, ptr_end, whole, around, name)
        covered = [(top, ptr_end)]
        for (lo, prefix_end, end, pages), sid in zip(cells, sids, strict=True):
            own = frozenset() if sid is None else frozenset({sid})
            if schema or is_index:
                self._add(pgno, lo, end, whole, around, name)
                for op in pages:
                    self._mark_overflow(op, whole, around, name)
            else:
                self._add(pgno, lo, prefix_end, "struct", around, name)
                self._add(pgno, prefix_end, end, "cell", own, name)
                for op in pages:
                    self._mark_overflow(op, "cell", own, name)
            covered.append((lo, end))
        block = _u16(d, h + 1)   # the freeblock chain: structure
        while block:
            self._add(pgno, block, block + 4, whole, around, name)
            covered.append((block, block + 4))
            block = _u16(d, base + block)
        covered.sort()
        pos = 0
        for lo, hi in covered:
            if lo > pos:
                self._add(pgno, pos, lo, "free", frozenset(), name)
            pos = max(pos, hi)
        if pos < self.page_size:
            self._add(pgno, pos, self.page_size, "free", frozenset(), name)
        self._segments[pgno].sort(key=lambda s: s.lo)

    def _freelist(self) -> None:
        trunk = _u32(self.data, 32)
        while trunk:
            base = (trunk - 1) * self.page_size
            self.page_table[trunk] = "freelist"
            self._add(trunk, 0, self.page_size, "free", frozenset(), "freelist")
            for i in range(_u32(self.data, base + 4)):
                leaf = _u32(self.data, base + 8 + 4 * i)
                self.page_table[leaf] = "freelist"
                self._add(leaf, 0, self.page_size, "free", frozenset(), "freelist")
            trunk = _u32(self.data, base)

    # -- asking -----------------------------------------------------------------

    def segments(self, pgno: int | None = None) -> list[Segment]:
        if pgno is not None:
            return self._segments[pgno]
        return [s for p in sorted(self._segments) for s in self._segments[p]]

    def where(self, offset: int) -> Segment:
        for seg in self._segments.get(offset // self.page_size + 1, ()):
            if seg.lo <= offset < seg.hi:
                return seg
        raise AssertionError(f"offset {offset} is in no segment")

    def blame(self, touched: Iterable[tuple[int, int]]) -> Blame:
        """What a damage over the byte ranges ``touched`` can hurt."""
        roles: set[str] = set()
        owners: set[int] = set()
        tables: set[str] = set()
        for lo, hi in touched:
            for pgno in range(lo // self.page_size + 1, (hi - 1) // self.page_size + 2):
                for seg in self._segments.get(pgno, ()):
                    if seg.lo < hi and lo < seg.hi:
                        roles.add(seg.role)
                        owners |= seg.owners
                        tables.add(seg.table)
        return Blame(frozenset(roles), frozenset(owners), frozenset(tables))


@dataclass(frozen=True)
class Blame:
    roles: frozenset[str]
    owners: frozenset[int]     # sids
    tables: frozenset[str]

    @property
    def shared(self) -> bool:
        return bool(self.roles & set(SHARED_ROLES))


# -- damage -------------------------------------------------------------------------

KINDS = ("zero_page", "truncate", "bitflip", "scribble")
TARGETS = ("header", "schema", "sessions", "session_heads", "chunks", "event_index",
           "projection_states", "indexes", "interior", "anywhere")


@dataclass(frozen=True)
class Damage:
    kind: str
    target: str
    edits: tuple[tuple[int, bytes], ...]   # (offset, new bytes)
    truncate: int | None = None            # new file length
    note: str = ""

    def touched(self, size: int) -> list[tuple[int, int]]:
        out = [(off, off + len(new)) for off, new in self.edits]
        if self.truncate is not None:
            out.append((self.truncate, size))
        return out

    def apply(self, data: bytes) -> bytes:
        buf = bytearray(data)
        for off, new in self.edits:
            buf[off:off + len(new)] = new
        if self.truncate is not None:
            del buf[self.truncate:]
        return bytes(buf)

    def describe(self, pm: PageMap) -> str:
        parts = [f"{self.kind}/{self.target}"]
        for off, new in self.edits[:6]:
            seg = pm.where(off)
            page, at = off // pm.page_size + 1, off % pm.page_size
            old = pm.data[off:off + len(new)]
            if len(new) == 1:
                change = f"xor 0x{old[0] ^ new[0]:02x}"
            elif new.count(0) == len(new):
                change = f"zeroed {len(new)} bytes"
            else:
                change = f"{len(new)} bytes overwritten"
            parts.append(f"page {page} (+{at}) byte {off} [{seg.role} of {seg.table}] "
                         f"{change}")
        if len(self.edits) > 6:
            parts.append(f"... {len(self.edits) - 6} more edits")
        if self.truncate is not None:
            parts.append(f"truncated to {self.truncate} bytes (page "
                         f"{self.truncate // pm.page_size + 1} +{self.truncate % pm.page_size})")
        return "; ".join(parts)


def _pages_of(pm: PageMap, target: str) -> list[int]:
    if target == "header":
        return [1]
    if target == "schema":
        return [p for p, t in pm.page_table.items() if t == "sqlite_schema"]
    if target == "indexes":
        return [p for p, t in pm.page_table.items() if t.startswith("sqlite_autoindex")
                or t.startswith("event_index_")]
    if target == "interior":
        return [p for p, k in pm.page_kind.items() if k == "internal"]
    if target == "anywhere":
        return list(range(1, pm.pages + 1))
    return [p for p, t in pm.page_table.items() if t == target]


def make_damage(rng: random.Random, pm: PageMap) -> Damage:
    """One random damage of the file mapped by ``pm``."""
    kind = rng.choices(KINDS, weights=(2, 2, 5, 2))[0]
    if kind == "truncate":
        if rng.random() < 0.4:
            cut = rng.randrange(1, pm.pages) * pm.page_size
        else:
            cut = rng.randrange(0, pm.size)
        return Damage(kind, "tail", (), cut)
    target = rng.choice(TARGETS)
    pages = _pages_of(pm, target) or list(range(1, pm.pages + 1))
    page = rng.choice(pages)
    base = (page - 1) * pm.page_size
    if kind == "zero_page":
        return Damage(kind, target, ((base, bytes(pm.page_size)),))

    def spot() -> int:
        if target == "header":
            return rng.randrange(0, 100)
        # mostly bytes that matter: the used parts of the page
        segs = [s for s in pm.segments(page) if s.role != "free"]
        if segs and rng.random() < 0.85:
            seg = rng.choice(segs)
            return rng.randrange(seg.lo, seg.hi)
        return base + rng.randrange(pm.page_size)

    if kind == "bitflip":
        edits: dict[int, int] = {}
        for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
            off = spot() if rng.random() < 0.8 or target == "header" else rng.randrange(pm.size)
            edits[off] = edits.get(off, pm.data[off]) ^ (1 << rng.randrange(8))
        return Damage(kind, target, tuple((o, bytes([v])) for o, v in sorted(edits.items())))
    off = spot()
    n = rng.choice((2, 4, 8, 16, 64, 256))
    n = min(n, pm.size - off)
    fill = rng.choice(("zero", "random", "ff"))
    new = (bytes(n) if fill == "zero" else b"\xff" * n if fill == "ff"
           else bytes(rng.randrange(256) for _ in range(n)))
    return Damage(kind, target, ((off, new),), note=fill)


__all__ = ["BATCHES", "CRASHED", "KINDS", "PLAIN", "ROLES", "TARGETS", "TURNS", "Blame",
           "Damage", "PageMap", "Segment", "Template", "build_store", "checkpoint",
           "make_damage"]
