"""An OpenAI Agents SDK agent with trajlog as its session store, offline.

A scripted model asks for a tool, reads its result and answers, over two runs of
one session; the SDK saves every item into trajlog.  Then the trajectory trajlog
recorded is printed, and a branch is made from the second turn (a trajlog fork).

    python examples/agents_example.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from trajlog import projections
from trajlog.adapters.openai_agents import TrajlogSession


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny and 21 C in {city}"


async def main(db: str) -> None:
    set_tracing_disabled(True)   # offline: no trace export
    model = ScriptedModel()      # no network: each run's model replies are scripted
    agent = Agent(name="forecaster", model=model, tools=[get_weather])
    session = TrajlogSession("demo-user-1", db)

    model.enqueue([function_call("get_weather", {"city": "Paris"}, call_id="call_1")])
    model.enqueue([assistant_message("It is sunny in Paris.")])
    result = await Runner.run(agent, "What is the weather in Paris?", session=session)
    print("run 1:", result.final_output)

    model.enqueue([assistant_message("Yes: 21 C.")])
    result = await Runner.run(agent, "Is it warm?", session=session)
    print("run 2:", result.final_output, f"(the model saw {len(model.calls[-1].input)} items)")

    log = session.trajlog_session()
    assert log is not None
    print(f"\ntrajlog session {log.id}: {log.last_seq + 1} events")
    for turn in projections.trajectory(log):
        for step in turn.steps:
            for req in step.requests:
                print(f"  model request  seq {req.seq:>2}  tool calls: {req.tool_calls}")
            for span in step.tools:
                print(f"  tool {span.name:<12} seq {span.requested_seq}..{span.result_seq}"
                      f"  {span.status}: {span.result_summary}")
    for msg in projections.model_history(log):
        text = msg.content if msg.content is not None else msg.tool_calls
        print(f"  {msg.seq:>2} {msg.role:<9} {str(text)[:60]}")

    branch = await session.create_branch_from_turn(2, "try-again")
    print(f"\nbranch {branch!r} (a fork): {len(await session.get_items())} items before turn 2;"
          f" branches: {[b['branch_id'] for b in await session.list_branches()]}")
    session.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--db", default=os.path.join(tempfile.mkdtemp(), "agents.db"))
    asyncio.run(main(ap.parse_args().db))
