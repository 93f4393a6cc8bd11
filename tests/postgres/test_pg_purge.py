"""Erasure on PostgreSQL, proved on the pages: the erased payload is gone
from the rows at once; from the data files only as far as ``purge()`` says
(pageinspect reads every page of the tables and their TOAST)."""

from __future__ import annotations

import pytest

from kits.pgcluster import Cluster, open_store
from trajlog import Identity

SECRET = b"SECRET-PAYLOAD"


def _copies(pg: Cluster, schema: str, table: str) -> dict[str, int]:
    """How many pages' bytes hold the secret, in the heap and the TOAST."""
    out = {}
    with pg.connect() as conn:   # (a superuser: pageinspect)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        heap, toast = conn.execute(
            "SELECT c.oid, c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON "
            "n.oid = c.relnamespace WHERE nspname = %s AND relname = %s",
            (schema, table)).fetchone()
        for name, rel in (("heap", heap), ("toast", toast)):
            pages = conn.execute("SELECT pg_relation_size(%s) / 8192", (rel,)).fetchone()[0]
            out[name] = sum(conn.execute("SELECT get_raw_page(%s::regclass::text, %s)",
                                         (rel, p)).fetchone()[0].count(SECRET)
                            for p in range(pages))
    return out


def _erase(pg: Cluster, url: str, schema: str, vacuum_full: bool = False):
    with open_store(url, schema, "acme", repack=False, vacuum_full=vacuum_full) as store:
        s = store.create_session()
        for i in range(20):   # small rows: the payload in the heap
            s.append("user/message", {"content": f"{SECRET.decode()} {i}"})
        s.append("user/message", {"content": SECRET.decode() + "q" * 6000})   # TOAST
        before = _copies(pg, schema, "chunks")
        report = store.erase(s.id, list(range(21)), reason="gdpr")
        assert s.verify().ok and SECRET.decode() not in repr(list(s.events()))
    assert before["heap"] >= 20 and before["toast"] >= 1
    return report, _copies(pg, schema, "chunks")


def test_pg_purge_as_the_app_role_names_the_dead_tuples(pg: Cluster, schema: str):
    with pg.connect() as conn:   # (autovacuum would remove the dead tuples at its own time)
        conn.execute(f'ALTER TABLE "{schema}".chunks SET (autovacuum_enabled = false, '
                     "toast.autovacuum_enabled = false)")
    report, after = _erase(pg, pg.app_url, schema)
    # VACUUM is the owner's: the old TOAST chunks are dead tuples, still in the file
    assert report.purged == () and after["toast"] >= 1
    assert any("dead tuples" in r and "VACUUM" in r for r in report.residues)
    assert any("WAL archive, streaming replicas and base backups" in r for r in report.residues)


def test_pg_purge_as_the_owner_vacuums(pg: Cluster, schema: str):
    report, after = _erase(pg, pg.owner_url, schema)
    assert report.purged and "VACUUM ran" in report.purged[0]
    # VACUUM does not zero the freed space (measured: some copies stay in the
    # pages until overwritten): what stays is named
    assert any("without zeroing" in r for r in report.residues)
    assert after["heap"] + after["toast"] < 21


@pytest.mark.parametrize("what", ["event", "memory"])
def test_pg_purge_with_vacuum_full_leaves_no_page_holding_the_bytes(pg: Cluster, schema: str,
                                                                     what: str):
    if what == "event":
        report, after = _erase(pg, pg.owner_url, schema, vacuum_full=True)
    else:
        with open_store(pg.owner_url, schema, "acme", vacuum_full=True) as store:
            mem = store.memory(Identity("acme", user="u"))
            item = mem.remember("user", "fact", {"text": f"{SECRET.decode()} " * 3})
            assert _copies(pg, schema, "memories")["heap"] >= 1
            report = mem.revoke(item.id, reason="gdpr")
        after = _copies(pg, schema, "memories")
    assert "VACUUM FULL ran" in report.purged[0]
    assert after == {"heap": 0, "toast": 0}
