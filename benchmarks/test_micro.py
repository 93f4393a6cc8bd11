"""Micro-benchmarks of the hot paths, under pytest-benchmark.

    python -m pytest benchmarks/test_micro.py --benchmark-only
    python -m pytest benchmarks/test_micro.py --benchmark-only --benchmark-json=out.json
    python -m pytest benchmarks/test_micro.py --benchmark-only --benchmark-autosave
    python -m pytest benchmarks/test_micro.py --benchmark-only --benchmark-compare

(The normal suite does not collect this file: ``testpaths`` is ``tests``.)

* encode -- ``encode_event`` of a 1,000-event batch of the benchmark workload
  (the payloads), and ``encode_chunks`` of those payloads: framing (one kernel
  call), cutting into rows of at most 64 KiB, zstd of the large ones.
* scan -- one stored 64 KiB chunk row of workload frames: ``open_chunk``
  (body check, decompression, kernel scan of every frame and the chain), and
  the kernel scan alone of its raw body.
* append -- one ``append`` and one ``append_batch`` of 1,000 workload events,
  each round on a fresh store (``durability="normal"``: the commit's fsync
  would otherwise be most of what is timed; ``repack=False``: no background
  work) whose session already holds one event, so the first append's
  one-time set-up is not timed.
* read -- a session of 10,000 workload events: ``events()`` eager and
  ``lazy=True`` (the chunk cache cleared before each round), ``get(seq)``
  with its row in the chunk cache (warm) and with the cache cleared (cold).
* fold -- ``projections.model_history`` from scratch on that session: no
  state in memory (``store._e.views.states`` cleared) and none saved
  (``projections.rebuild``) before each round.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trajlog
import workload
from trajlog import projections
from trajlog.codec import session_key, start_cursor
from trajlog.codec.chunks import ZSTD, Chunk, ChunkCompressor, open_chunk
from trajlog.codec.frames import _kernel
from trajlog.codec.records import encode_chunks
from trajlog.events import Event, encode_event

T0 = 1_767_225_600_000   # fixed event times: 2026-01-01
BATCH = 1_000
SESSION_EVENTS = 10_000


@pytest.fixture(scope="module")
def events() -> list[tuple[str, dict[str, Any]]]:
    return workload.events(SESSION_EVENTS)


@pytest.fixture(scope="module")
def batch(events: list[tuple[str, dict[str, Any]]]) -> list[Event]:
    return [Event(t, T0 + i, d) for i, (t, d) in enumerate(events[:BATCH])]


@pytest.fixture(scope="module")
def payloads(batch: list[Event]) -> list[bytes]:
    return [encode_event(ev) for ev in batch]


@pytest.fixture(scope="module")
def key() -> int:
    return session_key(uuid.UUID(int=1))


@pytest.fixture(scope="module")
def full_row(key: int, payloads: list[bytes]) -> Chunk:
    """A compressed row of the batch, at the 64 KiB cap, with the most frames."""
    rows, _ = encode_chunks(key, payloads, start_cursor(key), ChunkCompressor())
    full = [r for r in rows if r.codec == ZSTD and r.raw_len >= 60 * 1024]
    assert full, "no 64 KiB row in the batch"
    return max(full, key=lambda r: r.n)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory,
            events: list[tuple[str, dict[str, Any]]]) -> Iterator[trajlog.Session]:
    """A store holding one session of SESSION_EVENTS workload events, repacked."""
    path = tmp_path_factory.mktemp("micro") / "read.db"
    with trajlog.open(str(path), durability="normal", repack=False) as store:
        s = store.create_session(cwd="/bench")
        for start in range(0, len(events), BATCH):
            s.append_batch([(t, d, {"time": T0 + start + i})
                            for i, (t, d) in enumerate(events[start:start + BATCH])])
        store.repack(s.id)
        assert s.verify().ok
        yield s


# -- encode -------------------------------------------------------------------------------

@pytest.mark.benchmark(group="encode")
def test_encode_payloads(benchmark: Any, batch: list[Event]) -> None:
    out = benchmark(lambda: [encode_event(ev) for ev in batch])
    assert len(out) == BATCH


@pytest.mark.benchmark(group="encode")
def test_encode_chunks(benchmark: Any, key: int, payloads: list[bytes]) -> None:
    compressor = ChunkCompressor()
    cursor = start_cursor(key)
    rows, end = benchmark(encode_chunks, key, payloads, cursor, compressor)
    assert sum(r.n for r in rows) == BATCH and end.next_seq == BATCH


# -- scan ---------------------------------------------------------------------------------

@pytest.mark.benchmark(group="scan")
def test_scan_open_chunk(benchmark: Any, key: int, full_row: Chunk) -> None:
    compressor = ChunkCompressor()
    opened = benchmark(open_chunk, key, full_row, compressor)
    assert isinstance(opened, tuple) and len(opened[1]) == full_row.n


@pytest.mark.benchmark(group="scan")
def test_scan_kernel(benchmark: Any, key: int, full_row: Chunk) -> None:
    opened = open_chunk(key, full_row, ChunkCompressor())
    assert isinstance(opened, tuple)
    raw = bytes(opened[0])
    kernel = _kernel(None)
    cursor = start_cursor(key)._replace(next_seq=full_row.first_seq, chain=full_row.seed_chain)
    _status, table, end, _hints = benchmark(kernel.scan_table, raw, key, cursor, full_row.n)
    assert len(table) == full_row.n and end.chain == full_row.last_chain


# -- append -------------------------------------------------------------------------------

class FreshStores:
    """A fresh store per round: a session holding one event already."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0

    def setup(self) -> tuple[tuple[trajlog.Store, trajlog.Session], dict[str, Any]]:
        self.count += 1
        store = trajlog.open(str(self.root / f"append{self.count}.db"), durability="normal",
                             repack=False)
        s = store.create_session(cwd="/bench")
        s.append("user/message", {"content": "warm-up"}, time=T0)
        return (store, s), {}

    def teardown(self, store: trajlog.Store, s: trajlog.Session) -> None:
        store.close()
        for p in self.root.glob(f"append{self.count}.db*"):
            p.unlink()


@pytest.mark.benchmark(group="append")
def test_append_single(benchmark: Any, tmp_path: Path,
                       events: list[tuple[str, dict[str, Any]]]) -> None:
    stores = FreshStores(tmp_path)
    t, d = events[1]   # a user/message

    def append(store: trajlog.Store, s: trajlog.Session) -> Event:
        return s.append(t, d, time=T0 + 1)

    ev = benchmark.pedantic(append, setup=stores.setup, teardown=stores.teardown, rounds=100,
                            warmup_rounds=3)
    assert ev.seq == 1


@pytest.mark.benchmark(group="append")
def test_append_batch(benchmark: Any, tmp_path: Path,
                      events: list[tuple[str, dict[str, Any]]]) -> None:
    stores = FreshStores(tmp_path)
    items = [(t, d, {"time": T0 + 1 + i}) for i, (t, d) in enumerate(events[:BATCH])]

    def append(store: trajlog.Store, s: trajlog.Session) -> list[Event]:
        return s.append_batch(items)

    out = benchmark.pedantic(append, setup=stores.setup, teardown=stores.teardown, rounds=20,
                             warmup_rounds=1)
    assert len(out) == BATCH and out[-1].seq == BATCH


# -- read ---------------------------------------------------------------------------------

def _cold(s: trajlog.Session) -> None:
    s._e.reading.cache.clear()


@pytest.mark.benchmark(group="read")
def test_read_events_eager(benchmark: Any, session: trajlog.Session) -> None:
    def read() -> int:
        return sum(1 for _ in session.events())

    count = benchmark.pedantic(read, setup=lambda: _cold(session), rounds=15, warmup_rounds=1)
    assert count == SESSION_EVENTS


@pytest.mark.benchmark(group="read")
def test_read_events_lazy(benchmark: Any, session: trajlog.Session) -> None:
    def read() -> int:
        return sum(1 for _ in session.events(lazy=True))

    count = benchmark.pedantic(read, setup=lambda: _cold(session), rounds=15, warmup_rounds=1)
    assert count == SESSION_EVENTS


@pytest.mark.benchmark(group="read")
def test_read_get_warm(benchmark: Any, session: trajlog.Session) -> None:
    seq = SESSION_EVENTS // 2 + 1
    session.get(seq)   # its row is in the chunk cache from now on
    ev = benchmark(session.get, seq)
    assert ev.seq == seq


@pytest.mark.benchmark(group="read")
def test_read_get_cold(benchmark: Any, session: trajlog.Session) -> None:
    seq = SESSION_EVENTS // 2 + 1
    ev = benchmark.pedantic(session.get, args=(seq,), setup=lambda: _cold(session),
                            rounds=200, warmup_rounds=5)
    assert ev.seq == seq


# -- fold ---------------------------------------------------------------------------------

@pytest.mark.benchmark(group="fold")
def test_fold_model_history(benchmark: Any, session: trajlog.Session) -> None:
    def scratch() -> None:
        session._e.views.states.clear()   # no state in memory
        projections.rebuild(session)      # and none saved

    history = benchmark.pedantic(projections.model_history, args=(session,), setup=scratch,
                                 rounds=10, warmup_rounds=1)
    assert history
