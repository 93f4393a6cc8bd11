"""Deterministic counters of what a store's operations cost SQLite (the
guards in ``tests/cost/``): no clock anywhere, so they hold on a noisy machine.

:class:`Meter` hooks a store's write connection and the calling thread's
reader connection and counts, from the calling thread only, while it is on:

* ``statements``: top-level statement executions (SQLITE_TRACE_STMT; each row
  of an ``executemany`` is one), and per SQL text in ``by_sql``;
* ``triggers``: trigger programs entered (``TRIGGER name`` trace lines);
* ``vm_steps`` / ``fullscan_steps``: SQLite's own statement counters
  (``sqlite3_stmt_status``, triggers included), read at each statement's end;
* ``rows`` / ``bytes``: result rows returned, and the bytes of their text and
  blob values;
* ``pages``: page look-ups (page-cache hits + misses) of those connections;
* ``prepares``: apsw statement-cache misses (statements compiled anew);
* ``authorizer``: authorizer callbacks (SQLite calls it while it compiles or
  recompiles a statement), and per SQL text in ``auth_by_sql`` -- each
  callback is charged to the next top-level statement that starts, the one
  it was compiled for.

:func:`chunk_writes` counts the raw and stored bytes of every chunk row
written (inserted or updated), by a temporary trigger on the write connection:
whatever code path writes a row, it is counted.

The workloads are deterministic for a seed: :func:`small_turn` (tiny events,
for logs of 200k events built fast) and :func:`turns` (200-1200 B texts).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import apsw
import pytest

T0 = 1_700_000_000_000   # every event's time: the same bytes on every run
Event = tuple[str, dict[str, Any]]


@dataclass
class Cost:
    """What the operations inside one :meth:`Meter.window` cost."""

    statements: int = 0
    triggers: int = 0
    vm_steps: int = 0
    fullscan_steps: int = 0
    rows: int = 0
    bytes: int = 0
    pages: int = 0
    prepares: int = 0
    authorizer: int = 0
    by_sql: Counter[str] = field(default_factory=Counter)
    auth_by_sql: Counter[str] = field(default_factory=Counter)
    bindings: dict[str, Any] = field(default_factory=dict)   # first bindings of each SQL

    def counts(self) -> dict[str, int]:
        """The scalar counters (for messages and reports)."""
        return {k: v for k, v in vars(self).items() if isinstance(v, int)}

    def auth_per_execute(self) -> dict[str, float]:
        """Authorizer callbacks per execution of each statement."""
        return {sql: self.auth_by_sql[sql] / n for sql, n in self.by_sql.items()}


class Meter:
    """Counters over a store's connections (see the module docstring)."""

    def __init__(self, store: Any) -> None:
        backend = store._e.backend
        self.conns: list[apsw.Connection] = [backend.write_connection, backend.connection()]
        self._thread = threading.get_ident()
        self._on = False
        self._pending = 0   # authorizer calls not yet charged to a statement
        self.cost = Cost()
        self._auth: list[Any] = []
        for conn in self.conns:
            conn.trace_v2(apsw.SQLITE_TRACE_STMT | apsw.SQLITE_TRACE_ROW
                          | apsw.SQLITE_TRACE_PROFILE, self._trace, id=self)
            conn.row_trace = self._row
            conn.exec_trace = self._exec
            self._auth.append(conn.authorizer)
            conn.authorizer = self._wrap(conn.authorizer)

    def close(self) -> None:
        for conn, auth in zip(self.conns, self._auth, strict=True):
            conn.trace_v2(0, None, id=self)
            conn.row_trace = None
            conn.exec_trace = None
            conn.authorizer = auth

    def _mine(self) -> bool:
        return self._on and threading.get_ident() == self._thread

    def _wrap(self, auth: Callable[..., int] | None) -> Callable[..., int]:
        def counted(*args: Any) -> int:
            if self._mine():
                self.cost.authorizer += 1
                self._pending += 1
            return apsw.SQLITE_OK if auth is None else auth(*args)
        return counted

    def _trace(self, info: dict[str, Any]) -> None:
        if not self._mine():
            return
        code, cost = info["code"], self.cost
        if code == apsw.SQLITE_TRACE_STMT:
            if not info["trigger"]:
                cost.statements += 1
                cost.by_sql[info["sql"]] += 1
                cost.auth_by_sql[info["sql"]] += self._pending
                self._pending = 0
            elif info["sql"].startswith("TRIGGER "):
                cost.triggers += 1
        elif code == apsw.SQLITE_TRACE_ROW:
            cost.rows += 1
        elif code == apsw.SQLITE_TRACE_PROFILE:
            status = info["stmt_status"]
            cost.vm_steps += status["SQLITE_STMTSTATUS_VM_STEP"]
            cost.fullscan_steps += status["SQLITE_STMTSTATUS_FULLSCAN_STEP"]

    def _row(self, cursor: apsw.Cursor, row: Any) -> Any:
        if self._mine():
            self.cost.bytes += sum(len(v) for v in row if isinstance(v, (bytes, str)))
        return row

    def _exec(self, cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        if self._mine():
            self.cost.bindings.setdefault(sql.strip(), bindings)
        return True

    def _pages(self) -> int:
        return sum(c.status(apsw.SQLITE_DBSTATUS_CACHE_HIT)[0]
                   + c.status(apsw.SQLITE_DBSTATUS_CACHE_MISS)[0] for c in self.conns)

    def _misses(self) -> int:
        return sum(c.cache_stats()["misses"] for c in self.conns)

    @contextmanager
    def window(self) -> Iterator[Cost]:
        """Count what the block runs (the yielded :class:`Cost` fills as it goes)."""
        self.cost = cost = Cost()
        self._pending = 0
        pages, misses = self._pages(), self._misses()
        self._on = True
        try:
            yield cost
        finally:
            self._on = False
            cost.pages = self._pages() - pages
            cost.prepares = self._misses() - misses

    def measure(self, op: Callable[[int], Any], times: int = 1) -> Cost:
        """The cost of ``op(0) .. op(times - 1)``."""
        with self.window() as cost:
            for i in range(times):
                op(i)
        return cost


@contextmanager
def metered(store: Any) -> Iterator[Meter]:
    meter = Meter(store)
    try:
        yield meter
    finally:
        meter.close()


def traced(store: Any, act: Callable[[], Any]) -> list[str]:
    """The SQL statements ``act`` runs on this thread's reader connection, in order."""
    conn = store._e.backend.connection()
    seen: list[str] = []

    def trace(_cursor: Any, sql: str, _bindings: Any) -> bool:
        seen.append(sql)
        return True

    conn.exec_trace = trace
    try:
        act()
    finally:
        conn.exec_trace = None
    return seen


# -- query plans ------------------------------------------------------------------------

def plan(conn: apsw.Connection, sql: str, bindings: Any = None) -> list[str]:
    """The EXPLAIN QUERY PLAN lines of ``sql``."""
    return [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings)]


def scans(lines: list[str]) -> list[str]:
    """The lines of a plan that read a whole table or index (a virtual table's
    own index and a constant row are not scans of stored rows)."""
    return [line for line in lines if line.startswith("SCAN ") and "VIRTUAL TABLE" not in line
            and line != "SCAN CONSTANT ROW"]


def access(lines: list[str]) -> set[str]:
    """How each table of a plan is reached: ``"<table> USING <index>"`` of every
    SEARCH line (its column terms dropped), and every SCAN line whole."""
    out = set()
    for line in lines:
        if line.startswith("SEARCH "):
            out.add(line.split(" (")[0].removeprefix("SEARCH "))
        elif line.startswith("SCAN "):
            out.add(line)
    return out


# -- chunk rows written ------------------------------------------------------------------

@contextmanager
def chunk_writes(store: Any) -> Iterator[Callable[[], tuple[int, int, int]]]:
    """Count every chunk row the store's write connection inserts or updates;
    yields a function giving ``(rows, raw bytes, stored bytes)`` written so far.
    A temporary trigger does it (the store's authorizer refuses DDL: it is set
    aside for the two statements that make it)."""
    conn = store._e.backend.write_connection
    auth = conn.authorizer
    conn.authorizer = None
    try:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS cost_writes(raw INTEGER, stored INTEGER)")
        for op in ("INSERT", "UPDATE"):
            conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS cost_{op.lower()} AFTER {op} ON "
                         f"main.chunks BEGIN INSERT INTO cost_writes VALUES (NEW.raw_len, "
                         f"length(NEW.body)); END")
    finally:
        conn.authorizer = auth

    def written() -> tuple[int, int, int]:
        n, raw, stored = conn.execute("SELECT count(*), coalesce(sum(raw), 0), "
                                      "coalesce(sum(stored), 0) FROM temp.cost_writes"
                                      ).fetchall()[0]
        return int(n), int(raw), int(stored)
    yield written


# -- workloads ---------------------------------------------------------------------------

def small_turn(i: int) -> list[Event]:
    """One turn of 6 tiny events with one tool call (id ``c<i>``)."""
    cid = f"c{i}"
    return [("turn/start", {}), ("user/message", {"content": f"q{i}"}),
            ("assistant/message", {"content": "", "tool_calls": [{"id": cid, "name": "t"}]}),
            ("tool/call", {"call_id": cid, "name": "t"}),
            ("tool/result", {"call_id": cid, "output": f"r{i}"}),
            ("turn/end", {})]


_WORDS = ["the", "of", "and", "to", "in", "is", "for", "that", "with", "on", "as", "are",
          "this", "by", "be", "from", "at", "or", "an", "it", "was", "have", "not", "which",
          "read", "file", "grep", "test", "edit", "line", "path", "error", "value", "return"]


def _text(rng: random.Random, n: int) -> str:
    out, size = [], 0
    while size < n:
        word = rng.choice(_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:n]


def turns(n: int, seed: int = 7, tag: str = "t") -> list[Event]:
    """At least ``n`` events in whole turns: a user message, 1-3 tool calls
    with their results, a closing assistant message; texts of 100-1200 B."""
    rng = random.Random(seed)
    out: list[Event] = []
    t = 0
    while len(out) < n:
        user = _text(rng, rng.randint(200, 1200))
        out += [("turn/start", {}), ("user/message", {"content": user})]
        for k in range(rng.randint(1, 3)):
            cid = f"{tag}{t}_{k}"
            out += [("assistant/message", {"content": _text(rng, rng.randint(100, 600)),
                                           "tool_calls": [{"id": cid, "name": "read"}]}),
                    ("tool/call", {"call_id": cid, "name": "read"}),
                    ("tool/result", {"call_id": cid,
                                     "output": _text(rng, rng.randint(200, 1200))})]
        out += [("assistant/message", {"content": _text(rng, rng.randint(100, 600))}),
                ("turn/end", {})]
        t += 1
    return out


def batch(n: int, seed: int, tag: str) -> list[Event]:
    """Exactly ``n`` events: whole turns of :func:`turns`, then user messages
    outside a turn."""
    events = turns(n, seed, tag)
    ends = [i for i, (t, _) in enumerate(events[:n]) if t == "turn/end"]
    events = events[:ends[-1] + 1] if ends else []
    rng = random.Random(seed)
    return events + [("user/message", {"content": _text(rng, 400)})] * (n - len(events))


def timed(events: list[Event]) -> list[tuple[str, dict[str, Any], dict[str, int]]]:
    """``events`` as ``append_batch`` items, each at :data:`T0`."""
    return [(t, d, {"time": T0}) for t, d in events]


# -- a guard shown to fail ---------------------------------------------------------------

def tightest(limits: dict[str, Any], clean: dict[str, Any]) -> dict[str, Any]:
    """The limits a planted run must break: each at most what the same
    measurement gave without the plant (so that a plant is shown to be seen
    even after the work that lowers today's values, before the limits follow)."""
    return {k: min(v, clean[k]) for k, v in limits.items()}


def fails(check: Callable[[], None]) -> None:
    """``check`` -- a guard's assertions on a planted regression -- fails."""
    with pytest.raises(AssertionError):
        check()
