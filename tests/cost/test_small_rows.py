"""A range read over a run of small rows -- one per single append, as the log
holds them until a repack merges them at a quiet moment -- against the same
read of the merged log: Python frames entered per event (``sys.setprofile``
"call" events of the calling thread) and kernel scans per read.  Opening the
rows one by one cost ~32 frames and one scan an event (26x the merged read's
time); a run of small rows is opened as one (codec.chunks.open_run), and what
is left a row is mostly the storage's making of each row (~9 frames an event,
against ~1.2 merged).
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import trajlog
from kits.costkit import T0
from trajlog._backend import get_kernel

N = 600
# Python frames per event of the read over N single-append rows, per kernel
# (today's value: lower it with the work that lowers it)
FRAMES = {"trajlog._kernel_c": 9.5, "trajlog._kernel_py": 17.5}
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
