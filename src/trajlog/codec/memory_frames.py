"""MEMORY and TOMBSTONE frames (FORMAT.md 4.6): the byte layout of memory
versions and tombstones.

A memory item's versions form a log of their own: version ``v`` is the frame
of seq ``v - 1`` under the item's key (XXH3-64 of its UUID, like a session
key), chained to the version before it.  Tombstones form one store-wide log
(seq ``tid - 1``, under :data:`TOMBSTONE_KEY`).  Payloads are MessagePack
maps.  A revoked item's versions keep their 40 header bytes and have their
payload zeroed: the stored payload check stays as the proof of what was
there, and the chain still verifies (:func:`open_record`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import msgspec

from .._format import HEADER_SIZE, Cursor, FrameType, Status
from .chunks import step_over_blank
from .frames import _kernel, decode_header, encode, session_key

# The key of the tombstone log: a fixed UUID's key, so tombstone frames can
# never verify as another log's.
TOMBSTONE_KEY = session_key(uuid.UUID("8b5f3a2e-74f1-4c2d-9a11-746f6d627374"))
_ENC = msgspec.msgpack.Encoder()
_DEC = msgspec.msgpack.Decoder(dict[str, Any])


def item_key(item_id: str) -> int:
    """The key of an item's version frames."""
    return session_key(uuid.UUID(item_id))


@dataclass(frozen=True, slots=True)
class Opened:
    """A verified record frame: its payload (None when blanked), its chain,
    the defect that stopped it (None when it verified), and where its
    payload ends (:func:`record_at` decodes it again)."""

    record: dict[str, Any] | None
    chain: int
    defect: str | None = None
    status: Status | None = None
    end: int = 0


def encode_record(record: dict[str, Any], key: int, seq: int, prev_chain: int,
                  kind: FrameType) -> tuple[bytes, int]:
    """One MEMORY or TOMBSTONE frame of ``record`` at ``seq`` continuing
    ``prev_chain``; returns the frame and its chain."""
    frame, chain, _ = encode_record_end(record, key, seq, prev_chain, kind)
    return frame, chain


def encode_record_end(record: dict[str, Any], key: int, seq: int, prev_chain: int,
                      kind: FrameType) -> tuple[bytes, int, int]:
    """:func:`encode_record`, and where the frame's payload ends (as
    :attr:`Opened.end` gives it: :func:`record_at` decodes it)."""
    payload = _ENC.encode(record)
    frame, cursor = encode([payload], key, Cursor(0, seq, prev_chain), types=kind)
    return frame, cursor.chain, HEADER_SIZE + len(payload)


def payload_bytes(record: dict[str, Any]) -> bytes:
    return _ENC.encode(record)


def blank(frame: bytes) -> bytes:
    """The frame with its payload (and pad) zeroed, its header kept."""
    return frame[:HEADER_SIZE] + bytes(len(frame) - HEADER_SIZE)


def open_record(frame: bytes, key: int, seq: int, prev_chain: int, kind: FrameType, *,
                may_be_blank: bool) -> Opened:
    """Verify one record frame (every check of FORMAT.md 5, its type, that it
    is the whole blob) and decode its payload.  A blank frame (an erased
    payload) is accepted only when ``may_be_blank``."""
    k = _kernel(None)
    status, headers, end, _ = k.scan(frame, key, Cursor(0, seq, prev_chain), 1, True)
    if status == Status.BAD_PAYLOAD and may_be_blank:
        stepped = step_over_blank(frame, end, key)
        if stepped is not None and stepped[1].offset == len(frame):
            header = stepped[0]
            if header.type != kind:
                return Opened(None, header.chain, "a record frame of the wrong type",
                              Status.BAD_FIELD)
            return Opened(None, header.chain)
    if status not in (Status.END, Status.MORE):
        return Opened(None, prev_chain, k.strerror(status), Status(status))
    if len(headers) != 1 or end.offset != len(frame):
        return Opened(None, prev_chain, "a record row holds other than exactly one frame",
                      Status.BAD_FIELD)
    header = headers[0]
    if header.type != kind:
        return Opened(None, header.chain, "a record frame of the wrong type", Status.BAD_FIELD)
    end_ = HEADER_SIZE + header.stored_len
    try:
        record = _DEC.decode(memoryview(frame)[HEADER_SIZE:end_])
    except msgspec.DecodeError as exc:
        return Opened(None, header.chain, f"undecodable record payload: {exc}",
                      Status.BAD_FIELD)
    return Opened(record, header.chain, end=end_)


def record_at(frame: bytes, end: int) -> dict[str, Any]:
    """The payload of a record frame :func:`open_record` verified, decoded
    again (a fresh dict: callers may change what they get)."""
    return _DEC.decode(memoryview(frame)[HEADER_SIZE:end])


def chain_of_record(frame: bytes) -> int:
    """The chain field of a record frame (trusted: it was verified before)."""
    return decode_header(frame).chain


__all__ = ["TOMBSTONE_KEY", "Opened", "blank", "chain_of_record", "encode_record",
           "encode_record_end", "item_key",
           "open_record", "payload_bytes", "record_at"]
