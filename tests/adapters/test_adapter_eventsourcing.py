"""The eventsourcing recorders beyond the library's own cases
(peers/eventsourcing/run.py runs those), and Store.append_atomic under them."""

from __future__ import annotations

import random
import threading
import uuid

import pytest

pytest.importorskip("eventsourcing")

from eventsourcing.persistence import IntegrityError, StoredEvent, Tracking
from eventsourcing.popo import POPOAggregateRecorder

import trajlog
from trajlog.adapters.eventsourcing import (
    EVENT,
    TrajlogAggregateRecorder,
    TrajlogApplicationRecorder,
    TrajlogProcessRecorder,
)
from trajlog.errors import InvalidArgumentError, LeaseHeldError, LogMovedError

SQLITE_COST = "counts what SQLite runs (statements, VM steps, pages, compiles)"


@pytest.fixture
def store(tmp_path):
    with trajlog.open(str(tmp_path / "es.db"), durability="normal") as s:
        yield s


def _ev(oid, v, state=b"{}", topic="t"):
    return StoredEvent(originator_id=oid, originator_version=v, topic=topic, state=state)


# -- Store.append_atomic --------------------------------------------------------------

def test_append_atomic_creates_and_appends_in_one_transaction(store):
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    out = store.append_atomic([(a, [("x/y", {"n": 1})], -1), (b, [("x/y", {}), ("x/y", {})], None)],
                              create={a: {"k": 1}, b: None})
    assert [[e.seq for e in w] for w in out] == [[0], [0, 1]]
    assert store.session(a).header.metadata == {"k": 1}


def test_append_atomic_writes_nothing_when_one_log_moved(store):
    a = store.create_session().id
    b = str(uuid.uuid4())
    store.session(a).append("x/y", {})
    with pytest.raises(LogMovedError):
        store.append_atomic([(b, [("x/y", {})], -1), (a, [("x/y", {})], -1)], create={b: None})
    with pytest.raises(trajlog.errors.SessionNotFoundError):
        store.session(b)               # not made either
    assert store.session(a).last_seq == 0
    # the write path's cached head was not left ahead of the log
    assert store.session(a).append("x/y", {}).seq == 1


def test_append_atomic_lease_of_another_writer_refuses_every_write(tmp_path):
    path = str(tmp_path / "two.db")
    with trajlog.open(path) as one, trajlog.open(path) as two:
        a, b = one.create_session().id, one.create_session().id
        with two.session(b).lease(), pytest.raises(LeaseHeldError):
            one.append_atomic([(a, [("x/y", {})], None), (b, [("x/y", {})], None)])
        assert one.session(a).last_seq == -1
        assert one.session(a).append("x/y", {}).seq == 0


def test_append_atomic_refusals(store):
    a = store.create_session().id
    with pytest.raises(InvalidArgumentError):
        store.append_atomic([(a, [("x/y", {})], None), (a, [("x/y", {})], None)])
    with pytest.raises(InvalidArgumentError):
        store.append_atomic([(a, [("turn/start", {})], None)])
    with pytest.raises(trajlog.errors.SessionNotFoundError):
        store.append_atomic([(str(uuid.uuid4()), [("x/y", {})], None)])
    assert store.append_atomic([]) == []
    assert store.session(a).last_seq == -1


# -- the recorders ---------------------------------------------------------------------

def test_duplicate_in_one_originator_fails_the_whole_batch(store):
    rec = TrajlogApplicationRecorder(store)
    a, b = uuid.uuid4(), uuid.uuid4()
    assert rec.insert_events([_ev(a, 1)]) == [1]
    with pytest.raises(IntegrityError):
        rec.insert_events([_ev(b, 1), _ev(a, 1)])
    assert rec.select_events(b) == [] and rec.max_notification_id() == 1
    assert rec.insert_events([_ev(b, 1)]) == [2]


def test_a_lower_version_never_stored_is_refused(store):
    # the documented difference from the SQLite recorder: versions increase
    rec = TrajlogAggregateRecorder(store)
    a = uuid.uuid4()
    rec.insert_events([_ev(a, 5)])
    with pytest.raises(IntegrityError):
        rec.insert_events([_ev(a, 3)])
    with pytest.raises(IntegrityError):
        rec.insert_events([_ev(a, 7), _ev(a, 6)])


def test_state_bytes_round_trip_as_text_or_base64(store):
    rec = TrajlogApplicationRecorder(store)
    a = uuid.uuid4()
    blobs = [b'{"a": 1}', bytes(range(256)), b"", "é\x00\u2028".encode()]
    rec.insert_events([_ev(a, i + 1, s) for i, s in enumerate(blobs)])
    assert [e.state for e in rec.select_events(a)] == blobs
    assert [n.state for n in rec.select_notifications(None, 10)] == blobs
    raw = list(store.session(rec._sid("aggregate", a.hex)).events())
    assert raw[0].type == EVENT and raw[0].data["state"] == '{"a": 1}'
    assert "state_b64" in raw[1].data


def test_select_events_matches_the_reference_recorder_on_sparse_versions(store):
    ours, ref = TrajlogAggregateRecorder(store, name="snapshots"), POPOAggregateRecorder()
    rng = random.Random(16)
    for contiguous in (True, False):
        oid = uuid.uuid4()
        v = 0
        for _ in range(12):
            batch = []
            for _ in range(rng.randint(1, 3)):
                v += 1 if contiguous else rng.randint(1, 4)
                batch.append(_ev(oid, v, str(v).encode()))
            ours.insert_events(batch)
            ref.insert_events(batch)
        for _ in range(300):
            kw = {"gt": rng.choice([None, *range(-1, v + 2)]),
                  "lte": rng.choice([None, *range(-1, v + 2)]),
                  "desc": rng.random() < 0.5,
                  # (not 0: the SQLite recorder gives none, the POPO one all)
                  "limit": rng.choice([None, 1, 2, 5, 100])}
            assert ours.select_events(oid, **kw) == ref.select_events(oid, **kw), kw


def test_text_originator_ids(store):
    rec = TrajlogApplicationRecorder(store, originator_id_type="text")
    rec.insert_events([_ev("order-1", 1), _ev("order-2", 1)])
    assert rec.select_events("order-1")[0].originator_id == "order-1"
    assert [n.originator_id for n in rec.select_notifications(1, 5)] == ["order-1", "order-2"]


def test_two_stores_on_one_file_keep_ids_contiguous_and_refuse_duplicates(tmp_path):
    path = str(tmp_path / "shared.db")
    with trajlog.open(path, durability="normal") as s1, trajlog.open(path,
                                                                     durability="normal") as s2:
        recs = [TrajlogApplicationRecorder(s1), TrajlogApplicationRecorder(s2)]
        shared = uuid.uuid4()
        got: list[list[int]] = [[], []]
        dup: list[int] = [0, 0]

        def work(i: int) -> None:
            for k in range(40):
                got[i] += recs[i].insert_events([_ev(uuid.uuid4(), 1), _ev(uuid.uuid4(), 1)])
                try:  # both race for every version of one originator
                    got[i] += recs[i].insert_events([_ev(shared, k + 1)])
                except IntegrityError:
                    dup[i] += 1
        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ids = sorted(got[0] + got[1])
        assert ids == list(range(1, len(ids) + 1))
        assert [e.originator_version for e in recs[0].select_events(shared)] == list(
            range(1, 41))
        assert dup[0] + dup[1] == 40        # each version won exactly once
        assert len(ids) == 160 + 40


def test_process_recorder_tracking_is_atomic_with_the_events(store):
    rec = TrajlogProcessRecorder(store)
    a = uuid.uuid4()
    rec.insert_events([_ev(a, 1)], tracking=Tracking("up", 5))
    with pytest.raises(IntegrityError):  # the tracking record fails: no event either
        rec.insert_events([_ev(a, 2)], tracking=Tracking("up", 5))
    assert len(rec.select_events(a)) == 1 and rec.max_notification_id() == 1
    fresh = TrajlogProcessRecorder(store)   # no cached heads: read from the log
    assert fresh.max_tracking_id("up") == 5
    with pytest.raises(IntegrityError):
        fresh.insert_events([_ev(a, 1)], tracking=Tracking("up", 6))
    assert fresh.max_tracking_id("up") == 5


def test_subscription_sees_another_recorders_writes(store):
    reader, writer = TrajlogApplicationRecorder(store), TrajlogApplicationRecorder(store)
    a = uuid.uuid4()
    with reader.subscribe(gt=None) as sub:
        writer.insert_events([_ev(a, 1), _ev(a, 2)])   # only the poll wakes `sub`
        seen = [next(sub).id, next(sub).id]
    assert seen == [1, 2]


@pytest.mark.sqlite_only(reason=SQLITE_COST)
def test_reads_cost_one_head_read_and_a_read_after_them_spares_the_insert_one(store):
    """The statements a read runs (kits.costkit counts them, no clock):
    ``select_events`` of an originator and its last event read the head once
    and the rows once; the insert that follows knows the head from that read
    (no read of the log's tail); a page of notifications reads the head once
    and the rows of the page only."""
    from kits.costkit import metered

    oid = uuid.UUID(int=5)
    TrajlogApplicationRecorder(store).insert_events([_ev(oid, v) for v in range(1, 11)])
    for i in range(40):
        TrajlogApplicationRecorder(store).insert_events([_ev(uuid.UUID(int=100 + i), 1)])
    rec = TrajlogApplicationRecorder(store)
    rec.select_events(oid)   # (the session handles cached: the same for every read below)
    rec.select_notifications(1, 1)
    rec._heads.clear()
    with metered(store) as meter:
        whole = meter.measure(lambda _: rec.select_events(oid))
        last = meter.measure(lambda _: rec.select_events(oid, desc=True, limit=1))
        insert = meter.measure(lambda _: rec.insert_events([_ev(oid, 11)]))
        page = meter.measure(lambda _: rec.select_notifications(1, 10))
    assert [e.originator_version for e in rec.select_events(oid)] == list(range(1, 12))
    assert whole.statements == 2, whole.by_sql
    assert last.statements == 2, last.by_sql
    assert not [sql for sql in insert.by_sql if "FROM chunks" in sql], insert.by_sql
    assert page.statements == 2, page.by_sql


@pytest.mark.sqlite_only(reason=SQLITE_COST)
def test_what_a_recorder_wrote_it_writes_and_reads_again_without_a_session_look_up(store):
    """The handles of the sessions an insert wrote are kept: the next insert
    of the same originator runs no ``sessions`` statement (neither for the
    originator nor for the application sequence), only the transaction and
    its rows, and reading the originator back is the head read and the rows
    (kits.costkit counts the statements, no clock)."""
    from kits.costkit import metered

    rec = TrajlogApplicationRecorder(store)
    oid = uuid.UUID(int=7)
    rec.insert_events([_ev(oid, 1)])
    with metered(store) as meter:
        again = meter.measure(lambda _: rec.insert_events([_ev(oid, 2)]))
        read = meter.measure(lambda _: rec.select_events(oid))
        new = meter.measure(lambda _: rec.insert_events([_ev(uuid.UUID(int=8), 1)]))
    assert not [sql for sql in again.by_sql if "FROM sessions" in sql], again.by_sql
    assert again.statements == 6, again.by_sql   # BEGIN, SAVEPOINT, 2 rows, RELEASE, COMMIT
    assert read.statements == 2, read.by_sql
    # a new originator: looked up in the transaction only (the application's is kept)
    assert sum(n for sql, n in new.by_sql.items() if "FROM sessions" in sql) == 2, new.by_sql
    assert [e.originator_version for e in rec.select_events(oid)] == [1, 2]


def _calls(code, act):
    """How many times ``act`` calls the function of ``code`` (a count, no clock)."""
    import sys

    n = 0

    def profile(frame, event, _arg):
        nonlocal n
        if event == "call" and frame.f_code is code:
            n += 1

    sys.setprofile(profile)
    try:
        act()
    finally:
        sys.setprofile(None)
    return n


def test_an_insert_maps_each_state_once_and_a_page_makes_each_originator_id_once(store):
    """Python work per event: an insert decodes each stored state once (its
    notification shares the event's mapping), and a page of notifications
    builds an originator's UUID once, not once per notification."""
    import trajlog.adapters.eventsourcing as es

    rec = TrajlogApplicationRecorder(store)
    batches = [[_ev(uuid.UUID(int=a), v, b'{"n":%d}' % v) for v in range(1, 11)]
               for a in range(1, 6)]
    states = _calls(es._state.__code__, lambda: [rec.insert_events(b) for b in batches])
    assert states == 50, states
    es._uuid_of.cache_clear()
    page: list = []
    fresh = TrajlogApplicationRecorder(store)
    made = _calls(uuid.UUID.__init__.__code__,
                  lambda: page.extend(fresh.select_notifications(1, 50)))
    assert len(page) == 50 and made <= 5, made
    assert [(n.originator_id, n.originator_version, n.state) for n in page] == [
        (e.originator_id, e.originator_version, e.state) for b in batches for e in b]


@pytest.mark.sqlite_only(reason=SQLITE_COST)
def test_a_new_originator_is_written_without_a_read_and_a_stale_guess_is_retried(store):
    """The first insert of an originator this recorder never saw reads
    nothing before its transaction (the append's ``expect_last`` checks that
    the log is new); when another recorder wrote it meanwhile, the retry
    reads its head: a version that cannot follow is refused, one that can is
    written."""
    from kits.costkit import metered

    rec = TrajlogApplicationRecorder(store)
    rec.insert_events([_ev(uuid.UUID(int=1), 1)])   # (the application log exists)
    oid = uuid.UUID(int=2)
    with metered(store) as meter:
        new = meter.measure(lambda _: rec.insert_events([_ev(oid, 1), _ev(oid, 2)]))
    stmts = list(new.by_sql)
    assert stmts[0].startswith("BEGIN"), stmts        # nothing read before the transaction
    other = TrajlogApplicationRecorder(store)         # never saw oid: guesses it is new
    with pytest.raises(IntegrityError):
        other.insert_events([_ev(oid, 2)])
    other.insert_events([_ev(oid, 3)])
    assert [e.originator_version for e in rec.select_events(oid)] == [1, 2, 3]
