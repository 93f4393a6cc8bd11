"""What SQLite runs for an append: statements, trigger programs, VM steps,
pages, statement compiles and authorizer callbacks per single append (FULL
and NORMAL) and per batch of 1000 events, in steady state on a fresh store.

Today a single append is three statements (BEGIN IMMEDIATE, the chunk
INSERT, COMMIT: a foreign commit is seen by the connection's data version, a
file-control call, not a ``PRAGMA data_version`` statement) and three trigger
programs; a leaner path aims at one statement per append.  A batch compiles
its five statements anew every time (a statement-cache miss each, and the
authorizer runs for every table and column they touch).  Each limit below is today's value: lower it
with the work that lowers the cost.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import apsw
import pytest

import trajlog
from kits.costkit import T0, Cost, Meter, batch, fails, metered, tightest, timed, turns
from trajlog._backend import get_kernel
from trajlog.codec.chunks import ChunkCompressor

PLANTS = [None, "statement", "recompile"]


def plant(meter: Meter, kind: str | None) -> None:
    """A regression planted in a measured operation: one more statement, or
    every prepared statement compiled anew (setting an authorizer expires
    them all, as any schema change would)."""
    for conn in meter.conns:
        if kind == "statement":
            conn.execute("SELECT 1").fetchall()
        elif kind == "recompile":
            conn.authorizer = conn.authorizer


def within(cost: Cost, limits: dict[str, int], per: int = 1) -> None:
    """Every counter of ``limits`` at most its limit (per ``per`` operations)."""
    got = cost.counts()
    over = {k: (got[k] / per, v) for k, v in limits.items() if got[k] > v * per}
    assert not over, f"over today's limit (measured per op, limit): {over}; all: {got}"


def guarded(measure: Any, limits: dict[str, int], kind: str | None, per: int = 1) -> None:
    """The guard on a clean run; with a plant, the planted run breaks it (at
    the limits the clean run itself meets)."""
    clean = measure(None, "a")
    within(clean, limits, per)
    if kind is not None:
        tight = tightest(limits, {k: v / per for k, v in clean.counts().items()})
        planted = measure(kind, "b")
        fails(lambda: within(planted, tight, per))


# Per single append of a user/message in an open turn (measured over 100).
SINGLE = {"statements": 3,      # BEGIN IMMEDIATE, INSERT chunks, COMMIT
          "triggers": 3,        # chunks_append, chunks_advance_head, heads_forward_only
          "vm_steps": 181,
          "pages": 7,
          "prepares": 0,
          "authorizer": 0,
          "fullscan_steps": 0}
# Over 309 single appends of whole turns (tool calls, turn markers, leases).
TURNS = {"statements": 1110, "triggers": 987, "vm_steps": 66918, "pages": 2646,
         "prepares": 0, "authorizer": 0, "fullscan_steps": 0}
# Over three batches of 1000 events (whole turns of 100-1200 B texts).
BATCHES = {"statements": 1221,  # 2 + a chunk INSERT a row + an index INSERT a marker or call
           "triggers": 656, "vm_steps": 97582, "pages": 6806,
           "prepares": 15,     # every statement of every batch compiled anew
           "authorizer": 162,
           "fullscan_steps": 0}


def _fresh(tmp_path: Any, durability: str, name: str) -> trajlog.Store:
    return trajlog.open(str(tmp_path / f"{name}.db"), durability, repack=False)


@pytest.mark.parametrize("kind", PLANTS)
@pytest.mark.parametrize("durability", ["full", "normal"])
def test_a_single_append(tmp_path, durability, kind):
    def measure(kind: str | None, name: str) -> Cost:
        with _fresh(tmp_path, durability, name) as store, metered(store) as meter:
            s = store.create_session(cwd="/cost")
            for t, d in turns(60, seed=1, tag="w"):     # warm-up: whole turns
                s.append(t, d, time=T0)
            s.append("turn/start", {}, time=T0)

            def op(i: int) -> None:
                s.append("user/message", {"content": f"hello {i}"}, time=T0)
                plant(meter, kind)
            cost = meter.measure(op, 100)
            assert cost.by_sql["COMMIT"] == 100
            return cost
    guarded(measure, SINGLE, kind, 100)


@pytest.mark.parametrize("kind", PLANTS)
def test_single_appends_of_whole_turns(tmp_path, kind):
    events = turns(300, seed=3, tag="m")
    assert len(events) == 309

    def measure(kind: str | None, name: str) -> Cost:
        with _fresh(tmp_path, "normal", name) as store, metered(store) as meter:
            s = store.create_session(cwd="/cost")
            for t, d in turns(60, seed=1, tag="w"):
                s.append(t, d, time=T0)

            def op(i: int) -> None:
                s.append(*events[i], time=T0)
                plant(meter, kind)
            return meter.measure(op, len(events))
    guarded(measure, TURNS, kind)


# (no "recompile" plant: a batch compiles every statement anew already)
@pytest.mark.parametrize("kind", [None, "statement"])
def test_a_batch_of_1000(tmp_path, kind):
    batches = [timed(batch(1000, 10 + i, f"b{i}_")) for i in range(5)]

    def measure(kind: str | None, name: str) -> Cost:
        with _fresh(tmp_path, "normal", name) as store, metered(store) as meter:
            s = store.create_session(cwd="/cost")
            s.append_batch(batches[0])
            s.append_batch(batches[1])

            def op(i: int) -> None:
                s.append_batch(batches[2 + i])
                plant(meter, kind)
            return meter.measure(op, 3)
    guarded(measure, BATCHES, kind)


# Python frames entered per single append of a user/message in an open turn
# (sys.setprofile "call" events of the calling thread: functions, generators and
# comprehensions), per kernel.  Today's bookkeeping on the path: the session's
# append, prepare (validation, serialization), the engine's stages, the inline
# commit (the request's apply called with its arguments: no closure) and the
# framing wrapper; a Cursor and a Plan made in C.
FRAMES = {"trajlog._kernel_c": 39, "trajlog._kernel_py": 53}


@pytest.mark.parametrize("kind", [None, "frame"])
def test_python_frames_per_single_append(tmp_path, kind):
    def measure(kind: str | None, name: str) -> float:
        with _fresh(tmp_path, "normal", name) as store:
            writer = store._e.writer
            if kind == "frame":   # one more layer of bookkeeping on the path
                state = writer.state
                writer.state = lambda tx, ref: state(tx, ref)  # type: ignore[method-assign]
            s = store.create_session(cwd="/cost")
            for t, d in turns(60, seed=1, tag="w"):
                s.append(t, d, time=T0)
            s.append("turn/start", {}, time=T0)

            def appends() -> None:
                for i in range(100):
                    s.append("user/message", {"content": f"hello {i}"}, time=T0)
            return _frames(appends) / 100

    _frames_guard(measure, FRAMES, kind, "append")


def _at_most(value: float, limit: float) -> None:
    assert value <= limit, (value, limit)


def _frames_guard(measure: Callable[[str | None, str], float], limits: dict[str, float],
                  kind: str | None, what: str) -> None:
    """Today's frames per ``what`` within this kernel's limit; and with a
    planted ``kind`` of regression, over what was measured clean."""
    limit = limits[get_kernel().__name__]
    clean = measure(None, "a")
    assert clean <= limit, f"{clean} Python frames per {what}; today's limit {limit}"
    if kind is not None:
        planted = min(limit, clean)
        fails(lambda: _at_most(measure(kind, "b"), planted))


def _frames(run: Callable[[], Any]) -> int:
    """Python frames the calling thread enters during ``run()``
    (``sys.setprofile`` "call" events: functions, generators, comprehensions)."""
    calls = [0]

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls[0] += 1
    sys.setprofile(count)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls[0] - 1   # (run's own frame)


# Python frames entered per event of a batch of 1000 (sys.setprofile "call"
# events of the calling thread over two batches of whole turns), per kernel.
# A common item -- (type, data, {"time": t}) of a type already seen -- is
# prepared inline in the batch's loop; what stays per event: the JSON type
# walk (nested values), a known type's shape check, the mark of an event that
# has one (an index row is made in the batch's one loop, without a call), the
# returned event.  (The reference kernel frames in Python: about six frames per
# event of its own.)
BATCH_FRAMES = {"trajlog._kernel_c": 4.6, "trajlog._kernel_py": 10.6}


class _Seen(dict):  # type: ignore[type-arg]
    """The engine's cache of valid types, looked up through a Python method."""

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, key, default)


@pytest.mark.parametrize("kind", [None, "frame"])
def test_python_frames_per_batched_event(tmp_path, kind):
    batches = [timed(batch(1000, 20 + i, f"f{i}_")) for i in range(3)]

    def measure(kind: str | None, name: str) -> float:
        with _fresh(tmp_path, "normal", name) as store:
            writer = store._e.writer
            if kind == "frame":   # one more Python call per event on the path
                writer._types_seen = _Seen(writer._types_seen)
            s = store.create_session(cwd="/cost")
            s.append_batch(batches[0])

            def appends() -> None:
                s.append_batch(batches[1])
                s.append_batch(batches[2])
            return _frames(appends) / 2000

    _frames_guard(measure, BATCH_FRAMES, kind, "batched event")


# Stored bytes per raw frame byte of three batches of 1000 (0.336 today): a
# batch's rows are compressed as they are written (zstd level 1), since no
# rewrite would compress them later -- a repack only merges small rows, and
# the schema lets a chunk row change only by growing over the rows after it
# (storage/schema.py, chunks_repack).  The plant stores the rows raw.
BATCH_STORED = 0.36


@pytest.mark.parametrize("kind", [None, "raw"])
def test_a_batch_is_stored_compressed(tmp_path, kind):
    batches = [timed(batch(1000, 30 + i, f"r{i}_")) for i in range(3)]

    def measure(kind: str | None, name: str) -> float:
        with _fresh(tmp_path, "normal", name) as store:
            if kind == "raw":
                store._e.writer._chunks = ChunkCompressor(None)
            s = store.create_session(cwd="/cost")
            for items in batches:
                s.append_batch(items)
            store.close()
        conn = apsw.Connection(str(tmp_path / f"{name}.db"))
        try:
            stored, raw = conn.execute(
                "SELECT sum(length(body)), sum(raw_len) FROM chunks").fetchone()
        finally:
            conn.close()
        return float(stored / raw)

    clean = measure(None, "a")
    assert clean <= BATCH_STORED, f"{clean} stored bytes per raw byte of a batch"
    if kind is not None:
        fails(lambda: _at_most(measure(kind, "b"), BATCH_STORED))
