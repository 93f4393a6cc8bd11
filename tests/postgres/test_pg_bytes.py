"""Byte identity across backends: chunk bodies, checks and chains are stored
exactly as the codec made them, so a session exported from either backend
verifies and imports into the other, and the same import gives the same
rows, byte for byte, on both."""

from __future__ import annotations

import trajlog
from kits.pgcluster import Cluster, open_store


def _write(s) -> None:
    t = 1_700_000_000_000
    with s.turn():
        s.append("user/message", {"content": "hello ü " * 20}, time=t, idempotency_key="k")
        with s.step():
            s.append("assistant/message", {"content": "", "tool_calls": [
                {"id": "c1", "name": "run", "arguments": {"x": 1}}]}, time=t + 1)
            s.append("tool/call", {"call_id": "c1", "name": "run", "arguments": {"x": 1}},
                     time=t + 2)
            s.append("tool/result", {"call_id": "c1", "output": "ok " * 500,
                                     "is_error": False}, time=t + 3)
    s.append_batch([(f"note/{i}", {"n": i, "pad": "y" * (i % 50)}) for i in range(400)])


def _rows(store, session_id: str) -> list:
    backend = store._e.backend
    reader = backend.reader()
    sid = reader.session_by_id(session_id).sid
    return [tuple(c) for c in reader.chunks(sid, 0, 1 << 40)]


def _import(store, path, session_id: str, out) -> list:
    """Import ``path``, verify, export to ``out``; the session's rows."""
    store.import_path(path)
    assert store.load(session_id).verify().ok
    store.export(session_id, out)
    return _rows(store, session_id)


def test_pg_exports_cross_both_ways_byte_for_byte(pg: Cluster, schema: str, tmp_path):
    """An export of each backend imports into both; the two imports store
    the same rows and export the same bytes."""
    with trajlog.open(str(tmp_path / "a.db")) as lite:
        s = lite.create_session(cwd="/r")
        _write(s)
        lite.export(s.id, tmp_path / "from_sqlite.tlog")
        lite_id = s.id
    with open_store(pg.app_url, schema, "acme") as store:
        native = store.create_session(cwd="/p")
        _write(native)
        assert native.verify().ok
        store.export(native.id, tmp_path / "from_pg.tlog")
        pg_id = native.id
    for name, sid in (("from_sqlite", lite_id), ("from_pg", pg_id)):
        src = tmp_path / f"{name}.tlog"
        with trajlog.open(str(tmp_path / f"{name}.db")) as lite:
            lite_rows = _import(lite, src, sid, tmp_path / f"{name}.sqlite.tlog")
        with open_store(pg.app_url, schema, f"import-{name}") as store:
            pg_rows = _import(store, src, sid, tmp_path / f"{name}.pg.tlog")
        assert pg_rows == lite_rows   # bodies, checks and chains, byte for byte
        assert (tmp_path / f"{name}.pg.tlog").read_bytes() == (
            tmp_path / f"{name}.sqlite.tlog").read_bytes()
