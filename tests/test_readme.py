"""The README's examples of the "Runs you can replay" section run as written.

Every ```python block of that section is executed on its own, in an empty
folder, with nothing imported beforehand: a block that stops working (an
API renamed, an assert in it no longer true) fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Runs you can replay"


def _blocks() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end != -1 else None]
    out, heading = [], SECTION
    for m in re.finditer(r"^(### [^\n]+)$|^```python\n(.*?)^```$", section, re.M | re.S):
        if m.group(1):
            heading = m.group(1)
        else:
            out.append((heading.lstrip("# "), m.group(2)))
    return out


BLOCKS = _blocks()


def test_every_mechanism_has_a_runnable_example():
    headings = {h for h, _ in BLOCKS}
    assert len(headings) >= 6, headings


@pytest.mark.parametrize("heading,code", BLOCKS, ids=[h for h, _ in BLOCKS])
def test_readme_example_runs(heading, code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md: {heading}", "exec"), {"__name__": "__readme__"})
