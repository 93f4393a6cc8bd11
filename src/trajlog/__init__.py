"""trajlog: checksummed, append-only event logs for AI-agent sessions.

The frame layer is :mod:`trajlog.codec` over one of two kernels (the C core,
or the pure-Python reference), chosen by ``TRAJLOG_BACKEND``; every error is
in :mod:`trajlog.errors`.
"""

from __future__ import annotations

from . import codec, context, errors, evidence, projections, recovery
from ._backend import get_kernel
from ._format import FORMAT_VERSION, Cursor, FrameHeader, FrameType, Status
from .codec import Frame, ScanReport, Verdict, Watermark
from .context import ContextPolicy, build_context
from .events import Event
from .store import Session, SessionHeader, Store, VerifyReport, open

__version__ = "0.1.0"


def __getattr__(name: str) -> str:
    # ``trajlog.backend``: "c" or "python", resolved when first asked for.
    if name == "backend":
        return str(get_kernel().NAME)
    raise AttributeError(f"module 'trajlog' has no attribute {name!r}")

__all__ = [
    "FORMAT_VERSION",
    "ContextPolicy",
    "Cursor",
    "Event",
    "Frame",
    "FrameHeader",
    "FrameType",
    "ScanReport",
    "Session",
    "SessionHeader",
    "Status",
    "Store",
    "Verdict",
    "VerifyReport",
    "Watermark",
    "__version__",
    "backend",
    "build_context",
    "codec",
    "context",
    "errors",
    "evidence",
    "open",
    "projections",
    "recovery",
]
