"""The byte layout: frames, special payloads, compression, event records and
the one verified stream reader.  Nothing outside this package calls a kernel
or slices a frame.

:mod:`.frames` -- encode, scan, classify (the torn / corrupt rule), iterate;
:mod:`.special` -- SESSION_HEADER and SEAL payloads; :mod:`.compression` --
zstd for payloads; :mod:`.records` -- event frames and session header checks;
:mod:`.stream` -- verified reading of a stored log, batch by batch.
"""

from __future__ import annotations

from .._format import Cursor, FrameHeader, FrameType
from .frames import (
    Frame,
    ScanReport,
    Verdict,
    Watermark,
    checksum,
    classify,
    decode_header,
    encode,
    iter_frames,
    kernel_name,
    payload_of,
    scan,
    session_key,
    split_frames,
    start_cursor,
    verify,
)
from .special import SealPayload, SessionHeaderPayload

__all__ = [
    "Cursor",
    "Frame",
    "FrameHeader",
    "FrameType",
    "ScanReport",
    "SealPayload",
    "SessionHeaderPayload",
    "Verdict",
    "Watermark",
    "checksum",
    "classify",
    "decode_header",
    "encode",
    "iter_frames",
    "kernel_name",
    "payload_of",
    "scan",
    "session_key",
    "split_frames",
    "start_cursor",
    "verify",
]
