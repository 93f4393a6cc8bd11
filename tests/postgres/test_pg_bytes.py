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


def _reads(reader, sid: int) -> dict:
    """Every Reader look-up of one session, keyed by what it asked."""
    out: dict = {}
    big = 1 << 40
    for args in ((0, big), (5, 100), (0, 3), (100, 50), (401, big)):
        for limit, budget in ((-1, -1), (2, -1), (-1, 500), (3, 1)):
            out["chunks", args, limit, budget] = reader.chunks(sid, *args, limit, budget)
            out["log_range", args, limit, budget] = tuple(reader.log_range(sid, *args, limit,
                                                                           budget))
        out["marks", args] = reader.marks(sid, *args)
        out["index_rows", args] = reader.index_rows(sid, *args)
        out["chunk_meta", args] = reader.chunk_meta(sid, *args)
        out["row_checks", args] = reader.row_checks(sid, *args)
        out["repack_run", args] = reader.repack_run(sid, *args)
    for seq in (0, 1, 4, 5, 200, 404, 405, big):
        out["chunk_at", seq] = reader.chunk_at(sid, seq)
        out["locate", seq] = (reader.locate(sid, seq, True), reader.locate(sid, seq, False))
        for type_ in ("turn/start", "turn/end"):
            out["marker", type_, seq] = (reader.marker_at_or_before(sid, type_, seq),
                                         reader.marker_after(sid, type_, seq))
    out["head_stored"] = reader.head_stored(sid)
    out["sizes"] = reader.chunk_sizes(sid)[:2]   # (stored bytes: the engine's own measure)
    out["max_seq"] = reader.max_seq(sid)
    out["key"] = reader.seq_of_idempotency_key(sid, "k")
    out["calls"] = (reader.call_requested(sid, "c1"), reader.calls_requested(sid, ["c1", "x"]),
                    reader.call_count(sid))
    return out


def test_pg_every_read_answers_as_on_sqlite(pg: Cluster, schema: str, tmp_path):
    """The same session, written through the API on each backend with the
    same fixed times: every Reader look-up gives the same answer."""
    with trajlog.open(str(tmp_path / "a.db"), repack=False) as lite:
        s = lite.create_session(cwd="/r")
        _write(s)
        for i in range(5):
            s.append("note/y", {"i": i}, time=i)
        lite.export(s.id, tmp_path / "x.tlog")
    with trajlog.open(str(tmp_path / "b.db"), repack=False) as lite:
        lite.import_path(tmp_path / "x.tlog")
        reader = lite._e.backend.reader()
        want = _reads(reader, reader.session_by_id(s.id).sid)
    with open_store(pg.app_url, schema, "acme", repack=False) as store:
        store.import_path(tmp_path / "x.tlog")
        reader = store._e.backend.reader()
        got = _reads(reader, reader.session_by_id(s.id).sid)
    assert got.keys() == want.keys()
    assert [k for k in want if got[k] != want[k]] == []
