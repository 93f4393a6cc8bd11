"""The public API on the PostgreSQL backend, as the app role (a login member
of ``trajlog_app``, owning no table): create, single and batch appends,
reads, forks, a crash and load, verify, repack, erasure, memory and
projections -- the same behaviour as on SQLite."""

from __future__ import annotations

import pytest

from kits.pgcluster import Cluster, open_store
from trajlog import Identity, projections
from trajlog.errors import SchemaError


def _agent(s, secret: str, call: str = "c1") -> None:
    with s.turn():
        s.append("user/message", {"content": f"please remember {secret}"})
        with s.step():
            s.append("assistant/message", {"content": f"noted {secret}", "tool_calls": [
                {"id": call, "name": "write", "arguments": {"text": secret}}]})
            s.append("tool/call", {"call_id": call, "name": "write",
                                   "arguments": {"text": secret}})
            s.append("tool/result", {"call_id": call, "output": f"wrote {secret}",
                                     "is_error": False})


def test_pg_the_whole_api_as_the_app_role(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as store:
        s = store.create_session(cwd="/r", agent_preset="coder")
        with s.turn():
            s.append("user/message", {"content": "go"}, idempotency_key="u1")
            with s.step():
                s.append("assistant/message", {"content": "x", "tool_calls": [
                    {"id": "c1", "name": "read", "arguments": {}}]})
                s.append("tool/call", {"call_id": "c1", "name": "read", "arguments": {}})
                s.append("tool/result", {"call_id": "c1", "output": "ok", "is_error": False})
        assert s.append("user/message", {"content": "go"}, idempotency_key="u1").seq == 1
        s.append_batch([(f"note/{i}", {"n": i}) for i in range(300)])
        assert s.verify().ok and len(s.tail(3)) == 3 and s.get(1).type == "user/message"
        assert [e.seq for e in s.events()] == list(range(len(list(s.events()))))
        child = s.fork(3)
        sub = s.spawn_subagent("review", call_id=None)
        assert child.verify().ok and [c.id for c in s.children()] == [child.id, sub.id]
        with s.turn():
            s.append("user/message", {"content": "crash here"})
            s.append("assistant/message", {"content": "", "tool_calls": [
                {"id": "c2", "name": "run"}]})
        assert projections.model_history(s)
        projections.checkpoint(s)
        last = s.head_seq if hasattr(s, "head_seq") else len(list(s.events())) - 1
        sid = s.id
    # a crash: the store closed mid-turn; another store loads and closes the turn
    with open_store(pg.app_url, schema, "acme") as store:
        loaded = store.load(sid)
        assert loaded.verify().ok and len(list(loaded.events())) > last + 1
        assert next(h.id for h in store.sessions()) == sid


def test_pg_repack_erase_and_load(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme", repack=False) as store:
        s = store.create_session()
        for i in range(3):
            _agent(s, f"RPK{i}", f"c{i}")    # single appends: one small row each
        store.erase(s.id, [1, 9, 11, 12, 13], reason="r")
        assert store.repack(s.id) > 0         # rows holding blank frames merge (heap order!)
        assert s.verify().ok and s.get(9).data["erased"]["reason"] == "r"
        child = s.fork(15)
        assert child.verify().ok and child.get(13).data["call_id"] == "c1"
        with s.turn():
            s.append("user/message", {"content": "open turn"})
        assert store.load(s.id).verify().ok
        assert "RPK1" not in repr(list(s.events()))
        report = store.erase(s.id, [2], reason="again")
        assert any("WAL" in r for r in report.residues)


def test_pg_memory_write_search_revoke(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as store:
        session = store.create_session()
        mem = store.memory(Identity("acme", user="alice", session=session.id))
        u = mem.remember("user", "preference", {"text": "dark mode please"})
        mem.remember("session", "fact", {"text": "the build is red"})
        for i in range(5):
            store.memory(Identity("globex", user=f"u{i}")).remember(
                "user", "fact", {"text": "dark dark dark " + str(i)})
        assert [i.id for i in mem.search("dark")] == [u.id]
        assert [i.id for i in mem.search("build red")] != []
        assert mem.search("dark purple") == []   # every word must match
        # words are never query syntax (no NOT, no operators)
        assert [i.id for i in mem.search("mode -dark | !(")] == [u.id]
        mem.revoke(u.id, reason="asked")
        assert mem.search("dark") == []
        assert mem.search("build")


def test_pg_schema_version_mismatch_is_refused_at_open(pg: Cluster, schema: str):
    with pg.connect() as conn:
        conn.execute(f'ALTER TABLE "{schema}".meta DISABLE TRIGGER meta_fixed')
        conn.execute(f'UPDATE "{schema}".meta SET version = version + 1')
    with pytest.raises(SchemaError, match="version 2"):
        open_store(pg.app_url, schema, "acme")


def test_pg_a_role_that_cannot_create_gets_a_schema_error(pg: Cluster):
    with pytest.raises(SchemaError, match="trajlog migrate"):
        open_store(pg.app_url, "never_made", "acme")


def test_pg_no_password_in_errors_or_repr(pg: Cluster, schema: str):
    url = pg.app_url
    assert "client-secret" in url
    with open_store(url, schema, "acme") as store:
        assert "client-secret" not in store.path and "client-secret" not in repr(
            store._e.backend)
    bad = url.replace("/trajlog", "/no_such_database")
    with pytest.raises(Exception) as caught:
        open_store(bad, schema, "acme")
    assert "client-secret" not in str(caught.value)


def test_pg_the_memory_index_is_emptied_and_rebuilt_not_dropped(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as store, open_store(
            pg.app_url, schema, "globex") as other:
        mem = store.memory(Identity("acme", user="u"))
        item = mem.remember("user", "fact", {"text": "zeppelin ride"})
        other.memory(Identity("globex", user="u")).remember("user", "fact",
                                                            {"text": "zeppelin"})
        reader = store._e.backend.reader()
        assert reader.memory_index_exists() and reader.memory_index_rows() == 1
        store.drop_memory_index()
        assert not reader.memory_index_exists() and reader.memory_index_rows() == 0
        assert [i.id for i in mem.search("zeppelin")] == [item.id]   # (the canonical scan)
        assert other._e.backend.reader().memory_index_rows() == 1   # (only this tenant's)
        assert store.rebuild_memory_index() == 1
        assert reader.memory_index_exists() and reader.memory_indexed([1, 2]) == [1]
        assert [i.id for i in mem.search("zeppelin")] == [item.id]


def test_pg_size_counts_the_schemas_tables(pg: Cluster, schema: str):
    with open_store(pg.app_url, schema, "acme") as store:
        backend = store._e.backend
        empty = backend.size()
        s = store.create_session()
        s.append_batch([("note/x", {"pad": "z" * 2000, "i": i}) for i in range(500)])
        assert empty > 0 and backend.size() > empty


def test_pg_concurrent_openers_make_the_schema_once(pg: Cluster):
    import threading

    from trajlog.storage.postgres import PostgresBackend
    name = "racing_" + schema_suffix()
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            PostgresBackend(pg.owner_url, schema=name).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    with open_store(pg.app_url, name, "acme") as store:
        assert store.create_session().verify().ok


def schema_suffix() -> str:
    import uuid
    return uuid.uuid4().hex[:8]


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://app:s3cret@db1:5432,db2:5433/trajlog?sslmode=require",
     "postgresql://app:***@db1:5432,db2:5433/trajlog?sslmode=require"),
    ("postgres://app:s3cret@db/trajlog", "postgres://app:***@db/trajlog"),
    ("postgresql://db/trajlog?password=s3cret&sslmode=require",
     "postgresql://db/trajlog?password=***&sslmode=require"),
    ("host=db user=app password=s3cret dbname=trajlog",
     "host=db user=app password=*** dbname=trajlog"),
    ("postgresql://app@db:5432/trajlog", "postgresql://app@db:5432/trajlog"),
])
def test_pg_the_printable_location_has_no_password(url: str, shown: str):
    from trajlog.storage.postgres import redact
    assert redact(url) == shown and "s3cret" not in redact(url)


def test_pg_open_by_url_through_the_factory(pg: Cluster):
    """``trajlog.open(url, tenant=...)``: the factory's PostgreSQL store, in
    the default schema, made by ``migrate`` as the owner (the app role may
    not make it)."""
    import trajlog
    from trajlog.api.store import migrate, schema_of

    with pytest.raises(SchemaError, match="trajlog migrate"):
        trajlog.open(pg.app_url, tenant="acme")
    assert schema_of(pg.owner_url) is None
    assert migrate(pg.owner_url) == 0 and migrate(pg.owner_url) == 1
    assert schema_of(pg.app_url) == 1
    with trajlog.open(pg.app_url, tenant="acme") as store:
        assert "client-secret" not in store.path and store.path.startswith("postgresql://")
        s = store.create_session()
        s.append("note/x", {"n": 1})
        assert s.verify().ok
    with trajlog.open(pg.app_url, tenant="globex") as store:
        assert store.sessions() == []
