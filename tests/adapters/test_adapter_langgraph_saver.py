"""TrajlogSaver (trajlog.adapters.langgraph) beyond LangGraph's conformance
suite (peers/langgraph_checkpoint): several handles on one file, the
backwards scan, erasure, copies as forks, the mirror, and real graphs."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR
from langgraph.graph import END, START, MessagesState, StateGraph

import trajlog
from trajlog import projections
from trajlog.adapters.langgraph import TrajlogSaver
from trajlog.adapters.langgraph._log import PUT, session_id_of
from trajlog.errors import SessionDeletedError


def cfg(thread: str, ns: str = "", cid: str | None = None) -> Any:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if cid is not None:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def put(saver: TrajlogSaver, thread: str, values: dict[str, Any], *, ns: str = "",
        parent: str | None = None, step: int = 0, **md: Any) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = {k: saver.get_next_version(None, None) for k in values}
    metadata: Any = {"source": "loop", "step": step, **md}
    return saver.put(cfg(thread, ns, parent), cp, metadata, cp["channel_versions"])


def chain(saver: TrajlogSaver, thread: str, n: int, ns: str = "") -> list[str]:
    ids: list[str] = []
    for i in range(n):
        stored = put(saver, thread, {"i": i}, ns=ns, parent=ids[-1] if ids else None, step=i)
        ids.append(stored["configurable"]["checkpoint_id"])
    return ids


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "t.db")


def test_values_round_trip_bytes_and_nul(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        values = {"raw": b"\x00\xff\xfe binary", "text": "a\x00b ünïcode", "n": [1, (2, 3)]}
        stored = put(saver, "t", values)
        saver.put_writes(stored, [("raw", b"\x80\x81"), ("s", "\x00")], "task")
        tup = saver.get_tuple(cfg("t"))
        assert tup is not None
        # exactly what the serde gives back (msgpack makes nested tuples lists)
        assert tup.checkpoint["channel_values"] == saver.serde.loads_typed(
            saver.serde.dumps_typed(values))
        assert tup.checkpoint["channel_values"]["raw"] == values["raw"]
        assert tup.pending_writes == [("task", "raw", b"\x80\x81"), ("task", "s", "\x00")]
        assert saver.store.session(session_id_of("t")).verify().ok


def test_two_handles_on_one_file_stay_in_step(db: str) -> None:
    a, b = TrajlogSaver.open(db), TrajlogSaver.open(db)
    try:
        ids = chain(a, "t", 3)
        tup = b.get_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["id"] == ids[-1]
        thread = b._threads[session_id_of("t")]
        assert not thread.full          # the latest came from a backwards scan
        ids += chain(a, "t", 1)
        a.put_writes(cfg("t", cid=ids[-1]), [("x", 1)], "task")
        tup = b.get_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["id"] == ids[-1]
        assert tup.pending_writes == [("task", "x", 1)]
        assert [t.checkpoint["id"] for t in b.list(cfg("t"))] == ids[::-1]
        a.delete_thread("t")
        assert b.get_tuple(cfg("t")) is None and list(b.list(cfg("t"))) == []
        again = chain(b, "t", 1)        # the thread is used again after the marker
        tup = a.get_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["id"] == again[0]
    finally:
        a.close()
        b.close()


def test_backwards_scan_finds_an_old_namespace(db: str) -> None:
    with TrajlogSaver.open(db) as w:
        deep = chain(w, "t", 1, ns="child:1")
        w.put_writes(cfg("t", "child:1", deep[0]), [("c", "v")], "task")
        chain(w, "t", 150)
    with TrajlogSaver.open(db) as r:
        tup = r.get_tuple(cfg("t", "child:1"))
        assert tup is not None and tup.checkpoint["id"] == deep[0]
        assert tup.pending_writes == [("task", "c", "v")]
        assert r.get_tuple(cfg("t", "child:2")) is None
        assert not r._threads[session_id_of("t")].full


def test_delete_deletes_the_session_and_a_later_put_starts_a_new_one(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        chain(saver, "t", 2)
        put(saver, "other", {"keep": 1})
        s = saver.store.session(session_id_of("t"))
        saver.delete_thread("t")
        with pytest.raises(SessionDeletedError) as caught:
            saver.store.session(session_id_of("t"))
        assert caught.value.actor == "langgraph"
        events = list(s.events())        # (a handle from before: the erased log)
        assert events[-1].type == "session/deleted"
        assert all("erased" in ev.data for ev in events[:-1])
        assert s.verify().ok and saver.store.verify().ok
        assert session_id_of("t") not in {h.id for h in saver.store.sessions()}
        assert saver.get_tuple(cfg("t")) is None and list(saver.list(cfg("t"))) == []
        assert saver.get_tuple(cfg("other")) is not None
        saver.delete_thread("t")        # nothing there: a no-op
        again = chain(saver, "t", 1)    # the thread starts again, in a new session
        tup = saver.get_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["id"] == again[-1]
        ids = {h.id for h in saver.store.sessions()}
        assert session_id_of("t") not in ids and len(ids) == 2
        saver.delete_thread("t")        # and is deleted again: a third one next
        assert saver.get_tuple(cfg("t")) is None
        chain(saver, "t", 1)
        assert saver.get_tuple(cfg("t")) is not None


def test_copy_is_a_fork_and_outlives_its_source(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        ids = chain(saver, "src", 3)
        saver.put_writes(cfg("src", cid=ids[-1]), [("w", 1)], "task")
        saver.copy_thread("src", "dst")
        dst = saver.store.session(session_id_of("dst"))
        assert dst.header.parent_session == session_id_of("src")
        assert dst.header.seed_length == saver.store.session(session_id_of("src")).last_seq + 1
        chain(saver, "src", 1)          # the source goes on; the copy does not see it
        saver.delete_thread("src")      # the copy's inherited events are hidden, not erased
        assert saver.get_tuple(cfg("src")) is None
        assert [t.checkpoint["id"] for t in saver.list(cfg("dst"))] == ids[::-1]
        tup = saver.get_tuple(cfg("dst"))
        assert tup is not None and tup.pending_writes == [("task", "w", 1)]
        saver.delete_thread("dst")      # erases only the copy's own events
        assert saver.get_tuple(cfg("dst")) is None
        assert saver.store.verify().ok


def test_copy_into_an_existing_thread_appends(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        own = chain(saver, "dst", 1)
        ids = chain(saver, "src", 2)
        saver.copy_thread("src", "dst")
        got = [t.checkpoint["id"] for t in saver.list(cfg("dst"))]
        assert sorted(got) == sorted(own + ids)
        assert saver.store.session(session_id_of("dst")).header.parent_session is None


def test_writes_idempotent_and_special_channels_replace(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        stored = put(saver, "t", {})
        s = saver.store.session(session_id_of("t"))
        saver.put_writes(stored, [("a", 1), ("b", 2)], "task")
        last = s.last_seq
        saver.put_writes(stored, [("a", 1), ("b", 2)], "task")     # a retry: recorded, once
        assert s.last_seq == last + 1 and s.get(s.last_seq).type == "request/retry"
        saver.put_writes(stored, [("a", 9)], "task")               # (task, 0) again: first wins
        saver.put_writes(stored, [(ERROR, "boom")], "task")
        saver.put_writes(stored, [(ERROR, "worse")], "task")       # special only: replaces
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert sorted(tup.pending_writes or []) == [("task", "__error__", "worse"),
                                                    ("task", "a", 1), ("task", "b", 2)]


def test_metadata_that_is_not_json_goes_through_the_serde(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        when = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)
        put(saver, "t", {}, when=when, tag="x")
        put(saver, "t", {}, tag="y")
        tup = saver.get_tuple(cfg("t"))
        assert tup is not None
        got = [t.metadata.get("when") for t in saver.list(cfg("t"), filter={"tag": "x"})]
        assert got == [when]


def _graph(saver: TrajlogSaver) -> Any:
    """A scripted agent: the model asks for a tool once, then answers."""
    def model(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(f"it is {last.content}")]}
        call = {"id": f"call-{len(state['messages'])}", "name": "clock", "args": {}}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    def tool(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        return {"messages": [ToolMessage("noon", tool_call_id=call["id"])]}

    def route(state: MessagesState) -> str:
        return "tool" if state["messages"][-1].tool_calls else END  # type: ignore[union-attr]

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tool", tool)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["tool", END])
    g.add_edge("tool", "model")
    return g.compile(checkpointer=saver)


def test_a_graph_run_is_mirrored_for_trajlog_views(db: str) -> None:
    with TrajlogSaver.open(db) as saver:
        graph = _graph(saver)
        config: Any = cfg("chat")
        graph.invoke({"messages": [HumanMessage("time?")]}, config)
        graph.invoke({"messages": [HumanMessage("again?")]}, config)
        s = saver.store.session(session_id_of("chat"))
        turns = projections.trajectory(s)
        requests = [r for t in turns for st in t.steps for r in st.requests]
        tools = [x for t in turns for st in t.steps for x in st.tools]
        assert len(requests) == 4 and [x.status for x in tools] == ["done", "done"]
        history = [m for m in projections.model_history(s)]
        assert len(history) == 8        # 2 x (user, assistant + call, tool, assistant)
        state = graph.get_state(config)
        assert state.values["messages"][-1].content == "it is noon"
        assert len(list(graph.get_state_history(config))) == sum(
            1 for ev in s.events() if ev.type == PUT)


def test_a_graph_runs_async_through_aio(db: str) -> None:
    async def main() -> None:
        store = await trajlog.aio.open(db)
        try:
            graph = _graph(TrajlogSaver(store))
            config: Any = cfg("a")
            out = await graph.ainvoke({"messages": [HumanMessage("time?")]}, config)
            assert out["messages"][-1].content == "it is noon"
            state = await graph.aget_state(config)
            assert len(state.values["messages"]) == 4
        finally:
            await store.close()
    asyncio.run(main())
