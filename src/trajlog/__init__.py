"""trajlog: checksummed, append-only event logs for AI-agent sessions.

The layers, top to bottom (docs/architecture.md): :mod:`trajlog.cli`;
:mod:`trajlog.api` (``open``, ``Store``, ``Session``); :mod:`trajlog.projections`
(views, the context builder); :mod:`trajlog.recovery`; :mod:`trajlog.lifecycle`;
:mod:`trajlog.storage` (the ``Backend`` seam, SQLite); :mod:`trajlog.codec`
(the byte layout, over the C core or the pure-Python reference kernel, chosen
by ``TRAJLOG_BACKEND``); :mod:`trajlog.events` and :mod:`trajlog.errors`.
"""

from __future__ import annotations

from . import aio, codec, errors, lifecycle, memory, projections, recovery
from ._format import FORMAT_VERSION, Cursor, FrameHeader, FrameType, Status
from ._version import __version__
from .api import BalancedView, Session, SessionTree, Store, VerifyReport, open
from .codec import Frame, ScanReport, Verdict, Watermark
from .events import Event, SessionHeader
from .memory import Identity, MemoryItem, MemoryView, PurgeReport
from .projections import context, evidence
from .projections.context import ContextPolicy, build_context
from .projections.replay import ReplayResult, replay


def __getattr__(name: str) -> str:
    # ``trajlog.backend``: "c" or "python", resolved when first asked for.
    if name == "backend":
        return codec.kernel_name()
    raise AttributeError(f"module 'trajlog' has no attribute {name!r}")

__all__ = [
    "FORMAT_VERSION",
    "BalancedView",
    "ContextPolicy",
    "Cursor",
    "Event",
    "Frame",
    "FrameHeader",
    "FrameType",
    "Identity",
    "MemoryItem",
    "MemoryView",
    "PurgeReport",
    "ReplayResult",
    "ScanReport",
    "Session",
    "SessionHeader",
    "SessionTree",
    "Status",
    "Store",
    "Verdict",
    "VerifyReport",
    "Watermark",
    "__version__",
    "aio",
    "backend",
    "build_context",
    "codec",
    "context",
    "errors",
    "evidence",
    "lifecycle",
    "memory",
    "open",
    "projections",
    "recovery",
    "replay",
]
