"""Event schemas have versions (docs/event-schemas.md): each known type
declares one, an event of a version above 1 records it as the payload's
11th element (a version-1 event is byte for byte what it was), readers take
version-1 events with the version-1 rules or through a recorded migration,
and a version newer than the reader knows is refused, never misread.

Each test names, in its docstring, the rule whose removal makes it fail."""

from __future__ import annotations

import msgspec
import pytest

from trajlog import errors
from trajlog import events as events_module
from trajlog.event_types import BY_NAME, TYPES, VERSIONS
from trajlog.events import ENVELOPE_FIELDS, Event, check_envelope, encode_event
from trajlog.projections import schemas
from trajlog.projections.context import build_context
from trajlog.projections.evidence import branch_of, supersedes_of


@pytest.fixture
def newer_writer(monkeypatch):
    """Write as a newer trajlog would: its registry knows every type up to
    version 9 (this reader's registry is untouched)."""
    monkeypatch.setattr(events_module, "VERSIONS", {t.name: 9 for t in TYPES} | {"note/x": 9})


def _payload(ev: Event) -> list:
    return msgspec.msgpack.decode(encode_event(ev))


def test_every_type_declares_a_version_and_workspace_revision_is_at_2():
    """EventType.version (default 1) and the VERSIONS the write path reads."""
    assert all(type(t.version) is int and t.version >= 1 for t in TYPES)
    assert BY_NAME["workspace/revision"].version == 2
    assert dict(VERSIONS) == {t.name: t.version for t in TYPES if t.version > 1}
    assert ENVELOPE_FIELDS[-1] == "schema_version"


def test_a_version_1_event_costs_no_byte_and_a_version_2_one_records_it(store):
    """WriteEngine.prepare: the version is written only above 1 (element 11)."""
    s = store.create_session(cwd="/r")
    plain = s.append("user/message", {"content": "hi"})
    batch = s.append_batch([("tool/x", {"k": 1}), ("workspace/revision", {"revision": "r1"})])
    rev = s.append("workspace/revision", {"revision": "r2"}, source="host")
    assert plain.schema_version is None and batch[0].schema_version is None
    assert _payload(plain) == ["user/message", plain.time, {"content": "hi"}]
    assert (batch[1].schema_version, rev.schema_version) == (2, 2)
    assert _payload(rev) == ["workspace/revision", rev.time, {"revision": "r2"}, "host",
                             *[None] * 6, 2]
    assert s.get(rev.seq) == rev and s.verify().ok   # as stored, and read back
    assert [ev.schema_version for ev in s.events(lazy=True)] == [None, None, 2, 2]


def test_an_importer_states_an_older_version_and_it_is_kept(store, tmp_path):
    """The envelope's schema_version, when given, wins over the stamp; an
    export carries it, an import keeps it (an older event stays of its version)."""
    import trajlog

    s = store.create_session(cwd="/r")
    old = s.append_batch([("workspace/revision", {"revision": "r0", "branch_id": "exp"},
                           {"schema_version": None})])[0]
    new = s.append("workspace/revision", {"revision": "r1"})
    assert (old.schema_version, new.schema_version) == (None, 2)
    path = tmp_path / "s.tlog.jsonl"
    store.export(s.id, str(path))
    with trajlog.open(str(tmp_path / "other.db")) as other:
        (imported,) = other.import_path(str(path)).sessions
        back = other.load(imported.session_id)
        assert [ev.schema_version for ev in back.events()] == [None, 2]
        assert back.verify().ok


def test_version_1_events_are_read_with_the_version_1_rules():
    """evidence.branch_of / supersedes_of: data.branch_id, data.branch and
    data.supersedes count for a version-1 event only; from version 2 on
    they are data, and the envelope alone scopes."""
    data = {"revision": "r", "branch_id": "exp", "supersedes": 0}
    v1 = Event("workspace/revision", 1, data, seq=3)
    v2 = Event("workspace/revision", 1, data, schema_version=2, seq=3)
    assert (branch_of(v1), supersedes_of(v1)) == ("exp", 0)
    assert (branch_of(v2), supersedes_of(v2)) == (None, None)
    assert branch_of(Event("workspace/revision", 1, {"branch": "b"}, seq=1)) == "b"


def test_a_recorded_migration_upgrades_its_range_without_rewriting_it(store):
    """schemas.record_migration + schemas.read: the upgrade of the recorded
    range is applied by every reader (the context builder, so replay); the
    committed event is unchanged."""
    s = store.create_session(cwd="/r", metadata={"branch": "main"})
    old, _ = s.append_batch([
        ("workspace/revision", {"revision": "rM", "branch_id": "main"}, {"schema_version": 1}),
        ("workspace/revision", {"revision": "rX", "branch_id": "exp"}, {"schema_version": 1})])
    assert build_context(s, record=False).workspace_revision == "rM"   # version-1 rules
    mig = schemas.record_migration(s, "workspace/revision", 1)
    assert mig.type == schemas.MIGRATION and mig.data["last_seq"] == old.seq + 1
    assert mig.data["upgrade"] == "workspace/revision@1"
    events = schemas.read(list(s.events()), s.id)
    assert [(e.schema_version, e.branch_id) for e in events[:2]] == [(2, "main"), (2, "exp")]
    assert s.get(old.seq).schema_version == 1 and s.get(old.seq).branch_id is None
    # the upgrade says what the version-1 rules said: the same build
    assert build_context(s, record=False).workspace_revision == "rM"
    assert build_context(s, branch="exp", record=False).workspace_revision == "rX"
    # before the migration event, nothing names it: the events are read as written
    assert schemas.read(list(s.events(0, old.seq + 1)), s.id)[old.seq] == s.get(old.seq)


def test_a_migration_this_reader_does_not_have_is_refused(store):
    """schemas.read refuses a recorded upgrade it does not know;
    record_migration refuses to record one."""
    s = store.create_session(cwd="/r")
    with pytest.raises(errors.InvalidArgumentError):
        schemas.record_migration(s, "tool/result", 1)
    with pytest.raises(errors.InvalidArgumentError):
        schemas.record_migration(s, "workspace/revision", 1)   # an empty log: no range
    s.append("note/x", {})
    s.append(schemas.MIGRATION, {"type": "tool/result", "upgrade": "tool/result@1",
                                 "from_version": 1, "to_version": 2, "first_seq": 0,
                                 "last_seq": 0})
    with pytest.raises(errors.SchemaVersionError) as exc:
        build_context(s, record=False)
    assert (exc.value.session, exc.value.seq) == (s.id, 1)


@pytest.mark.parametrize(("type_", "version"), [("workspace/revision", 3), ("note/x", 2),
                                                 ("user/message", 2)])
def test_a_version_newer_than_the_reader_knows_raises_naming_where(store, newer_writer, type_,
                                                                  version):
    """schemas.check via schemas.read in the context builder: a newer
    version is a typed error naming session, seq and type."""
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "hi"})
    data = {"content": "x"} if type_ == "user/message" else {"revision": "r"}
    (ev,) = s.append_batch([(type_, data, {"schema_version": version})])
    with pytest.raises(errors.SchemaVersionError) as exc:
        build_context(s, record=False)
    assert (exc.value.session, exc.value.seq, exc.value.type, exc.value.version) == (
        s.id, ev.seq, type_, version)
    assert f"seq={ev.seq}" in str(exc.value) and type_ in str(exc.value)
    with pytest.raises(errors.SchemaVersionError):
        schemas.upgrade(ev, s.id)


@pytest.mark.parametrize(("type_", "version"), [("workspace/revision", 3), ("note/x", 2),
                                                 ("user/message", 2), ("user/message", 7)])
def test_a_version_newer_than_the_registry_is_refused_at_write(store, type_, version):
    """check_envelope(type_=): an event this trajlog could never read is not
    written (it would break every later build); its own version passes."""
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "hi"})
    data = {"content": "x"} if type_ == "user/message" else {"revision": "r"}
    with pytest.raises(errors.ValidationError, match=f"schema_version {version} of {type_}"):
        s.append_batch([(type_, data, {"schema_version": version})])
    assert s.last_seq == 0
    (ok,) = s.append_batch([(type_, data, {"schema_version": schemas.known(type_)})])
    assert schemas.read(list(s.events()), s.id)[-1].seq == ok.seq
    build_context(s, record=False)


_MALFORMED = [{"type": "workspace/revision", "from_version": 1, "upgrade": "workspace/revision@1"},
              {"type": "workspace/revision", "from_version": 1, "to_version": 2,
               "upgrade": "workspace/revision@1", "first_seq": "0", "last_seq": 0},
              {"type": "x", "from_version": 1, "upgrade": "x@1", "to_version": "two",
               "first_seq": 0, "last_seq": 0},
              {"type": "workspace/revision", "from_version": True, "to_version": 2,
               "upgrade": "workspace/revision@1", "first_seq": 0, "last_seq": 0}]


@pytest.mark.parametrize("data", _MALFORMED)
def test_a_malformed_migration_is_refused_at_append(store, data):
    """The registry's shape of schema/migration (checked at append)."""
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "hi"})
    with pytest.raises(errors.ValidationError):
        s.append(schemas.MIGRATION, data)
    assert s.last_seq == 0
    build_context(s, record=False)


@pytest.mark.parametrize("data", [
    *_MALFORMED,
    {"type": "workspace/revision", "from_version": 1, "to_version": 3,
     "upgrade": "workspace/revision@1", "first_seq": 0, "last_seq": 0},
    {"type": "workspace/revision", "from_version": 1, "to_version": 2,
     "upgrade": "workspace/revision@1", "first_seq": 0, "last_seq": 5}])
def test_a_malformed_migration_in_a_log_is_a_typed_error_naming_where(store, monkeypatch,
                                                                     data):
    """schemas._check_migration: one written before its shape was checked
    (the rule taken out of the write path here) stops a build with a typed
    error naming session and seq, never a KeyError or a bad int()."""
    monkeypatch.delitem(events_module._RULES, schemas.MIGRATION)
    s = store.create_session(cwd="/r")
    s.append("user/message", {"content": "hi"})
    m = s.append(schemas.MIGRATION, data)
    with pytest.raises(errors.ValidationError, match=f"seq {m.seq} of session {s.id}"):
        build_context(s, record=False)


def test_upgrade_takes_an_event_to_its_types_current_version():
    """schemas.upgrade: one function per (type, from-version)."""
    v1 = Event("workspace/revision", 5, {"revision": "r", "branch": "exp"}, seq=2)
    up = schemas.upgrade(v1)
    assert (up.schema_version, up.branch_id, up.data, up.seq) == (2, "exp", v1.data, 2)
    plain = Event("note/x", 5, {"branch": "b"}, seq=1)
    assert schemas.upgrade(plain) is plain
    for bad in ("", 0, "2", -1, True):
        with pytest.raises(errors.ValidationError):
            check_envelope(None, None, None, None, None, None, None, bad)


def test_a_replay_of_a_recorded_older_log_reads_it_as_it_was_built(tmp_path, newer_writer):
    """The replay set was recorded before versions: its workspace/revision
    events stay version 1 through the import (the importers' stated
    version), a replay reads them with the version-1 rules and gives no
    diff -- also once a migration is recorded after the run (a build reads
    the migrations recorded up to its point) -- and a replay meeting a
    version it does not know stops with SchemaVersionError."""
    import json
    from pathlib import Path

    import trajlog
    from kits.replaykit import scripted

    data = Path(__file__).resolve().parents[1] / "data" / "replay"
    case = json.loads((data / "manifest.json").read_text())["workspace-change"]
    with trajlog.open(str(tmp_path / "replay.db")) as st:
        st.import_path(data / case["file"])
        s = st.session(case["session"])
        revisions = [e for e in s.events() if e.type == "workspace/revision"]
        assert revisions and all(e.schema_version is None for e in revisions)
        assert trajlog.replay(s, case["run"], scripted).same
        schemas.record_migration(s, "workspace/revision", 1)
        assert trajlog.replay(s, case["run"], scripted).same
        s.append_batch([("workspace/revision", {"revision": "r9"}, {"schema_version": 7})])
        with pytest.raises(errors.SchemaVersionError):
            build_context(s, record=False)
