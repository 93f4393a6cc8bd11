"""One module per source format.  Each defines

* ``NAME`` -- the format's name (``import_path(format=NAME)``);
* ``sniff(path: pathlib.Path) -> bool`` -- whether ``path`` (a file or a
  folder) is in this format, from its name and its first bytes only;
* ``read(path: pathlib.Path, notes: Notes) -> Iterator[MappedSession]`` -- the
  sessions it holds, parents before their children, each session's events
  lazily; every record that gives no event is written to ``notes`` with why.

:data:`FORMATS` is the order in which ``format="auto"`` asks them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

FORMATS = ("trajlog", "claude_code", "codex", "inspect_ai", "openhands", "swe_agent", "aider")


def module(name: str) -> ModuleType:
    """The module of the format ``name`` (``claude-code`` or ``claude_code``)."""
    key = name.replace("-", "_")
    if key not in FORMATS:
        raise KeyError(name)
    return importlib.import_module(f"{__name__}.{key}")


__all__ = ["FORMATS", "module"]
