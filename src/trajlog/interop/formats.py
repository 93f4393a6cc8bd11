"""The source formats trajlog imports, each a module of :mod:`.sources`, and
the order in which ``format="auto"`` asks them (:data:`FORMATS`)."""

from __future__ import annotations

import importlib
from types import ModuleType

FORMATS = ("trajlog", "claude_code", "codex", "inspect_ai", "openhands", "swe_agent", "aider")


def module(name: str) -> ModuleType:
    """The module of the format ``name`` (``claude-code`` or ``claude_code``)."""
    key = name.replace("-", "_")
    if key not in FORMATS:
        raise KeyError(name)
    return importlib.import_module(f"{__package__}.sources.{key}")


__all__ = ["FORMATS", "module"]
