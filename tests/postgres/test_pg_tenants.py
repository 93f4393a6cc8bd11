"""Tenant isolation is a data-plane rule: row-level security (ENABLE + FORCE)
shows and accepts only the rows of the transaction's ``trajlog.tenant`` --
through the API (a store opened for a tenant) and from a raw connection as
the app role (with the tenant set, another's; with none set, nothing)."""

from __future__ import annotations

import psycopg
import pytest

from kits.pgcluster import Cluster, open_store
from trajlog import Identity
from trajlog.errors import SessionNotFoundError

TABLES = ("sessions", "session_heads", "chunks", "event_index", "call_index", "memories",
          "tombstones", "memory_head", "memory_text", "projection_states", "search_text",
          "search_marks")


@pytest.fixture
def two_tenants(pg: Cluster, schema: str) -> dict[str, str]:
    """acme and globex each with a session (events, a tool call, an erased
    event), memory items (one revoked) and a saved projection state."""
    ids = {}
    for tenant in ("acme", "globex"):
        with open_store(pg.app_url, schema, tenant) as store:
            s = store.create_session(cwd=f"/{tenant}")
            with s.turn():
                s.append("user/message", {"content": f"{tenant} secret"})
                with s.step():
                    s.append("assistant/message", {"content": "", "tool_calls": [
                        {"id": "c1", "name": "run"}]})
                    s.append("tool/call", {"call_id": "c1", "name": "run", "arguments": {}})
                    s.append("tool/result", {"call_id": "c1", "output": "ok",
                                             "is_error": False})
            mem = store.memory(Identity("shared-name", user="u"))
            gone = mem.remember("user", "fact", {"text": f"{tenant} memo"})
            mem.remember("user", "fact", {"text": f"{tenant} kept memo"})
            mem.revoke(gone.id, reason="r")
            assert store.search("secret")   # (the search index's rows)
            store.erase(s.id, [1], reason="r")
            ids[tenant] = s.id
    return ids


def _counts(url: str, schema: str, tenant: str | None) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        if tenant is not None:
            conn.execute("SELECT set_config('trajlog.tenant', %s, true)", (tenant,))
        out = {t: int(conn.execute(f'SELECT count(*) FROM "{schema}".{t}').fetchone()[0])
               for t in TABLES}
        conn.rollback()
    return out


def test_pg_a_store_sees_only_its_tenant(pg: Cluster, schema: str, two_tenants):
    with open_store(pg.app_url, schema, "acme") as acme:
        assert [h.id for h in acme.sessions()] == [two_tenants["acme"]]
        # search: the same words in both tenants, only acme's rows found (and
        # its erased message's words in neither)
        hits = acme.search("ok")
        assert hits and {h.session_id for h in hits} == {two_tenants["acme"]}
        assert acme.search("secret").hits == () and acme.search("globex").hits == ()
        with pytest.raises(SessionNotFoundError):
            acme.load(two_tenants["globex"])
        mem = acme.memory(Identity("shared-name", user="u"))
        assert [i.content["text"] for i in mem.list()] == ["acme kept memo"]
        assert mem.search("memo") and all("acme" in i.content["text"] for i in mem.search("memo"))
        reader = acme._e.backend.reader()
        tombs = reader.tombstones(0, 100)
        head = reader.memory_head()
        assert len(tombs) == 2 and head == (3, 2, 3, 2)   # (its own versions, dense ids)
        # the other tenant's session is not writable through this store either
        sid = None
        with open_store(pg.app_url, schema, "globex") as globex:
            sid = globex._e.backend.reader().session_by_id(two_tenants["globex"]).sid
        assert reader.session_by_sid(sid) is None and reader.chunks(sid, 0, 100) == []


def test_pg_a_raw_connection_sees_its_tenant_or_nothing(pg: Cluster, schema: str, two_tenants):
    acme = _counts(pg.app_url, schema, "acme")
    globex = _counts(pg.app_url, schema, "globex")
    admin = _counts(pg.admin_url, schema, None)   # (a superuser bypasses RLS)
    assert all(acme[t] > 0 for t in TABLES if t not in ("projection_states",)), acme
    assert acme == globex and {t: 2 * n for t, n in acme.items()} == admin
    assert set(_counts(pg.app_url, schema, None).values()) == {0}
    assert set(_counts(pg.app_url, schema, "initech").values()) == {0}


@pytest.mark.parametrize("statement", [
    "INSERT INTO sessions(tenant_id, id, session_key, created_ms, cwd, seed_chain, metadata, "
    "header_check) VALUES ('globex', repeat('x', 36), 0, 0, '/', 0, '', 0)",
    "UPDATE session_heads SET lease_owner = 'me' WHERE tenant_id = 'globex'",
    "INSERT INTO chunks(cid, n, raw_len, codec, body_check, seed_chain, last_chain, body) "
    "SELECT max(cid) + 1000, 1, 40, 0, 0, 0, 0, '' FROM chunks",
    "UPDATE memory_head SET tenant_id = 'globex'",
])
def test_pg_another_tenants_rows_are_unwritable(pg: Cluster, schema: str, two_tenants,
                                                statement):
    with psycopg.connect(pg.app_url) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute("SELECT set_config('trajlog.tenant', 'acme', true)")
        try:
            cur = conn.execute(statement)
            assert cur.rowcount == 0, f"{statement}: {cur.rowcount} row(s) written"
        except psycopg.Error as exc:
            assert exc.sqlstate in ("42501", "TL001", "23503"), exc
        finally:
            conn.rollback()
    assert _counts(pg.app_url, schema, "globex") == _counts(pg.app_url, schema, "acme")


def test_pg_no_tenant_set_writes_nothing(pg: Cluster, schema: str, two_tenants):
    with psycopg.connect(pg.app_url) as conn:
        with pytest.raises(psycopg.Error):
            conn.execute(f'INSERT INTO "{schema}".memory_text_state(present) VALUES (false)')
        conn.rollback()
        cur = conn.execute(f'UPDATE "{schema}".session_heads SET lease_owner = %s', ("x",))
        assert cur.rowcount == 0
        conn.rollback()
