"""Each memory version is verified once and kept by its whole row (every
column, every byte of its frame): a steady-state read is one statement and
a payload decode; a row that differs in any byte -- tampered with after it
was read -- is verified in full and refused.  A revocation drops the
item's verified rows.  A LangGraph search walks the items newest first and
stops when no unread item can rank (LIMIT in SQL, not every candidate
opened).  Deterministic counts, no timing."""

from __future__ import annotations

import contextlib
from typing import Any

import apsw
import pytest

import trajlog
from kits.costkit import traced
from trajlog import Identity
from trajlog.adapters.langgraph.base_store import TrajlogStore
from trajlog.memory.versions import VerifiedRows, verified_rows

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
SQLITE_CONN = "runs SQL on the SQLite backend's own connections"
SQLITE_COST = "counts what SQLite runs (statements, VM steps, pages, compiles)"

IDENT = Identity("acme", user="alice")


@pytest.fixture
def store(tmp_path):
    with trajlog.open(str(tmp_path / "v.db")) as st:
        yield st


def _foreign(store: Any) -> apsw.Connection:
    conn = apsw.Connection(store.path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    return conn


def _versions(mem: Any, n: int) -> Any:
    item = mem.remember("user", "fact", {"text": "v1"}, key="k")
    for v in range(2, n + 1):
        item = mem.correct(item.id, {"text": f"v{v}"}, reason="edit")
    return item


@pytest.mark.sqlite_only(reason=SQLITE_COST)
def test_memory_verified_a_steady_get_is_one_statement(store):
    mem = store.memory(IDENT)
    item = _versions(mem, 5)
    assert mem.get(item.id).content == {"text": "v5"}     # verified (in full) once
    for read in (lambda: mem.get(item.id), lambda: mem.find("user", "k")):
        sql = traced(store, read)
        assert len(sql) == 1, sql                         # the latest row; no versions,
        assert "tombstones" not in sql[0]                 # no tombstone read again
    assert mem.get(item.id).content == {"text": "v5"} and mem.history(item.id)[0].version == 1


@pytest.mark.sqlite_only(reason=SQLITE_COST)
def test_memory_verified_a_version_written_here_is_not_verified_again(store):
    """A version this store wrote (framed here, chained to a verified one)
    is kept as verified once its transaction commits: the first read of it
    is one statement too."""
    mem = store.memory(IDENT)
    item = _versions(mem, 3)
    sql = traced(store, lambda: mem.get(item.id))
    assert len(sql) == 1, sql
    assert mem.get(item.id).content == {"text": "v3"}
    [many] = mem.remember_many([{"scope": "user", "type": "fact", "content": {"text": "m"}}])
    assert len(traced(store, lambda: mem.get(many.id))) == 1


def test_memory_verified_rows_are_fresh_copies(store):
    mem = store.memory(IDENT)
    item = mem.remember("user", "fact", {"text": "mine"})
    got = mem.get(item.id)
    got.content["text"] = "changed by the caller"
    assert mem.get(item.id).content == {"text": "mine"}


@pytest.mark.parametrize("tamper", [
    # the latest version's payload rewritten (its frame check no longer holds)
    "UPDATE memories SET frame = CAST(substr(frame, 1, length(frame) - 8) || "
    "x'0000000000000001' AS BLOB) WHERE mid = (SELECT max(mid) FROM memories)",
    # a column the frame copies, edited
    "UPDATE memories SET state = 'quarantined' WHERE mid = (SELECT max(mid) FROM memories)",
    "UPDATE memories SET scope_key = 'mallory' WHERE mid = (SELECT max(mid) FROM memories)",
    # blanked like a revoked item's, without its tombstone
    "UPDATE memories SET frame = CAST(substr(frame, 1, 40) || zeroblob(length(frame) - 40) "
    "AS BLOB) WHERE mid = (SELECT max(mid) FROM memories)",
])
@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_memory_verified_a_row_tampered_after_it_was_read_is_refused(store, tamper):
    mem = store.memory(IDENT)
    item = _versions(mem, 3)
    assert mem.get(item.id).content == {"text": "v3"}
    assert mem.find("user", "k") is not None            # both kept as verified
    conn = _foreign(store)
    try:
        conn.execute(tamper)
    finally:
        conn.close()
    with pytest.raises((trajlog.errors.CorruptionError, trajlog.errors.MemoryAccessError)):
        mem.get(item.id)
    with contextlib.suppress(trajlog.errors.CorruptionError):
        assert mem.find("user", "k") is None   # (a row moved out of the scope is not found)
    assert not store.verify_memory().ok


def test_memory_verified_a_revocation_drops_the_items_rows(store):
    mem = store.memory(IDENT)
    item = mem.remember("user", "fact", {"text": "SECRETVERIFIED"})
    other = mem.remember("user", "fact", {"text": "other"})
    mem.get(item.id)
    mem.get(other.id)
    rows = verified_rows(store._e.backend)
    assert len(rows) == 2
    mem.revoke(item.id, reason="forget")
    assert len(rows) == 1 and all(r.item_id == other.id for r in rows._ends)
    assert mem.get(item.id).content is None and mem.get(other.id).content == {"text": "other"}
    assert all(b"SECRETVERIFIED" not in r.frame for r in rows._ends)


def test_memory_verified_rows_are_bounded():
    rows = VerifiedRows(size=3)
    from trajlog.storage.base import MemoryRow
    made = [MemoryRow(i, "x", 1, "t", "user", "u", "fact", "active", None, b"", None, None,
                      None, None, "internal", 0, b"f%d" % i) for i in range(5)]
    for r in made:
        rows.add(r, 40)
    assert len(rows) == 3 and list(rows._ends) == made[2:]
    rows.discard("x")
    assert len(rows) == 0


def _filled(path: str, n: int) -> TrajlogStore:
    ts = TrajlogStore.open(path)
    for i in range(n):
        ts.put(("users", "u1", "notes"), f"k{i}", {"i": i, "tag": f"t{i % 3}"})
    for i in range(0, n, 4):   # updates move items to the front
        ts.put(("users", "u1", "notes"), f"k{i}", {"i": i, "tag": "t9"})
    return ts


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_memory_verified_langgraph_search_opens_what_it_returns(tmp_path):
    ts = _filled(str(tmp_path / "lg.db"), 300)
    try:
        store = ts._store
        rows = [0]
        conn = store._e.backend.connection()
        conn.row_trace = lambda _c, row: (rows.__setitem__(0, rows[0] + 1), row)[1]
        try:
            got = ts.search(("users", "u1"), limit=10)
        finally:
            conn.row_trace = None
        assert len(got) == 10
        assert rows[0] <= 100, rows[0]   # a page or two, not the 300 candidates
    finally:
        ts.close()


@pytest.mark.parametrize("offset,limit,flt", [(0, 10, None), (5, 7, None), (0, 200, None),
                                              (0, 5, {"tag": "t9"}), (3, 4, {"tag": "t1"})])
def test_memory_verified_langgraph_search_order_is_the_full_sort(tmp_path, offset, limit, flt):
    """The walk gives exactly what sorting every candidate gives."""
    from langgraph.store.base import SearchOp

    from trajlog.adapters.langgraph import base_store
    ts = _filled(str(tmp_path / "o.db"), 60)
    try:
        ts.put(("users", "u2", "notes"), "other", {"i": -1, "tag": "t9"})
        got = ts.search(("users", "u1"), offset=offset, limit=limit, filter=flt)
        now = base_store._now_ms()
        want = []
        for mi in ts._candidates(("users", "u1")):
            rec = base_store._live(mi, now)
            if rec is None or tuple(rec["namespace"][:2]) != ("users", "u1"):
                continue
            if flt and not all(base_store._compare(rec["value"].get(k), v)
                               for k, v in flt.items()):
                continue
            want.append(rec["key"])
        assert [g.key for g in got] == want[offset:offset + limit]
        assert ts.batch([SearchOp(("users", "u1"), offset=offset, limit=limit,
                                  filter=flt)])[0] == got
    finally:
        ts.close()
