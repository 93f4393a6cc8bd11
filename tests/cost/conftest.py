"""The logs the size-ratio guards compare: whole turns of tiny events written
in batches (a 200k-event log builds in about a second)."""

from __future__ import annotations

from pathlib import Path

import pytest

import trajlog
from kits.costkit import Event, small_turn, timed

SIZES = (1_000, 2_000, 100_000, 200_000)


def build(path: Path, n: int) -> tuple[str, list[int]]:
    """A log of ``n`` events (whole turns, the last one cut to fit) written in
    batches of 996; its id and the seq of every turn end."""
    events: list[Event] = []
    i = 0
    while len(events) < n:
        events += small_turn(i)
        i += 1
    events = events[:n]
    with trajlog.open(str(path), durability="normal", repack=False) as store:
        s = store.create_session(cwd="/cost")
        for k in range(0, n, 996):   # (166 whole turns a batch)
            s.append_batch(timed(events[k:k + 996]))
        return s.id, [k for k, (t, _) in enumerate(events) if t == "turn/end"]


@pytest.fixture(scope="session")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, str, list[int]]]:
    """``{n: (path, session id, turn-end seqs)}`` for each of :data:`SIZES`."""
    root = tmp_path_factory.mktemp("cost")
    out = {}
    for n in SIZES:
        path = root / f"log{n}.db"
        out[n] = (path, *build(path, n))
    return out
