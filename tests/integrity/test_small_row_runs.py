"""A read over a run of small rows (one per single append, before a repack
merges them) opens the run as one (codec.chunks.open_run); a damaged row in
the middle of the run must still be found, with the error type, seq and
offset a row-by-row opening gives: the offset counts the raw bytes of the
rows read before it."""

from __future__ import annotations

import pytest

import trajlog
from kits.tamper import flip_frame_bits, foreign, raw_body, row_of, settle
from trajlog.errors import (
    ChainError,
    ChecksumError,
    CorruptionError,
    HeadMismatchError,
    SequenceError,
)
from trajlog.storage.statements import i64, rid, u64

SQLITE_APSW = "tampers with the store through an apsw connection of its own"

N = 200
AT = 120   # the damaged row: past the read's first fetch, inside a run of small rows


def _store(tmp_path):
    store = trajlog.open(str(tmp_path / "s.db"), repack=False)
    s = store.create_session(cwd="/runs")
    for i in range(N):
        s.append("user/message", {"content": f"message {i} " + "x" * (i % 90)})
    return store, s


def _sid(store, s) -> int:
    return int(store._e.backend.connection().execute(
        "SELECT sid FROM sessions WHERE id = ?", (s.id,)).fetchall()[0][0])


def _sql(store, sql: str, args: tuple) -> None:
    conn = foreign(store)
    try:
        conn.execute(sql, args)
    finally:
        conn.close()


def _before(store, sid: int, seq: int) -> int:
    """Raw bytes of the rows before the row holding ``seq``."""
    conn = foreign(store)
    try:
        return sum(int(r[0]) for r in conn.execute(
            "SELECT raw_len FROM chunks WHERE cid BETWEEN ? AND ?",
            (rid(sid, 0), rid(sid, seq) - 1)).fetchall())
    finally:
        conn.close()


def _body(store, sid):
    """The stored body of row AT damaged (its body check left as it was)."""
    body = bytearray(row_of(foreign(store), sid, AT)[7])
    body[len(body) // 2] ^= 0x10
    _sql(store, "UPDATE chunks SET body = ? WHERE cid = ?", (bytes(body), rid(sid, AT)))
    return ChecksumError, AT


def _payload(store, sid):
    """A payload bit flipped, the row's body check recomputed over it."""
    flip_frame_bits(store, sid, AT, 48, 0x01)
    return ChecksumError, AT


def _seed_chain(store, sid):
    """The row's seed chain no longer the chain of the row before it."""
    row = row_of(foreign(store), sid, AT)
    _sql(store, "UPDATE chunks SET seed_chain = ? WHERE cid = ?",
         (i64(u64(row[5]) ^ 1), rid(sid, AT)))
    return ChainError, AT


def _last_chain(store, sid):
    """The row's last chain not the chain of its frame."""
    row = row_of(foreign(store), sid, AT)
    _sql(store, "UPDATE chunks SET last_chain = ? WHERE cid = ?",
         (i64(u64(row[6]) ^ 1), rid(sid, AT)))
    return ChainError, AT


def _gap(store, sid):
    _sql(store, "DELETE FROM chunks WHERE cid = ?", (rid(sid, AT),))
    return SequenceError, AT


def _tail(store, sid):
    """The last rows gone: the log ends before the session head."""
    _sql(store, "DELETE FROM chunks WHERE cid >= ? AND cid <= ?", (rid(sid, AT), rid(sid, N)))
    return HeadMismatchError, AT


DAMAGE = {"body check": _body, "payload check": _payload, "seed chain": _seed_chain,
          "last chain": _last_chain, "seq gap": _gap, "truncated tail": _tail}


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_inside_a_run_of_small_rows_is_found_where_it_is(tmp_path, kind):
    store, s = _store(tmp_path)
    with store:
        settle(store)
        sid = _sid(store, s)
        assert len(raw_body(row_of(foreign(store), sid, AT))) < 4096   # a small row
        before = _before(store, sid, AT)
        error, seq = DAMAGE[kind](store, sid)
        store._e.reading.cache.clear()
        with pytest.raises(CorruptionError) as got:
            list(s.events(0, N - 1))
        assert type(got.value) is error, got.value
        assert (got.value.seq, got.value.offset) == (seq, before), got.value
        # the events before the damaged row are handed out first
        seen = []
        with pytest.raises(CorruptionError):
            for ev in s.events(0, N - 1):
                seen.append(ev.seq)
        assert seen == list(range(AT))
        report = s.verify()
        assert not report.ok
        assert (report.scan.cursor.next_seq, report.scan.cursor.offset) == (seq, before)
        # a read from the middle of the run: offsets count from its first row
        start = AT - 40   # (the damaged row past this read's first fetch too)
        with pytest.raises(CorruptionError) as mid:
            list(s.events(start, N - 1))
        assert type(mid.value) is error
        assert (mid.value.seq, mid.value.offset) == (seq, before - _before(store, sid, start))


def test_an_erased_event_inside_a_run_of_small_rows_reads_as_its_tombstone(tmp_path):
    store, s = _store(tmp_path)
    with store:
        settle(store)
        store.erase(s.id, [AT, AT + 3], reason="request")
        store._e.reading.cache.clear()
        events = list(s.events(0, N - 1))
        assert [ev.seq for ev in events] == list(range(N))
        assert events[AT].data["erased"]["reason"] == "request"
        assert events[AT + 3].data["erased"]["reason"] == "request"
        assert events[AT + 1].data["content"].startswith(f"message {AT + 1} ")
        assert s.verify().ok
