"""The examples of README.md and of every page under docs/ run as written.

Every ```python block of those pages is executed on its own, in an empty
folder, with nothing imported beforehand: a block that stops working (an
API renamed, an assert in it no longer true) fails here. A block that is not
meant to run (a shell session, an output) is fenced with another language.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
# The mechanisms that answer "what did the agent know when it decided, and would it decide
# the same again?" (run envelopes, model switches, replay, checkpoints, expiring facts,
# redaction before write) live on these two pages.
RUNS_PAGES = [DOCS / "runs-and-replay.md", DOCS / "privacy.md"]
# An adapter's example needs its extra installed (the sdist round trip installs [test] only).
PEERS = {"trajlog.adapters.openai_agents": "agents",
         "trajlog.adapters.langgraph": "langgraph.checkpoint", "from langgraph.": "langgraph.graph",
         "eventsourcing": "eventsourcing"}


def _blocks(path: Path) -> list[tuple[str, str]]:
    """(nearest heading above, code) for each ```python block of one page."""
    out, heading = [], path.name
    for m in re.finditer(r"^(#{1,6} [^\n]+)$|^```python\n(.*?)^```$",
                         path.read_text(encoding="utf-8"), re.M | re.S):
        if m.group(1):
            heading = m.group(1).lstrip("# ")
        else:
            out.append((heading, m.group(2)))
    return out


BLOCKS = [(path.relative_to(ROOT).as_posix(), heading, code)
          for path in PAGES for heading, code in _blocks(path)]
IDS = [f"{page}: {heading} [{i}]" for i, (page, heading, _) in enumerate(BLOCKS)]


def test_every_mechanism_has_a_runnable_example():
    headings = {h for path in RUNS_PAGES for h, _ in _blocks(path)}
    assert len(headings) >= 6, headings


def test_every_page_is_read():
    assert README in PAGES and len(PAGES) > 10, PAGES
    assert {page for page, _, _ in BLOCKS} >= {"README.md", "docs/sessions.md"}


@pytest.mark.parametrize("page,heading,code", BLOCKS, ids=IDS)
def test_readme_example_runs(page, heading, code, tmp_path, monkeypatch, capsys):
    for statement, peer in PEERS.items():
        if statement in code:
            pytest.importorskip(peer, reason=f"the example imports {peer}")
    monkeypatch.chdir(tmp_path)
    # a module of its own, so that what reads a class's annotations later (typing's
    # get_type_hints, as LangGraph does) finds the block's names
    module = types.ModuleType("__readme__")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, f"{page}: {heading}", "exec"), module.__dict__)
