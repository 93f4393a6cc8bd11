"""docs/cli.md is what ``python docs/gen_cli.py`` writes from the installed command.

A command, option or help text that changes without the page being regenerated fails here
(and so in CI); the fix is ``python docs/gen_cli.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "gen_cli.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_page_is_current() -> None:
    gen = _generator()
    page = gen.render()
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == page, (
        "docs/cli.md is out of date: run python docs/gen_cli.py")


def test_cli_page_covers_every_command() -> None:
    import click

    from trajlog.cli.main import cli

    gen = _generator()
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    paths = gen._commands(cli)
    assert len(paths) >= 20 and ("memory", "search") in paths
    for path in paths:
        assert f"## trajlog {' '.join(path)}\n" in page, path
    groups = [name for name, c in cli.commands.items() if isinstance(c, click.Group)]
    assert groups, "no command group to cover"
