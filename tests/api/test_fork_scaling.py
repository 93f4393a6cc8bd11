"""A fork, and the first write after a store is reopened, cost the same
whatever the parent's length -- and still refuse exactly what they refused.

The cost is asserted as a shape, not a time: every SQL statement, every
result row and every database page the store's connections run, return and
touch while a freshly reopened store forks a long log at a cut and appends
the child's first events (and while it appends to the long log itself) is
counted, at 2k and at 200k events.  A fork that reads its parent's prefix
to rebuild the write path's state reads ~100x more rows at 200k (one chunk
row per 1000 events of the prefix); a look-up that scans an index instead of
seeking in it touches ~100x more pages.

The rest checks that the state a write starts from -- open turn and step,
open and finished tool calls, the redaction pause -- is still exact at a cut
after a reopen, and that a store of the previous schema migrates to the
index these look-ups use.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import trajlog
from kits.costkit import small_turn as turn
from trajlog import errors
from trajlog.storage.schema import SCHEMA_VERSION

SQLITE_BYTES = "reads or damages the SQLite file's bytes"
SQLITE_CONN = "runs SQL on the SQLite backend's own connections"
SQLITE_MIGRATE = "migrates a SQLite file of an older trajlog"

SMALL, LARGE = 2_000, 200_000
CUTS = (0.1, 0.3, 0.5, 0.7, 0.9)   # where the forks cut, as fractions of the log


def build(path: Path, n: int) -> tuple[str, list[int]]:
    """A log of ``n`` events (whole turns) written in batches of 1000; its id
    and the seq of every turn end."""
    events: list[tuple[str, dict[str, Any]]] = []
    i = 0
    while len(events) < n:
        events += turn(i)
        i += 1
    with trajlog.open(str(path), durability="normal", repack=False) as store:
        s = store.create_session(cwd="/scale")
        for k in range(0, len(events), 996):   # whole turns per batch
            s.append_batch(events[k:k + 996])
        ends = [k for k, (t, _) in enumerate(events) if t == "turn/end"]
        return s.id, ends


class Counter:
    """Statements and result rows of every connection opened while it is
    installed (``apsw.connection_hooks``), counted while ``on``, and the
    pages they looked up (page cache hits and misses)."""

    def __init__(self) -> None:
        self.on = False
        self.statements = 0
        self.rows = 0
        self.conns: list[apsw.Connection] = []

    def pages(self) -> int:
        total = 0
        for conn in self.conns:
            try:
                total += (conn.status(apsw.SQLITE_DBSTATUS_CACHE_HIT)[0]
                          + conn.status(apsw.SQLITE_DBSTATUS_CACHE_MISS)[0])
            except apsw.ConnectionClosedError:
                continue
        return total

    def trace(self, info: dict[str, Any]) -> None:
        if not self.on:
            return
        if info["code"] == apsw.SQLITE_TRACE_STMT:
            self.statements += 1
        elif info["code"] == apsw.SQLITE_TRACE_ROW:
            self.rows += 1

    def hook(self, conn: apsw.Connection) -> None:
        self.conns.append(conn)
        conn.trace_v2(apsw.SQLITE_TRACE_STMT | apsw.SQLITE_TRACE_ROW, self.trace, id=self)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, str, list[int]]]:
    root = tmp_path_factory.mktemp("scaling")
    out = {}
    for n in (SMALL, LARGE):
        path = root / f"parent{n}.db"
        sid, ends = build(path, n)
        out[n] = (path, sid, ends)
    return out


@pytest.fixture
def counter() -> Iterator[Counter]:
    c = Counter()
    apsw.connection_hooks.append(c.hook)
    try:
        yield c
    finally:
        apsw.connection_hooks.remove(c.hook)


def first_events(tag: str) -> list[tuple[str, dict[str, Any]]]:
    cid = f"fresh-{tag}"
    return [("turn/start", {}),
            ("assistant/message", {"content": "", "tool_calls": [{"id": cid, "name": "t"}]}),
            ("tool/call", {"call_id": cid, "name": "t"}),
            ("tool/result", {"call_id": cid, "output": "ok"}), ("turn/end", {})]


Cost = tuple[int, int, int]   # statements, rows, pages


def fork_cost(counter: Counter, path: Path, sid: str, cut: int) -> Cost:
    """What one fork at ``cut`` and the child's first append cost, on a
    store just reopened (the parent's state cached nowhere)."""
    with trajlog.open(str(path), repack=False) as store:
        parent = store.session(sid)
        counter.statements = counter.rows = 0
        pages = counter.pages()
        counter.on = True
        child = parent.fork(cut)
        child.append_batch(first_events(f"{cut}"))
        counter.on = False
        assert child.header.seed_length == cut + 1
        return counter.statements, counter.rows, counter.pages() - pages


def append_cost(counter: Counter, path: Path, sid: str, tag: str) -> Cost:
    """What the first append to the long log itself costs after a reopen."""
    with trajlog.open(str(path), repack=False) as store:
        s = store.session(sid)
        counter.statements = counter.rows = 0
        pages = counter.pages()
        counter.on = True
        s.append_batch(first_events(tag))
        counter.on = False
        return counter.statements, counter.rows, counter.pages() - pages


def same_shape(cost: dict[int, list[Cost]]) -> None:
    """The median cost at 200k is the one at 2k: the same statements and
    rows, and the pages of b-trees one or two levels deeper (a scan of the
    prefix, or of an index, is ~100x)."""
    small = [statistics.median(c[i] for c in cost[SMALL]) for i in (0, 1, 2)]
    large = [statistics.median(c[i] for c in cost[LARGE]) for i in (0, 1, 2)]
    assert large[0] <= small[0] + 2, (small, large, cost)
    assert large[1] <= small[1] + 2, (small, large, cost)
    assert large[2] <= small[2] * 1.5 + 20, (small, large, cost)


def test_fork_and_first_append_cost_the_same_at_2k_and_200k(logs, counter):
    cost: dict[int, list[Cost]] = {}
    for n, (path, sid, ends) in logs.items():
        cuts = [ends[int(f * (len(ends) - 1))] for f in CUTS]
        cost[n] = [fork_cost(counter, path, sid, cut) for cut in cuts]
    same_shape(cost)


def test_first_append_after_a_reopen_costs_the_same_at_2k_and_200k(logs, counter):
    same_shape({n: [append_cost(counter, path, sid, f"own{k}") for k in range(3)]
                for n, (path, sid, _) in logs.items()})


def subagent_cost(counter: Counter, path: Path, sid: str, seeded: bool) -> Cost:
    """What a subagent costs -- spawned, or forked up to the last completed
    turn -- with its first append, on a store just reopened: the parent's
    sandbox settings (none here) and last turn end are index look-ups."""
    with trajlog.open(str(path), repack=False) as store:
        parent = store.session(sid)
        counter.statements = counter.rows = 0
        pages = counter.pages()
        counter.on = True
        child = (parent.fork_subagent if seeded else parent.spawn_subagent)("task")
        child.append_batch(first_events("sub"))
        counter.on = False
        return counter.statements, counter.rows, counter.pages() - pages


@pytest.mark.parametrize("seeded", [False, True], ids=["spawned", "forked"])
def test_a_subagent_costs_the_same_at_2k_and_200k(logs, counter, seeded):
    same_shape({n: [subagent_cost(counter, path, sid, seeded) for _ in range(3)]
                for n, (path, sid, _) in logs.items()})


@pytest.mark.sqlite_only(reason=SQLITE_CONN)
def test_marker_look_ups_seek_their_partial_index(tmp_path):
    """Every marker look-up names its partial index's condition and pins it
    (without it SQLite walks the session's index rows back to the last
    match: the whole log for a type the log does not hold)."""
    from trajlog.storage import statements

    with trajlog.open(str(tmp_path / "q.db")) as store:
        conn = store._e.backend.connection()
        traced: list[str] = []
        conn.trace_v2(apsw.SQLITE_TRACE_STMT,
                      lambda info: traced.append(info["sql"]), id="plan")
        for type_ in ("turn/start", "turn/end", "sandbox/mode", "redaction/paused",
                      "redaction/resumed"):
            traced.clear()
            statements.marker_at_or_before(conn, 1, type_, 10)
            statements.marker_after(conn, 1, type_, 10)
            for sql in traced:
                plan = " ".join(str(r[3]) for r in conn.execute(
                    "EXPLAIN QUERY PLAN " + sql, (1 << 32, (1 << 32) + 10)))
                assert "USING COVERING INDEX event_index_" in plan and "type=?" in plan, (
                    type_, plan)
        conn.trace_v2(0, None, id="plan")


# --- what the first write of a fork refuses, after a reopen --------------------------

@pytest.fixture
def long_log(tmp_path: Path) -> tuple[Path, str, dict[str, int]]:
    """A log where call ``early`` was requested in the first turn and never
    started, ``started`` was started in the second and never answered, then
    many turns (with their own calls) pass; marks name useful seqs."""
    path = tmp_path / "long.db"
    seqs: dict[str, int] = {}
    with trajlog.open(str(path), repack=False) as store:
        s = store.create_session(cwd="/r")
        s.append_batch([("turn/start", {}),
                        ("assistant/message", {"tool_calls": [{"id": "early", "name": "t"}]}),
                        ("turn/end", {}),
                        ("turn/start", {}),
                        ("assistant/message", {"tool_calls": [{"id": "started", "name": "t"}]}),
                        ("tool/call", {"call_id": "started", "name": "t"}),
                        ("turn/end", {})])
        for k in range(0, 3000, 600):
            s.append_batch([e for i in range(k, k + 600, 6) for e in turn(i)])
        seqs["cut"] = s.last_seq
        s.append_batch(turn(99_999))
        seqs["after"] = s.last_seq
        sid = s.id
    return path, sid, seqs


def reopened_fork(path: Path, sid: str, cut: int) -> tuple[trajlog.Store, trajlog.Session]:
    store = trajlog.open(str(path), repack=False)
    return store, store.session(sid).fork(cut)


@pytest.mark.parametrize("events, refusal", [
    # a call id used anywhere in the prefix (finished long ago) cannot be requested again
    ([("turn/start", {}), ("assistant/message", {"tool_calls": [{"id": "c6", "name": "t"}]})],
     "already used"),
    ([("assistant/message", {"tool_calls": [{"id": "early", "name": "t"}]})], "already used"),
    # a finished call is not answered twice, nor started again
    ([("tool/result", {"call_id": "c12", "output": "again"})], "already finished"),
    ([("tool/call", {"call_id": "c12", "name": "t"})], "already started"),
    # a requested call never started cannot be answered (except by a synthetic closer)
    ([("tool/result", {"call_id": "early", "output": "x"})], "requested but never started"),
    # a started call is not started again
    ([("tool/call", {"call_id": "started", "name": "t"})], "already started"),
    # an id the log never mentioned cannot be started or answered
    ([("tool/call", {"call_id": "nobody", "name": "t"})], "never requested"),
    # no turn is open at a cut after a turn end
    ([("turn/end", {})], "no turn is open"),
    ([("step/start", {})], "inside a turn"),
])
def test_a_forks_first_write_refuses_what_the_prefix_forbids(long_log, events, refusal):
    path, sid, seqs = long_log
    store, child = reopened_fork(path, sid, seqs["cut"])
    with store:
        before = child.last_seq
        with pytest.raises(errors.ValidationError, match=refusal):
            child.append_batch(events)
        assert child.last_seq == before


@pytest.mark.parametrize("events", [
    [("tool/call", {"call_id": "early", "name": "t"}),
     ("tool/result", {"call_id": "early", "output": "late"})],
    [("tool/result", {"call_id": "started", "output": "late"})],
    [("tool/result", {"call_id": "early", "output": "closed", "synthetic": True})],
    # the parent's id used only after the cut is free in the fork
    [("assistant/message", {"tool_calls": [{"id": "c99999", "name": "t"}]})],
    [("turn/start", {}), ("step/start", {}), ("step/end", {}), ("turn/end", {})],
])
def test_a_forks_first_write_takes_what_the_prefix_left_open(long_log, events):
    path, sid, seqs = long_log
    store, child = reopened_fork(path, sid, seqs["cut"])
    with store:
        child.append_batch(events)
        # and the state it moved to holds on the next write, across another reopen
    with trajlog.open(str(path), repack=False) as store:
        again = store.session(child.id)
        last = events[-1]
        if last[0] == "tool/result":
            with pytest.raises(errors.ValidationError, match="already finished"):
                again.append("tool/result", {"call_id": last[1]["call_id"], "output": "x"})
        if last[0] == "assistant/message":
            with pytest.raises(errors.ValidationError, match="already used"):
                again.append("assistant/message",
                              {"tool_calls": [{"id": "c99999", "name": "t"}]})


def test_the_long_log_itself_after_a_reopen_refuses_and_takes_the_same(long_log):
    path, sid, _ = long_log
    with trajlog.open(str(path), repack=False) as store:
        s = store.session(sid)
        with pytest.raises(errors.ValidationError, match="already used"):
            s.append("assistant/message", {"tool_calls": [{"id": "c99999", "name": "t"}]})
        with pytest.raises(errors.ValidationError, match="already finished"):
            s.append("tool/result", {"call_id": "c6", "output": "x"})
        s.append("tool/call", {"call_id": "early", "name": "t"})
        s.append("tool/result", {"call_id": "started", "output": "late"})
    with trajlog.open(str(path), repack=False) as store:
        s = store.session(sid)
        s.append("tool/result", {"call_id": "early", "output": "late"})
        with pytest.raises(errors.ValidationError, match="already finished"):
            s.append("tool/result", {"call_id": "started", "output": "twice"})


def test_a_fork_inside_an_open_step_outside_turns_and_of_a_fork(tmp_path):
    """Cuts outside any turn, and a fork of a fork cut inside its inherited
    prefix, after reopens: the turn state and the calls at the cut hold."""
    path = tmp_path / "s.db"
    with trajlog.open(str(path), repack=False) as store:
        p = store.create_session(cwd="/r")
        p.append_batch([("assistant/message", {"tool_calls": [{"id": "a", "name": "t"}]}),
                        ("user/message", {"content": "no turn"})])
        p.append_batch([e for i in range(50) for e in turn(i)])
        pid = p.id
    with trajlog.open(str(path), repack=False) as store:
        child = store.session(pid).fork(1)      # outside any turn: cut right there
        assert child.header.seed_length == 2
        with pytest.raises(errors.ValidationError, match="no turn is open"):
            child.append("turn/end", {})
        child.append("tool/call", {"call_id": "a", "name": "t"})
        child.append_batch(turn(7))             # c7 is the parent's after the cut: free
        cid = child.id
    with trajlog.open(str(path), repack=False) as store:
        child = store.session(cid)
        grandchild = child.fork(0)              # cut inside the child's inherited prefix
        with pytest.raises(errors.ValidationError, match="already used"):
            grandchild.append("assistant/message", {"tool_calls": [{"id": "a", "name": "t"}]})
        grandchild.append("tool/call", {"call_id": "a", "name": "t"})
        great = child.fork(child.last_seq)      # after the child's own turn
        with pytest.raises(errors.ValidationError, match="already used"):
            great.append("assistant/message", {"tool_calls": [{"id": "c7", "name": "t"}]})
        with pytest.raises(errors.ValidationError, match="already started"):
            great.append("tool/call", {"call_id": "a", "name": "t"})
        great.append("tool/result", {"call_id": "a", "output": "done"})


def test_a_fork_of_a_paused_log_after_a_reopen_starts_paused(tmp_path):
    path = tmp_path / "p.db"
    with trajlog.open(str(path), repack=False) as store:
        p = store.create_session(cwd="/r")
        p.append_batch([e for i in range(100) for e in turn(i)])
        p.append("redaction/paused", {"reason": "test", "events": []})
        cut = p.last_seq                        # outside any turn: cut right there
        p.append("redaction/resumed", {})
        p.append_batch([e for i in range(100, 300) for e in turn(i)])
        pid = p.id
    with trajlog.open(str(path), repack=False) as store:
        p = store.session(pid)
        paused = p.fork(cut)
        free = p.fork(p.last_seq)
        assert [e.type for e in paused.events()][-1] == "redaction/paused"
        assert [e.type for e in free.events()][-1] == "turn/end"
        with pytest.raises(errors.RedactionPausedError):
            paused.append("user/message", {"content": "go on"})
        free.append("user/message", {"content": "go on"})
        # the parent itself, reopened after its resume, takes content
        p.append("user/message", {"content": "go on"})
    with trajlog.open(str(path), repack=False) as store, pytest.raises(
            errors.RedactionPausedError):
        store.session(paused.id).append("user/message", {"content": "go on"})


# --- the call and pause index: verified, and made for stores of schema 6 ---------------

def _downgrade_to_v6(path: Path) -> None:
    """Make ``path`` what trajlog with schema 6 wrote: no call index, no pause
    index, no index rows for pause events."""
    conn = apsw.Connection(str(path))
    guard = conn.execute("SELECT sql FROM sqlite_schema WHERE name = "
                         "'event_index_no_delete'").fetchall()[0][0]
    conn.execute("DROP TABLE call_index; DROP INDEX event_index_pauses; "
                 "DROP TRIGGER event_index_no_delete; "
                 "DELETE FROM event_index WHERE type IN ('redaction/paused', "
                 "'redaction/resumed'); DROP TRIGGER sessions_not_under_deleted; "
                 "DROP TABLE deleted_sessions;")
    conn.execute(guard)
    conn.execute("PRAGMA user_version = 6")
    conn.close()


def _index_copies(path: Path) -> tuple[list[Any], list[Any]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        calls = conn.execute("SELECT sid, call_id, seq FROM call_index ORDER BY 1, 2").fetchall()
        pauses = conn.execute("SELECT rid, type FROM event_index WHERE type LIKE "
                              "'redaction/%' ORDER BY rid").fetchall()
        return calls, pauses
    finally:
        conn.close()


@pytest.mark.sqlite_only(reason=SQLITE_MIGRATE)
def test_a_schema_6_store_migrates_to_the_call_and_pause_index(tmp_path):
    path = tmp_path / "old.db"
    with trajlog.open(str(path), repack=False) as store:
        p = store.create_session(cwd="/r")
        p.append_batch([e for i in range(300) for e in turn(i)])
        p.append("assistant/message", {"tool_calls": [{"id": "open", "name": "t"}]})
        p.append("redaction/paused", {"reason": "test", "events": []})
        cut = p.last_seq
        p.append("redaction/resumed", {})
        child = p.fork(cut)                         # starts paused (its own copy)
        child.append("redaction/resumed", {})
        child.append_batch(turn(5000))
        pid, cid = p.id, child.id
    expected = _index_copies(path)
    assert len(expected[0]) == 300 + 1 + 1 and len(expected[1]) == 4
    _downgrade_to_v6(path)
    with trajlog.open(str(path), repack=False) as store:
        assert _index_copies(path) == expected
        p = store.session(pid)
        assert p.verify().ok and store.session(cid).verify().ok
        # the first writes after the migration decide from the new index
        with pytest.raises(errors.ValidationError, match="already used"):
            p.append("assistant/message", {"tool_calls": [{"id": "c7", "name": "t"}]})
        paused = p.fork(cut)
        with pytest.raises(errors.RedactionPausedError):
            paused.append("user/message", {"content": "x"})
        p.append("tool/call", {"call_id": "open", "name": "t"})
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION
    conn.close()


@pytest.mark.sqlite_only(reason=SQLITE_BYTES)
def test_verify_finds_a_call_row_removed_changed_or_added(tmp_path):
    path = tmp_path / "v.db"
    with trajlog.open(str(path), repack=False) as store:
        s = store.create_session(cwd="/r")
        s.append_batch([e for i in range(20) for e in turn(i)])
        sid = s._sid
        sessid = s.id
    damage = ["DELETE FROM call_index WHERE call_id = 'c3'",
              "UPDATE call_index SET seq = seq + 1 WHERE call_id = 'c4'",
              "INSERT INTO call_index VALUES ({sid}, 'forged', 5)"]
    for sql in damage:
        copy = tmp_path / f"d{damage.index(sql)}.db"
        copy.write_bytes(path.read_bytes())
        conn = apsw.Connection(str(copy))
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
        conn.execute(sql.format(sid=sid))
        conn.close()
        with trajlog.open(str(copy), repack=False) as store:
            report = store.session(sessid).verify()
            assert not report.ok, sql
            assert "call row" in report.scan.reason, (sql, report.scan.reason)


@pytest.mark.sqlite_only(reason=SQLITE_BYTES)
def test_a_call_row_is_never_changed_or_removed_and_a_forged_one_is_found(tmp_path):
    """Triggers refuse any change or removal of a call row; a row forged
    beside the log (no insert trigger guards it: it would cost every append
    that requests a call) is found by verify."""
    path = tmp_path / "g.db"
    with trajlog.open(str(path), repack=False) as store:
        s = store.create_session(cwd="/r")
        s.append_batch([e for i in range(3) for e in turn(i)])
        sid, sessid = s._sid, s.id
    conn = apsw.Connection(str(path))
    for sql in (f"UPDATE call_index SET seq = 3 WHERE sid = {sid}",
                f"DELETE FROM call_index WHERE sid = {sid}"):
        with pytest.raises(apsw.ConstraintError, match="trajlog: call rows"):
            conn.execute(sql)
    with pytest.raises(apsw.ConstraintError):
        conn.execute(f"INSERT INTO call_index VALUES ({sid}, 'c1', 17)")   # the key
    for sql in (f"INSERT OR REPLACE INTO call_index VALUES ({sid}, 'c1', 17)",
                f"INSERT INTO call_index VALUES ({sid}, 'ahead', 99)"):
        copy = tmp_path / f"f{len(sql)}.db"
        copy.write_bytes(path.read_bytes())
        forged = apsw.Connection(str(copy))
        forged.execute(sql)
        forged.close()
        with trajlog.open(str(copy), repack=False) as store:
            report = store.session(sessid).verify()
            assert not report.ok and "call row" in report.scan.reason, sql
    conn.close()


@pytest.mark.sqlite_only(reason=SQLITE_BYTES)
def test_an_index_copy_that_disagrees_with_the_log_is_corruption_not_a_decision(tmp_path):
    """The first write after a reopen rests on index rows: a turn marker the
    index lost, or a call row no request stands behind, is reported as
    corruption (typed, naming the seq) -- never a refusal or an acceptance
    the log itself would not make."""
    path = tmp_path / "i.db"
    with trajlog.open(str(path), repack=False) as store:
        s = store.create_session(cwd="/r")
        s.append_batch([e for i in range(10) for e in turn(i)])
        sid, sessid, last = s._sid, s.id, s.last_seq
    for sql, then in (
            (f"DELETE FROM event_index WHERE rid = ({sid} << 32) + {last}",
             ("turn/start", {})),
            (f"INSERT INTO call_index VALUES ({sid}, 'ghost', 3)",
             ("assistant/message", {"tool_calls": [{"id": "ghost", "name": "t"}]}))):
        copy = tmp_path / f"c{len(sql)}.db"
        copy.write_bytes(path.read_bytes())
        conn = apsw.Connection(str(copy))
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
        conn.execute(sql)
        conn.close()
        with trajlog.open(str(copy), repack=False) as store:
            s = store.session(sessid)
            with pytest.raises(errors.CorruptionError, match="index row of seq"):
                s.append(*then)
            assert s.last_seq == last
