"""How a session's records become bytes: chunk rows of event frames for the
write path, one frame decoded back into an :class:`~trajlog.events.Event`, and
the session header's metadata and check.

The write path hands this module the serialized payloads of a batch and gets
back its chunk rows: the bytes the storage stores.  A session header is not a frame inside the
database; its fields are covered by ``header_check``, the XXH3-64 (seeded with
the session key) of a MessagePack array of the fields, so a flipped bit in a
stored header is found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
from msgspec.structs import force_setattr as _set

from .. import _backend
from .._format import FLAG_ZSTD, Cursor, Kernel, Status
from ..errors import error_for
from ..events import Event, SessionHeader, decode_event, decode_lazy
from .chunks import RAW, Chunk, ChunkCompressor, cut, frame_sizes, pack
from .compression import Compressor
from .frames import checksum, decode_header, payload_of

_new = tuple.__new__   # a Chunk made in C (a NamedTuple's own __new__ is Python)

_OK = Status.OK
COMPRESS_FROM = 4096   # a run this long is stored compressed (shorter ones wait for a repack)
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder()


def encode_chunks(key: int, payloads: Sequence[bytes], cursor: Cursor,
                  compressor: ChunkCompressor, *, session: str | None = None,
                  kernel: Kernel | None = None, json_depth: int = 0,
                  explain: Callable[[int], None] | None = None,
                  ) -> tuple[list[Chunk], Cursor]:
    """Frame a batch of event payloads continuing ``cursor`` -- one kernel call
    that also checks each payload against the JSON rules (``json_depth`` > 0:
    see ``tl_encode_events``) and hashes the frames as one row -- and cut the
    frames into chunk rows (FORMAT.md 7): one lean, uncompressed row for a
    single event; for a batch, rows of at most :data:`CAP` raw bytes, each
    compressed as one zstd frame when it is large enough to pay.

    All or nothing: a typed error (naming the first seq) and no rows.  A
    payload the JSON rules refuse is handed to ``explain`` (its index) first,
    which may raise the precise error."""
    n = len(payloads)
    if kernel is None:   # (frames._kernel inlined: this runs on every append)
        kernel = _backend.get_kernel()
    status, blob, end, check, failed = kernel.encode_events(key, payloads, cursor, json_depth)
    if status != _OK:
        if status == Status.NOT_JSON and explain is not None:
            explain(failed)
        raise error_for(status, seq=cursor.next_seq + failed, session=session)
    if n == 1:  # the body check came with the frame: no second kernel call
        return [_new(Chunk, (cursor.next_seq, 1, len(blob), RAW, check, cursor.chain,
                             end.chain, blob))], end
    # runs as views of the blob: a run that is compressed is never copied
    runs = cut(memoryview(blob), frame_sizes([len(p) for p in payloads]), cursor.next_seq,
               cursor.chain)
    big = [i for i, run in enumerate(runs) if len(run[0]) >= COMPRESS_FROM]
    stored: list[bytes | None] = [None] * len(runs)
    for i, packed in zip(big, compressor.compress([runs[i][0] for i in big]), strict=True):
        stored[i] = packed
    if len(runs) == 1 and stored[0] is None:   # one raw row: its check is the blob's
        _, first, count, seed, last = runs[0]
        return [_new(Chunk, (first, count, len(blob), RAW, check, seed, last, blob))], end
    return [pack(key, bytes(view) if data is None else view, first, count, seed, last, data,
                 kernel=kernel)
            for (view, first, count, seed, last), data in zip(runs, stored, strict=True)], end


def decode_frame(frame: Any, seq: int, compressor: Compressor, *, session: str | None = None,
                 kernel: Kernel | None = None) -> Event:
    """The event in one frame whose verification happened elsewhere (or is not needed)."""
    header = decode_header(frame, kernel=kernel)
    payload: Any = payload_of(frame, header)
    if header.flags & FLAG_ZSTD:
        payload = compressor.decompress(payload, header.raw_len)
    event: Event = decode_payload(payload, seq, session)
    return event


def fresh_events(payloads: Sequence[bytes], first_seq: int) -> list[Event]:
    """The events just written, decoded afresh from their payloads: what an
    append returns, so that its ``data`` belongs to the caller and is exactly
    what the log holds (never the caller's own object, which it may change)."""
    out = [decode_event(p, 0) for p in payloads]
    seq = first_seq
    for event in out:
        _set(event, "seq", seq)
        seq += 1
    return out


def decode_payload(payload: Any, seq: int, session: str | None, lazy: bool = False) -> Any:
    """An event payload v1 as an Event (a LazyEvent with ``lazy``) at ``seq``;
    undecodable bytes are corruption."""
    try:
        return decode_lazy(payload, seq) if lazy else decode_event(payload, seq)
    except msgspec.DecodeError as exc:
        raise error_for(Status.BAD_FIELD, reason=f"undecodable event payload: {exc}",
                        seq=seq, session=session, corrupt=True) from exc


def encode_metadata(metadata: Mapping[str, Any]) -> bytes:
    """A session header's metadata as stored (MessagePack)."""
    return _ENCODER.encode(dict(metadata))


def decode_metadata(blob: bytes) -> dict[str, Any]:
    """A stored metadata blob as a dict; undecodable or not a map: a
    :class:`~trajlog.errors.CorruptionError` (``BAD_HEADER``)."""
    try:
        value = _DECODER.decode(blob)
    except msgspec.DecodeError as exc:
        raise error_for(Status.BAD_HEADER, reason=f"undecodable session metadata: {exc}",
                        corrupt=True) from exc
    if not isinstance(value, dict):
        raise error_for(Status.BAD_HEADER, reason="session metadata is not a map", corrupt=True)
    return value


def header_check(header: SessionHeader, key: int, *, kernel: Kernel | None = None) -> int:
    """The check over a session header's fields, seeded with the session key."""
    blob = _ENCODER.encode([header.id, header.cwd, header.parent_session, header.seed_length,
                            header.origin, header.delegation_depth, header.agent_preset,
                            header.created_at, dict(header.metadata)])
    return checksum(blob, key, kernel=kernel)


STATE_CHECK = 8   # bytes of check after a saved projection state


def _state_check(key: int, name: str, version: int, seq: int, chain: int, state: bytes,
                 kernel: Kernel | None) -> bytes:
    # Over what the state claims as well as its bytes: a state moved to
    # another session, seq or projection fails its check.
    blob = _ENCODER.encode([name, version, seq, chain]) + state
    return checksum(blob, key, kernel=kernel).to_bytes(STATE_CHECK, "little")


def seal_state(key: int, name: str, version: int, seq: int, chain: int, state: bytes, *,
               kernel: Kernel | None = None) -> bytes:
    """A projection state as saved: its bytes, then an XXH3-64 check (seeded
    with the session key) over the state and what it claims to be."""
    return state + _state_check(key, name, version, seq, chain, state, kernel)


def open_state(key: int, name: str, version: int, seq: int, chain: int, blob: bytes, *,
               kernel: Kernel | None = None) -> bytes | None:
    """The state bytes of a saved blob, or None if its check fails (a derived
    state is then rebuilt from the log, never served)."""
    if len(blob) < STATE_CHECK:
        return None
    state = blob[:-STATE_CHECK]
    if _state_check(key, name, version, seq, chain, state, kernel) != blob[-STATE_CHECK:]:
        return None
    return state


__all__ = ["COMPRESS_FROM", "STATE_CHECK", "decode_frame", "decode_metadata", "decode_payload",
           "encode_chunks", "encode_metadata", "fresh_events", "header_check", "open_state",
           "seal_state"]
