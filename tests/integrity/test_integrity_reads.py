"""What the API fuzzer, the damage soak and the concurrency soak found after
the first adversarial review (each test failed before its fix): huge seqs,
values the encoder would take beside a subclass, headers built from the
caller's metadata, envelope subclasses, misplaced retries, rows whose stored
types changed, and a head below its seed read silently by the views."""

from __future__ import annotations

import collections
from pathlib import Path

import apsw
import pytest

import trajlog
from trajlog import errors, projections

SQLITE_APSW = "tampers with the store through an apsw connection of its own"


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "r.db")


def _foreign(path: str) -> apsw.Connection:
    conn = apsw.Connection(path)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    return conn


def test_huge_seqs_are_no_event_and_never_another_sessions(path: str) -> None:
    with trajlog.open(path) as store:
        a = store.create_session()
        a.append("user/message", {"content": "a"})
        b = store.create_session()
        b.append("user/message", {"content": "b"})
        for seq in (2**32, 2**32 + 1, 2**63 - 1, 2**64, 10**30):
            with pytest.raises(errors.InvalidArgumentError, match="has no event"):
                a.get(seq)
            assert list(a.events(seq)) == []
        assert [e.data for e in a.events(0, 2**70)] == [{"content": "a"}]


def test_set_or_cycle_beside_a_subclass_is_refused(path: str) -> None:
    cyclic: collections.OrderedDict[str, object] = collections.OrderedDict()
    cyclic["self"] = cyclic
    with trajlog.open(path) as store:
        s = store.create_session()
        for data, where in (({"a": collections.OrderedDict(), "x": {1, 2}}, "data.x"),
                            ({"a": collections.OrderedDict(x=frozenset())}, "data.a.x"),
                            (cyclic, "data")):
            with pytest.raises(errors.SerializationError) as info:
                s.append("x/custom", data)
            assert info.value.args and where.split(".")[0] in str(info.value)
        assert s.last_seq == -1


def test_a_tuple_in_metadata_leaves_the_creating_handle_verifiable(path: str) -> None:
    with trajlog.open(path) as store:
        s = store.create_session(metadata={"tags": ("a", "b")})
        s.append("user/message", {"content": "hi"})
        assert s.verify().ok
        assert s.header.metadata["tags"] == ["a", "b"]
        assert store.session(s.id).header == s.header


class _Liar(str):
    def __len__(self) -> int:
        return 1


def test_an_envelope_subclass_is_checked_as_the_text_stored(path: str) -> None:
    with trajlog.open(path) as store:
        s = store.create_session()
        with pytest.raises(errors.ValidationError, match="1 to 512"):
            s.append("x/custom", {}, source=_Liar("q" * 600))
        assert s.last_seq == -1


def test_a_retry_whose_keys_do_not_line_up_is_a_conflict(path: str) -> None:
    with trajlog.open(path) as store:
        s = store.create_session()
        s.append("x/custom", {}, idempotency_key="k0")
        # k0 is at seq 0: as the batch's second event the original would
        # have begun at seq -1
        with pytest.raises(errors.IdempotencyConflictError, match="begun at seq -1"):
            s.append_batch([("x/custom", {}, {}), ("x/custom", {}, {"idempotency_key": "k0"})])
        assert s.last_seq == 0


# (The tables are STRICT, so SQL cannot store an integer column as text: a
# changed type comes only from damage to the file, which test_integrity_damage
# makes.  Text that is not UTF-8 and marks that do not decode SQL can store.)
@pytest.mark.parametrize("sql, table", [
    ("UPDATE chunks SET marks = x'c1'", "chunks"),
    ("UPDATE event_index SET type = CAST(x'ff' AS TEXT)", "event_index"),
])
@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_a_stored_value_that_cannot_be_read_is_corruption_naming_the_file(
        path: str, sql: str, table: str) -> None:
    with trajlog.open(path, repack=False) as store:
        s = store.create_session()
        s.append_batch([("turn/start", {}, {}), ("user/message", {"content": "x"}, {}),
                        ("turn/end", {"interrupted": False}, {})])
        sid = s._sid
    conn = _foreign(path)
    conn.execute(sql + (" WHERE sid = ?" if table == "session_heads" else
                        " WHERE rid >> 32 = ?" if table == "event_index" else
                        " WHERE cid >> 32 = ?"), (sid,))
    conn.close()
    with trajlog.open(path, repack=False) as store:
        s = store.session(s.id)
        report = s.verify()   # reported, with where
        assert not report.ok and report.scan.cursor.next_seq == 0
        assert path in report.scan.reason and table in report.scan.reason
        with pytest.raises(errors.CorruptionError):
            store.load(s.id)


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_views_refuse_a_head_below_the_seed(path: str) -> None:
    with trajlog.open(path) as store:
        s = store.create_session()
        for i in range(3):
            s.append("user/message", {"content": str(i)})
        sid = s._sid
    conn = _foreign(path)
    conn.execute("UPDATE session_heads SET last_seq = -80 WHERE sid = ?", (sid,))
    conn.close()
    with trajlog.open(path) as store:
        s = store.session(s.id)
        for view in (projections.chat, projections.model_history, projections.status):
            with pytest.raises(errors.HeadMismatchError):
                view(s)
        assert not s.verify().ok


def test_a_fork_cut_inside_its_parents_prefix_has_only_that_prefixs_calls(path: str) -> None:
    call = {"content": "calling", "tool_calls": [{"id": "c0", "name": "t", "arguments": {}}]}
    with trajlog.open(path) as store:
        root = store.create_session()
        for i in range(3):
            root.append("user/message", {"content": str(i)})
        root.append("assistant/message", call)          # seq 3: c0 requested
        f1 = root.fork(3)                                # seed 4: c0 inherited
        assert f1.header.seed_length == 4
        with pytest.raises(errors.ValidationError, match="already used"):
            f1.append("assistant/message", call)
        f2 = f1.fork(2)                                  # seed 3: before c0
        assert f2.header.seed_length == 3
        assert f2.append("assistant/message", call).seq == 3   # c0 is new in f2's log
        assert f2.verify().ok
