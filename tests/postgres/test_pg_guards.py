"""The guarantees hold in the database: a raw psycopg connection -- as the
app role, and as the schema's owner -- cannot rewrite history (the
PostgreSQL counterpart of ``tests/adversarial/``'s matrix for SQLite).

Each case runs one statement in a transaction with the tenant set, and must
be refused by the database (a trigger's ``TL001``, a missing privilege, a
constraint); the store's rows are then compared, byte for byte, with what
they were, and every session still verifies.
"""

from __future__ import annotations

import hashlib

import psycopg
import pytest

from kits.pgcluster import Cluster, open_store
from trajlog import Identity

# (case, statement) -- {S} is the session's sid, {K} the key of its seq 0
CASES = [
    ("update a chunk body", "UPDATE chunks SET body = '\\x00'::bytea WHERE cid = {K}"),
    ("shrink a chunk", "UPDATE chunks SET n = 1 WHERE cid = {K} + 1"),
    ("move a chunk", "UPDATE chunks SET cid = cid + 100 WHERE cid = {K} + 1"),
    ("delete the first chunk", "DELETE FROM chunks WHERE cid = {K}"),
    ("delete the last chunk", "DELETE FROM chunks WHERE cid = (SELECT max(cid) FROM chunks "
                              "WHERE cid >> 32 = {S})"),
    ("delete every chunk", "DELETE FROM chunks"),
    ("truncate chunks", "TRUNCATE chunks"),
    ("truncate the index", "TRUNCATE event_index"),
    ("truncate sessions", "TRUNCATE sessions CASCADE"),
    ("truncate memories", "TRUNCATE memories, memory_head, tombstones"),
    ("a gap", "INSERT INTO chunks(cid, n, raw_len, codec, body_check, seed_chain, last_chain, "
              "body) SELECT cid + 1000, 1, raw_len, codec, body_check, seed_chain, last_chain, "
              "body FROM chunks WHERE cid = {K}"),
    ("a duplicate of seq 0", "INSERT INTO chunks(cid, n, raw_len, codec, body_check, "
                             "seed_chain, last_chain, body) SELECT cid, n, raw_len, codec, "
                             "body_check, seed_chain, last_chain, body FROM chunks "
                             "WHERE cid = {K}"),
    ("the head moved back", "UPDATE session_heads SET last_seq = last_seq - 1 WHERE sid = {S}"),
    ("the head moved on", "UPDATE session_heads SET last_seq = last_seq + 1 WHERE sid = {S}"),
    ("the head's chain", "UPDATE session_heads SET chain_head = chain_head + 1 WHERE sid = {S}"),
    ("a head deleted", "DELETE FROM session_heads WHERE sid = {S}"),
    ("a second head", "INSERT INTO session_heads(sid, last_seq, chain_head) SELECT sid, -1, "
                      "seed_chain FROM sessions WHERE sid = {S}"),
    ("a header changed", "UPDATE sessions SET cwd = '/elsewhere' WHERE sid = {S}"),
    ("a header deleted", "DELETE FROM sessions WHERE sid = {S}"),
    ("an index row changed", "UPDATE event_index SET type = 'turn/end' WHERE rid >> 32 = {S}"),
    ("an index row deleted", "DELETE FROM event_index WHERE rid >> 32 = {S}"),
    ("an index row past the head", "INSERT INTO event_index(rid, type, time_ms) "
                                   "VALUES ({K} + 100000, 'turn/end', 0)"),
    ("an index row forged early", "INSERT INTO event_index(rid, type, time_ms) "
                                  "VALUES ({K} + 2, 'turn/end', 0)"),
    ("a duplicate idempotency key", "INSERT INTO event_index(rid, type, time_ms, "
                                    "idempotency_key) SELECT max(cid), 'x', 0, 'k1' FROM chunks "
                                    "WHERE cid >> 32 = {S}"),
    ("a call row deleted", "DELETE FROM call_index"),
    ("a memory changed", "UPDATE memories SET frame = frame || '\\x00'::bytea"),
    ("a memory deleted", "DELETE FROM memories"),
    ("a memory version skipped", "INSERT INTO memories(mid, item_id, version, tenant, scope, "
                                 "scope_key, type, state, digest, sensitivity, created_ms, "
                                 "frame) SELECT mid + 5, item_id, version + 5, tenant, scope, "
                                 "scope_key, type, state, digest, sensitivity, created_ms, "
                                 "frame FROM memories WHERE mid = 1"),
    ("a tombstone deleted", "DELETE FROM tombstones"),
    ("a tombstone changed", "UPDATE tombstones SET reason = 'none'"),
    ("a tombstone skipped", "INSERT INTO tombstones(tid, target_kind, target_item, reason, "
                            "created_ms, frame) SELECT tid + 3, 'memory', 'x', reason, "
                            "created_ms, frame FROM tombstones WHERE tid = 1"),
    ("the memory head moved", "UPDATE memory_head SET last_mid = last_mid + 1"),
    ("the memory head deleted", "DELETE FROM memory_head"),
    ("the version row", "UPDATE meta SET version = 2"),
]
REFUSALS = {"TL001", "42501", "23505", "23503", "23514", "0A000"}
TABLES = ("sessions", "session_heads", "chunks", "event_index", "call_index", "memories",
          "tombstones", "memory_head", "meta")


@pytest.fixture(scope="module")
def template(pg: Cluster) -> tuple[str, int]:
    schema = pg.new_schema("guards")
    with open_store(pg.app_url, schema, "acme", repack=False) as store:
        s = store.create_session()
        with s.turn():
            s.append("user/message", {"content": "go"}, idempotency_key="k1")
            with s.step():
                s.append("assistant/message", {"content": "", "tool_calls": [
                    {"id": "c1", "name": "run"}]})
                s.append("tool/call", {"call_id": "c1", "name": "run", "arguments": {}})
                s.append("tool/result", {"call_id": "c1", "output": "ok", "is_error": False})
        s.append_batch([(f"note/{i}", {"n": i}) for i in range(50)])
        mem = store.memory(Identity("acme", user="alice"))
        item = mem.remember("user", "fact", {"text": "to be revoked"})
        mem.remember("user", "fact", {"text": "kept"})
        mem.revoke(item.id, reason="r")
        store.erase(s.id, [5], reason="r")
        sid = int(store._e.backend.reader().session_by_id(s.id).sid)
    return schema, sid


def _digest(pg: Cluster, schema: str) -> str:
    h = hashlib.sha256()
    with pg.connect() as conn:   # (the superuser sees every row)
        for table in TABLES:
            for row in conn.execute(f'SELECT * FROM "{schema}".{table} ORDER BY 1, 2'):
                h.update(repr(row).encode())
    return h.hexdigest()


def _attempt(url: str, schema: str, statement: str) -> str | None:
    """Run ``statement`` as ``url``'s role for tenant acme; its SQLSTATE
    (None: it went through -- then rolled back here)."""
    with psycopg.connect(url) as conn:
        conn.execute(f"SET search_path = \"{schema}\"")
        conn.execute("SELECT set_config('trajlog.tenant', 'acme', true)")
        try:
            conn.execute(statement)
        except psycopg.Error as exc:
            return exc.sqlstate or "?"
        finally:
            conn.rollback()
    return None


@pytest.mark.parametrize("role", ["app", "owner"])
@pytest.mark.parametrize(("case", "statement"), CASES, ids=[c for c, _ in CASES])
def test_pg_history_cannot_be_rewritten(pg: Cluster, template, role, case, statement):
    schema, sid = template
    url = pg.app_url if role == "app" else pg.owner_url
    before = _digest(pg, schema)
    state = _attempt(url, schema, statement.format(S=sid, K=sid << 32))
    assert state in REFUSALS, f"{case} as {role}: {state or 'accepted'}"
    assert _digest(pg, schema) == before


def test_pg_the_owner_is_refused_by_the_triggers_not_privileges(pg: Cluster, template):
    """As the owner (every privilege), the refusals are the triggers' own."""
    schema, _ = template
    for statement in ("DELETE FROM chunks", "TRUNCATE chunks",
                      "UPDATE session_heads SET last_seq = last_seq - 1"):
        assert _attempt(pg.owner_url, schema, statement) == "TL001"


def test_pg_the_matrix_can_fail(pg: Cluster, template):
    """A statement the schema allows goes through: the check above is not
    vacuous (a lease change is a plain UPDATE the app role may make)."""
    schema, sid = template
    assert _attempt(pg.app_url, schema,
                    f"UPDATE session_heads SET lease_owner = 'x' WHERE sid = {sid}") is None


def test_pg_a_store_still_verifies_after_the_matrix(pg: Cluster, template):
    schema, _ = template
    with open_store(pg.app_url, schema, "acme") as store:
        assert all(store.load(h.id).verify().ok for h in store.sessions())
