"""Kernel selection: ``TRAJLOG_BACKEND=auto|c|python``.

``auto`` (the default) means the C kernel, and fails with a message that says
how to build it or how to opt in to the pure-Python kernel: a silent fallback
would make a 20x slower engine look like a working one.  ``python`` selects
the reference kernel, which needs the ``xxhash`` package.
"""

from __future__ import annotations

import importlib
import os
from typing import cast

from ._format import Kernel
from .errors import BackendUnavailableError

_CHOICES = ("auto", "c", "python")


def load_kernel(name: str) -> Kernel:
    """Import and return the kernel module for ``"c"`` or ``"python"``."""
    if name == "c":
        try:
            return cast(Kernel, importlib.import_module("trajlog._kernel_c"))
        except ImportError as exc:
            raise BackendUnavailableError(
                "the trajlog C core (trajlog._tlcore) is not built or failed to load "
                f"({exc}); build it with `pip install -e .` (or `make build`), or set "
                "TRAJLOG_BACKEND=python to use the pure-Python reference kernel"
            ) from exc
    if name == "python":
        try:
            return cast(Kernel, importlib.import_module("trajlog._kernel_py"))
        except ImportError as exc:
            raise BackendUnavailableError(
                f"the pure-Python kernel needs the xxhash package ({exc}); "
                "install it with `pip install trajlog[pure]`"
            ) from exc
    raise BackendUnavailableError(f"unknown kernel {name!r}; choose 'c' or 'python'")


def select_kernel() -> Kernel:
    """The kernel named by ``TRAJLOG_BACKEND`` (default ``auto`` = C, required)."""
    choice = os.environ.get("TRAJLOG_BACKEND", "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise BackendUnavailableError(
            f"TRAJLOG_BACKEND={choice!r} is not one of {', '.join(_CHOICES)}")
    return load_kernel("c" if choice == "auto" else choice)


_selected: Kernel | None = None


def get_kernel() -> Kernel:
    """The selected kernel, loaded on first use (so that importing trajlog never
    fails; the first operation that needs a kernel raises the clear error)."""
    global _selected
    if _selected is None:
        _selected = select_kernel()
    return _selected
