"""The benchmark workload, deterministic for a seed.

Agent turns: ``turn/start``, a user message, 1-10 steps (``step/start``, an
assistant message with 1-3 tool calls, their ``tool/call`` and ``tool/result``,
``step/end``), a final step with the closing assistant message, ``turn/end``.
Tool results: 90 % log-uniform 200 B-2 KiB, 10 % log-uniform 8-64 KiB.  Their
text is cut from the Python standard library's own source files, which is
what a coding agent's tool results mostly are (file reads, greps, diffs).
"""

from __future__ import annotations

import math
import random
import sysconfig
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

Event = tuple[str, dict[str, Any]]
TOOLS = ("read_file", "grep", "run_tests", "edit_file", "list_dir", "bash")


@lru_cache(maxsize=1)
def corpus() -> str:
    """About 4 MB of real source text (sorted files: the same on every machine
    with the same Python version)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts, size = [], 0
    for path in sorted(root.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(text)
        size += len(text)
        if size > 4_000_000:
            break
    return "\n".join(parts)


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _text(rng: random.Random, n: int) -> str:
    text = corpus()
    start = rng.randrange(0, len(text) - n - 1)
    return text[start:start + n]


def turns(rng: random.Random) -> Iterator[list[Event]]:
    """Endless turns; each is a list of (type, data) events."""
    call = 0
    while True:
        events: list[Event] = [("turn/start", {}),
                               ("user/message", {"content": _text(rng, rng.randint(20, 400))})]
        for _ in range(rng.randint(1, 10)):
            calls = []
            for _ in range(rng.randint(1, 3)):
                call += 1
                name = rng.choice(TOOLS)
                calls.append({"id": f"call_{call}", "name": name,
                              "arguments": {"path": f"src/mod{rng.randrange(200)}.py",
                                            "line": rng.randrange(1, 2000)}})
            events.append(("step/start", {}))
            events.append(("assistant/message", {
                "content": _text(rng, rng.randint(30, 300)), "tool_calls": calls,
                "usage": {"input_tokens": rng.randint(500, 60_000),
                          "output_tokens": rng.randint(10, 800)}}))
            for c in calls:
                events.append(("tool/call", {"call_id": c["id"], "name": c["name"],
                                             "arguments": c["arguments"]}))
            for c in calls:
                size = (_log_uniform(rng, 8 * 1024, 64 * 1024) if rng.random() < 0.1
                        else _log_uniform(rng, 200, 2048))
                events.append(("tool/result", {"call_id": c["id"], "output": _text(rng, size),
                                               "is_error": rng.random() < 0.05}))
            events.append(("step/end", {}))
        events.append(("step/start", {}))
        events.append(("assistant/message", {"content": _text(rng, rng.randint(50, 600)),
                                             "tool_calls": []}))
        events.append(("step/end", {}))
        events.append(("turn/end", {"interrupted": False}))
        yield events


def events(n: int, seed: int = 1) -> list[Event]:
    """The first ``n`` events of the workload for ``seed``."""
    out: list[Event] = []
    for turn in turns(random.Random(seed)):
        out.extend(turn)
        if len(out) >= n:
            return out[:n]
    raise AssertionError("unreachable")
