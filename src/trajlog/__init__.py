"""trajlog: checksummed, append-only event logs for AI-agent sessions.

The front door holds what a host uses every day: :func:`open` a
:class:`Store`, create and read :class:`Session` logs of :class:`Event`
values, verify them (:class:`VerifyReport`, :class:`StoreAudit`), erase
(:class:`PurgeReport`), remember (:class:`Identity`, :mod:`trajlog.memory`),
replay a run (:func:`replay`), and the same for asyncio (:mod:`trajlog.aio`,
loaded on first use).  Everything else lives in its room: the frame
vocabulary in :mod:`trajlog.codec`, the views and the context builder in
:mod:`trajlog.projections`, every exception in :mod:`trajlog.errors`, exports
and importers in :mod:`trajlog.interop`.

The rooms, top to bottom (``tests/project/test_architecture.py`` checks the order):
:mod:`trajlog.cli`; the adapters and the viewer; :mod:`trajlog.api` (with
:mod:`trajlog.aio`); :mod:`trajlog.interop`; :mod:`trajlog.projections`;
:mod:`trajlog.memory`; :mod:`trajlog.recovery`; :mod:`trajlog.lifecycle`;
:mod:`trajlog.storage` (the ``Backend`` seam, SQLite); :mod:`trajlog.codec`
(the byte layout, over the C core or the pure-Python reference kernel, chosen
by ``TRAJLOG_BACKEND``); :mod:`trajlog.events` and :mod:`trajlog.errors`.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import codec, errors, memory, projections
from ._version import __version__
from .api import Session, Store, StoreAudit, VerifyReport, open
from .errors import TrajlogError
from .events import Event, SessionHeader
from .memory import Identity, PurgeReport
from .projections.replay import ReplayResult, replay


def __getattr__(name: str) -> Any:
    # ``trajlog.backend``: "c" or "python", resolved when first asked for.
    if name == "backend":
        return codec.kernel_name()
    # ``trajlog.aio`` on first use: a host that never awaits never loads asyncio
    if name == "aio":
        return importlib.import_module(".aio", __name__)
    raise AttributeError(f"module 'trajlog' has no attribute {name!r}")

__all__ = [
    "Event",
    "Identity",
    "PurgeReport",
    "ReplayResult",
    "Session",
    "SessionHeader",
    "Store",
    "StoreAudit",
    "TrajlogError",
    "VerifyReport",
    "__version__",
    "aio",
    "backend",
    "codec",
    "errors",
    "memory",
    "open",
    "projections",
    "replay",
]
