"""Docstrings point at what exists: every Sphinx-style reference in ``src/``
(``:mod:`.versions```, ``:func:`trajlog.projections.runs```, ...) names a module
or an attribute that is there -- a module renamed or split leaves no reader at a
dead end."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import trajlog

PKG = Path(trajlog.__file__).parent
REF = re.compile(r":(?:mod|func|class|data|meth|attr|exc):`~?([\w.]+)`")


def _absolute(path: Path, target: str) -> str:
    """``target`` as a dotted name from ``trajlog``, relative ones resolved
    against the package of the module at ``path``."""
    if not target.startswith("."):
        return target
    package = list(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    level = len(target) - len(target.lstrip("."))
    base = package[:len(package) - (level - 1)]
    return ".".join([*base, *filter(None, [target.lstrip(".")])])


def resolves(name: str) -> bool:
    """Whether the dotted ``name`` is a module, or an attribute reached from one."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def dead_references(path: Path) -> list[str]:
    text = path.read_text()
    return [f"{path.relative_to(PKG)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for m in REF.finditer(text)
            if (name := _absolute(path, m.group(1))).startswith("trajlog") and not resolves(name)]


def test_every_docstring_reference_resolves() -> None:
    dead = [ref for path in sorted(PKG.rglob("*.py")) for ref in dead_references(path)]
    assert not dead, "references to names that do not exist:\n" + "\n".join(dead)


def test_the_reference_check_can_fail() -> None:
    assert resolves("trajlog.memory.versions") and resolves("trajlog.projections.runs")
    assert not resolves("trajlog.memory.records") and not resolves("trajlog.api.repair")
    assert _absolute(PKG / "api" / "erasure.py", "..memory.versions") == "trajlog.memory.versions"
    assert _absolute(PKG / "memory" / "__init__.py", ".versions") == "trajlog.memory.versions"
