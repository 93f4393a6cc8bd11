"""The byte layout: frames, special payloads, compression, event records and
the one verified stream reader.  Nothing outside this package calls a kernel
or slices a frame.  The frame vocabulary a caller meets (:class:`Cursor`,
:class:`FrameHeader`, :class:`FrameType`, :class:`Status`, :class:`Frame`,
:class:`ScanReport`, :class:`Verdict`, :class:`Watermark`,
:data:`FORMAT_VERSION`) is exported here.

:mod:`.frames` -- encode, scan, classify (the torn / corrupt rule), iterate;
:mod:`.special` -- SESSION_HEADER and SEAL payloads; :mod:`.compression` --
zstd for payloads; :mod:`.records` -- event frames and session header checks;
:mod:`.stream` -- verified reading of a stored log, batch by batch.
"""

from __future__ import annotations

from .._format import FORMAT_VERSION, Cursor, FrameHeader, FrameType, Status
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
    "FORMAT_VERSION",
    "Cursor",
    "Frame",
    "FrameHeader",
    "FrameType",
    "ScanReport",
    "SealPayload",
    "SessionHeaderPayload",
    "Status",
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
