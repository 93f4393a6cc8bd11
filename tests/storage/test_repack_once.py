"""When the repack runs, and what it merges (src/trajlog/api/repack.py).

* each frame is merged once, to full size: the background worker merges only
  complete runs (cut at the cap, or ended by a big row) and leaves the run at
  the tail to grow -- even when it runs after every turn (a slow host);
* the worker gives way to appends: a merge planned while appends come is
  queued again, not run against them;
* what is queued at close is merged there, not dropped;
* a merged row whose stored form would not decompress to the rows it
  replaces, or whose source rows' frames do not begin where the rows say, is
  refused and nothing is written.
"""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import pytest

import trajlog
import trajlog.codec.merge as merge_mod
from kits import tamper
from kits.costkit import T0, chunk_writes, turns
from kits.tamper import foreign
from trajlog import codec
from trajlog.codec.chunks import CAP, body_seed
from trajlog.errors import CorruptionError
from trajlog.storage.statements import i64, rid

SQLITE_APSW = "tampers with the store through an apsw connection of its own"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_APSW)

SMALL_ROW = CAP // 2


def rows_of(conn: apsw.Connection, sid: int) -> list[tuple[int, int, int]]:
    """``(first_seq, n, raw_len)`` of a session's own rows, in order."""
    return [(cid & 0xFFFFFFFF, n, raw) for cid, n, raw in conn.execute(
        "SELECT cid, n, raw_len FROM chunks WHERE cid BETWEEN ? AND ? ORDER BY cid",
        (rid(sid, 0), rid(sid, 0xFFFFFFFF)))]


def test_the_worker_merges_each_frame_once_even_after_every_turn(tmp_path):
    """A host whose turns come slower than the worker's quiet wait: the
    worker merges after every turn (``drain``).  The raw bytes it rewrites are
    at most those appended (each frame once), and the run at the tail is left
    to grow.  (Merging the tail at every request rewrote each frame ~4.6x.)"""
    events = turns(1000, seed=5, tag="o")
    with trajlog.open(str(tmp_path / "o.db"), "normal") as store, \
            chunk_writes(store) as written:
        s = store.create_session(cwd="/o")
        for t, d in events:
            s.append(t, d, time=T0)
            if t == "turn/end":
                store._e.repacker.drain()
        store._e.repacker.drain()
        assert not store._e.repacker.errors
        _, raw, _ = written()
        conn = foreign(store)
        try:
            rows = rows_of(conn, s._sid)
        finally:
            conn.close()
    appended = sum(r[2] for r in rows)
    assert raw - appended <= appended, (raw - appended) / appended
    merged = [r for r in rows if r[1] > 1]
    assert len(merged) >= 3, "the worker merged nothing"
    assert all(r[2] >= SMALL_ROW for r in merged), "a run merged before it was full"
    tail = rows[rows.index(merged[-1]) + 1:]
    assert len(tail) > 1 and all(r[1] == 1 for r in tail), "the tail was merged"


def test_the_worker_gives_way_to_appends(tmp_path):
    """A merge planned while appends come is not run (nothing is written): the
    session is queued again, and merged at the next quiet moment."""
    with trajlog.open(str(tmp_path / "w.db"), "normal", repack=False) as store:
        s = store.create_session(cwd="/w")
        for t, d in turns(300, seed=2, tag="w"):
            s.append(t, d, time=T0)
        repacker = store._e.repacker
        conn = foreign(store)
        try:
            count = len(rows_of(conn, s._sid))
            moving = iter(range(10**6))
            repacker._appends = lambda: next(moving)    # an append between any two looks
            repacker._background(s._ref)
            assert len(rows_of(conn, s._sid)) == count, "merged while appends came"
            assert s._sid in repacker._queue, "not queued again"
            repacker._appends = lambda: 7               # quiet
            repacker._background(s._ref)
            assert len(rows_of(conn, s._sid)) < count, "never merged"
        finally:
            conn.close()


def test_close_merges_what_is_queued(tmp_path):
    """A run past the cap, then close at once (no quiet moment came): the
    queued merge runs at close instead of being dropped."""
    path = str(tmp_path / "c.db")
    rng = random.Random(1)
    with trajlog.open(path, "normal") as store:
        s = store.create_session(cwd="/c")
        for i in range(120):
            s.append("user/message", {"content": f"c{i} " + "x" * rng.randint(600, 900)})
        sid = s._sid
    with trajlog.open(path, repack=False) as store:
        conn = foreign(store)
        try:
            rows = rows_of(conn, sid)
        finally:
            conn.close()
        assert len(rows) < 120, "the queued merge was dropped at close"
        assert rows[0][1] > 1 and rows[0][2] >= SMALL_ROW
        assert store.session(store.sessions()[0].id).verify().ok


def _singles(path: Path, n: int) -> tuple[trajlog.Store, trajlog.Session]:
    store = trajlog.open(str(path), "normal", repack=False)
    s = store.create_session(cwd="/v")
    for i in range(n):
        s.append("user/message", {"content": f"v{i} " + "abcdefgh" * 40})
    return store, s


def test_a_stored_form_that_does_not_decompress_to_the_rows_is_refused(tmp_path, monkeypatch):
    """The merged row's stored bytes are decompressed and compared with the
    joined body before anything is written."""
    store, s = _singles(tmp_path / "z.db", 20)
    try:
        conn = foreign(store)
        before = rows_of(conn, s._sid)
        real = merge_mod.RowCompressor.compress

        def lying(self, body: bytes) -> bytes | None:   # a compressor that flips a bit
            return real(self, body[:-1] + bytes([body[-1] ^ 1]))
        monkeypatch.setattr(merge_mod.RowCompressor, "compress", lying)
        with pytest.raises(CorruptionError, match="does not decompress to the frames"):
            store.repack(s.id)
        assert rows_of(conn, s._sid) == before
        monkeypatch.undo()
        assert store.repack(s.id) == 19 and s.verify().ok
        conn.close()
    finally:
        store.close()


def test_source_rows_whose_frames_do_not_begin_where_they_say_are_refused(tmp_path):
    """Row A holds one frame but says two, row B holds two but says one: the
    joined body scans clean (same frames, same chain), yet each row lies about
    where its frames are -- opening each row refused it, and so does the
    merge."""
    store, s = _singles(tmp_path / "b.db", 6)
    try:
        conn = foreign(store)
        rows = conn.execute("SELECT cid, n, last_chain FROM chunks WHERE cid BETWEEN ? AND ? "
                            "ORDER BY cid", (rid(s._sid, 0), rid(s._sid, 5))).fetchall()
        # rows at seqs 2, 3, 4 (one frame each): 2 says n=2 (its last chain: 3's);
        # 3's body moves into a row at seq 4 that says n=1 but holds frames 3 and 4
        cid2, cid3, cid4 = rows[2][0], rows[3][0], rows[4][0]
        b3, b4 = (conn.execute("SELECT body FROM chunks WHERE cid = ?", (c,)).fetchall()[0][0]
                  for c in (cid3, cid4))
        key = tamper._key(conn, s._sid)
        with conn:
            conn.execute("DELETE FROM chunks WHERE cid = ?", (cid3,))
            conn.execute("UPDATE chunks SET n = 2, last_chain = ? WHERE cid = ?",
                         (rows[3][2], cid2))
            both = b3 + b4
            conn.execute("UPDATE chunks SET raw_len = ?, body = ?, body_check = ? WHERE cid = ?",
                         (len(both), both, i64(codec.checksum(both, body_seed(key, 4))), cid4))
            conn.execute("UPDATE chunks SET n = 1 WHERE cid = ?", (cid4,))
        conn.close()
        with pytest.raises(CorruptionError, match="repack refused"):
            store.repack(s.id)
    finally:
        store.close()
