"""Hot statements are prepared once: a steady-state repeat of each memory and
event statement, with new bound values every time, prepares nothing again.

Why it matters: SQLite marks a statement to be compiled anew at every rebind
when a bound value might change its plan (``col = ? ... ORDER BY``, a bound
``LIMIT``, ``LIKE``, a partial index matched through a value).  Every memory
read was prepared again at every execute that way (a prepare costs tens of
microseconds, and runs the Python authorizer once per column it reads).  The
store's connections turn on the query planner stability guarantee
(``SQLITE_DBCONFIG_ENABLE_QPSG``), so no plan depends on a bound value.

The counter: every prepare of a statement -- the first one, or again after
an expiry -- asks the connection's authorizer about what the statement does
(at least one callback per statement).  A prepare that apsw's statement
cache cannot spare (a text that differs from call to call) is a cache miss.
So a repeat that prepares nothing makes no authorizer callback and no miss.
Deterministic counts, no timing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import apsw
import pytest

import trajlog
from trajlog import Identity
from trajlog.storage import sqlite as storage

SQLITE_CONN = "runs SQL on the SQLite backend's own connections"
pytestmark = pytest.mark.sqlite_only(reason=SQLITE_CONN)

WARM, REPEATS = 3, 10


class Prepares:
    """Authorizer callbacks (= prepares) and statement-cache misses on one
    connection while it is watched.  The store's own authorizer still
    decides every callback."""

    def __init__(self, conn: apsw.Connection,
                 counts: Callable[[tuple[Any, ...]], bool] = lambda _: True) -> None:
        self.conn, self.counts = conn, counts
        self.callbacks = 0
        self.actions: collections.Counter[tuple[Any, ...]] = collections.Counter()
        self._misses = 0

    def _authorize(self, *args: Any) -> int:
        if self.counts(args):
            self.callbacks += 1
            self.actions[args[:3]] += 1
        return self._inner(*args) if self._inner is not None else apsw.SQLITE_OK

    @contextmanager
    def watching(self) -> Iterator[Prepares]:
        self._inner = self.conn.authorizer
        self.conn.authorizer = self._authorize   # (expires every statement: warm up first)
        try:
            yield self
        finally:
            self.conn.authorizer = self._inner

    def start(self) -> None:
        self.callbacks = 0
        self.actions.clear()
        self._misses = self.conn.cache_stats()["misses"]

    @property
    def misses(self) -> int:
        return int(self.conn.cache_stats()["misses"]) - self._misses


def _not_fts(args: tuple[Any, ...]) -> bool:
    # FTS5 prepares statements of its own for each MATCH ... ORDER BY rank
    # (on its shadow tables); a plain FTS5 table does the same.  Only a
    # callback naming another table is a prepare of trajlog's statement.
    return args[1] is not None and not str(args[1]).startswith("memory_fts") and args[0] in (
        apsw.SQLITE_READ, apsw.SQLITE_INSERT, apsw.SQLITE_UPDATE, apsw.SQLITE_DELETE)


def steady(conn: apsw.Connection, op: Callable[[int], Any],
           counts: Callable[[tuple[Any, ...]], bool] = lambda _: True) -> Prepares:
    """Run ``op(i)`` with new values each time; count what the repeats after
    the warm-up prepare."""
    with Prepares(conn, counts).watching() as p:
        for i in range(WARM):
            op(i)
        p.start()
        for i in range(WARM, WARM + REPEATS):
            op(i)
    return p


@pytest.fixture
def filled(tmp_path):
    with trajlog.open(str(tmp_path / "s.db"), repack=False) as st:
        s = st.create_session(cwd="/repo")
        for k in range(4):
            s.append_batch([("turn/start", {}, {})]
                           + [("user/message", {"content": f"m{k}-{i}"},
                               {"idempotency_key": f"k{k}-{i}"}) for i in range(40)]
                           + [("turn/end", {}, {})])
        mem = st.memory(Identity("acme", user="alice"))
        items = [mem.remember("user", "fact", {"text": f"likes tea {i}"}, key=f"pref{i}")
                 for i in range(40)]
        yield st, s, mem, items


def _backend(st: Any) -> Any:
    return st._e.backend


def _reads(st: Any, s: Any, mem: Any, items: list[Any]) -> dict[str, Callable[[int], Any]]:
    r = _backend(st).reader()
    sid = r.session_by_id(s.id).sid
    tenant = mem.identity.tenant
    scopes = [("user", mem.identity.scope_key("user")), ("global", "")]
    states = ["provisional", "active", "quarantined"]
    digests = [r.memory_versions(item.id)[-1].digest for item in items]
    return {
        # memory
        "memory key look-up": lambda i: r.memory_current(tenant, scopes, None, states,
                                                         f"pref{i}", 2),
        "memory list": lambda i: r.memory_current(tenant, scopes, ["fact"], ["active"],
                                                  None, 5 + i),
        "memory versions": lambda i: r.memory_versions(items[i].id),
        "memory version": lambda i: r.memory_version(i + 1),
        "memory merge match": lambda i: r.memory_merge_match(digests[i], tenant, "user",
                                                             scopes[0][1], "fact", f"pref{i}"),
        "memory latest": lambda i: r.memory_latest(i, 5),
        "tombstone of an item": lambda i: r.tombstone_for_item(items[i].id),
        "tombstone of an event": lambda i: r.tombstone_for_event(sid, i),
        # events
        "session by id": lambda i: r.session_by_id(s.id),
        "head": lambda i: r.head(sid),
        "locate": lambda i: r.locate(sid, i * 7, True),
        "chunk at": lambda i: r.chunk_at(sid, i * 7),
        "chunks": lambda i: r.chunks(sid, i, i + 20, 4),
        "index rows": lambda i: r.index_rows(sid, i, i + 20),
        "idempotency key": lambda i: r.seq_of_idempotency_key(sid, f"k1-{i}"),
        "call requested": lambda i: r.call_requested(sid, f"call{i}"),
        "turn start at or before": lambda i: r.marker_at_or_before(sid, "turn/start", i * 9),
        "turn end after": lambda i: r.marker_after(sid, "turn/end", i * 9),
        "max seq": lambda i: r.max_seq(sid),
    }


READS = ["memory key look-up", "memory list", "memory versions", "memory version",
         "memory merge match", "memory latest", "tombstone of an item", "tombstone of an event",
         "session by id", "head", "locate", "chunk at", "chunks", "index rows",
         "idempotency key", "call requested", "turn start at or before", "turn end after",
         "max seq"]


@pytest.mark.parametrize("name", READS)
def test_statement_cache_hot_read_is_prepared_once(filled, name):
    st, s, mem, items = filled
    conn = _backend(st).connection()
    p = steady(conn, _reads(st, s, mem, items)[name])
    assert (p.callbacks, p.misses) == (0, 0), (
        f"{name}: {p.callbacks} authorizer callbacks and {p.misses} statement-cache misses "
        f"in {REPEATS} repeats -- prepared again ({p.actions.most_common(4)})")


def test_statement_cache_memory_search_is_prepared_once(filled):
    st, _s, mem, _items = filled
    conn = _backend(st).connection()
    p = steady(conn, lambda i: mem.search(f"tea {i}", limit=5 + i), _not_fts)
    assert (p.callbacks, p.misses) == (0, 0), p.actions.most_common(4)


def test_statement_cache_memory_get_and_find_are_prepared_once(filled):
    st, _s, mem, items = filled
    conn = _backend(st).connection()
    p = steady(conn, lambda i: (mem.get(items[i].id), mem.find("user", f"pref{i}")))
    assert (p.callbacks, p.misses) == (0, 0), p.actions.most_common(4)


@pytest.mark.parametrize("write", ["single append", "batch append", "remember",
                                   "remember_many"])
def test_statement_cache_hot_write_is_prepared_once(filled, write):
    st, s, mem, _items = filled
    ops: dict[str, Callable[[int], Any]] = {
        "single append": lambda i: s.append("user/message", {"content": f"w{i}"}),
        "batch append": lambda i: s.append_batch(
            [("user/message", {"content": f"b{i}-{k}"}, {}) for k in range(10)]),
        "remember": lambda i: mem.remember("user", "fact", {"text": f"new {i}"},
                                           key=f"new{i}"),
        "remember_many": lambda i: mem.remember_many(
            [{"scope": "user", "type": "fact", "content": {"text": f"many {i} {k}"}}
             for k in range(5)]),
    }
    p = steady(_backend(st).write_connection, ops[write], _not_fts)
    assert (p.callbacks, p.misses) == (0, 0), p.actions.most_common(4)


def test_statement_cache_every_connection_has_the_stability_guarantee(filled):
    st, *_ = filled
    b = _backend(st)
    for conn in (b.connection(), b.write_connection,
                 storage.open_connection(st.path, migrations=True)):
        assert conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, -1) == 1


def test_statement_cache_the_counter_sees_a_statement_prepared_again(filled):
    """The guard can fail: without the stability guarantee, the memory key
    look-up is compiled anew at every rebind, and the counter sees it."""
    st, s, mem, items = filled
    conn = _backend(st).connection()
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 0)
    try:
        p = steady(conn, _reads(st, s, mem, items)["memory key look-up"])
    finally:
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
    assert p.misses == 0                     # apsw's cache hits every time...
    assert p.callbacks >= REPEATS * 10       # ...and SQLite prepares it again each time
