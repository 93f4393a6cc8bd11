"""A range read over a run of small rows -- one per single append, as the log
holds them until a repack merges them at a quiet moment -- against the same
read of the merged log: Python frames entered per event (``sys.setprofile``
"call" events of the calling thread) and kernel scans per read.  Opening the
rows one by one cost ~32 frames and one scan an event (26x the merged read's
time); a run of small rows is opened as one (codec.chunks.open_run), its body
checks in one kernel call (check_bodies), its rows fetched many to a
statement and made without a Python frame each (~2.6 frames an event with
the C kernel, ~8.2 before; ~1.2 merged).
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import pytest

import trajlog
from kits.costkit import T0, traced
from trajlog._backend import get_kernel
from trajlog.codec.stream import READ_MAX_ROWS, READ_ROWS
from trajlog.storage.statements import CHUNK_COLUMNS

SQLITE_FRAMES = "counts the Python frames of the SQLite read path"
SQLITE_COST = "counts what SQLite runs (statements, VM steps, pages, compiles)"

N = 600
# Python frames per event of the read over N single-append rows, per kernel
# (today's value: lower it with the work that lowers it)
FRAMES = {"trajlog._kernel_c": 3.0, "trajlog._kernel_py": 11.0}
MERGED = 1.5   # the same read of the merged log


def _read(s: Any) -> Counter[str]:
    """Frames entered by a whole-log read, by function name, and in all ("*")."""
    calls: Counter[str] = Counter()

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls[frame.f_code.co_name] += 1
            calls["*"] += 1
    list(s.events(0, N - 1))   # warm: the statements prepared, the first rows cached
    sys.setprofile(count)
    try:
        got = list(s.events(0, N - 1))
    finally:
        sys.setprofile(None)
    assert [ev.seq for ev in got] == list(range(N))
    return calls


@pytest.mark.sqlite_only(reason=SQLITE_FRAMES)
def test_a_read_over_small_rows_costs_about_a_merged_read(tmp_path):
    with trajlog.open(str(tmp_path / "s.db"), repack=False) as store:
        s = store.create_session(cwd="/cost")
        for i in range(N):
            s.append("user/message", {"content": "x" * 250, "i": i}, time=T0)
        small = _read(s)
        store.repack(s.id)
        merged = _read(s)
    per_event = small["*"] / N
    limit = FRAMES[get_kernel().__name__]
    assert merged["*"] / N <= MERGED, merged.most_common(8)
    assert per_event <= limit, (f"{per_event:.1f} Python frames per event over small rows "
                                f"(merged: {merged['*'] / N:.1f}); today's limit {limit}; "
                                f"{small.most_common(10)}")
    # one scan per fetch of small rows, not one per row
    assert small["scan_table"] <= N // 8, small["scan_table"]


@pytest.mark.sqlite_only(reason=SQLITE_COST)
def test_a_read_over_small_rows_checks_their_bodies_in_few_calls_and_statements(tmp_path):
    """Kernel body checks and chunk statements per read of N single-append
    rows: one body check a row (a cffi call each) and one statement per
    READ_ROWS rows cost ~2.3 us an event of a read that is ~4 us an event in
    all; the rows a read does not keep in the cache have their bodies
    checked in one call (check_bodies) and come many to a statement."""
    with trajlog.open(str(tmp_path / "s.db"), repack=False) as store:
        s = store.create_session(cwd="/cost")
        for i in range(N):
            s.append("user/message", {"content": "x" * 250, "i": i}, time=T0)
        calls = _read(s)
        fetches = [sql for sql in traced(store, lambda: list(s.events(0, N - 1)))
                   if sql.startswith(f"SELECT {CHUNK_COLUMNS} FROM chunks")]
    # the first READ_ROWS rows are opened alone (the cache keeps them): one
    # check each; the other rows' bodies in a call per fetch
    checks = calls["checksum"] + calls["check_bodies"]
    assert checks <= READ_ROWS + 4, (checks, calls.most_common(12))
    # the first READ_ROWS rows, then up to READ_MAX_ROWS small rows a statement
    assert len(fetches) <= 2 + N // READ_MAX_ROWS, fetches


def test_a_read_over_small_rows_a_get_opened_joins_them_still(tmp_path):
    """Rows ``get`` opened are in the cache with only their own payload
    checked, which a read over them cannot use: they were opened again one
    by one at every read (a scan a row: a LangGraph list after get_tuple by
    id); as rows the cache does not hold fully, they join a run."""
    with trajlog.open(str(tmp_path / "s.db"), repack=False) as store:
        s = store.create_session(cwd="/cost")
        for i in range(N):
            s.append("user/message", {"content": "x" * 250, "i": i}, time=T0)
        for seq in range(N):
            assert s.get(seq).seq == seq
        calls = _read(s)
    assert calls["scan_table"] <= READ_ROWS + N // 64, calls.most_common(12)
    assert calls["open_chunk"] <= READ_ROWS, calls.most_common(12)


def test_a_tail_again_checks_no_body_again(tmp_path):
    """``tail`` opens the log's last (big) row with only the payloads it hands
    out checked, and the cache keeps it so; a second ``tail`` takes it from
    the cache.  Counting such a row as fresh -- as the rule for small rows a
    ``get`` opened does -- checked its whole body again at every ``tail``
    (~4 us of a ~90 us ``tail(50)``)."""
    with trajlog.open(str(tmp_path / "t.db"), repack=False) as store:
        s = store.create_session(cwd="/cost")
        s.append_batch([("user/message", {"content": "y" * 300, "i": i}) for i in range(2000)])
        store.repack(s.id)
        assert len(s.tail(50)) == 50   # warm: the last rows opened and kept
        calls: Counter[str] = Counter()

        def count(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                calls[frame.f_code.co_name] += 1
        sys.setprofile(count)
        try:
            got = s.tail(50)
        finally:
            sys.setprofile(None)
    assert [ev.seq for ev in got] == list(range(1950, 2000))
    assert calls["checksum"] + calls["check_bodies"] == 0, calls.most_common(12)
    assert calls["open_chunk"] == 0, calls.most_common(12)
