"""The OpenAI Agents SDK adapter: items round-trip as trajlog events, pops and
clears are events the views honour, recovery closes an orphan call, branches
are forks.  The SDK's own suite runs from peers/agents/run.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner
from agents.testing import ScriptedModel
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import trajlog
from trajlog import projections
from trajlog.adapters.openai_agents import TrajlogSession
from trajlog.errors import SerializationError, StoreClosedError

ITEMS: list[Any] = [
    {"role": "user", "content": "weather?"},
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}",
     "id": "fc_1", "status": "completed"},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
    {"type": "message", "role": "assistant", "id": "m1", "status": "completed",
     "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}]},
    {"role": "system", "content": "be brief"},
    {"type": "function_call_output", "call_id": "nobody", "output": "orphan"},
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def db(tmp_path: Any) -> str:
    return str(tmp_path / "agents.db")


def test_items_round_trip_as_typed_events(db: str) -> None:
    s = TrajlogSession("conv-1", db)
    run(s.add_items(ITEMS))
    assert run(s.get_items()) == ITEMS
    assert run(s.get_items(3)) == ITEMS[-3:]
    assert run(s.get_items(0)) == [] and run(s.get_items(-1)) == ITEMS
    log = s.trajlog_session()
    assert log is not None and log.header.metadata["agents_session_id"] == "conv-1"
    types = [ev.type for ev in log.events()]
    assert types == ["agents/session", "user/message", "assistant/message", "tool/call",
                     "tool/result", "assistant/message", "assistant/message", "agents/item",
                     "agents/item"]
    # the content is stored once: under its trajlog field, the rest under "sdk"
    assert log.get(6).data["content"] == ITEMS[4]["content"]
    assert "content" not in log.get(6).data["sdk"]
    history = projections.model_history(log)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "assistant"]
    assert history[1].tool_calls == [{"id": "c1", "name": "weather", "arguments": "{}"}]
    cards = [n for n in projections.chat(log) if n.kind == "tool"]
    assert [(c.call_id, c.status) for c in cards] == [("c1", "done")]
    s.close()


def test_same_sdk_id_finds_the_same_log_and_others_stay_apart(db: str) -> None:
    a, b, c = TrajlogSession("x", db), TrajlogSession("x", db), TrajlogSession("y", db)
    run(a.add_items([{"role": "user", "content": "one"}]))
    run(c.add_items([{"role": "user", "content": "other"}]))
    assert run(b.get_items()) == [{"role": "user", "content": "one"}]
    assert a.trajlog_id() == b.trajlog_id() != c.trajlog_id()
    for s in (a, b, c):
        s.close()
    with pytest.raises(StoreClosedError):
        run(a.get_items())
    assert run(TrajlogSession("x", db).get_items()) == [{"role": "user", "content": "one"}]


def test_add_items_is_one_transaction(db: str) -> None:
    s = TrajlogSession("atomic", db)
    run(s.add_items([{"role": "user", "content": "kept"}]))
    with pytest.raises(SerializationError):
        run(s.add_items([{"role": "user", "content": "lost"},
                         {"role": "user", "content": b"not json"}]))
    assert run(s.get_items()) == [{"role": "user", "content": "kept"}]
    s.close()


def test_pop_and_clear_are_events_the_views_honour(db: str) -> None:
    s = TrajlogSession("pops", db)
    run(s.add_items(ITEMS[:5]))
    assert run(s.pop_item()) == ITEMS[4]
    assert run(s.pop_item()) == ITEMS[3]
    assert run(s.get_items()) == ITEMS[:3] and run(s.get_items(1)) == ITEMS[2:3]
    log = s.trajlog_session()
    assert log is not None
    assert [ev.data for ev in log.events() if ev.type == "history/pop"] == [
        {"target": 6}, {"target": 5}]
    assert [m.seq for m in projections.model_history(log)] == [1, 2, 4]
    assert run(s.pop_item()) == ITEMS[2]     # the output: the card is running again
    card = next(n for n in projections.chat(log) if n.kind == "tool")
    assert card.status == "running" and card.result_seq is None
    run(s.clear_session())
    assert run(s.get_items()) == [] and run(s.pop_item()) is None
    assert projections.model_history(log) == [] and projections.chat(log) == []
    run(s.add_items([{"role": "user", "content": "again"}]))
    assert run(s.get_items()) == [{"role": "user", "content": "again"}]
    assert [m.content for m in projections.model_history(log)] == ["again"]
    assert log.verify().ok
    s.close()


def test_each_call_is_one_executor_call(db: str) -> None:
    """Every hop between the event loop and a thread costs more than the
    commit's own CPU work: ``add_items``, ``get_items``, ``pop_item`` and
    ``clear_session`` are one executor call each (the look-up, the walk and
    the commit together)."""
    s = TrajlogSession("hops", db)
    hops: dict[str, int] = {}

    async def go() -> None:
        loop = asyncio.get_running_loop()
        real, n = loop.run_in_executor, [0]

        def counted(*args: Any) -> Any:
            n[0] += 1
            return real(*args)

        loop.run_in_executor = counted  # type: ignore[method-assign]
        for name, op in [("add", lambda: s.add_items(ITEMS[:5])), ("get", s.get_items),
                         ("pop", s.pop_item), ("clear", s.clear_session)]:
            n[0] = 0
            await op()
            hops[name] = n[0]

    run(go())
    assert hops == {"add": 1, "get": 1, "pop": 1, "clear": 1}, hops
    assert run(s.get_items()) == [] and run(s.pop_item()) is None
    s.close()


def test_limit_reads_only_the_tail(db: str) -> None:
    s = TrajlogSession("long", db)
    run(s.add_items([{"role": "user", "content": f"m{i}"} for i in range(3000)]))
    log = s.trajlog_session()
    assert log is not None
    read: list[int] = []

    class Counting(trajlog.Session):
        """The same session, counting the events each read asks for."""

        def tail(self, n: int = 50) -> list[Any]:
            read.append(n)
            return super().tail(n)

        def events(self, *args: Any, **kwargs: Any) -> Any:
            read.append(-1)   # a read of a range: the walk went past its first window
            return super().events(*args, **kwargs)

    s._handles["main"].sync = Counting(log._e, log._ref)   # the handle the adapter reads
    assert [i["content"] for i in run(s.get_items(5))] == [f"m{i}" for i in range(2995, 3000)]
    assert read == [15]                      # one window of 1.5 * limit + 8 events
    s.close()


def test_pops_in_a_row_walk_on_from_the_last_one(db: str) -> None:
    """Each pop by a handle reads one window below the item it popped last,
    however many pops came before (not a walk back over every earlier pop and
    the items it hid); a write in between makes the next pop walk from the end."""
    s = TrajlogSession("popper", db)
    run(s.add_items([{"role": "user", "content": f"m{i}"} for i in range(200)]))
    log = s.trajlog_session()
    assert log is not None
    read: list[tuple[str, int]] = []

    class Counting(trajlog.Session):
        """The same session, counting the events each read asks for."""

        def tail(self, n: int = 50) -> list[Any]:
            read.append(("tail", n))
            return super().tail(n)

        def events(self, from_seq: int = 0, to_seq: int | None = None, **kw: Any) -> Any:
            read.append(("range", (to_seq if to_seq is not None else log.last_seq)
                         - from_seq + 1))
            return super().events(from_seq, to_seq, **kw)

    s._handles["main"].sync = Counting(log._e, log._ref)
    for i in range(100):
        read.clear()
        assert run(s.pop_item()) == {"role": "user", "content": f"m{199 - i}"}
        assert read == ([("tail", 16)] if i == 0 else [("range", 16)]), (i, read)
    run(s.add_items([{"role": "user", "content": "new"}]))
    read.clear()
    assert run(s.pop_item()) == {"role": "user", "content": "new"}
    assert read == [("tail", 16)]            # from the end again: the log moved
    assert [i["content"] for i in run(s.get_items())] == [f"m{i}" for i in range(100)]
    s.close()


def test_recovery_closes_an_orphan_call_and_the_history_stays_well_formed(db: str) -> None:
    s = TrajlogSession("crash", db)
    run(s.add_items([{"role": "user", "content": "run it"},
                     {"type": "function_call", "call_id": "c9", "name": "deploy",
                      "arguments": "{}"}]))
    s.close()      # the process dies before the tool's output is saved
    store = trajlog.open(db)
    sid = TrajlogSession("crash", store).trajlog_id()
    _, report = store.session(sid).inspect()
    assert [c.data["status"] for c in report.closers] == ["TOOL_NOT_STARTED"]
    store.load(sid)
    again = TrajlogSession("crash", store)
    items = run(again.get_items())
    assert items[1]["type"] == "function_call" and items[2]["type"] == "function_call_output"
    # the closer's guidance is the output the model reads: the SDK never says
    # when a tool starts, so a call with no output is one that never started
    assert items[2] == {"type": "function_call_output", "call_id": "c9",
                        "output": report.closers[0].data["output"]}
    status = projections.status(store.session(sid))
    assert status.tools_requested == [] and status.tools_running == []
    # the SDK can go on: the next turn sees the call answered
    run(again.add_items([{"role": "user", "content": "and now?"}]))
    assert len(run(again.get_items())) == 4
    store.close()


def test_a_cancelled_call_reads_back_answered_as_the_model_history_tells_it(db: str) -> None:
    """A host may append ``tool/cancel`` for a call: the SDK reads the call
    answered (an output saying it was cancelled, the model history's words),
    a late output from the SDK is carried rather than refused, and a cancel of
    a popped call shows nothing (no output without its call)."""
    s = TrajlogSession("cancel", db)
    call = {"type": "function_call", "call_id": "c5", "name": "deploy", "arguments": "{}"}
    run(s.add_items([{"role": "user", "content": "ship it"}, call]))
    log = s.trajlog_session()
    assert log is not None
    log.append("tool/cancel", {"call_id": "c5", "reason": "the user stopped it"})
    history = projections.model_history(log)
    cancelled = {"type": "function_call_output", "call_id": "c5",
                 "output": history[-1].content}
    assert history[-1].tool_call_id == "c5" and "the user stopped it" in history[-1].content
    assert run(s.get_items()) == [{"role": "user", "content": "ship it"}, call, cancelled]
    assert run(s.get_items(1)) == [cancelled]
    # the SDK can go on: its late output for the cancelled call is carried as it is
    late = {"type": "function_call_output", "call_id": "c5", "output": "deployed"}
    run(s.add_items([late, {"role": "user", "content": "and now?"}]))
    assert [ev.type for ev in log.events()][-2:] == ["agents/item", "user/message"]
    assert run(s.get_items())[2:] == [cancelled, late, {"role": "user", "content": "and now?"}]
    # a popped call needs no answer: its cancel reads as nothing
    other = {"type": "function_call", "call_id": "c6", "name": "rollback", "arguments": "{}"}
    run(s.add_items([other]))
    assert run(s.pop_item()) == other
    log.append("tool/cancel", {"call_id": "c6"})
    assert run(s.get_items())[-1] == {"role": "user", "content": "and now?"}
    assert log.verify().ok
    s.close()


def test_the_runner_goes_on_after_a_cancelled_call(db: str) -> None:
    """The SDK's own run loop reads the cancelled call answered and sends the
    model a well-formed input (every call followed by its output)."""
    model = ScriptedModel()
    agent = Agent(name="a", model=model)
    s = TrajlogSession("cancel-run", db)
    run(s.add_items([{"role": "user", "content": "ship it"},
                     {"type": "function_call", "call_id": "c7", "name": "deploy",
                      "arguments": "{}"}]))
    log = s.trajlog_session()
    assert log is not None
    log.append("tool/cancel", {"call_id": "c7"})
    model.enqueue([_text("Not deployed.")])
    assert run(Runner.run(agent, "did it ship?", session=s)).final_output == "Not deployed."
    sent = [i for i in model.calls[-1].input if isinstance(i, dict)]
    outputs = [i for i in sent if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["c7"]
    assert outputs[0]["output"] == projections.model_history(log)[2].content
    s.close()


def test_branches_are_forks(db: str) -> None:
    s = TrajlogSession("tree", db)
    run(s.add_items([{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                     {"role": "user", "content": "second"}, {"role": "assistant", "content": "b"}]))
    turns = run(s.get_conversation_turns())
    assert [(t["turn"], t["content"]) for t in turns] == [(1, "first"), (2, "second")]
    name = run(s.create_branch_from_turn(2, "alt"))
    assert name == "alt" and s.current_branch_id == "alt"
    assert run(s.get_items()) == [{"role": "user", "content": "first"},
                                  {"role": "assistant", "content": "a"}]
    run(s.add_items([{"role": "user", "content": "second, differently"}]))
    branch, main = s.trajlog_session(), s.trajlog_session("main")
    assert branch is not None and main is not None
    assert branch.parent() is not None and branch.parent().id == main.id  # type: ignore[union-attr]
    assert branch.header.seed_length == 3    # shares seqs 0..2, copies nothing
    assert [b["branch_id"] for b in run(s.list_branches())] == ["main", "alt"]
    run(s.switch_to_branch("main"))
    assert len(run(s.get_items())) == 4
    assert run(s.find_turns_by_content("SECOND"))[0]["turn"] == 2
    first = run(s.create_branch_from_turn(1))   # before the first turn: an empty fork
    assert run(s.get_items()) == [] and first.startswith("branch_from_turn_1")
    with pytest.raises(ValueError):
        run(s.create_branch_from_turn(1, "alt"))       # ids stay reserved
    with pytest.raises(ValueError):
        run(s.delete_branch(first))                    # the current one, without force
    run(s.delete_branch(first, force=True))
    assert s.current_branch_id == "main"
    run(s.delete_branch("alt"))
    assert [b["branch_id"] for b in run(s.list_branches())] == ["main"]
    with pytest.raises(ValueError):
        run(s.switch_to_branch("alt"))
    s.close()


def _text(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text,
                                                             annotations=[])])


def test_runner_drives_a_scripted_model_on_trajlog(db: str) -> None:
    model = ScriptedModel()
    agent = Agent(name="a", model=model)
    s = TrajlogSession("run", db)
    model.enqueue([_text("Paris")])
    assert run(Runner.run(agent, "capital of France?", session=s)).final_output == "Paris"
    model.enqueue([_text("Lyon")])
    run(Runner.run(agent, "and the second city?", session=s))
    assert len(model.calls[-1].input) == 3      # the first turn came from trajlog
    log = s.trajlog_session()
    assert log is not None
    assert [m.role for m in projections.model_history(log)] == ["user", "assistant"] * 2
    s.close()


def test_concurrent_pops_on_separate_stores_return_each_item_once(db: str) -> None:
    """Threads popping through separate stores on one file: every item is
    returned to exactly one caller, and the log hides each exactly once."""
    import threading

    n, workers = 120, 3
    seed = TrajlogSession("race", db)
    run(seed.add_items([{"role": "user", "content": f"m{i}"} for i in range(n)]))
    seed.close()
    got: list[list[Any]] = [[] for _ in range(workers)]
    errors: list[BaseException] = []
    start = threading.Barrier(workers)

    def worker(k: int) -> None:
        store = trajlog.open(db)   # a handle of its own: its own connections
        s = TrajlogSession("race", store)
        try:
            start.wait()

            async def drain() -> None:
                while (item := await s.pop_item()) is not None:
                    got[k].append(item["content"])
            run(drain())
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            s.close()
            store.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    popped = [c for g in got for c in g]
    assert sorted(popped) == sorted(f"m{i}" for i in range(n))   # none twice, none lost
    check = TrajlogSession("race", db)
    assert run(check.get_items()) == []
    log = check.trajlog_session()
    assert log is not None
    targets = [ev.data["target"] for ev in log.events() if ev.type == "history/pop"]
    assert len(targets) == len(set(targets)) == n
    check.close()
