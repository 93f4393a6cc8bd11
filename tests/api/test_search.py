"""Search across sessions (both backends): ranked hits with snippets and
links, the filters in the statement before the rank, a derived index that
appends never write, caught up to a stated point, dropped and rebuilt from
the logs, and every erasure's text gone from it -- on the SQLite file's
bytes (its FTS5 shadow tables and free pages) and from PostgreSQL's rows."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import trajlog
from kits.tamper import file_bytes
from trajlog.aio import AsyncStore
from trajlog.errors import InvalidArgumentError, SessionNotFoundError
from trajlog.storage.sqlite import SQLiteBackend


def _sqlite(store: Any) -> bool:
    return isinstance(store._e.backend, SQLiteBackend)


def _sql(store: Any, query: str, args: tuple[Any, ...] = ()) -> list[Any]:
    """Rows of ``query`` on the store's own reader (its tenant, on PostgreSQL)."""
    backend = store._e.backend
    if _sqlite(store):
        return list(backend.connection().execute(query, args).fetchall())
    return backend.reader()._run(lambda conn: conn.execute(query.replace("?", "%s"),
                                                           args).fetchall())


def _docs(store: Any) -> int:
    return store._e.backend.reader().search_index_rows()


def _fill(store: Any) -> tuple[Any, Any]:
    a = store.create_session(cwd="/repo", metadata={"tenant": "acme", "user": "bob"})
    a.append("user/message", {"content": "the quokka test is flaky again"}, time=1000)
    a.append("assistant/message", {"content": "running the quokka suite"}, time=2000)
    a.append("note", {"text": "quokka quokka quokka"}, branch_id="b2", time=3000)
    b = store.create_session(cwd="/other", metadata={"tenant": "globex"})
    b.append("user/message", {"content": "facts about the quokka"}, data_class="restricted",
             time=4000)
    return a, b


def test_search_returns_ranked_hits_with_snippets_and_links(tmp_path):
    with trajlog.open(str(tmp_path / "s.db")) as store:
        a, _ = _fill(store)
        result = store.search("quokka")
        assert len(result) == 4 and result.caught_up and result.indexed == 4
        assert [h.score for h in result] == sorted((h.score for h in result), reverse=True)
        top = result[0]
        assert (top.session_id, top.seq, top.type) == (a.id, 2, "note")
        assert "[quokka]" in top.snippet
        assert top.command == f"trajlog show {a.id} --from 2 --to 2"
        assert top.viewer_anchor == f"#session={a.id}&view=events&seq=2"
        assert {(h.session_id, h.seq) for h in store.search("quokka flaky")} == {(a.id, 0)}
        assert not store.search("wombat")
        with pytest.raises(InvalidArgumentError):
            store.search("   ")
        with pytest.raises(SessionNotFoundError):
            store.search("quokka", sessions=["no-such-session"])


def test_filters_are_in_the_statement_before_the_rank(tmp_path):
    """limit=1 with a filter that keeps only a lower-ranked event: a
    post-filter of the top hit would return nothing."""
    with trajlog.open(str(tmp_path / "s.db")) as store:
        a, b = _fill(store)
        def one(**f: Any) -> list[tuple[str, int]]:
            return [(h.session_id, h.seq) for h in store.search("quokka", limit=1, **f)]
        assert one() == [(a.id, 2)]
        assert one(types=["user/message"], sessions=[a.id]) == [(a.id, 0)]
        assert one(types=["user/"], sessions=[a.id]) == [(a.id, 0)]
        assert one(types=["assistant/*"]) == [(a.id, 1)]
        assert one(tenant="globex") == [(b.id, 0)]
        assert one(tenant="acme", user="bob", types=["user/message"]) == [(a.id, 0)]
        assert one(user="nobody") == []
        assert one(cwd="/other") == [(b.id, 0)]
        assert one(data_class="restricted") == [(b.id, 0)]
        assert one(branch="b2") == [(a.id, 2)]
        t1 = a.get(1).time
        assert one(since_ms=t1, until_ms=t1, sessions=[a.id]) == [(a.id, 1)]
        assert one(until_ms=a.get(0).time - 1) == []


def test_the_plan_matches_with_the_filters_in_the_statement(tmp_path):
    with trajlog.open(str(tmp_path / "s.db")) as store:
        _fill(store)
        store.update_search_index()
        backend = store._e.backend
        if _sqlite(store):
            from trajlog.storage.search_model import SearchFilter
            from trajlog.storage.sqlite_search import search_sql
            sql, args = search_sql(SearchFilter(cwd="/repo", types=("user/",)), ("[", "]"))
            args.insert(3, '"quokka"')
            plan = " | ".join(str(r[3]) for r in backend.connection().execute(
                "EXPLAIN QUERY PLAN " + sql, (*args, 5)))
            assert "SCAN f VIRTUAL TABLE INDEX" in plan, plan   # the FTS5 match drives
            assert "SEARCH d USING INTEGER PRIMARY KEY" in plan, plan
            assert "tombstones_event" in plan, plan               # the anti-join, indexed
        else:
            from trajlog.storage.postgres_search import headline_options, search_sql
            from trajlog.storage.search_model import SearchFilter
            sql, args = search_sql(SearchFilter(cwd="/repo", types=("user/",)))

            def explain(conn: Any) -> str:
                return "\n".join(r[0] for r in conn.execute(
                    "EXPLAIN " + sql, ["quokka", headline_options(("[", "]")), *args, 5]))
            plan = backend.reader()._run(explain)
            # the match, the filters and the anti-join in the one statement, under
            # the LIMIT (which index serves the match is the planner's choice by
            # the tables' statistics: the GIN index at scale, benchmarks/bench_search.py)
            assert "tsv @@" in plan and "'/repo'" in plan and '"left"(type, 5)' in plan, plan
            assert "Anti Join" in plan and "tombstones_event" in plan, plan
            assert plan.index("Limit") < plan.index("Sort") < plan.index("tsv @@"), plan


def test_appends_never_write_the_index_and_a_search_catches_it_up(tmp_path):
    with trajlog.open(str(tmp_path / "s.db")) as store:
        a, _ = _fill(store)
        assert store.update_search_index() == 4
        before = _docs(store)
        for i in range(5):
            a.append("user/message", {"content": f"later platypus {i}"})
        assert _docs(store) == before                      # not on the append's path
        stale = store.search("platypus", catch_up=False)
        assert len(stale) == 0 and not stale.caught_up
        start = time.time_ns() // 1_000_000
        fresh = store.search("platypus")
        assert len(fresh) == 5 and fresh.indexed == 5 and fresh.as_of_ms >= start
        assert _docs(store) == before + 5
        assert store.search("platypus").indexed == 0       # caught up: nothing twice


def test_drop_and_rebuild_from_the_logs(tmp_path):
    with trajlog.open(str(tmp_path / "s.db")) as store:
        _fill(store)
        assert len(store.search("quokka")) == 4
        store.drop_search_index()
        if _sqlite(store):
            assert not store._e.backend.reader().search_index_exists()
        else:
            assert _docs(store) == 0
        assert len(store.search("quokka", catch_up=False)) == 0
        assert store.rebuild_search_index() == 4
        assert _docs(store) == 4 and len(store.search("quokka", catch_up=False)) == 4
        assert store.verify().ok


def test_a_fork_is_indexed_from_its_own_log(tmp_path):
    with trajlog.open(str(tmp_path / "s.db")) as store:
        a, _ = _fill(store)
        f = a.fork(1)
        f.append("user/message", {"content": "a forked quokka"})
        hits = [(h.session_id, h.seq) for h in store.search("quokka", sessions=[f.id])]
        assert hits == [(f.id, 2)]   # its inherited prefix is found in the parent's log


@pytest.mark.parametrize("how", ["erase", "retention"])
def test_an_erased_events_text_leaves_the_index(tmp_path, how):
    word = "SECRETWORD" + how.upper()
    path = str(tmp_path / "s.db")
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/repo")
        for i in range(40):
            s.append("user/message", {"content": f"{word} {i} ordinary filler text"})
        s.append("user/message", {"content": "kept ordinary text"})
        assert len(store.search(word, limit=100)) == 40
        if how == "erase":
            store.erase(s.id, list(range(40)), reason="gdpr")
        else:
            s.append("retention/policy", {"ttl_ms": 1000})
            report = store.apply_retention(now_ms=max(e.time for e in s.events()) + 5000)
            assert len(report.events_erased) >= 40
        assert len(store.search(word, catch_up=False, limit=100)) == 0
        if how == "erase":
            assert len(store.search("kept")) == 1
        sqlite = _sqlite(store)
        if not sqlite:
            rows = _sql(store, "SELECT count(*) FROM search_text WHERE body LIKE ? OR "
                               "tsv::text LIKE ?", (f"%{word}%", f"%{word.lower()}%"))
            assert rows[0][0] == 0
    if sqlite:
        assert word.encode() not in file_bytes(path)
        assert word.lower().encode() not in file_bytes(path)


def test_the_erasure_hook_is_the_tombstone_write(tmp_path):
    """A store that never searches again after the erasure still holds no
    document of it: the tombstone's own transaction deleted it."""
    with trajlog.open(str(tmp_path / "s.db")) as store:
        a, _ = _fill(store)
        store.update_search_index()
        n = _docs(store)
        store.erase(a.id, [2], reason="r")
        assert _docs(store) == n - 1
        store.erase(a.id, [2], reason="again")   # idempotent: nothing more to remove
        assert _docs(store) == n - 1


def test_the_background_indexer_catches_up_off_the_append_path(tmp_path):
    with trajlog.open(str(tmp_path / "s.db")) as store:
        _fill(store)
        store.search_indexer(0.02)
        deadline = time.monotonic() + 30
        while _docs(store) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _docs(store) == 4
        assert store._search.background_running
        store.search_indexer(None)
        assert not store._search.background_running
        store.search_indexer(0.5)
    assert not store._search.background_running   # close() stops it
    with pytest.raises(InvalidArgumentError):
        trajlog.open(str(tmp_path / "s.db")).search_indexer(0)


def test_the_async_store_searches(tmp_path):
    async def run() -> None:
        store = AsyncStore(trajlog.open(str(tmp_path / "s.db")))
        s = await store.create_session(cwd="/repo")
        await s.append("user/message", {"content": "an async quokka"})
        assert await store.update_search_index() == 1
        hits = await store.search("quokka")
        assert [h.seq for h in hits] == [0]
        assert await store.rebuild_search_index() == 1
        await store.drop_search_index()
        await store.close()
    asyncio.run(run())
