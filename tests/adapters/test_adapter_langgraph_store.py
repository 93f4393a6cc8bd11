"""TrajlogStore: LangGraph's BaseStore over trajlog memory -- what LangGraph's
own suite (peers/langgraph_store/run.py) does not check: that the items are
trajlog memory items, that a delete leaves no byte of the value in the files,
TTL through trajlog retention, the key mapping, and concurrent writers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, Item, PutOp, SearchOp

import trajlog
from trajlog import Identity
from trajlog.adapters.langgraph.base_store import TrajlogStore, item_key

SQLITE_ERASED = "proves what is gone on the bytes of the SQLite file and its WAL"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "lg.db"


@pytest.fixture
def store(path: Path) -> Iterator[TrajlogStore]:
    with TrajlogStore.open(str(path)) as s:
        yield s


def test_put_get_update_keeps_created_at_and_versions(store: TrajlogStore) -> None:
    store.put(("users", "alice"), "prefs", {"editor": "vim"})
    first = store.get(("users", "alice"), "prefs")
    assert first is not None and first.value == {"editor": "vim"}
    time.sleep(0.005)
    store.put(("users", "alice"), "prefs", {"editor": "emacs"})
    second = store.get(("users", "alice"), "prefs")
    assert second is not None and second.value == {"editor": "emacs"}
    assert second.created_at == first.created_at < second.updated_at
    # one memory item, two versions, in user scope of the store's identity
    mi = store.memory.find("user", item_key(("users", "alice"), "prefs"))
    assert mi is not None and mi.scope == "user" and mi.type == "fact"
    assert [v.content["value"] for v in store.memory.history(mi.id)] == [
        {"editor": "vim"}, {"editor": "emacs"}]
    assert store.get(("users", "alice"), "other") is None
    assert store.get(("users",), "prefs") is None


@pytest.mark.sqlite_only(reason=SQLITE_ERASED)
def test_delete_is_a_revocation_that_leaves_no_byte(path: Path) -> None:
    secret = "sk-live-7f3a9c1e5b2d4f6a8e0c"
    with TrajlogStore.open(str(path)) as s:
        s.put(("keys",), "api", {"token": secret})
        s.put(("keys",), "api", {"token": secret + "-rotated"})
        mi = s.memory.find("user", item_key(("keys",), "api"))
        assert mi is not None
        s.delete(("keys",), "api")
        assert s.get(("keys",), "api") is None and s.search(("keys",)) == []
        assert s.memory.get(mi.id).state == "revoked"
        assert s._store.verify_memory().ok
        s.delete(("keys",), "never-there")   # a delete of nothing writes nothing
    for f in path.parent.iterdir():
        assert secret.encode() not in f.read_bytes(), f.name


def test_same_value_under_two_keys_is_two_items(store: TrajlogStore) -> None:
    store.put(("a",), "k1", {"v": 1})
    store.put(("a",), "k2", {"v": 1})
    store.delete(("a",), "k1")
    assert store.get(("a",), "k2") is not None
    # a put after a delete is a new item again
    store.put(("a",), "k1", {"v": 1})
    assert {i.key for i in store.search(("a",))} == {"k1", "k2"}


def test_keys_never_collide_and_long_keys_hash(store: TrajlogStore) -> None:
    pairs = [(("a", "b"), "c"), (("a",), "b..c"), (("a",), "b.c"), (("a", "b", "c"), ""),
             (("x",) * 40, "k" * 300), ((), "root")]
    for i, (ns, key) in enumerate(pairs):
        store.batch([PutOp(ns, key, {"i": i})])
    assert len({item_key(ns, k) for ns, k in pairs}) == len(pairs)
    assert item_key(("x",) * 40, "k" * 300).startswith("#")
    for i, (ns, key) in enumerate(pairs):
        got = store.get(ns, key)
        assert got is not None and got.value == {"i": i} and got.namespace == ns


def test_search_filters_pages_and_full_text(store: TrajlogStore) -> None:
    for i in range(6):
        store.put(("docs", "en" if i % 2 else "fr"), f"d{i}",
                  {"n": i, "text": f"note number {i}", "tag": {"kind": "odd" if i % 2 else
                                                             "even"}})
    assert {i.key for i in store.search(("docs",), filter={"n": {"$gte": 2, "$lt": 5}})} == {
        "d2", "d3", "d4"}
    assert {i.key for i in store.search(("docs",), filter={"tag": {"kind": "odd"}})} == {
        "d1", "d3", "d5"}
    assert {i.key for i in store.search(("docs",), filter={"n": {"$ne": 0}})} == {
        "d1", "d2", "d3", "d4", "d5"}
    full = [i.key for i in store.search(("docs",), limit=10)]
    assert full == [f"d{i}" for i in reversed(range(6))]   # last written first
    assert [i.key for i in store.search(("docs",), limit=2, offset=3)] == full[3:5]
    assert [i.key for i in store.search(("docs", "en"), query="number 3")] == ["d3"]
    assert store.search(("docs",), query="absent") == []
    with TrajlogStore(store._store, fts=False) as plain:   # query ignored, no index
        assert len(plain.search(("docs",), query="absent")) == 6


def test_list_namespaces(store: TrajlogStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "c", "f"), ("b", "a", "f")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces(prefix=("a", "*"), suffix=("f",)) == [("a", "c", "f")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "c"), ("b", "a")]
    assert store.list_namespaces(prefix=("a",), limit=1, offset=1) == [("a", "b", "d", "e")]
    store.delete(("a", "c", "f"), "k")
    assert store.list_namespaces(suffix=("f",)) == [("b", "a", "f")]


def test_ttl_expires_and_sweeps_through_trajlog_retention(store: TrajlogStore) -> None:
    store.put(("t",), "short", {"v": 1}, ttl=0.001)   # 60 ms
    store.put(("t",), "kept", {"v": 2})
    mi = store.memory.find("user", item_key(("t",), "short"))
    assert mi is not None and mi.retention == {"ttl_ms": 60}
    time.sleep(0.1)
    # expired: never returned, swept or not
    assert store.get(("t",), "short") is None
    assert [i.key for i in store.search(("t",))] == ["kept"]
    assert store.sweep_ttl() == 1
    assert store.memory.get(mi.id).state == "revoked"
    assert store.sweep_ttl() == 0


def test_refresh_on_read_restarts_the_ttl(path: Path) -> None:
    with TrajlogStore.open(str(path), ttl={"refresh_on_read": True,
                                           "default_ttl": 0.006}) as s:   # 360 ms
        s.put(("t",), "a", {"v": 1})
        s.put(("t",), "b", {"v": 2})
        created = s.get(("t",), "a", refresh_ttl=False)
        time.sleep(0.2)
        assert s.get(("t",), "a") is not None                     # refreshed at 200 ms
        assert s.get(("t",), "b", refresh_ttl=False) is not None
        time.sleep(0.2)
        assert s.get(("t",), "a") is not None                     # 200 ms after it
        assert s.get(("t",), "b", refresh_ttl=False) is None      # 400 ms: expired
        again = s.get(("t",), "a")
        assert again is not None and created is not None
        assert again.created_at == created.created_at   # a refresh is not an update
        assert again.updated_at == created.updated_at


def test_batch_reads_before_puts_and_last_put_wins(store: TrajlogStore) -> None:
    store.put(("n",), "k", {"v": 0})
    got = store.batch([PutOp(("n",), "k", {"v": 1}), GetOp(("n",), "k"),
                       PutOp(("n",), "k", {"v": 2}), SearchOp(("n",))])
    assert got[0] is None and got[2] is None
    read, found = got[1], got[3]
    assert isinstance(read, Item) and read.value == {"v": 0}
    assert isinstance(found, list) and [i.value for i in found if isinstance(i, Item)] == [
        {"v": 0}]
    assert store.get(("n",), "k").value == {"v": 2}  # type: ignore[union-attr]


def test_async_face(store: TrajlogStore) -> None:
    async def main() -> None:
        await asyncio.gather(*(store.aput(("a",), f"k{i}", {"i": i}) for i in range(10)))
        assert len(await store.asearch(("a",), limit=20)) == 10
        assert (await store.aget(("a",), "k3")).value == {"i": 3}  # type: ignore[union-attr]
        await store.adelete(("a",), "k3")
        assert await store.aget(("a",), "k3") is None
        assert await store.asweep_ttl() == 0

    asyncio.run(main())


def test_threads_putting_one_key_make_one_item(store: TrajlogStore) -> None:
    def put(i: int) -> None:
        store.put(("race",), "k", {"i": i})

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    items = store.memory.list(key=item_key(("race",), "k"))
    assert len(items) == 1 and items[0].state == "active"


def test_items_it_did_not_write_are_ignored(store: TrajlogStore) -> None:
    store.memory.remember("user", "fact", {"text": "not a langgraph record"}, key="x..y")
    assert store.get(("x",), "y") is None and store.search(()) == []
    assert store.list_namespaces() == []


def test_refuses_vector_index_and_shares_an_async_store(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as raw:
        with pytest.raises(NotImplementedError):
            TrajlogStore(raw, index={"dims": 4, "embed": lambda xs: [[0.0] * 4 for _ in xs]})
        a = TrajlogStore(raw, tenant="acme", user="alice")
        b = TrajlogStore(raw, tenant="acme", user="bob")
        a.put(("p",), "k", {"v": "a"})
        assert b.get(("p",), "k") is None       # another identity's scope
        mine = raw.memory(Identity("acme", user="alice")).list()
        assert [m.content["value"] for m in mine] == [{"v": "a"}]

    async def via_aio() -> None:
        astore = await trajlog.aio.open(str(tmp_path / "b.db"))
        s = TrajlogStore(astore)
        await s.aput(("q",), "k", {"v": 1})
        assert (await s.aget(("q",), "k")).value == {"v": 1}  # type: ignore[union-attr]
        await astore.close()

    asyncio.run(via_aio())


def test_search_finds_every_label_kind_with_and_without_the_index(store: TrajlogStore) -> None:
    namespaces = [("users", "u1"), ("users", "u1", "deep"), ("users", "u10"), ("Users", "u1"),
                  ("users", "a_%"), ("users", "naïve"), ("users", "e\u0301t\u00e9"),
                  ("users", "日本"), ("users", "x-y")]
    for i, ns in enumerate(namespaces):
        store.put(ns, f"k{i}", {"i": i, "text": "users u1"})   # words of other labels too
    for dropped in (False, True):
        if dropped:
            store._store.drop_memory_index()
        for ns in namespaces:
            want = {n for n in namespaces if n[:len(ns)] == ns}
            assert {i.namespace for i in store.search(ns, limit=100)} == want, ns
            assert set(store.list_namespaces(prefix=ns)) == want, ns
        assert len(store.search((), limit=100)) == len(namespaces)
        assert [i.key for i in store.search(("users",), query="users", limit=3)] != []


def test_a_ttl_refresh_is_a_new_version_of_the_same_item(tmp_path: Path) -> None:
    with TrajlogStore.open(str(tmp_path / "r.db"), ttl={"refresh_on_read": True}) as s:
        s.put(("t",), "k", {"v": 1}, ttl=1)
        first = s.memory.find("user", item_key(("t",), "k"))
        assert first is not None and first.expires_ms is not None
        time.sleep(0.01)
        assert s.get(("t",), "k") is not None          # refreshes the ttl
        again = s.memory.find("user", item_key(("t",), "k"))
        assert again is not None and again.id == first.id and again.version == 2
        assert again.expires_ms is not None and again.expires_ms > first.expires_ms
        s.put(("t",), "k", {"v": 2}, ttl=1)             # a put restarts it too
        put = s.memory.find("user", item_key(("t",), "k"))
        assert put is not None and put.id == first.id and put.content["value"] == {"v": 2}
