"""A LangGraph agent with trajlog as its checkpointer and its store, offline.

A scripted chat model asks for a tool, reads its result and answers; the graph
checkpoints every step into trajlog (one session per thread) and remembers a
fact in trajlog's memory.  Then the trajectory trajlog recorded is printed.

    python examples/langgraph_example.py [--db PATH]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.base import BaseStore

import trajlog
from trajlog import projections
from trajlog.adapters.langgraph import TrajlogSaver, TrajlogStore


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return "export function login() { /* the session cookie is never refreshed */ }"


SCRIPT = [  # what the "model" answers, in order
    AIMessage("", tool_calls=[{"id": "call-1", "name": "read_file",
                               "args": {"path": "login.ts"}}]),
    AIMessage("The session cookie is never refreshed: refresh it on every request."),
]
model = GenericFakeChatModel(messages=iter(SCRIPT))


def agent(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
    reply = model.invoke(state["messages"])
    if not reply.tool_calls:  # the answer: remember what was learned
        store.put(("repo", "facts"), "login", {"text": reply.content})
    return {"messages": [reply]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=os.path.join(tempfile.mkdtemp(), "trajlog.db"))
    db = ap.parse_args().db
    with trajlog.open(db) as store:
        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_node("tools", ToolNode([read_file]))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        memory = TrajlogStore(store)
        graph = builder.compile(checkpointer=TrajlogSaver(store), store=memory)
        config: Any = {"configurable": {"thread_id": "login-bug"}}
        out = graph.invoke({"messages": [HumanMessage("Why are users logged out?")]}, config)
        print("answer:", out["messages"][-1].content,
              f"({len(list(graph.get_state_history(config)))} checkpoints)")
        print("remembered:", memory.get(("repo", "facts"), "login").value)  # type: ignore[union-attr]
        session = store.session(TrajlogSaver.session_id("login-bug"))
        for turn in projections.trajectory(session):
            for step in turn.steps:
                for req in step.requests:
                    print(f"  model request seq {req.seq}: {req.tool_calls} tool call(s)")
                for span in step.tools:
                    print(f"  tool {span.name} ({span.call_id}): {span.status}, "
                          f"{span.result_summary!r}")
        print(f"explore: python -m trajlog --db {db} trajectory {session.id}")


if __name__ == "__main__":
    main()
