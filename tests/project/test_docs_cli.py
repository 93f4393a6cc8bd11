"""The generated pages are current: docs/cli.md is what ``python docs/generate.py`` writes
from the installed command, docs/event-types.md what it writes
writes from the event-type registry.

A command, option, help text or event type that changes without its page being regenerated
fails here (and so in CI); the fix is to run the script.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "generate.py"


def _generator(script: Path = SCRIPT) -> ModuleType:
    spec = importlib.util.spec_from_file_location(script.stem, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_page_is_current() -> None:
    gen = _generator()
    page = gen.render_cli()
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == page, (
        "docs/cli.md is out of date: run python docs/generate.py")


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


def test_event_types_page_is_current() -> None:
    page = _generator().render_event_types()
    assert (ROOT / "docs" / "event-types.md").read_text(encoding="utf-8") == page, (
        "docs/event-types.md is out of date: run python docs/generate.py")


def test_event_types_page_lists_every_declared_type() -> None:
    from trajlog import event_types

    page = (ROOT / "docs" / "event-types.md").read_text(encoding="utf-8")
    assert len(event_types.TYPES) >= 20
    for entry in event_types.TYPES:
        assert f"## `{entry.name}`\n" in page, entry.name
