"""Two stores on one file write the same session in turn: each must notice
the other's commits before it writes, whatever transaction of its own came
in between.  A store's writer caches each session's head; a transaction that
is not an append (an erasure, a memory write) used to consume the "another
connection committed" signal without telling the writer, whose next append
then started at a stale seq (a ConstraintError from the chunks trigger,
found by the API fuzzer)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog import Identity


def _erase(store: Any, sid: str) -> None:
    store.erase(sid, [0], reason="gdpr", actor="human:test")


def _remember(store: Any, sid: str) -> None:
    store.memory(Identity("acme", user="alice")).remember(
        "user", "preference", {"value": "dark"}, key="theme")


def _lease(store: Any, sid: str) -> None:
    with store.session(sid).lease():
        pass


@pytest.mark.parametrize("between", [_erase, _remember, _lease],
                         ids=["erase", "memory", "lease"])
def test_a_store_follows_the_other_stores_appends_across_its_own_transactions(
        tmp_path: Path, between: Callable[[Any, str], None]) -> None:
    path = str(tmp_path / "s.db")
    with trajlog.open(path, repack=False) as b, trajlog.open(path, repack=False) as c:
        sb = b.create_session()
        sb.append("user/message", {"content": "first"})
        sc = c.session(sb.id)
        sc.append("user/message", {"content": "from c"})       # c's writer caches seq 1
        for i in range(3):
            sb.append("user/message", {"content": f"from b {i}"})  # b moves the head to 4
        between(c, sb.id)                                        # c's own transaction
        event = sc.append("user/message", {"content": "c again"})
        assert event.seq == 5
        assert c.session(sb.id).verify().ok
        assert [e.seq for e in b.session(sb.id).events()] == list(range(6))
