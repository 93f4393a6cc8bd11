"""The demo's memory-layers step: a context built from durable memory -- the
constitution, the tenant's policy, the user's preferences and retrieved
facts -- each layer budgeted and every item recorded by id and version."""

from __future__ import annotations

from typing import Any

from ..api import Session, Store
from ..memory import Identity
from ..projections.context import build_context
from .app import summary


def demo_memory_layers(store: Store, s: Session, write: Any) -> None:
    """Write one item per layer through the gates, build a context with
    memory, and print its layers and what the context/injection recorded."""
    store.deploy_global("policy", {"text": "Never push to main; open a pull request."},
                        key="git.push", actor="deploy:demo")   # deploy time: outside the gates
    mem = store.memory(Identity("acme", user="alice", session=s.id))
    mem.remember("tenant", "policy", {"text": "Deploys need a change ticket."},
                 key="deploy.ticket", evidence={"kind": "human_approval", "by": "human:lead"})
    mem.remember("user", "preference", {"text": "Answer in short bullet points."},
                 key="style")
    mem.remember("user", "fact", {"text": "The login service deploys with blue-green."},
                 source=(s.id, 1))
    other = store.memory(Identity("globex", user="bob"))
    other.remember("user", "fact", {"text": "globex deploys the login service on fridays"})
    build = build_context(s, target_model="demo-model", memory=mem,
                          memory_query="how does the login service deploy?")
    assert build.memory is not None and build.injection is not None
    write(f"memory layers (acme / alice; query {build.memory.query!r}):\n")
    for message in build.messages:
        if message.get("layer"):
            lines = message["content"].splitlines()
            write(f"  {lines[0]}\n")
            for line in lines[1:]:
                write(f"    {summary(line, 90)}\n")
    recorded = build.injection.data["memory"]
    write(f"  recorded in context/injection seq {build.injection.seq}: " + ", ".join(
        f"{m['layer']} {m['id'][:8]}@v{m['version']}" for m in recorded) + "\n")
    write(f"  another tenant's fact retrieved: "
          f"{'YES' if 'globex' in str(build.messages) else 'no'}\n\n")


__all__ = ["demo_memory_layers"]
