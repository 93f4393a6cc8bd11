"""Loaded by every Python child of the suite's PostgreSQL run (``tests/kits/pgstores.py``
puts this folder first on ``PYTHONPATH``): when ``trajlog.api.store`` is imported, the stores
of file paths are redirected to PostgreSQL as in the parent.  Nothing is imported before
trajlog is (a child that checks what ``import trajlog`` loads sees what it would see)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

TARGET = "trajlog.api.store"


def _redirect() -> Any:
    path = Path(__file__).resolve().parent.parent / "pgstores.py"
    spec = importlib.util.spec_from_file_location("_trajlog_test_pgstores", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Hook:
    """A meta-path finder that runs the redirect's install() right after TARGET loads."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        real = loader.exec_module

        def exec_module(module: Any) -> None:
            real(module)
            _redirect().install(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("TRAJLOG_TEST_DB") == "postgresql" and os.environ.get("TRAJLOG_TEST_PG_SCHEMA"):
    sys.meta_path.insert(0, _Hook())


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows (Debian's Python has one)."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(__file__):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
