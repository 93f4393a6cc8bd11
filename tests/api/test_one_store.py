"""One store: ``trajlog.open`` returns :class:`trajlog.api.Store` itself, with
every capability, and :mod:`trajlog.aio` offers each of them awaitable --
:class:`AsyncStore`, :class:`AsyncSession` and :class:`AsyncMemoryView` have
the public methods of their sync twins (compared by name below), and the new
ones behave as the sync ones do (export and import, erasure, memory,
retention, repack, lineage, leases, runs)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trajlog
import trajlog.api
from trajlog import aio
from trajlog.memory import Identity, MemoryView

# Deliberate differences, each with its reason.
#: sync methods the async face does not offer
NOT_OFFERED = {
    # a Bulk load holds one write transaction open across its caller's calls;
    # asyncio callers await import_path or load_session, which run whole off the loop
    (trajlog.Store, "bulk_loader"),
}
#: a sync property that reads the database: a coroutine method on the async face
READS_AS_COROUTINE = {(trajlog.Session, "last_seq"), (trajlog.Session, "closed")}
#: an attribute each sync handle sets in ``__init__`` (so not in ``dir`` of its
#: class): a property of the async face
SYNC_ATTRIBUTES = {(trajlog.Session, "header")}
#: blocks (``with``): ``async with`` on the async face
CONTEXT_MANAGERS = {"turn", "step", "lease", "run"}
#: iterators: async iterators on the async face
ITERATORS = {"events", "frames"}


def _public(cls: type) -> dict[str, Any]:
    return {n: inspect.getattr_static(cls, n) for n in dir(cls) if not n.startswith("_")}


def _compare(sync_cls: type, async_cls: type) -> None:
    sync, asyn = _public(sync_cls), _public(async_cls)
    expected = {n for n in sync if (sync_cls, n) not in NOT_OFFERED}
    expected |= {n for c, n in SYNC_ATTRIBUTES if c is sync_cls}
    assert set(asyn) - {"sync"} == expected, (
        f"missing: {sorted(expected - set(asyn))}, extra: {sorted(set(asyn) - expected)}")
    for name, attr in asyn.items():
        if name == "sync":
            continue
        is_property = (sync_cls, name) in SYNC_ATTRIBUTES or (
            isinstance(sync[name], property) and (sync_cls, name) not in READS_AS_COROUTINE)
        if is_property:
            assert isinstance(attr, property), name
        elif name in CONTEXT_MANAGERS:
            # an asynccontextmanager: a plain function returning an async context manager
            assert inspect.isasyncgenfunction(inspect.unwrap(attr)), name
        elif name in ITERATORS:
            assert inspect.isasyncgenfunction(attr), name
        else:
            assert inspect.iscoroutinefunction(attr), name


def test_trajlog_store_is_the_one_store_with_every_capability(tmp_path):
    assert trajlog.Store is trajlog.api.Store
    with trajlog.open(str(tmp_path / "s.db")) as store:
        assert type(store) is trajlog.api.Store
        for name in ("create_session", "session", "sessions", "load", "export",
                     "import_path", "erase", "memory", "apply_retention", "retention_plan",
                     "repack", "verify", "verify_memory", "stats", "append_atomic"):
            assert callable(getattr(store, name)), name

    async def main() -> None:
        async with await aio.open(str(tmp_path / "a.db")) as astore:
            assert type(astore.sync) is trajlog.Store

    asyncio.run(main())


def test_the_async_store_offers_every_method_of_the_store():
    _compare(trajlog.Store, aio.AsyncStore)


def test_the_async_session_offers_every_method_of_the_session():
    _compare(trajlog.Session, aio.AsyncSession)


def test_the_async_memory_view_offers_every_method_of_the_memory_view():
    _compare(MemoryView, aio.AsyncMemoryView)


def _run(tmp_path: Path, body: Callable[[aio.AsyncStore], Awaitable[None]]) -> None:
    async def main() -> None:
        async with await aio.open(str(tmp_path / "a.db")) as astore:
            await body(astore)

    asyncio.run(main())


def _agent_turn(s: trajlog.Session, text: str) -> None:
    with s.turn():
        s.append("user/message", {"content": text})
        s.append("assistant/message", {"content": "ok"})


def test_export_and_import_round_trip_through_aio(tmp_path):
    async def body(astore: aio.AsyncStore) -> None:
        s = await astore.create_session(cwd="/w")
        async with s.turn():
            await s.append("user/message", {"content": "hello"})
        child = await s.spawn_subagent("look around")
        assert isinstance(child, aio.AsyncSession)
        for fmt in ("tlog", "jsonl", "zip"):
            report = await astore.export(s.id, tmp_path / f"out.{fmt}")
            assert report.format == fmt and report.sessions[0] == s.id
        assert (await astore.export(s.id, tmp_path / "out.zip")).sessions == [s.id, child.id]
        again = await astore.import_path(tmp_path / "out.jsonl")
        assert again.skipped == [s.id] and again.events == 0
        async with await aio.open(str(tmp_path / "b.db")) as other:
            imported = await other.import_path(tmp_path / "out.zip")
            assert sorted(imported.created) == sorted([s.id, child.id])
            copy = await other.session(s.id)
            assert [e.data async for e in copy.events()] == [e.data async for e in s.events()]

    _run(tmp_path, body)


def test_erase_memory_and_retention_through_aio(tmp_path):
    async def body(astore: aio.AsyncStore) -> None:
        s = await astore.create_session()
        await s.append("user/message", {"content": "ASYNCSECRET"})
        await s.append("user/message", {"content": "old"})
        await s.append("retention/policy", {"ttl_ms": 1})
        mem = await astore.memory(Identity("acme", user="alice", session=s.id))
        item = await mem.remember("user", "fact", {"text": "ASYNCWORD tabs"})
        assert item is not None
        assert [i.id for i in await mem.search("ASYNCWORD")] == [item.id]
        assert (await mem.get(item.id)).content == {"text": "ASYNCWORD tabs"}
        report = await astore.erase(s.id, 0, reason="gdpr")
        assert report.frames_blanked == 1 and (await s.get(0)).data["erased"]
        assert (await mem.revoke(item.id, reason="gdpr")).memory_versions_blanked >= 1
        assert await mem.search("ASYNCWORD") == []
        _, events = await astore.retention_plan(now_ms=2**62)
        assert [(sid, seqs) for sid, seqs, _ in events] == [(s.id, [1])]
        assert (await astore.apply_retention(2**62)).events_erased
        assert (await astore.verify_memory()).ok and (await astore.verify()).ok
        assert await astore.rebuild_memory_index() >= 0

    _run(tmp_path, body)


def test_lineage_reads_and_maintenance_through_aio(tmp_path):
    async def body(astore: aio.AsyncStore) -> None:
        s = await astore.create_session()
        async with s.turn():
            await s.append("user/message", {"content": "a"})
        fork = await s.fork(await s.last_seq())
        assert isinstance(fork, aio.AsyncSession)
        assert (await fork.parent()).id == s.id  # type: ignore[union-attr]
        assert [c.id for c in await s.children()] == [fork.id]
        assert [h.id for h in await astore.dependents(s.id)] == [fork.id]
        assert (await s.tree()).header.id == s.id
        runs = [r async for r in s.frames()]
        assert [e.seq for r in runs for e in r.events] == list(range(await s.last_seq() + 1))
        assert runs == list(s.sync.frames())
        assert fork.seed_chain == fork.sync.seed_chain
        _, report = await s.inspect()
        assert report.outcome == s.sync.inspect()[1].outcome
        assert await astore.repack() >= 0
        stats = await astore.stats()
        assert len(stats.sessions) == 2
        written = await astore.append_atomic([(s, [("note/x", {})], None),
                                              (fork.id, [("note/y", {})], None)])
        assert [[e.type for e in w] for w in written] == [["note/x"], ["note/y"]]
        assert {h.id for h in await astore.sessions()} == {s.id, fork.id}

    _run(tmp_path, body)


def test_lease_and_run_blocks_through_aio(tmp_path):
    async def body(astore: aio.AsyncStore) -> None:
        s = await astore.create_session()
        other = trajlog.open(astore.sync.path)
        try:
            async with s.lease():
                with contextlib.suppress(trajlog.errors.LeaseHeldError), \
                        other.session(s.id).lease():
                    raise AssertionError("a second writer took a held lease")
            with other.session(s.id).lease():   # given back
                pass
        finally:
            other.close()
        async with s.run(model="m1") as run:
            await s.append("user/message", {"content": "hi"})
            switch = await s.switch_model(old="m1", new="m2", reason="cheaper")
            assert switch.data["run_id"] == run.id   # the open run is seen off the loop
        assert run.finalized is not None and run.finalized.data["state"] == "completed"
        types = [e.type async for e in s.events()]
        assert types == ["run/started", "user/message", "model/switch", "run/finalized"]
        with contextlib.suppress(ValueError):
            async with s.run(model="m1") as failing:
                raise ValueError("boom")
        assert failing.finalized is not None
        assert failing.finalized.data["state"] == "failed"

    _run(tmp_path, body)


def test_checkpoints_compaction_and_subagents_through_aio(tmp_path):
    async def body(astore: aio.AsyncStore) -> None:
        s = await astore.create_session()
        async with s.turn():
            await s.append("user/message", {"content": "a"})
            await s.append("assistant/message", {"content": "b"})
        compaction = await s.compact(1, 2, "summary")
        assert compaction.type == "compaction/apply"
        mark = await s.mark(1, "superseded", "stale", source="human")
        assert mark.type == "event/status"
        await s.append("goal/change", {"revision": 1, "goal": {"text": "g"}}, source="user")
        await s.append("context/injection", {"policy": "p", "selected": []}, source="system")
        assert (await s.checkpoint("context-ready")).type == "checkpoint/stage"
        assert (await s.resume()).outcome in ("resumed", "paused")
        child = await s.spawn_subagent("task", background=True)
        assert await child.task() == "task"
        assert (await child.finish()).type in ("tool/result", "subagent/notification")
        assert await s.missed_notifications() == []
        assert await s.approvals() == []
        assert (await s.fold_source()) is not None
        assert json.dumps((await s.tail(1))[0].data)

    _run(tmp_path, body)
