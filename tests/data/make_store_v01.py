"""Make tests/data/store_v01.db: a store written by trajlog 0.1 (schema 3, one
row per frame), and tests/data/store_v01.json: what 0.1 itself read back from it.

This script ran once, against trajlog 0.1 (commit 4382bea) -- the files it
wrote are checked in; running it against a later trajlog writes a later store.
It covers what a migration must carry: plain sessions, a fork (its own events
after an inherited prefix), a spawned and a forked subagent, payloads 0.1
stored zstd-compressed (>= 512 bytes), every envelope field, idempotency keys,
a saved projection state, an interrupted (open) turn, and a fork with no
events of its own.

    PYTHONPATH=<trajlog 0.1>/src python tests/data/make_store_v01.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import trajlog

HERE = Path(__file__).resolve().parent
T0 = 1_767_225_600_000


def main() -> None:
    db = HERE / "store_v01.db"
    for suffix in ("", "-wal", "-shm"):
        if Path(str(db) + suffix).exists():
            os.unlink(str(db) + suffix)
    with trajlog.open(str(db)) as st:
        a = st.create_session(cwd="/repo/a", agent_preset="coder-v1",
                              metadata={"title": "login bug", "tenant": "acme"},
                              session_id="00000000-0000-4000-8000-00000000000a")
        t = T0
        for turn in range(6):
            with a.turn():
                a.append("user/message", {"content": f"task {turn}"}, time=t, source="user",
                         data_class="internal")
                with a.step():
                    call = f"call_{turn}"
                    a.append("assistant/message", {"content": "reading", "tool_calls": [
                        {"id": call, "name": "read", "arguments": {"path": f"f{turn}.py"}}]},
                        time=t + 1, source="model")
                    a.append("tool/call", {"call_id": call, "name": "read",
                                           "arguments": {"path": f"f{turn}.py"}}, time=t + 2)
                    a.append("tool/result", {"call_id": call, "output": ("x = 1\n" * 300)
                                             if turn % 2 else "ok", "is_error": False},
                             time=t + 3, source="read", workspace_revision=f"git:{turn:07x}",
                             causal_parent=a.last_seq)
                a.append("assistant/message", {"content": f"done {turn}"}, time=t + 4,
                         idempotency_key=f"final-{turn}")
            t += 10
        a.append_batch([("note/x", {"n": i, "text": "y" * (40 * i)}, {"time": t + i})
                        for i in range(30)])
        a.compact(1, 7, "the first task")
        trajlog.projections.checkpoint(a)
        fork = a.fork(12, metadata={"branch": "alt"})
        fork.append("user/message", {"content": "try another way"}, time=t + 100)
        empty_fork = a.fork(20)
        sub = a.spawn_subagent("review f1.py", agent_preset="reviewer")
        sub.append("assistant/message", {"content": "looks fine"}, time=t + 200)
        fsub = a.fork_subagent("write the test")
        fsub.append("assistant/message", {"content": "added"}, time=t + 300)
        b = st.create_session(cwd="/repo/b", session_id="00000000-0000-4000-8000-00000000000b")
        b.append("turn/start", {}, time=T0)
        b.append("user/message", {"content": "crashed here"}, time=T0 + 1)
        b.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "c9", "name": "deploy", "arguments": {}}]}, time=T0 + 2)
        b.append("tool/call", {"call_id": "c9", "name": "deploy", "arguments": {}},
                 time=T0 + 3)
        dump = {}
        for h in st.sessions(include_subagents=True):
            s = st.session(h.id)
            dump[h.id] = {
                "header": {"cwd": h.cwd, "parent_session": h.parent_session,
                           "seed_length": h.seed_length, "origin": h.origin,
                           "delegation_depth": h.delegation_depth,
                           "agent_preset": h.agent_preset, "created_at": h.created_at,
                           "metadata": dict(h.metadata)},
                "last_seq": s.last_seq,
                "events": [[e.seq, e.type, e.time, e.data, e.envelope] for e in s.events()],
            }
        for sid in (empty_fork.id, fork.id):
            assert dump[sid]["events"]
    (HERE / "store_v01.json").write_text(json.dumps(dump, indent=1, sort_keys=True) + "\n")
    print(f"wrote {db} ({db.stat().st_size} bytes) with {len(dump)} sessions "
          f"({sum(len(v['events']) for v in dump.values())} events read back)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
