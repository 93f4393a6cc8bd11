"""Bytes a repack rewrites per byte appended, over 1000 single appends of
whole turns (texts of 100-1200 B) on a fresh store: every chunk row written
is counted by a trigger (``kits.costkit.chunk_writes``), whoever writes it;
the bytes appended are the log's own (its rows' raw bytes at the end).

The repack runs when the write engine asks for one (every 32 small rows, and
at each turn's end), at once and on the caller's thread, then once more at the
end: the schedule of a host whose turns come slower than the background
worker's 0.2 s wait, made deterministic.  Today a merged row smaller than half
the cap is merged again at the next request, so a frame is rewritten ~4.6
times before its row is full; merging once to full size makes it ~1.  The
planted regression asks for a repack after every append.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import trajlog
import trajlog.api.writer as writer_module
from kits.costkit import T0, chunk_writes, fails, turns

# raw bytes rewritten per raw byte appended (today 4.5576, the same on every
# run), and stored bytes rewritten per stored byte of the final log (today
# 6.809-6.814: a session's random key changes the compressed size a little);
# a merge once to full size brings them to ~1 (lower them with it)
LIMITS = {"raw": 4.5576, "stored": 6.83}


def rewritten(path: Path) -> dict[str, float]:
    events = turns(1000, seed=5, tag="p")
    with trajlog.open(str(path), "normal", repack=False) as store, \
            chunk_writes(store) as written:
        repacker = store._e.repacker
        store._e.writer.on_small_rows = lambda ref: repacker.repack(ref) and None  # at once, here
        s = store.create_session(cwd="/cost")
        for t, d in events:
            s.append(t, d, time=T0)
        store.repack()
        _, raw, stored = written()
        final = store._e.backend.connection().execute(
            "SELECT sum(raw_len), sum(length(body)) FROM chunks").fetchall()[0]
    return {"raw": (raw - final[0]) / final[0], "stored": (stored - final[1]) / final[1]}


def within(got: dict[str, float], limits: dict[str, float]) -> None:
    over = {k: (round(got[k], 4), v) for k, v in limits.items() if got[k] > v}
    assert not over, f"a repack rewrites more than today (measured, limit): {over}"


@pytest.mark.parametrize("planted", [False, True], ids=["today", "planted"])
def test_bytes_rewritten_per_byte_appended(tmp_path, monkeypatch, planted):
    clean = rewritten(tmp_path / "a.db")
    within(clean, LIMITS)
    if planted:
        monkeypatch.setattr(writer_module, "REPACK_ROWS", 1)   # a repack after every append
        got = rewritten(tmp_path / "b.db")
        fails(lambda: within(got, {k: min(v, clean[k]) for k, v in LIMITS.items()}))
