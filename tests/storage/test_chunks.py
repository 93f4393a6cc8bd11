"""Storage v2: chunk rows, the event index and marks, the read path (lazy
events, the chunk cache, forks cut inside a row) and trajlog.aio."""

from __future__ import annotations

import asyncio

import apsw
import pytest

import trajlog
from kits.tamper import edit_row, foreign, frames_of, raw_body, row_of, settle
from trajlog import codec, errors
from trajlog.codec import Status
from trajlog.codec.chunks import CAP, ChunkCompressor, cut, frame_sizes, open_chunk, pack
from trajlog.codec.stream import READ_ROWS
from trajlog.events import LazyEvent
from trajlog.storage.statements import rid

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
SQLITE_CONN = "runs SQL on the SQLite backend's own connections"


def turn(s, n: int, big: bool = False) -> None:
    with s.turn():
        s.append("user/message", {"content": f"task {n}"})
        with s.step():
            s.append("assistant/message", {"content": "x", "tool_calls": [
                {"id": f"c{n}", "name": "read", "arguments": {}}]})
            s.append("tool/call", {"call_id": f"c{n}", "name": "read", "arguments": {}})
            s.append("tool/result", {"call_id": f"c{n}", "is_error": False,
                                     "output": "y" * (20_000 if big else 10)})


def batch_turns(s, turns: int) -> None:
    items = []
    for n in range(turns):
        items += [("turn/start", {}), ("user/message", {"content": f"q{n}"}),
                  ("step/start", {}),
                  ("assistant/message", {"content": "", "tool_calls": [
                      {"id": f"b{n}", "name": "grep", "arguments": {"p": n}}]}),
                  ("tool/call", {"call_id": f"b{n}", "name": "grep", "arguments": {"p": n}}),
                  ("tool/result", {"call_id": f"b{n}", "output": "z" * 900, "is_error": False}),
                  ("step/end", {}), ("turn/end", {"interrupted": False})]
    s.append_batch(items)


# -- the codec's chunk rows ----------------------------------------------------------

def test_chunks_cut_at_the_cap_and_open_verified():
    key = codec.session_key(bytes(range(16)))
    payloads = [bytes([i % 251]) * (1000 + i) for i in range(200)]
    blob, end = codec.encode(payloads, key, codec.start_cursor(key))
    runs = cut(blob, frame_sizes(payloads and [len(p) for p in payloads]), 0, key)
    assert len(runs) > 1 and all(len(body) <= CAP for body, *_ in runs)
    assert b"".join(body for body, *_ in runs) == blob
    assert runs[-1][4] == end.chain and runs[0][3] == key
    compressor = ChunkCompressor()
    for body, first, n, seed, last in runs:
        for stored in (None, compressor.compress([body])[0]):
            row = pack(key, body, first, n, seed, last, stored)
            raw, table = open_chunk(key, row, compressor)
            assert bytes(raw) == body and len(table) == n and table.seq(0) == first
    # each check refuses what it guards
    body, first, n, seed, last = runs[1]
    good = pack(key, body, first, n, seed, last, compressor.compress([body])[0])
    bad_body = pack(key, body, first, n, seed, last, None)
    assert open_chunk(key, bad_body.__class__(**{**_fields(bad_body), "body_check": 1}),
                      compressor).reason == "chunk body check mismatch"
    wrong_n = good.__class__(**{**_fields(good), "n": n - 1})
    assert "row says" in open_chunk(key, wrong_n, compressor).reason
    wrong_last = good.__class__(**{**_fields(good), "last_chain": last ^ 1})
    assert "last_chain" in open_chunk(key, wrong_last, compressor).reason
    wrong_seed = good.__class__(**{**_fields(good), "seed_chain": seed ^ 1})
    assert open_chunk(key, wrong_seed, compressor).status == Status.BAD_CHAIN
    wrong_len = good.__class__(**{**_fields(good), "raw_len": good.raw_len + 8})
    assert "decompress" in open_chunk(key, wrong_len, compressor).reason


def _fields(row) -> dict:
    return {f: getattr(row, f) for f in row._fields}


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_chunks_a_batch_is_few_rows_and_a_single_append_one_lean_row(store):
    s = store.create_session(cwd="/r")
    batch_turns(s, 100)
    conn = store._e.backend.connection()
    rows = conn.execute("SELECT n, raw_len, codec FROM chunks WHERE sid = ?", (s._sid,)).fetchall()
    assert sum(r[0] for r in rows) == 800 and len(rows) <= 800 * 1100 // (CAP // 2)
    assert all(r[2] == 1 for r in rows[:-1])            # compressed, but maybe the last
    s.append("user/message", {"content": "one more"})
    last = conn.execute("SELECT n, codec FROM chunks WHERE sid = ? ORDER BY cid DESC LIMIT 1",
                        (s._sid,)).fetchall()[0]
    assert last == (1, 0)                                # lean: one frame, stored as is


# -- the index and the marks -----------------------------------------------------------

@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_chunks_index_rows_are_sparse_and_marks_carry_the_tool_calls(store):
    s = store.create_session(cwd="/r")
    turn(s, 1)
    s.append("note/x", {}, idempotency_key="k1")
    conn = store._e.backend.connection()
    types = [r[0] for r in conn.execute("SELECT type FROM event_index WHERE sid = ? ORDER BY rid",
                                        (s._sid,))]
    assert types == ["turn/start", "turn/end", "note/x"]
    marks = store._e.backend.reader().marks(s._sid, 0, s.last_seq)
    assert [(m.seq, m.call_id) for m in marks if m.call_id] == [(3, "c1"), (4, "c1"), (5, "c1")]
    assert [m.seq for m in marks if m.call_id is None] == [2, 6]   # step/start, step/end


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
@pytest.mark.parametrize("what", ["relabel", "drop-key", "forge-row", "marks"])
def test_chunks_verify_checks_every_index_row_and_mark(store, what):
    """A relabelled type, a dropped idempotency key, a row for an event that
    is not indexed, or marks that differ from the frames: verify() finds each."""
    s = store.create_session(cwd="/r")
    turn(s, 1)
    s.append("note/x", {"n": 1}, idempotency_key="k1")
    s.append("note/y", {"n": 2})
    settle(store)
    assert s.verify().ok
    conn = foreign(store)
    if what == "relabel":
        conn.execute("UPDATE event_index SET type = 'turn/start' WHERE rid = ?",
                     (rid(s._sid, 7),))
    elif what == "drop-key":
        conn.execute("DELETE FROM event_index WHERE rid = ?", (rid(s._sid, 8),))
    elif what == "forge-row":
        conn.execute("INSERT INTO event_index(rid, type, time_ms) VALUES (?, 'turn/end', 0)",
                     (rid(s._sid, 9),))
    else:
        conn.execute("UPDATE chunks SET marks = NULL WHERE marks IS NOT NULL")
    conn.close()
    report = s.verify()
    assert not report.ok and report.scan.status == Status.BAD_FIELD
    assert ("index row" in report.scan.reason) != (what == "marks")


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_chunks_index_rows_cannot_be_added_beyond_the_head(store):
    s = store.create_session(cwd="/r")
    s.append("note/x", {})
    conn = apsw.Connection(store.path)
    with pytest.raises(apsw.ConstraintError, match="trajlog"):
        conn.execute("INSERT INTO event_index(rid, type, time_ms) VALUES (?, 'turn/end', 0)",
                     (rid(s._sid, 5),))
    conn.close()


# -- reading ----------------------------------------------------------------------------

def test_chunks_lazy_events_decode_on_first_access_and_stay_valid(store):
    s = store.create_session(cwd="/r")
    batch_turns(s, 20)
    lazy = list(s.events(lazy=True))
    eager = list(s.events())
    assert all(isinstance(e, LazyEvent) for e in lazy)
    assert [e.event() for e in lazy] == eager
    assert lazy[5].data is lazy[5].data                # decoded once, then kept
    with pytest.raises(AttributeError):
        lazy[5].seq = 9                                # immutable
    assert lazy[-1].envelope == eager[-1].envelope


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_chunks_get_and_tail_use_the_cache_but_notice_a_rewritten_row(store):
    s = store.create_session(cwd="/r", )
    batch_turns(s, 30)
    store.repack()
    first = s.get(100)
    assert s.get(100) == first and s.tail(3) == list(s.events(s.last_seq - 2))
    edit_row(store, s._sid, 100, lambda frames, i: [
        f if k != i else f[:45] + bytes([f[45] ^ 1]) + f[46:] for k, f in enumerate(frames)])
    with pytest.raises(errors.ChecksumError):
        s.get(100)                                    # the cached copy is not trusted


def test_chunks_scan_checks_the_payloads_asked_for_and_every_header(kernel):
    """tl_scan_some (a reader's scan of a row whose body check held): the
    payload check only for the seqs it hands out; headers, seqs, padding and
    chains of every frame as ever -- in both kernels alike."""
    key = codec.session_key(bytes(range(16)))
    payloads = [bytes([i + 1]) * (100 + i) for i in range(10)]
    blob, end = codec.encode(payloads, key, codec.start_cursor(key))
    _, full, _, _ = kernel.scan_table(blob, key, codec.start_cursor(key), 10)
    at3 = full.offset(3) + 40 + 5                              # a payload byte of seq 3
    payload_flip = blob[:at3] + bytes([blob[at3] ^ 1]) + blob[at3 + 1:]
    at3 = full.offset(3) + 20                                  # a header byte (its seq)
    header_flip = blob[:at3] + bytes([blob[at3] ^ 1]) + blob[at3 + 1:]
    start = codec.start_cursor(key)
    status, table, cur, _ = kernel.scan_table(payload_flip, key, start, 10)
    assert (status, len(table)) == (Status.BAD_PAYLOAD, 3)
    for checked in ((5, 9), (0, 2), (4, 4)):                   # seq 3 is not handed out
        status, table, cur, _ = kernel.scan_table(payload_flip, key, start, 10, checked)
        assert (status, len(table), cur.chain) == (Status.END, 10, end.chain)
        assert table.packed == full.packed
    for checked in ((3, 3), (0, 9), None):
        status, table, _, _ = kernel.scan_table(payload_flip, key, start, 10, checked)
        assert (status, len(table)) == (Status.BAD_PAYLOAD, 3)
    status, table, _, _ = kernel.scan_table(header_flip, key, start, 10, (9, 9))
    assert (status, len(table)) == (Status.BAD_HEADER, 3)


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_chunks_get_checks_the_payload_it_returns(store):
    """``get`` checks the payload it hands out, and walks the row's other
    frames by header and chain: a payload changed behind a recomputed body
    check is refused where it is read -- and found by verify -- while the
    row's other events still read back as written."""
    s = store.create_session(cwd="/r")
    batch_turns(s, 30)
    row = row_of(foreign(store), s._sid, 100)
    first, n = row[0] & 0xFFFFFFFF, row[1]
    assert first < 100 < first + n - 1
    want = [s.get(q) for q in range(first, first + n)]
    store._e.reading.cache.clear()
    edit_row(store, s._sid, 100, lambda frames, i: [
        f if k != i else f[:45] + bytes([f[45] ^ 1]) + f[46:] for k, f in enumerate(frames)])
    for q in (first, 99, 101, first + n - 1):
        store._e.reading.cache.clear()
        assert s.get(q) == want[q - first]
    with pytest.raises(errors.ChecksumError):
        s.get(100)
    with pytest.raises(errors.ChecksumError):
        list(s.events(first))
    report = s.verify()
    assert not report.ok and report.scan.cursor.next_seq == 100


def test_chunks_a_long_read_keeps_only_its_first_rows_in_the_cache(tmp_path):
    """A whole-log read remembers the rows of its first fetch (what a tail or
    a get near the start comes back to), not every row it passes."""
    with trajlog.open(str(tmp_path / "s.db"), repack=False) as st:
        s = st.create_session(cwd="/r")
        for i in range(3 * READ_ROWS):                    # a row each
            s.append_batch([("user/message", {"content": f"{i} {k} " + "z" * 900})
                            for k in range(40)])
        cache = st._e.reading.cache
        cache.clear()
        assert len(list(s.events())) == s.last_seq + 1
        assert 0 < len(cache._items) <= READ_ROWS
        assert s.get(3) == next(iter(s.events(3, 3)))


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_chunks_fork_cut_inside_a_parent_row(store):
    """A fork whose seed ends in the middle of a parent's chunk row reads that
    row up to its seed length, and continues the chain there."""
    p = store.create_session(cwd="/r")
    batch_turns(p, 40)                                 # rows of ~60 events
    conn = store._e.backend.connection()
    cut_at = 8 * 17 - 1                                # the turn/end of turn 16
    row = row_of(conn, p._sid, cut_at)
    assert (row[0] & 0xFFFFFFFF) < cut_at < (row[0] & 0xFFFFFFFF) + row[1] - 1
    child = p.fork(cut_at)
    child.append("user/message", {"content": "own"})
    got = list(child.events())
    assert [e.seq for e in got] == list(range(cut_at + 2))
    assert got[:-1] == list(p.events(0, cut_at)) and child.verify().ok
    assert len(frames_of(raw_body(row))) == row[1]


def test_chunks_aio_appends_await_the_group_commit(tmp_path):
    async def main() -> None:
        store = await trajlog.aio.open(str(tmp_path / "a.db"))
        sessions = [await store.create_session(cwd=f"/s{k}") for k in range(16)]

        async def writer(s) -> None:
            for i in range(10):
                await s.append("user/message", {"content": f"{i}"})

        await asyncio.gather(*(writer(s) for s in sessions))
        s = sessions[0]
        async with s.turn():
            await s.append("user/message", {"content": "in a turn"})
            async with s.step():
                await s.append("assistant/message", {"content": "ok"})
        types = [e.type async for e in s.events(10)]
        assert types == ["turn/start", "user/message", "step/start", "assistant/message",
                         "step/end", "turn/end"]
        with pytest.raises(errors.ValidationError):
            await s.append("tool/result", {"call_id": "nope", "output": ""})
        assert all([(await x.verify()).ok for x in sessions])
        assert (await s.get(3)).data == {"content": "3"}
        await store.close()
        with pytest.raises(errors.StoreClosedError):
            await s.append("user/message", {"content": "after close"})

    asyncio.run(main())
