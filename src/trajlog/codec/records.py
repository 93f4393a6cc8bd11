"""How a session's records become bytes: event frames for the write path, one
frame decoded back into an :class:`~trajlog.events.Event`, and the session
header's metadata and check.

The write path hands this module the serialized payloads of a batch (already
compressed where it pays) and gets back one frame per event with its chain:
the bytes the storage stores.  A session header is not a frame inside the
database; its fields are covered by ``header_check``, the XXH3-64 (seeded with
the session key) of a MessagePack array of the fields, so a flipped bit in a
stored header is found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .._format import FLAG_ZSTD, HEADER_SIZE, Cursor, FrameType, Kernel, Status
from ..errors import error_for
from ..events import Event, SessionHeader, decode_event
from .compression import Compressor
from .frames import _kernel, checksum, decode_header, payload_of

_CHAIN_AT = 32  # the chain is the last field of a frame header (FORMAT.md 3)
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder()


def encode_events(key: int, stored: Sequence[bytes], flags: Sequence[int],
                  raw_lens: Sequence[int], cursor: Cursor, *, session: str | None = None,
                  kernel: Kernel | None = None) -> tuple[list[bytes], list[int], Cursor]:
    """Frame a batch of event payloads continuing ``cursor``, in one kernel call.

    Returns the frames, their chains and the cursor after the last.  All or
    nothing: a typed error (naming the first seq) and no frames."""
    n = len(stored)
    status, blob, end = _kernel(kernel).encode_batch(
        key, stored, [FrameType.EVENT] * n, cursor, flags, raw_lens)
    if status != Status.OK:
        raise error_for(status, seq=cursor.next_seq, session=session)
    frames, chains = [], []
    pos = 0
    for p in stored:
        size = len(p)
        frames.append(blob[pos:pos + HEADER_SIZE + size + (-size & 7)])
        chains.append(int.from_bytes(blob[pos + _CHAIN_AT:pos + HEADER_SIZE], "little"))
        pos += HEADER_SIZE + size + (-size & 7)
    return frames, chains, end


def frame_chain(frame: Any, *, kernel: Kernel | None = None) -> int:
    """The chain a stored frame carries (its header decoded, not verified)."""
    return decode_header(frame, kernel=kernel).chain


def decode_frame(frame: Any, seq: int, compressor: Compressor, *, session: str | None = None,
                 kernel: Kernel | None = None) -> Event:
    """The event in one frame whose verification happened elsewhere (or is not needed)."""
    header = decode_header(frame, kernel=kernel)
    payload: Any = payload_of(frame, header)
    if header.flags & FLAG_ZSTD:
        payload = compressor.decompress(payload, header.raw_len)
    return decode_payload(payload, seq, session)


def decode_payload(payload: Any, seq: int, session: str | None) -> Event:
    """An event payload v1 as an Event at ``seq``; undecodable bytes are corruption."""
    try:
        return decode_event(payload, seq)
    except msgspec.DecodeError as exc:
        raise error_for(Status.BAD_FIELD, reason=f"undecodable event payload: {exc}",
                        seq=seq, session=session, corrupt=True) from exc


def encode_metadata(metadata: Mapping[str, Any]) -> bytes:
    """A session header's metadata as stored (MessagePack)."""
    return _ENCODER.encode(dict(metadata))


def decode_metadata(blob: bytes) -> dict[str, Any]:
    value = _DECODER.decode(blob)
    return value if isinstance(value, dict) else {}


def header_check(header: SessionHeader, key: int, *, kernel: Kernel | None = None) -> int:
    """The check over a session header's fields, seeded with the session key."""
    blob = _ENCODER.encode([header.id, header.cwd, header.parent_session, header.seed_length,
                            header.origin, header.delegation_depth, header.agent_preset,
                            header.created_at, dict(header.metadata)])
    return checksum(blob, key, kernel=kernel)


__all__ = ["decode_frame", "decode_metadata", "decode_payload", "encode_events",
           "encode_metadata", "frame_chain", "header_check"]
