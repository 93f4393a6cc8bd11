"""The tamper matrix: every way a foreign connection can change a store, and
what trajlog does about it.

A *case* is one mutation of one table (an UPDATE, a DELETE, a REPLACE, a head
moved, two rows swapped, a trigger dropped ...).  A *row* of the matrix is a
case run through one kind of connection:

* ``apsw`` -- ``apsw.Connection(path)`` with SQLite's defaults: triggers on,
  no ``recursive_triggers``, no authorizer, no defensive mode;
* ``sqlite3`` -- Python's ``sqlite3.connect(path)``, also with its defaults
  (a few rows: the guards must not depend on the driver);
* ``no-triggers`` -- apsw with ``SQLITE_DBCONFIG_ENABLE_TRIGGER`` off: what
  only verification can find;
* ``writable_schema`` -- apsw with ``PRAGMA writable_schema=ON``, editing
  ``sqlite_schema`` itself.

Each row runs on its own copy of one template store (several sessions: a
plain one with turns, tool calls, single appends, batches, a repacked row and
idempotency keys; a fork; a subagent; saved projection states; one memory
version and one tombstone).  Its *actual* outcome is measured, never assumed:

* ``refused`` -- the mutation raised on that connection and the store is
  byte for byte what it was;
* ``refused at open`` -- ``trajlog.open(path)`` raises a typed
  :class:`trajlog.errors.TrajlogError`;
* ``found by verify`` -- every damaged session's ``verify()`` is not ok and
  names the session, seq and offset expected; every read (``events()``,
  ``tail()``, ``get()``) and ``load()`` either raises a
  :class:`~trajlog.errors.CorruptionError` or returns exactly what was
  acknowledged; the other sessions are intact;
* ``harmless`` -- every session verifies and reads back exactly what was
  acknowledged, every projection equals a fold from scratch, and forks and
  idempotent appends behave as on the intact store;
* ``undetectable (limit)`` -- documented limits of a self-contained store
  (a consistent truncation: only an outside watermark, e.g. an export's
  SEAL, can tell).

Anything else is a defect, named by what went wrong: ``hidden`` (fewer
events than acknowledged, without an error), ``accepted`` (altered events
without an error, or verify ok on a log that differs), ``view differs`` (a
saved projection state was trusted), ``index trusted`` (a fork cut or an
idempotent append acted on a forged index row), ``misplaced`` (found, but at
another seq / offset / session), ``error`` (an untyped or unexpected
exception).
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import msgspec

import trajlog
from kits.tamper import frames_of, raw_body
from trajlog import Identity, codec, errors, projections
from trajlog.codec.chunks import body_seed
from trajlog.projections import FOLDS, from_scratch
from trajlog.storage.event_index import REQUESTED, STEP_START, Mark, pack_marks, unpack_marks
from trajlog.storage.schema import SCHEMA_VERSION
from trajlog.storage.statements import i64

# -- outcomes ---------------------------------------------------------------------

REFUSED = "refused"
AT_OPEN = "refused at open"
FOUND = "found by verify"
HARMLESS = "harmless"
LIMIT = "undetectable (limit)"
OUTCOMES = (REFUSED, AT_OPEN, FOUND, HARMLESS, LIMIT)

# -- connections --------------------------------------------------------------------

APSW, SQLITE3, NO_TRIGGERS, WRITABLE = "apsw", "sqlite3", "no-triggers", "writable_schema"
MODES = (APSW, SQLITE3, NO_TRIGGERS, WRITABLE)
MODE_TEXT = {APSW: "apsw, defaults", SQLITE3: "sqlite3, defaults",
             NO_TRIGGERS: "apsw, triggers off", WRITABLE: "apsw, writable_schema=ON"}

P, F, S, E = "P", "F", "S", "E"   # the plain session, its fork, its subagent, an erased one
LABELS = (P, F, S, E)
ERASED_AT = 1             # the seq of E erased under tombstone 2 (after the memory's)
FORK_AT = 2               # P.fork(FORK_AT) on the intact store: seed = the end of turn 1 + 1


class Db:
    """One foreign connection, the same few calls whatever the driver."""

    def __init__(self, mode: str, path: str) -> None:
        self.mode = mode
        if mode == SQLITE3:
            self.conn: Any = sqlite3.connect(path)
        else:
            self.conn = apsw.Connection(path)
            if mode == NO_TRIGGERS:
                self.conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
            if mode == WRITABLE:
                self.conn.execute("PRAGMA writable_schema=ON").fetchall()

    def q(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(sql, tuple(params)).fetchall()]

    def begin(self) -> None:
        self.q("BEGIN")

    def commit(self) -> None:
        if self.mode == SQLITE3:
            self.conn.commit()
        else:
            self.q("COMMIT")

    def rollback(self) -> None:
        try:
            if self.mode == SQLITE3:
                self.conn.rollback()
            elif not self.conn.getautocommit():
                self.q("ROLLBACK")
        except (apsw.Error, sqlite3.Error):
            pass

    def close(self) -> None:
        self.conn.close()


# -- the template store ------------------------------------------------------------

@dataclass(frozen=True)
class RowInfo:
    """A chunk row as stored (i64 columns as SQLite holds them)."""

    cid: int
    first: int
    n: int
    raw_len: int
    codec: int
    body_check: int
    seed_chain: int
    last_chain: int
    body: bytes
    marks: bytes | None

    @property
    def last(self) -> int:
        return self.first + self.n - 1

    def values(self, **change: Any) -> tuple[Any, ...]:
        """The row's column values (cid, n, raw_len, codec, body_check,
        seed_chain, last_chain, body, marks), with ``change`` applied."""
        cols = {"cid": self.cid, "n": self.n, "raw_len": self.raw_len, "codec": self.codec,
                "body_check": self.body_check, "seed_chain": self.seed_chain,
                "last_chain": self.last_chain, "body": self.body, "marks": self.marks}
        cols.update(change)
        return tuple(cols.values())


ROW_COLUMNS = "cid, n, raw_len, codec, body_check, seed_chain, last_chain, body, marks"
ROW_SET = ("n = ?, raw_len = ?, codec = ?, body_check = ?, seed_chain = ?, last_chain = ?, "
           "body = ?, marks = ?")
SESSION_COLUMNS = ("sid, id, session_key, created_ms, cwd, parent_sid, seed_length, seed_chain, "
                   "origin, delegation_depth, agent_preset, metadata, header_check")
INDEX_COLUMNS = ("rid, type, time_ms, source, causal_parent, workspace_revision, data_class, "
                 "idempotency_key")


@dataclass
class Template:
    """The template store and everything the cases and checks need to know
    about it, read once."""

    path: str
    sid: dict[str, int] = field(default_factory=dict)
    id: dict[str, str] = field(default_factory=dict)
    key: dict[str, int] = field(default_factory=dict)          # u64
    seed: dict[str, int] = field(default_factory=dict)
    parent: dict[str, str | None] = field(default_factory=dict)
    last: dict[str, int] = field(default_factory=dict)
    chain_head: dict[str, int] = field(default_factory=dict)   # i64
    rows: dict[str, list[RowInfo]] = field(default_factory=dict)
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)  # own stream; end too
    frames: dict[str, dict[int, bytes]] = field(default_factory=dict)
    chains: dict[str, dict[int, int]] = field(default_factory=dict)   # u64, own frames
    acked: dict[str, list[Any]] = field(default_factory=dict)
    fork_seed: int = -1
    digest: str = ""
    memory_item: str = ""

    def rid(self, label: str, seq: int) -> int:
        return (self.sid[label] << 32) + seq

    def row(self, label: str, seq: int) -> RowInfo:
        """The row of ``label`` holding ``seq``."""
        for r in self.rows[label]:
            if r.first <= seq <= r.last:
                return r
        raise KeyError((label, seq))

    def off(self, label: str, seq: int) -> int:
        """The offset of frame ``seq`` in the session's own stream (past the
        end: the stream's length)."""
        own = self.offsets[label]
        if seq < self.seed[label]:
            return 0
        return own.get(seq, own[max(own)])

    def chain(self, label: str, seq: int) -> int:
        """The chain of frame ``seq`` as SQLite stores it (i64)."""
        if seq < 0:
            return i64(self.key[label])
        if seq < self.seed[label]:
            parent = self.parent[label]
            assert parent is not None
            return self.chain(parent, seq)
        return i64(self.chains[label][seq])

    def body_check(self, label: str, first: int, body: bytes) -> int:
        return i64(codec.checksum(body, body_seed(self.key[label], first)))

    def state(self, label: str, name: str) -> tuple[Any, ...]:
        """(version, seq, chain, state) of a saved projection state."""
        conn = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return tuple(conn.execute(
                "SELECT version, seq, chain, state FROM projection_states WHERE sid = ? "
                "AND name = ?", (self.sid[label], name)).fetchall()[0])
        finally:
            conn.close()


def agent_turn(s: Any, k: int, text: str) -> None:
    """One turn with a step, a requested tool call, its call and result (8 events)."""
    with s.turn():
        s.append("user/message", {"content": text}, idempotency_key=f"u{k}" if k == 1 else None)
        with s.step():
            s.append("assistant/message", {
                "content": f"reading {k}", "reasoning": [{"text": "think"}],
                "tool_calls": [{"id": f"c{k}", "name": "read", "arguments": {"p": k}}],
                "usage": {"input_tokens": 100 + k, "output_tokens": 7}})
            s.append("tool/call", {"call_id": f"c{k}", "name": "read", "arguments": {"p": k}})
            s.append("tool/result", {"call_id": f"c{k}", "output": f"out {k}",
                                     "is_error": False})


def build_template(path: str) -> Template:
    """Write the template store at ``path`` and describe it."""
    with trajlog.open(path, repack=False) as store:
        p = store.create_session(cwd="/repo", agent_preset="coder-v1",
                                 metadata={"identity": "alice", "title": "matrix"})
        agent_turn(p, 1, "fix the bug")                                   # 0..7
        p.append_batch([("note/a", {"n": i, "text": "abc " * 40}) for i in range(20)])  # 8..27
        assert store.repack(p.id) > 0                                     # one row: 0..27
        p.append("sandbox/mode", {"mode": "workspace-write"})             # 28
        agent_turn(p, 2, "and the test")                                  # 29..36, one a row
        p.append_batch([("user/message", {"content": "batched"}, {"idempotency_key": "b1"})]
                       + [("note/b", {"n": i, "text": "xyz " * 100}) for i in range(4)])  # 37..41
        p.mark(1, "superseded", "asked again", source="human:alice")      # 42
        f = p.fork(FORK_AT)                                               # seed 8
        with f.turn():
            f.append("user/message", {"content": "fork question"})
        f.append_batch([("note/f", {"n": i}) for i in range(5)])
        s = p.spawn_subagent("review the fix")
        s.append("assistant/message", {"content": "looks fine"})
        s.append_batch([("note/s", {"n": i}) for i in range(3)])
        e = store.create_session(cwd="/erased")
        e.append("note/e", {"n": 0})
        e.append("user/message", {"content": "wire nothing"})              # erased below
        e.append("note/e", {"n": 2})
        sessions = {P: p, F: f, S: s, E: e}
        for x in sessions.values():
            projections.checkpoint(x)
            assert x.verify().ok
        t = Template(path)
        t.fork_seed = f.header.seed_length
        for label, x in sessions.items():
            t.sid[label], t.id[label], t.key[label] = x._sid, x.id, x._key
            t.seed[label] = x.header.seed_length
            t.acked[label] = list(x.events())
            t.last[label] = x.last_seq
        t.parent = {P: None, F: P, S: P, E: None}
        # memory: an item with two versions, a revoked item (blank versions and
        # a tombstone), an item in another tenant
        mem = store.memory(Identity("acme", user="alice", session=p.id))
        kept = mem.remember("session", "fact", {"text": "the build is red"}, source=(p.id, 1))
        mem.quarantine(kept.id, reason="unsure")
        mem.revoke(mem.remember("user", "preference", {"text": "tabs"}).id, reason="asked")
        store.memory(Identity("globex", user="bob")).remember("user", "fact", {"text": "x"})
        t.memory_item = kept.id
        # an erased event: its tombstone (2, after the memory's) holds what it reads as
        store.erase(e.id, ERASED_AT, reason="gdpr", actor="human:dpo")
        t.acked[E] = list(e.events())
        assert e.verify().ok and store.verify_memory().ok
    conn = apsw.Connection(path)
    try:
        for label in LABELS:
            sid = t.sid[label]
            t.chain_head[label] = conn.execute("SELECT chain_head FROM session_heads WHERE "
                                               "sid = ?", (sid,)).fetchall()[0][0]
            rows = [RowInfo(c, c & 0xFFFFFFFF, n, rl, cd, bc, sc, lc, bytes(b),
                            None if m is None else bytes(m))
                    for c, n, rl, cd, bc, sc, lc, b, m in conn.execute(
                        f"SELECT {ROW_COLUMNS} FROM chunks WHERE cid >> 32 = ? ORDER BY cid",
                        (sid,))]
            t.rows[label], t.offsets[label], t.frames[label], t.chains[label] = rows, {}, {}, {}
            pos = 0
            for r in rows:
                fs = frames_of(raw_body((r.cid, r.n, r.raw_len, r.codec, r.body_check,
                                         r.seed_chain, r.last_chain, r.body)))
                assert len(fs) == r.n
                for i, frame in enumerate(fs):
                    t.offsets[label][r.first + i] = pos
                    t.frames[label][r.first + i] = frame
                    t.chains[label][r.first + i] = codec.decode_header(frame).chain
                    pos += len(frame)
            t.offsets[label][t.last[label] + 1] = pos
    finally:
        conn.close()
    assert not Path(path + "-wal").exists()
    t.digest = digest(path)
    return t


def digest(path: str) -> str:
    """Everything SQLite holds for the store: schema, every table's rows, the
    header pragmas."""
    h = hashlib.sha256()
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return f"unreadable: {exc}"
    try:
        for name in ("user_version", "application_id", "schema_version"):
            h.update(repr(conn.execute(f"PRAGMA {name}").fetchall()).encode())
        schema = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema "
                              "ORDER BY type, name").fetchall()
        h.update(repr(schema).encode())
        for kind, name, _, _ in schema:
            if kind == "table" and not name.startswith("sqlite_"):
                # (sorted here: FTS5's config table has no rowid to order by)
                rows = sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{name}"'))
                h.update(repr(rows).encode())
    except apsw.Error as exc:
        return f"unreadable: {exc}"
    finally:
        conn.close()
    return h.hexdigest()


# -- where a defect must be reported ------------------------------------------------

@dataclass(frozen=True)
class Damage:
    """A defect verify() must report: in session ``label`` (the one whose
    stored data is wrong), at one of ``places`` = (seq, offset) -- None:
    anywhere in that session."""

    label: str
    places: frozenset[tuple[int, int]] | None
    inherited: bool = True   # a child whose prefix holds ``places`` must fail too

    def text(self) -> str:
        if self.places is None:
            return f"{self.label} (anywhere)"
        seqs = sorted(self.places)
        if len(seqs) > 3:
            return f"{self.label} seq {seqs[0][0]}..{seqs[-1][0]}"
        return " or ".join(f"{self.label} seq {s} @{o}" for s, o in seqs)


Where = Callable[[Template], Damage]
Seq = int | Callable[[Template], int]


def _seq(t: Template, seq: Seq) -> int:
    return seq(t) if callable(seq) else seq


def at(label: str, *seqs: Seq, inherited: bool = True) -> Where:
    """Frame ``seq`` (any of ``seqs``) of ``label``, at its offset;
    ``inherited=False``: the frames are intact (the session's head is not),
    so a child that inherits them need not fail."""
    return lambda t: Damage(label, frozenset((_seq(t, s), t.off(label, _seq(t, s)))
                                             for s in seqs), inherited)


def row_start(label: str, seq: Seq) -> Where:
    """The first frame of the row holding ``seq``: a defect of the row as a whole."""
    return lambda t: at(label, t.row(label, _seq(t, seq)).first)(t)


def in_row(label: str, seq: Seq) -> Where:
    """Any frame of the row holding ``seq`` (a compressed body's damage)."""
    def where(t: Template) -> Damage:
        r = t.row(label, _seq(t, seq))
        return at(label, *range(r.first, r.last + 1))(t)
    return where


def header(label: str, *seqs: int) -> Where:
    """The session header: before the session's first own frame (seq 0 or
    its seed -- or ``seqs``, e.g. the seed the damaged header claims -- at
    offset 0)."""
    return lambda t: Damage(label, frozenset({(0, 0), (t.seed[label], 0)}
                                             | {(s, 0) for s in seqs}))


def log_end(label: str) -> Where:
    """Past the session's last frame (its last seq, at the stream's end): a
    defect found once the whole log was read."""
    return lambda t: Damage(label, frozenset({(t.last[label], t.off(label, t.last[label] + 1))}),
                            inherited=False)


def anywhere(label: str) -> Where:
    return lambda t: Damage(label, None)


def end(label: str) -> Callable[[Template], int]:
    """The seq after the session's last acknowledged one."""
    return lambda t: t.last[label] + 1


# -- the cases -------------------------------------------------------------------------

Mutation = Callable[[Db, Template], Any]


@dataclass(frozen=True)
class Case:
    table: str
    name: str
    mutate: Mutation
    expect: dict[str, str]
    damage: tuple[Where, ...] = ()
    note: str = ""
    # a probe known to act on this damaged index row before verify() runs (a
    # documented limit: finding an unindexed idempotency key means reading
    # the whole log); its result is reported, not counted as a defect
    probe_limit: str | None = None


@dataclass(frozen=True)
class Row:
    case: Case
    mode: str

    @property
    def expected(self) -> str:
        return self.case.expect[self.mode]

    @property
    def id(self) -> str:
        slug = "".join(ch if ch.isalnum() else "-" for ch in self.case.name.lower())
        slug = "-".join(part for part in slug.split("-") if part)[:72]
        return f"{self.case.table}/{slug}/{self.mode}"


CASES: list[Case] = []


def case(table: str, name: str, mutate: Mutation, *, apsw_: str | None = REFUSED,
         off: str | None = FOUND, sqlite3_: str | None = None, wschema: str | None = None,
         damage: Iterable[Where] = (), note: str = "", probe_limit: str | None = None) -> None:
    expect = {m: e for m, e in ((APSW, apsw_), (SQLITE3, sqlite3_), (NO_TRIGGERS, off),
                                (WRITABLE, wschema)) if e is not None}
    CASES.append(Case(table, name, mutate, expect, tuple(damage), note, probe_limit))


def sql(statement: str, *args: Callable[[Template], Any]) -> Mutation:
    """A mutation of one statement; ``args`` compute its parameters."""
    return lambda db, t: db.q(statement, [a(t) for a in args])


def steps(*mutations: Mutation) -> Mutation:
    def run(db: Db, t: Template) -> None:
        for m in mutations:
            m(db, t)
    return run


def sid(label: str) -> Callable[[Template], int]:
    return lambda t: t.sid[label]


def rid(label: str, seq: Seq) -> Callable[[Template], int]:
    return lambda t: t.rid(label, _seq(t, seq))


def cid(label: str, seq: Seq) -> Callable[[Template], int]:
    """The key of the row holding ``seq``."""
    return lambda t: t.row(label, _seq(t, seq)).cid


def chain(label: str, seq: Seq) -> Callable[[Template], int]:
    return lambda t: t.chain(label, _seq(t, seq))


def const(value: Any) -> Callable[[Template], Any]:
    return lambda t: value


def flip(data: bytes, at: int, mask: int = 0x01) -> bytes:
    out = bytearray(data)
    out[at] ^= mask
    return bytes(out)


def put_row(label: str, seq: Seq, **change: Any) -> Mutation:
    """UPDATE the row holding ``seq``: ``change`` maps columns to values or
    to functions ``(template, row) -> value``."""
    def run(db: Db, t: Template) -> None:
        r = t.row(label, _seq(t, seq))
        values = {k: (v(t, r) if callable(v) else v) for k, v in change.items()}
        db.q(f"UPDATE chunks SET {ROW_SET} WHERE cid = ?", (*r.values(**values)[1:], r.cid))
    return run


def insert_row(verb: str, label: str, seq: Seq, *, at_cid: Callable[[Template], int] | None = None,
               tail: str = "", **change: Any) -> Mutation:
    """``verb`` (INSERT, INSERT OR REPLACE, ...) the row holding ``seq`` again,
    at ``at_cid`` (default: its own key), with ``change``; ``tail`` ends the
    statement (an upsert clause)."""
    def run(db: Db, t: Template) -> None:
        r = t.row(label, _seq(t, seq))
        values = {k: (v(t, r) if callable(v) else v) for k, v in change.items()}
        if at_cid is not None:
            values["cid"] = at_cid(t)
        db.q(f"{verb} INTO chunks({ROW_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?) {tail}",
             r.values(**values))
    return run


def edit_frames(label: str, seq: Seq, edit: Callable[[list[bytes], int], list[bytes]]) -> Mutation:
    """Rewrite the row holding ``seq`` with ``edit(frames, index of seq)``,
    raw, with a body check over the new bytes (so that the frames, not the
    row, are what is damaged)."""
    def run(db: Db, t: Template) -> None:
        r = t.row(label, _seq(t, seq))
        frames = edit([t.frames[label][s] for s in range(r.first, r.last + 1)],
                      _seq(t, seq) - r.first)
        body = b"".join(frames)
        db.q(f"UPDATE chunks SET {ROW_SET} WHERE cid = ?",
             (*r.values(n=len(frames), raw_len=len(body), codec=0,
                        body_check=t.body_check(label, r.first, body), body=body)[1:], r.cid))
    return run


def flip_frame(frames: list[bytes], i: int) -> list[bytes]:
    frames[i] = flip(frames[i], 45)      # a payload byte (the header is 40 bytes)
    return frames


def swap_rows(a: tuple[str, int], b: tuple[str, int]) -> Mutation:
    """Swap every column but the key of two rows."""
    def run(db: Db, t: Template) -> None:
        ra, rb = t.row(*a), t.row(*b)
        db.q(f"UPDATE chunks SET {ROW_SET} WHERE cid = ?", (*rb.values()[1:], ra.cid))
        db.q(f"UPDATE chunks SET {ROW_SET} WHERE cid = ?", (*ra.values()[1:], rb.cid))
    return run


def index_row(label: str, seq: int, verb: str = "INSERT", tail: str = "",
              **change: Any) -> Mutation:
    """``verb`` an index row for ``seq``: the stored one (or a user/message
    row if none), with ``change``."""
    cols = INDEX_COLUMNS.split(", ")

    def run(db: Db, t: Template) -> None:
        found = db.q(f"SELECT {INDEX_COLUMNS} FROM event_index WHERE rid = ?",
                     (t.rid(label, seq),))
        values = dict(zip(cols, found[0] if found else
                          (t.rid(label, seq), "user/message", 0, None, None, None, None, None),
                          strict=True))
        values.update({k: (v(t) if callable(v) else v) for k, v in change.items()})
        db.q(f"{verb} INTO event_index({INDEX_COLUMNS}) VALUES (?,?,?,?,?,?,?,?) {tail}",
             tuple(values.values()))
    return run


def session_row(verb: str, label: str, tail: str = "", **change: Any) -> Mutation:
    cols = SESSION_COLUMNS.split(", ")

    def run(db: Db, t: Template) -> None:
        values = dict(zip(cols, db.q(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE sid = ?",
                                     (t.sid[label],))[0], strict=True))
        values.update(change)
        db.q(f"{verb} INTO sessions({SESSION_COLUMNS}) VALUES ({', '.join('?' * len(cols))}) "
             f"{tail}", tuple(values.values()))
    return run


def set_marks(label: str, seq: int, edit: Callable[[list[Mark]], list[Mark]]) -> Mutation:
    return put_row(label, seq, marks=lambda t, r: pack_marks(edit(unpack_marks(r.marks))))


def first_mark(label: str, seq: int) -> Callable[[Template], int]:
    return lambda t: unpack_marks(t.row(label, seq).marks)[0].seq


def state_of(label: str, name: str, what: int) -> Callable[[Template], Any]:
    """Column ``what`` (0 version, 1 seq, 2 chain, 3 state) of a saved state."""
    return lambda t: t.state(label, name)[what]


def replace_state(label: str, name: str, state: Callable[[Template], bytes]) -> Mutation:
    return sql("UPDATE projection_states SET state = ? WHERE sid = ? AND name = ?",
               state, sid(label), const(name))


def _edit_state(t: Template) -> bytes:
    blob = t.state(P, "model_history")[3]
    assert b"fix the bug" in blob
    return blob.replace(b"fix the bug", b"fix the bux")


def reframe_replacement(change: Callable[[list[Any]], Any]) -> Mutation:
    """Rewrite the event tombstone's replacement (the event payload array,
    ``change``d in place) and frame the record again under the public
    tombstone key, chained as before."""
    from trajlog._format import FrameType
    from trajlog.codec.memory_frames import (
        TOMBSTONE_KEY,
        chain_of_record,
        encode_record,
        open_record,
    )

    def run(db: Db, t: Template) -> None:
        (first,), (frame,) = db.q("SELECT frame FROM tombstones WHERE tid <= 2 ORDER BY tid")
        prev = chain_of_record(bytes(first))
        record = open_record(bytes(frame), TOMBSTONE_KEY, 1, prev, FrameType.TOMBSTONE,
                             may_be_blank=False).record
        assert record is not None and record["seq"] == ERASED_AT
        payload = msgspec.msgpack.decode(record["replacement"])
        change(payload)
        record["replacement"] = msgspec.msgpack.encode(payload)
        new, _ = encode_record(record, TOMBSTONE_KEY, 1, prev, FrameType.TOMBSTONE)
        db.q("UPDATE tombstones SET frame = ? WHERE tid = 2", (new,))
    return run


MEMORY = ("INTO memories SELECT {mid}, item_id, version, tenant, scope, scope_key, type, state, "
          "key, digest, source_sid, source_seq, expires_ms, until_event, sensitivity, created_ms,"
          " frame FROM memories WHERE mid = 1")
TOMBSTONE = "INTO tombstones SELECT * FROM tombstones WHERE tid = 1"

TRIGGERS = ("chunks_append", "chunks_advance_head", "chunks_repack", "chunks_covered_delete",
            "event_index_append", "event_index_no_update", "event_index_no_delete",
            "heads_forward_only", "heads_no_rebind", "heads_no_delete", "heads_insert_once",
            "sessions_no_update", "sessions_no_delete", "sessions_insert_once",
            "memories_append", "memories_blank_only", "memories_no_delete",
            "tombstones_append", "tombstones_no_update", "tombstones_no_delete",
            "memories_advance_head", "tombstones_advance_head", "memory_head_forward",
            "memory_head_no_delete", "memory_head_once",
            "call_index_no_update", "call_index_no_delete",
            "deleted_sessions_names_header", "deleted_sessions_no_update",
            "deleted_sessions_no_delete", "sessions_not_under_deleted")
INDEXES = ("event_index_idempotency", "event_index_markers", "memories_scope", "memories_merge",
           "memories_key", "memories_source", "memories_expiry", "memories_until",
           "tombstones_event", "tombstones_memory", "event_index_pauses")
# The derived memory index: FTS5's table and its shadow tables
FTS_TABLES = ("memory_fts", "memory_fts_data", "memory_fts_idx", "memory_fts_content",
              "memory_fts_docsize", "memory_fts_config")
MEMORY_TABLES = ("memories", "tombstones", "memory_head", "scrub", *FTS_TABLES)

P_HEAD_BACK = ("head moved back to the row before (with that row's chain)",
               sql("UPDATE session_heads SET last_seq = ?, chain_head = ? WHERE sid = ?",
                   lambda t: t.last[P] - 1, lambda t: t.chain(P, t.last[P] - 1), sid(P)))


def _cases() -> None:
    last = end(P)
    lastseq = lambda t: t.last[P]  # noqa: E731

    # -- sessions ----------------------------------------------------------------------
    tb = "sessions"
    case(tb, "cwd changed", sql("UPDATE sessions SET cwd = '/elsewhere' WHERE sid = ?", sid(P)),
         sqlite3_=REFUSED, damage=[header(P)])
    case(tb, "metadata changed (decodes)",
         sql("UPDATE sessions SET metadata = ? WHERE sid = ?",
             const(msgspec.msgpack.encode({"identity": "mallory", "title": "matrix"})), sid(P)),
         damage=[header(P)])
    case(tb, "metadata undecodable",
         sql("UPDATE sessions SET metadata = x'c1' WHERE sid = ?", sid(P)), damage=[header(P)])
    case(tb, "seed_length of the fork changed",
         sql("UPDATE sessions SET seed_length = 4 WHERE sid = ?", sid(F)),
         damage=[header(F, 4)])
    case(tb, "seed_chain of the fork changed",
         sql("UPDATE sessions SET seed_chain = seed_chain + 1 WHERE sid = ?", sid(F)),
         damage=[header(F)])
    case(tb, "parent_sid of the fork changed",
         sql("UPDATE sessions SET parent_sid = ? WHERE sid = ?", sid(S), sid(F)),
         damage=[header(F)])
    case(tb, "session_key changed",
         sql("UPDATE sessions SET session_key = session_key + 1 WHERE sid = ?", sid(P)),
         damage=[header(P)])
    case(tb, "id changed (the subagent)",
         sql("UPDATE sessions SET id = ? WHERE sid = ?", const(str(uuid.UUID(int=7))), sid(S)),
         damage=[header(S)])
    case(tb, "origin changed (the subagent made ordinary)",
         sql("UPDATE sessions SET origin = NULL WHERE sid = ?", sid(S)), damage=[header(S)])
    case(tb, "created_ms changed",
         sql("UPDATE sessions SET created_ms = created_ms + 1 WHERE sid = ?", sid(P)),
         damage=[header(P)])
    case(tb, "header_check changed",
         sql("UPDATE sessions SET header_check = header_check + 1 WHERE sid = ?", sid(P)),
         damage=[header(P)])
    case(tb, "sid changed (the subagent's header moved off its head and rows)",
         sql("UPDATE sessions SET sid = 77 WHERE sid = ?", sid(S)), off=AT_OPEN,
         note="its head and rows are left without a header: orphans, found at open")
    case(tb, "ids of two sessions swapped",
         steps(sql("UPDATE sessions SET id = ? WHERE sid = ?", const(str(uuid.UUID(int=9))),
                   sid(P)),
               sql("UPDATE sessions SET id = ? WHERE sid = ?", lambda t: t.id[P], sid(S)),
               sql("UPDATE sessions SET id = ? WHERE sid = ?", lambda t: t.id[S], sid(P))),
         damage=[header(P), header(S), header(F)])
    case(tb, "row deleted (the subagent: its head and rows orphaned)",
         sql("DELETE FROM sessions WHERE sid = ?", sid(S)), sqlite3_=REFUSED, off=AT_OPEN,
         note="no session is left to verify: a store-wide check must find the orphans")
    case(tb, "row deleted (the parent of a fork and a subagent)",
         sql("DELETE FROM sessions WHERE sid = ?", sid(P)), off=AT_OPEN)
    case(tb, "INSERT OR REPLACE with another cwd",
         session_row("INSERT OR REPLACE", P, cwd="/elsewhere"), damage=[header(P)])
    case(tb, "REPLACE with another cwd", session_row("REPLACE", P, cwd="/elsewhere"),
         damage=[header(P)])
    case(tb, "INSERT OR IGNORE over an existing row",
         session_row("INSERT OR IGNORE", P, cwd="/elsewhere"), off=HARMLESS)
    case(tb, "upsert (ON CONFLICT DO UPDATE cwd)",
         session_row("INSERT", P, "ON CONFLICT(sid) DO UPDATE SET cwd = '/elsewhere'"),
         damage=[header(P)])

    # -- session_heads -----------------------------------------------------------------
    tb = "session_heads"
    case(tb, P_HEAD_BACK[0], P_HEAD_BACK[1], sqlite3_=REFUSED, damage=[at(P, lastseq)])
    case(tb, "head moved forward (no such row)",
         sql("UPDATE session_heads SET last_seq = last_seq + 1 WHERE sid = ?", sid(P)),
         damage=[at(P, last)])
    case(tb, "head chain changed",
         sql("UPDATE session_heads SET chain_head = chain_head + 1 WHERE sid = ?", sid(P)),
         damage=[at(P, lastseq, last)])
    case(tb, "head moved back to the empty log (last_seq -1, the key)",
         sql("UPDATE session_heads SET last_seq = -1, chain_head = ? WHERE sid = ?",
             chain(P, -1), sid(P)), damage=[at(P, 0, inherited=False)])
    case(tb, "fork head moved below its seed",
         sql("UPDATE session_heads SET last_seq = 5, chain_head = ? WHERE sid = ?",
             chain(P, 5), sid(F)), damage=[at(F, 6, 8)])
    case(tb, "head deleted (the subagent)",
         sql("DELETE FROM session_heads WHERE sid = ?", sid(S)), damage=[anywhere(S)])
    case(tb, "head re-keyed to another sid",
         sql("UPDATE session_heads SET sid = 99 WHERE sid = ?", sid(S)), off=AT_OPEN,
         note="a head of no session: an orphan, found at open")
    case(tb, "REPLACE INTO with an earlier last_seq",
         sql("REPLACE INTO session_heads(sid, last_seq, chain_head) VALUES (?, ?, ?)", sid(P),
             lambda t: t.last[P] - 1, lambda t: t.chain(P, t.last[P] - 1)),
         damage=[at(P, lastseq)])
    case(tb, "INSERT OR REPLACE with an earlier last_seq",
         sql("INSERT OR REPLACE INTO session_heads(sid, last_seq, chain_head) VALUES (?, ?, ?)",
             sid(P), lambda t: t.last[P] - 1, lambda t: t.chain(P, t.last[P] - 1)),
         damage=[at(P, lastseq)])
    case(tb, "INSERT OR IGNORE over the existing head",
         sql("INSERT OR IGNORE INTO session_heads(sid, last_seq, chain_head) VALUES (?, 0, 0)",
             sid(P)), off=HARMLESS)
    case(tb, "upsert (ON CONFLICT DO UPDATE to an earlier last_seq)",
         sql("INSERT INTO session_heads(sid, last_seq, chain_head) VALUES (?, ?, ?) "
             "ON CONFLICT(sid) DO UPDATE SET last_seq = excluded.last_seq, "
             "chain_head = excluded.chain_head", sid(P),
             lambda t: t.last[P] - 1, lambda t: t.chain(P, t.last[P] - 1)),
         damage=[at(P, lastseq)])
    case(tb, "lease columns rewritten (a dead writer's lease)",
         sql("UPDATE session_heads SET lease_owner = 'intruder', lease_host = 'elsewhere', "
             "lease_pid = 1, lease_started_ms = 0, lease_heartbeat_ms = 0 WHERE sid = ?",
             sid(P)), apsw_=HARMLESS, off=HARMLESS, note="leases are advisory; a stale one "
         "is taken over")
    case(tb, "truncation: last row deleted, head moved back (index row left)",
         steps(sql("DELETE FROM chunks WHERE cid = ?", cid(P, lastseq)), P_HEAD_BACK[1]),
         damage=[at(P, lastseq)])
    case(tb, "truncation: last row, its index row and the head, consistently",
         steps(sql("DELETE FROM chunks WHERE cid = ?", cid(P, lastseq)),
               sql("DELETE FROM event_index WHERE rid = ?", rid(P, lastseq)), P_HEAD_BACK[1]),
         off=LIMIT, note="a consistent rollback of the tail: only an outside watermark "
         "(an export's SEAL) can tell")

    # -- chunks ----------------------------------------------------------------------------
    tb = "chunks"
    case(tb, "a one-frame row's body bit-flipped (body_check kept)",
         put_row(P, 30, body=lambda t, r: flip(r.body, 45)), sqlite3_=REFUSED,
         damage=[row_start(P, 30)])
    case(tb, "a one-frame row's body bit-flipped, body_check recomputed",
         edit_frames(P, 30, flip_frame), damage=[at(P, 30)])
    case(tb, "a repacked (compressed) row's body bit-flipped (body_check kept)",
         put_row(P, 0, body=lambda t, r: flip(r.body, len(r.body) // 2)),
         damage=[row_start(P, 0)])
    case(tb, "a repacked row's frame bit-flipped, stored raw, body_check recomputed",
         edit_frames(P, 3, flip_frame), damage=[at(P, 3)])
    case(tb, "a batch (compressed) row's body bit-flipped, body_check recomputed",
         put_row(P, 37, body=lambda t, r: flip(r.body, len(r.body) // 2),
                 body_check=lambda t, r: t.body_check(P, r.first, flip(r.body,
                                                                       len(r.body) // 2))),
         damage=[in_row(P, 37)])
    case(tb, "n changed (one frame more)", put_row(P, 30, n=lambda t, r: r.n + 1),
         damage=[at(P, 30, 31)])
    case(tb, "n changed (one frame fewer)", put_row(P, 37, n=lambda t, r: r.n - 1),
         damage=[in_row(P, 37)])
    case(tb, "raw_len changed", put_row(P, 30, raw_len=lambda t, r: r.raw_len + 8),
         damage=[row_start(P, 30)])
    case(tb, "codec changed", put_row(P, 30, codec=1), damage=[row_start(P, 30)])
    case(tb, "seed_chain changed", put_row(P, 30, seed_chain=lambda t, r: r.seed_chain + 1),
         damage=[row_start(P, 30)])
    case(tb, "last_chain changed", put_row(P, 30, last_chain=lambda t, r: r.last_chain + 1),
         damage=[in_row(P, 30)])
    case(tb, "first row deleted (the fork's prefix with it)",
         sql("DELETE FROM chunks WHERE cid = ?", cid(P, 0)), damage=[at(P, 0)])
    case(tb, "a middle row deleted", sql("DELETE FROM chunks WHERE cid = ?", cid(P, 30)),
         sqlite3_=REFUSED, damage=[at(P, 30)])
    case(tb, "the last row deleted", sql("DELETE FROM chunks WHERE cid = ?", cid(P, lastseq)),
         damage=[at(P, lastseq)])
    case(tb, "every row of a session deleted (the subagent)",
         sql("DELETE FROM chunks WHERE cid >> 32 = ?", sid(S)), damage=[at(S, 0)])
    case(tb, "a row added beyond the head (a gap before it)",
         insert_row("INSERT", P, 30, at_cid=lambda t: t.rid(P, t.last[P] + 3)),
         damage=[at(P, last, lambda t: t.last[P] + 3)])
    case(tb, "a copy of a row inserted at the head's next seq",
         insert_row("INSERT", P, 30, at_cid=lambda t: t.rid(P, t.last[P] + 1)),
         apsw_=FOUND, damage=[at(P, last)],
         note="triggers on: the head advances with it; off: it lies beyond the head")
    case(tb, "another session's row inserted at the subagent's next seq",
         insert_row("INSERT", P, 30, at_cid=lambda t: t.rid(S, t.last[S] + 1)),
         apsw_=FOUND, damage=[at(S, end(S))])
    case(tb, "INSERT OR REPLACE over a row (the next row's content)",
         lambda db, t: insert_row("INSERT OR REPLACE", P, 31, at_cid=cid(P, 30))(db, t),
         damage=[row_start(P, 30)])
    case(tb, "REPLACE over a row (the next row's content)",
         lambda db, t: insert_row("REPLACE", P, 31, at_cid=cid(P, 30))(db, t),
         damage=[row_start(P, 30)])
    case(tb, "INSERT OR IGNORE over a row",
         insert_row("INSERT OR IGNORE", P, 31, at_cid=cid(P, 30)), off=HARMLESS)
    case(tb, "upsert (ON CONFLICT DO UPDATE body)",
         insert_row("INSERT", P, 30, tail="ON CONFLICT(cid) DO UPDATE SET body = "
                    "zeroblob(length(excluded.body))"), damage=[row_start(P, 30)])
    case(tb, "two rows swapped between seqs", swap_rows((P, 30), (P, 31)),
         damage=[row_start(P, 30)])
    case(tb, "a row relabelled to another session (cid changed)",
         sql("UPDATE chunks SET cid = ? WHERE cid = ?", lambda t: t.rid(S, t.last[S] + 1),
             cid(P, 30)), damage=[at(P, 30), at(S, end(S))])
    case(tb, "rows of two sessions swapped (fork and subagent)", swap_rows((F, 9), (S, 2)),
         damage=[row_start(F, 9), row_start(S, 2)])
    case(tb, "a frame dropped from a batch row (n, raw_len, body_check recomputed)",
         edit_frames(P, 39, lambda fs, i: fs[:i] + fs[i + 1:]), damage=[at(P, 39)])
    case(tb, "marks cleared", put_row(P, 0, marks=None), damage=[at(P, first_mark(P, 0))])
    case(tb, "a mark's call id changed",
         set_marks(P, 0, lambda ms: [m._replace(call_id="c9") if m.code == REQUESTED else m
                                     for m in ms]), damage=[at(P, 3)])
    case(tb, "a mark added to a row without any",
         set_marks(P, 30, lambda ms: [*ms, Mark(30, STEP_START, None)]), damage=[at(P, 30)])

    # -- call_index (one row per tool call id a session's own log requests) ---------------
    tb = "call_index"
    case(tb, "a call row's seq moved",
         sql("UPDATE call_index SET seq = seq + 1 WHERE sid = ? AND call_id = 'c1'", sid(P)),
         sqlite3_=REFUSED, damage=[at(P, 3)])
    case(tb, "a call row dropped",
         sql("DELETE FROM call_index WHERE sid = ? AND call_id = 'c2'", sid(P)),
         sqlite3_=REFUSED, damage=[at(P, 32)])
    case(tb, "every call row dropped", sql("DELETE FROM call_index"), damage=[at(P, 3)])
    # call rows have no insert trigger (it would cost every call-requesting append ~2 us):
    # an added row is found by verify(), and by the marks check before a write rests on it
    case(tb, "a forged call row (an id the log never requested)",
         sql("INSERT INTO call_index(sid, call_id, seq) VALUES (?, 'c9', 30)", sid(P)),
         apsw_=FOUND, damage=[log_end(P)], note="found once the log is read to its end")
    case(tb, "a call row moved to another session",
         sql("UPDATE call_index SET sid = ? WHERE sid = ? AND call_id = 'c2'", sid(E), sid(P)),
         damage=[at(P, 32), log_end(E)])
    case(tb, "INSERT OR REPLACE over a call row",
         sql("INSERT OR REPLACE INTO call_index(sid, call_id, seq) VALUES (?, 'c1', 30)",
             sid(P)), apsw_=FOUND, damage=[at(P, 3)])

    # -- deleted_sessions (the template deletes none: every row is a forgery) ---------------
    tb = "deleted_sessions"
    # the guard refuses a deletion row that names no header; with triggers off
    # one gets in and hides nothing (no session has that sid).  A forged row
    # naming a live session's header hides that session from every look-up:
    # no outcome of this matrix (the probes cannot reach the session); the
    # store's verify() names it (each deletion row is checked against its
    # log's session/deleted: tests/api/test_delete_session.py).
    case(tb, "a deletion row naming no session's header",
         sql("INSERT INTO deleted_sessions VALUES (999, 'no-such-id', 'r', NULL, 0, -1)"),
         sqlite3_=REFUSED, off=HARMLESS)

    # -- event_index ------------------------------------------------------------------------
    tb = "event_index"
    case(tb, "type relabelled: user/message marked turn/end (a fork would cut there)",
         sql("UPDATE event_index SET type = 'turn/end' WHERE rid = ?", rid(P, 1)),
         sqlite3_=REFUSED, damage=[at(P, 1)])
    case(tb, "type relabelled: turn/end marked user/message",
         sql("UPDATE event_index SET type = 'user/message' WHERE rid = ?", rid(P, 7)),
         damage=[at(P, 7)])
    retry_limit = ("until verify() runs, a retry of the key the index lost appends again "
                   "(finding an unindexed key means reading the whole log)")
    case(tb, "idempotency key removed",
         sql("UPDATE event_index SET idempotency_key = NULL WHERE rid = ?", rid(P, 1)),
         damage=[at(P, 1)], probe_limit="an idempotent retry", note=retry_limit)
    case(tb, "idempotency key changed",
         sql("UPDATE event_index SET idempotency_key = 'u9' WHERE rid = ?", rid(P, 1)),
         damage=[at(P, 1)], probe_limit="an idempotent retry", note=retry_limit)
    case(tb, "idempotency key added (to turn/start)",
         sql("UPDATE event_index SET idempotency_key = 'k-new' WHERE rid = ?", rid(P, 29)),
         damage=[at(P, 29)])
    case(tb, "time changed", sql("UPDATE event_index SET time_ms = 0 WHERE rid = ?",
                                 rid(P, 28)), damage=[at(P, 28)])
    case(tb, "a row dropped (turn/end)", sql("DELETE FROM event_index WHERE rid = ?",
                                             rid(P, 7)), damage=[at(P, 7)])
    case(tb, "every row dropped", sql("DELETE FROM event_index"),
         damage=[at(P, 0), at(F, 8), at(S, 0)], probe_limit="an idempotent retry", note=retry_limit)
    case(tb, "a forged row (turn/end at an unindexed seq)",
         index_row(P, 5, type="turn/end"), damage=[at(P, 5)],
         note="an index row belongs to its session's last chunk row; one forged for a seq "
         "of that last row gets in -- no trigger can read a frame -- and is found by verify "
         "and by every decision that uses it")
    case(tb, "a forged row beyond the head",
         index_row(P, 50, type="turn/end"), damage=[at(P, last, 50)])
    case(tb, "INSERT OR REPLACE over a row (turn/end made user/message)",
         index_row(P, 7, "INSERT OR REPLACE", type="user/message"), damage=[at(P, 7)])
    case(tb, "REPLACE over a row (turn/end made user/message)",
         index_row(P, 7, "REPLACE", type="user/message"), damage=[at(P, 7)])
    case(tb, "INSERT OR REPLACE through the idempotency index (the key at another seq)",
         index_row(P, 2, "INSERT OR REPLACE", idempotency_key="u1"), damage=[at(P, 1)])
    case(tb, "INSERT OR IGNORE over a row", index_row(P, 7, "INSERT OR IGNORE",
                                                      type="user/message"), off=HARMLESS)
    case(tb, "upsert (ON CONFLICT DO UPDATE type)",
         index_row(P, 7, tail="ON CONFLICT(rid) DO UPDATE SET type = 'user/message'"),
         damage=[at(P, 7)])

    # -- projection_states (derived: no triggers; nothing may be trusted) -----------------
    tb = "projection_states"
    derived = {"apsw_": HARMLESS, "off": HARMLESS}
    case(tb, "state bytes changed (still decodes)", replace_state(P, "model_history", _edit_state),
         sqlite3_=HARMLESS, **derived)
    case(tb, "state truncated (does not decode)",
         replace_state(P, "model_history", lambda t: t.state(P, "model_history")[3][:5]),
         **derived)
    case(tb, "state planted from another session (seq and chain kept)",
         replace_state(P, "model_history", state_of(S, "model_history", 3)),
         sqlite3_=HARMLESS, **derived)
    case(tb, "state of the fork planted from its parent (seq and chain kept)",
         replace_state(F, "chat", state_of(P, "chat", 3)), **derived)
    case(tb, "state planted with the other session's seq and chain",
         sql("UPDATE projection_states SET seq = ?, chain = ?, state = ? WHERE sid = ? AND "
             "name = 'model_history'", state_of(S, "model_history", 1),
             state_of(S, "model_history", 2), state_of(S, "model_history", 3), sid(P)),
         **derived)
    case(tb, "state relabelled to an earlier seq (with that seq's chain)",
         sql("UPDATE projection_states SET seq = 30, chain = ? WHERE sid = ? AND "
             "name = 'model_history'", chain(P, 30), sid(P)), **derived)
    case(tb, "version changed", sql("UPDATE projection_states SET version = version + 1"),
         **derived)
    case(tb, "every state deleted", sql("DELETE FROM projection_states"), **derived)
    for verb in ("INSERT OR REPLACE", "REPLACE"):
        case(tb, f"{verb} with another session's state",
             sql(f"{verb} INTO projection_states VALUES (?, 'model_history', ?, ?, ?, ?)",
                 sid(P), state_of(P, "model_history", 0), state_of(P, "model_history", 1),
                 state_of(P, "model_history", 2), state_of(S, "model_history", 3)), **derived)
    case(tb, "INSERT OR IGNORE over a state",
         sql("INSERT OR IGNORE INTO projection_states VALUES (?, 'model_history', ?, 0, 0, "
             "x'00')", sid(P), state_of(P, "model_history", 0)), **derived)
    case(tb, "upsert (ON CONFLICT DO UPDATE state)",
         sql("INSERT INTO projection_states VALUES (?, 'model_history', ?, 0, 0, ?) "
             "ON CONFLICT(sid, name, version) DO UPDATE SET state = excluded.state", sid(P),
             state_of(P, "model_history", 0), state_of(S, "model_history", 3)), **derived)

    # -- memories and tombstones (verify_memory() checks every version and tombstone) ----
    for tb, key, row, upd in (("memories", "mid", MEMORY.format(mid=1), "state = 'revoked'"),
                              ("tombstones", "tid", TOMBSTONE, "reason = 'forged'")):
        case(tb, "UPDATE", sql(f"UPDATE {tb} SET {upd}"), sqlite3_=REFUSED)
        case(tb, "DELETE", sql(f"DELETE FROM {tb}"), sqlite3_=REFUSED)
        case(tb, "INSERT OR REPLACE over a row", sql(f"INSERT OR REPLACE {row}"),
             sqlite3_=REFUSED, off=HARMLESS, note="the same row again")
        case(tb, "REPLACE over a row", sql(f"REPLACE {row}"), off=HARMLESS)
        case(tb, "INSERT OR IGNORE over a row", sql(f"INSERT OR IGNORE {row}"),
             off=HARMLESS, note="the insert guard raises ABORT, which OR IGNORE does not "
             "swallow")
        case(tb, "upsert (ON CONFLICT DO UPDATE)",
             sql(f"INSERT {row} ON CONFLICT({key}) DO UPDATE SET {upd}"))
    case("memories", "INSERT OR REPLACE of a new mid over the same (item_id, version)",
         sql(f"INSERT OR REPLACE {MEMORY.format(mid=99)}"), sqlite3_=REFUSED)
    case("memories", "a version's content edited (frame re-made with a valid header)",
         sql("UPDATE memories SET frame = CAST(substr(frame, 1, length(frame) - 8) || "
             "x'0000000000000001' AS BLOB) WHERE mid = 2"), sqlite3_=REFUSED)
    case("memories", "the last version deleted", sql("DELETE FROM memories WHERE mid = 5"),
         sqlite3_=REFUSED)
    case("memory_head", "the head moved back with its last version",
         steps(sql("DELETE FROM memories WHERE mid = 5"),
               sql("UPDATE memory_head SET last_mid = 4")), sqlite3_=REFUSED, off=LIMIT,
         note="no check can tell versions deleted with the head that counted them: the "
              "checks detect accidents, not a writer that rewrites every copy")
    case("memories", "a live item's version blanked like a revoked one",
         steps(sql("UPDATE memories SET frame = zeroblob(length(frame)) WHERE mid = 1")),
         sqlite3_=REFUSED)
    case("memories", "a version moved to another tenant",
         sql("UPDATE memories SET tenant = 'globex' WHERE mid = 1"), sqlite3_=REFUSED)
    case("memory_head", "UPDATE (the head counts more versions)",
         sql("UPDATE memory_head SET last_mid = last_mid + 1"), sqlite3_=REFUSED)
    case("memory_head", "DELETE", sql("DELETE FROM memory_head"), sqlite3_=REFUSED)
    case("scrub", "a row left in the scrub table", sql("INSERT INTO scrub VALUES (x'00')"),
         apsw_=HARMLESS, off=HARMLESS, note="scratch space of the erasure's free-page scrub")
    derived = {"apsw_": HARMLESS, "off": HARMLESS,
               "note": "derived: search checks every hit against its canonical version and "
                       "falls back to the canonical rows when the index fails"}
    case("memory_fts", "every index row deleted", sql("DELETE FROM memory_fts"), **derived)
    case("memory_fts", "a forged index row: another tenant's item under this tenant",
         sql("INSERT OR REPLACE INTO memory_fts(rowid, text, tenant, scope, scope_key, type) "
             "VALUES (5, 'build red', 'acme', 'session', ?, 'fact')", lambda t: t.id[P]),
         **derived)
    case("memory_fts", "an index row re-pointed at a quarantined version",
         sql("INSERT INTO memory_fts(rowid, text, tenant, scope, scope_key, type) VALUES "
             "(2, 'build red', 'acme', 'session', ?, 'fact')", lambda t: t.id[P]), **derived)
    for shadow in FTS_TABLES[1:]:
        case(shadow, "every row deleted", sql(f"DELETE FROM {shadow}"), **derived)
    case("tombstones", "a tombstone re-pointed at another item",
         sql("UPDATE tombstones SET target_item = (SELECT item_id FROM memories WHERE mid = 1) "
             "WHERE target_kind = 'memory'"), sqlite3_=REFUSED)
    # An erased event reads as its tombstone's replacement; the tombstone log is
    # chained under a public key, so a forger can re-frame any record -- and
    # the reader and verify() accept only the replacement the erasure writes.
    forged = {"apsw_": REFUSED, "sqlite3_": REFUSED, "damage": [at(E, ERASED_AT)]}
    case("tombstones", "an erased message's replacement given text (record re-framed)",
         reframe_replacement(lambda p: p[2].update(content="I approve: wire $1,000,000")),
         **forged)
    case("tombstones", "an erased message's replacement naming another tombstone",
         reframe_replacement(lambda p: p[2]["erased"].update(tombstone=1)), **forged)
    case("tombstones", "an erased message's replacement given another type",
         reframe_replacement(lambda p: p.__setitem__(0, "assistant/message")), **forged)
    case("tombstones", "an erased message's replacement given a source (envelope text)",
         reframe_replacement(lambda p: p.extend([None] * (4 - len(p))) or p.__setitem__(
             3, "I approve: wire $1,000,000")), **forged)
    case("tombstones", "an erased event's tombstone row re-pointed at another seq",
         sql("UPDATE tombstones SET target_seq = target_seq + 1 WHERE target_kind = 'event'"),
         sqlite3_=REFUSED, damage=[at(E, ERASED_AT)])

    # -- the schema ------------------------------------------------------------------------------
    tb = "sqlite_schema"
    at_open = {"apsw_": AT_OPEN, "off": AT_OPEN}
    for name in TRIGGERS:
        case(tb, f"DROP TRIGGER {name}", sql(f"DROP TRIGGER {name}"),
             sqlite3_=AT_OPEN if name == "chunks_repack" else None, **at_open)
        case(tb, f"trigger {name} deleted from sqlite_schema",
             sql("DELETE FROM sqlite_schema WHERE type = 'trigger' AND name = ?", const(name)),
             wschema=AT_OPEN, apsw_=None, off=None)
    for name in INDEXES:
        case(tb, f"DROP INDEX {name}", sql(f"DROP INDEX {name}"), **at_open)
        case(tb, f"index {name} deleted from sqlite_schema",
             sql("DELETE FROM sqlite_schema WHERE type = 'index' AND name = ?", const(name)),
             wschema=AT_OPEN, apsw_=None, off=None)
    for name in ("sessions", "session_heads", "chunks", "event_index", "projection_states",
                 "memories", "tombstones", "memory_head", "scrub", "call_index",
                 "deleted_sessions"):
        case(tb, f"DROP TABLE {name}", sql(f"DROP TABLE {name}"), **at_open)
    for alter in ("chunks RENAME TO old_chunks", "sessions ADD COLUMN note TEXT",
                  "event_index RENAME COLUMN idempotency_key TO key",
                  "tombstones DROP COLUMN actor"):
        case(tb, f"ALTER TABLE {alter}", sql(f"ALTER TABLE {alter}"), **at_open)
    case(tb, "CREATE TRIGGER that silently skips every index row",
         sql("CREATE TRIGGER zz_skip BEFORE INSERT ON event_index BEGIN SELECT RAISE(IGNORE); "
             "END"), **at_open)
    case(tb, "CREATE TRIGGER that silently stops heads advancing",
         sql("CREATE TRIGGER aa_stuck BEFORE UPDATE OF last_seq ON session_heads "
             "BEGIN SELECT RAISE(IGNORE); END"), **at_open)
    case(tb, "CREATE TEMP TRIGGER (this connection only)",
         sql("CREATE TEMP TRIGGER zz_temp BEFORE INSERT ON main.chunks BEGIN SELECT RAISE(IGNORE); "
             "END"), apsw_=HARMLESS, off=None)
    for name, body in (("chunks_repack", "BEFORE UPDATE ON chunks"),
                       ("event_index_append", "BEFORE INSERT ON event_index"),
                       ("heads_forward_only", "BEFORE UPDATE OF last_seq, chain_head ON "
                                              "session_heads")):
        case(tb, f"trigger {name} rewritten to never fire (same name)",
             sql("UPDATE sqlite_schema SET sql = ? WHERE type = 'trigger' AND name = ?",
                 const(f"CREATE TRIGGER {name} {body} WHEN 0 BEGIN SELECT RAISE(ABORT, "
                       "'trajlog'); END"), const(name)),
             wschema=AT_OPEN, apsw_=None, off=None)
    case(tb, "a trigger inserted into sqlite_schema (skips every index row)",
         sql("INSERT INTO sqlite_schema(type, name, tbl_name, rootpage, sql) VALUES ('trigger', "
             "'zz_skip', 'event_index', 0, 'CREATE TRIGGER zz_skip BEFORE INSERT ON event_index "
             "BEGIN SELECT RAISE(IGNORE); END')"), wschema=AT_OPEN, apsw_=None, off=None)
    case(tb, "a CHECK constraint removed from chunks",
         sql("UPDATE sqlite_schema SET sql = replace(sql, 'CHECK (n >= 1)', '') "
             "WHERE type = 'table' AND name = 'chunks'"), wschema=AT_OPEN, apsw_=None, off=None)
    case(tb, f"PRAGMA user_version = {SCHEMA_VERSION + 1} (a newer schema)",
         sql(f"PRAGMA user_version = {SCHEMA_VERSION + 1}"), **at_open)
    case(tb, "PRAGMA application_id = 0", sql("PRAGMA application_id = 0"), **at_open)


_cases()
ROWS: list[Row] = [Row(c, m) for c in CASES for m in MODES if m in c.expect]


# -- running a row ------------------------------------------------------------------------

@dataclass
class Result:
    actual: str
    detail: str = ""


def _name(exc: BaseException) -> str:
    return type(exc).__name__


def _short(exc: BaseException, width: int = 90) -> str:
    text = f"{_name(exc)}: {exc}".replace("|", "/").replace("\n", " ")
    return text if len(text) <= width else text[:width - 3] + "..."


class MatrixCaseError(RuntimeError):
    """A case whose SQL is wrong (not a refusal by the store)."""


def run_row(row: Row, t: Template, workdir: Path) -> Result:
    """Copy the template, mutate it through the row's connection, measure."""
    path = str(workdir / (row.id.replace("/", "_") + ".db"))
    shutil.copyfile(t.path, path)
    db = Db(row.mode, path)
    refusal: BaseException | None = None
    try:
        db.begin()
        row.case.mutate(db, t)
        db.commit()
    except (apsw.Error, sqlite3.Error) as exc:
        refusal = exc
        db.rollback()
    finally:
        db.close()
    here = Path(path)

    def short(exc: BaseException) -> str:
        return _short(exc, 10_000).replace(repr(str(here)), "the store").replace(
            str(here), "the store").replace(str(here.parent), "")[:110]

    changed = digest(path) != t.digest
    if refusal is not None:
        text = str(refusal)
        if any(s in text for s in ("no such", "syntax error", "near \"", "has no column",
                                   "incorrect number", "Incorrect number")):
            raise MatrixCaseError(f"{row.id}: {_short(refusal, 300)}") from refusal
        if changed:
            return Result("error: refused but changed", short(refusal))
        return Result(REFUSED, short(refusal))
    try:
        store = trajlog.open(path, repack=False)
    except errors.TrajlogError as exc:
        return Result(AT_OPEN, short(exc))
    except Exception as exc:
        return Result(f"error: open raised {_name(exc)}", short(exc))
    try:
        return _evaluate(store, t, row, changed)
    except Exception as exc:  # a crash of one row is that row's outcome
        return Result(f"error: {_name(exc)}", short(exc))
    finally:
        store.close()


@dataclass
class Seen:
    """What one session looked like after the mutation."""

    label: str
    session: Any = None
    report: Any = None
    bugs: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.report is not None and not self.report.ok

    @property
    def frames_bad(self) -> bool:
        """Verify failed on more than the index (reads and writes may then refuse)."""
        reason = self.report.scan.reason if self.report is not None else ""
        return self.session is None or self.report is None or (
            self.failed and "index row" not in reason and "marks" not in reason)


def _session(store: Any, t: Template, label: str, seen: Seen,
             names: dict[str, str]) -> Any:
    try:
        return store.session(t.id[label])
    except errors.SessionNotFoundError:
        pass
    except Exception as exc:
        seen.bugs.append(f"error: store.session({label}) raised {_short(exc, 60)}")
        return None
    try:  # renamed: the same sid under another id
        from trajlog.api.session import Session

        ref = store._e.reading.ref_by_sid(t.sid[label])
        names[ref.id] = label
        return Session(store._e, ref)
    except errors.SessionNotFoundError:
        seen.bugs.append(f"hidden: session {label} is gone (SessionNotFoundError)")
    except Exception as exc:
        seen.bugs.append(f"error: session {label} by sid raised {_short(exc, 60)}")
    return None


def _read(seen: Seen, what: str, want: list[Any], read: Callable[[], list[Any]]) -> bool:
    """One read of acknowledged events: it must return exactly ``want`` or
    raise a CorruptionError (only when verify failed).  True when it returned."""
    label = seen.label
    ok = "" if seen.failed else " (and verify is ok)"
    try:
        got = read()
    except errors.CorruptionError as exc:
        if not seen.failed:
            seen.bugs.append(f"error: {label} verify ok but {what} raised {_name(exc)}")
        return False
    except errors.InvalidArgumentError as exc:
        text = str(exc).split(" (", 1)[-1].rstrip(")") if "(last seq" in str(exc) else str(exc)
        seen.bugs.append(f"hidden: {label} {what} raised {_name(exc)} ({text}){ok}")
        return False
    except Exception as exc:
        seen.bugs.append(f"error: {label} {what} raised {_short(exc, 60)}")
        return False
    if got == want:
        return True
    seqs, wanted = [e.seq for e in got], [e.seq for e in want]
    if len(got) < len(want) and set(seqs) < set(wanted) and all(
            e == want[wanted.index(e.seq)] for e in got):
        missing = sorted(set(wanted) - set(seqs))
        seen.bugs.append(f"hidden: {label} {what} returned {len(got)} of {len(want)} "
                         f"acknowledged events (seqs {missing[0]}..{missing[-1]} missing) "
                         f"without an error{ok}")
    elif len(got) < len(want) and [e.seq for e in got] == [e.seq for e in want[:len(got)]]:
        seen.bugs.append(f"hidden: {label} {what} returned {len(got)} of {len(want)} "
                         f"acknowledged events without an error{ok}")
    elif got and want and got[-1].seq < want[-1].seq:
        seen.bugs.append(f"hidden: {label} {what} ended at seq {got[-1].seq}, not "
                         f"{want[-1].seq}, without an error{ok}")
    else:
        seen.bugs.append(f"accepted: {label} {what} returned altered events without an error"
                         + ("" if seen.failed else " (and verify is ok)"))
    return False


def _check_session(store: Any, t: Template, label: str, names: dict[str, str]) -> Seen:
    seen = Seen(label)
    s = seen.session = _session(store, t, label, seen, names)
    if s is None:
        return seen
    try:
        seen.report = s.verify()
    except Exception as exc:
        seen.bugs.append(f"error: {label} verify() raised {_short(exc, 70)}")
        return seen
    want = t.acked[label]
    readable = _read(seen, "events()", want, lambda: list(s.events()))
    _read(seen, "tail(3)", want[-3:], lambda: s.tail(3))
    _read(seen, f"get({want[-1].seq})", want[-1:], lambda: [s.get(want[-1].seq)])
    if readable:
        for name, fold in FOLDS.items():
            try:
                view = projections.project(s, fold)
            except errors.CorruptionError as exc:
                if not seen.failed:
                    seen.bugs.append(f"error: {label} {name} raised {_name(exc)}")
                continue
            except Exception as exc:
                seen.bugs.append(f"error: {label} projection {name} raised {_short(exc, 60)}")
                continue
            if view != from_scratch(want, fold):
                seen.bugs.append(f"view differs: {label} {name} differs from a fold from "
                                 "scratch (a saved state was trusted)")
    return seen


def _load(store: Any, seen: Seen) -> None:
    s = seen.session
    if s is None or seen.report is None:
        return
    try:
        before = s.last_seq
        loaded = store.load(s.id)
        if loaded.last_seq != before:
            seen.bugs.append(f"accepted: {seen.label} load() appended "
                             f"{loaded.last_seq - before} closers to a balanced log")
    except errors.CorruptionError as exc:
        if not seen.failed:
            seen.bugs.append(f"error: {seen.label} verifies but load() raised {_name(exc)}")
        return
    except Exception as exc:
        seen.bugs.append(f"error: {seen.label} load() raised {_short(exc, 60)}")
        return
    if seen.failed:
        seen.bugs.append(f"accepted: {seen.label} load() accepted a log verify() rejects")


def _probe(seen: Seen, what: str, act: Callable[[], str | None]) -> None:
    """A write on the plain session: it must do what it does on the intact
    store (``act`` returns None) or raise a CorruptionError -- or any typed
    error when the session does not verify (refusing is always allowed)."""
    try:
        wrong = act()
    except errors.CorruptionError:
        return
    except errors.TrajlogError as exc:
        if not seen.failed:
            seen.bugs.append(f"error: {what} raised {_short(exc, 60)}")
        return
    except Exception as exc:
        seen.bugs.append(f"error: {what} raised {_short(exc, 60)}")
        return
    if wrong is None:
        return
    if seen.failed and seen.frames_bad:
        seen.bugs.append(f"accepted: {what} on a session whose verify() fails {wrong}")
    else:
        seen.bugs.append(f"index trusted: {what} {wrong}")


def _write_probes(t: Template, seen: Seen) -> None:
    s = seen.session
    if s is None:
        return

    def fork() -> str | None:
        got = s.fork(FORK_AT).header.seed_length
        return None if got == t.fork_seed else f"cut at seed {got}, not {t.fork_seed}"

    def retry() -> str | None:
        ev = s.append("user/message", {"content": "fix the bug"}, idempotency_key="u1")
        return None if ev.seq == 1 else f"appended seq {ev.seq} instead of returning seq 1"

    def fresh() -> str | None:
        before = s.last_seq
        ev = s.append("user/message", {"content": "fresh"}, idempotency_key="k-new")
        return None if ev.seq == before + 1 else f"returned seq {ev.seq}"

    _probe(seen, f"fork({FORK_AT})", fork)
    _probe(seen, "an idempotent retry (key u1)", retry)
    _probe(seen, "a fresh key (k-new)", fresh)


def _evaluate(store: Any, t: Template, row: Row, changed: bool) -> Result:
    names = {t.id[label]: label for label in LABELS}
    seen = {label: _check_session(store, t, label, names) for label in LABELS}
    for x in seen.values():
        _load(store, x)
    _write_probes(t, seen[P])
    bugs = [b for x in seen.values() for b in x.bugs]
    limits: list[str] = []
    if row.case.probe_limit is not None:
        trusted = f"index trusted: {row.case.probe_limit}"
        limits = [b.replace("index trusted: ", "limit: ", 1) for b in bugs
                  if b.startswith(trusted)]
        bugs = [b for b in bugs if not b.startswith(trusted)]
    failed = [x for x in seen.values() if x.failed]
    places = []
    for x in failed:
        scan = x.report.scan
        places.append((names.get(x.report.session, x.report.session), scan.cursor.next_seq,
                       scan.cursor.offset, x.label))
    where = "; ".join(f"{lab}: {who} seq {seq} @{off}" for who, seq, off, lab in places)
    if failed and row.case.damage:
        damages = [d(t) for d in row.case.damage]
        wrong = []
        for who, seq, off, lab in places:
            if not any(d.label == who and (d.places is None or (seq, off) in d.places)
                       for d in damages):
                wrong.append(f"{lab} reports {who} seq {seq} @{off}")
        must = {d.label for d in damages}
        for d in damages:   # a child whose inherited prefix holds the defect must see it too
            must |= {child for child, parent in t.parent.items() if parent == d.label
                     and d.inherited and d.places
                     and max(seq for seq, _ in d.places) < t.seed[child]}
        for label in sorted(must):
            if not any(lab == label for _, _, _, lab in places):
                wrong.append(f"{label} verifies ok")
        if wrong:
            bugs.append(f"misplaced: {', '.join(wrong)} (expected "
                        f"{', '.join(x.text() for x in damages)})")
    if bugs and row.mode in row.case.expect and row.expected == LIMIT and not failed and all(
            b.startswith("hidden:") and b.endswith("(and verify is ok)") for b in bugs):
        return Result(LIMIT, "; ".join(dict.fromkeys(bugs)))
    if bugs:
        kinds = list(dict.fromkeys(b.split(":", 1)[0] for b in bugs))
        return Result(", ".join(kinds), "; ".join(dict.fromkeys(bugs)))
    if failed:
        return Result(FOUND, "; ".join([where, *dict.fromkeys(limits)]))
    if row.case.table in MEMORY_TABLES and changed:
        audit = store.verify_memory()
        if not audit.ok:
            return Result(FOUND, audit.defects[0][:200])
        try:
            mem = store.memory(Identity("acme", user="alice", session=t.id[P]))
            kept = mem.get(t.memory_item)
            found = mem.search("build red") + mem.search("x")
        except errors.TrajlogError as exc:
            return Result(f"error: verify ok but a read raised {_name(exc)}", _short(exc))
        if kept.state != "quarantined" or kept.content != {"text": "the build is red"}:
            return Result("hidden: the kept item reads differently", repr(kept))
        if found:
            return Result("error: search returned an item it must not",
                          ", ".join(f"{i.tenant}/{i.scope}/{i.state}" for i in found))
        if row.mode in row.case.expect and row.expected == LIMIT:
            return Result(LIMIT, "every version and tombstone left verifies")
        return Result(HARMLESS, "the rows changed; every version and tombstone verifies")
    return Result(HARMLESS, "every check passed" if changed else "nothing changed")


# -- the table -------------------------------------------------------------------------------

def markdown(results: list[tuple[Row, Result]], width: int = 240) -> str:
    """The matrix as a markdown table (details cut at ``width`` characters)."""
    lines = [
        "# The tamper matrix",
        "",
        "Generated by `python tests/adversarial/matrix.py` (the test: "
        "`tests/adversarial/test_tamper_matrix.py`).  Each row changes one copy of a store "
        "holding a plain session (turns, tool calls, single appends, batches, a repacked row, "
        "idempotency keys), a fork, a subagent, saved projection states, a memory version and "
        "a tombstone, through one foreign connection:",
        "",
        "* *apsw, defaults* / *sqlite3, defaults*: a plain connection with SQLite's default "
        "settings (triggers on, no `recursive_triggers`, no authorizer, no defensive mode);",
        "* *apsw, triggers off*: `SQLITE_DBCONFIG_ENABLE_TRIGGER` = 0;",
        "* *apsw, writable_schema=ON*: edits of `sqlite_schema` itself.",
        "",
        "Outcomes: **refused** (the connection raised; the store is unchanged), **refused at "
        "open** (`trajlog.open` raises a typed error), **found by verify** (`verify()` of "
        "every damaged session names the session, seq and offset; every read and `load()` "
        "raises a `CorruptionError` or returns exactly the acknowledged events), **harmless** "
        "(every session verifies and reads back what was acknowledged; projections equal a "
        "fold from scratch; forks and idempotent appends behave as on the intact store), "
        "**undetectable (limit)** (a consistent rollback of a log's tail: only an outside "
        "watermark such as an export's SEAL can tell).  Any other *actual* is a defect: "
        "*hidden* (fewer events than acknowledged, without an error), *accepted* (altered "
        "events or a damaged log accepted without an error), *view differs* (a saved "
        "projection state was trusted), *index trusted* (a fork cut or an idempotent append "
        "acted on a forged index row), *misplaced* (found at another seq, offset or session), "
        "*error* (an unexpected exception).",
        "",
    ]
    bad = [(r, res) for r, res in results if res.actual != r.expected]
    lines.append(f"{len(results)} rows, {len(bad)} where the actual outcome differs from the "
                 "expected one (marked ✗): defects of the store, each a failing test.")
    lines += ["", "| table | mutation | connection | expected | actual | details |",
              "|---|---|---|---|---|---|"]
    for r, res in results:
        mark = "" if res.actual == r.expected else " ✗"
        detail = res.detail.replace("|", "/")
        if r.case.note and r.case.note not in detail:
            detail = f"{detail} ({r.case.note})" if detail else r.case.note
        if len(detail) > width:
            detail = detail[:width - 1] + "…"
        lines.append(f"| {r.case.table} | {r.case.name} | {MODE_TEXT[r.mode]} | {r.expected} "
                     f"| {res.actual}{mark} | {detail} |")
    return "\n".join(lines) + "\n"


__all__ = [
    "CASES",
    "MODES",
    "OUTCOMES",
    "ROWS",
    "MatrixCaseError",
    "Result",
    "Row",
    "Template",
    "build_template",
    "markdown",
    "run_row",
]
