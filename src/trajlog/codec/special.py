"""Payload layouts of the special frames: SESSION_HEADER (the first frame of a
file) and SEAL (its last: the durable watermark of everything before it).
FORMAT.md section 4 is the normative description."""

from __future__ import annotations

import struct
import uuid as uuid_mod
from dataclasses import dataclass
from typing import Any

from .._format import Status
from ..errors import error_for

_SESSION_HEADER = struct.Struct("<HHI16sQIIII")  # 48 bytes, then ext
_SEAL = struct.Struct("<QQQQB7x32s")  # 72 bytes


@dataclass(frozen=True, slots=True)
class SessionHeaderPayload:
    """Payload of a SESSION_HEADER frame (type 1), the first frame of a file."""

    session_uuid: uuid_mod.UUID
    created_ms: int
    ext: bytes = b""
    format_version: int = 1
    min_reader_version: int = 1
    flags: int = 0
    max_frame: int = 16 * 1024 * 1024
    max_raw: int = 64 * 1024 * 1024
    zstd_dict_id: int = 0

    def pack(self) -> bytes:
        return _SESSION_HEADER.pack(
            self.format_version, self.min_reader_version, self.flags, self.session_uuid.bytes,
            self.created_ms, self.max_frame, self.max_raw, self.zstd_dict_id,
            len(self.ext)) + self.ext

    @classmethod
    def unpack(cls, payload: Any) -> SessionHeaderPayload:
        """Parse and bound-check a SESSION_HEADER payload (lengths distrusted)."""
        data = bytes(payload)
        if len(data) < _SESSION_HEADER.size:
            raise error_for(Status.BAD_FIELD, reason="session header payload too short")
        (version, min_reader, flags, raw_uuid, created, max_frame, max_raw, dict_id,
         ext_len) = _SESSION_HEADER.unpack_from(data)
        if ext_len != len(data) - _SESSION_HEADER.size:
            raise error_for(Status.BAD_FIELD, reason="session header ext length mismatch")
        if min_reader > 1:
            raise error_for(Status.UNSUPPORTED,
                            reason=f"file needs reader version {min_reader}, this is 1")
        return cls(uuid_mod.UUID(bytes=raw_uuid), created, data[_SESSION_HEADER.size:], version,
                   min_reader, flags, max_frame, max_raw, dict_id)


@dataclass(frozen=True, slots=True)
class SealPayload:
    """Payload of a SEAL frame (type 5), the last frame of a complete file:
    the durable watermark of everything before it."""

    first_event_seq: int
    event_count: int
    last_event_chain: int
    body_bytes: int
    digest_alg: int = 0  # 0 none, 1 SHA-256 of every byte before the SEAL
    digest: bytes = bytes(32)

    def pack(self) -> bytes:
        return _SEAL.pack(self.first_event_seq, self.event_count, self.last_event_chain,
                          self.body_bytes, self.digest_alg, self.digest)

    @classmethod
    def unpack(cls, payload: Any) -> SealPayload:
        data = bytes(payload)
        if len(data) != _SEAL.size:
            raise error_for(Status.BAD_FIELD, reason="seal payload has the wrong length")
        first, count, chain, body, alg, digest = _SEAL.unpack(data)
        if alg not in (0, 1):
            raise error_for(Status.UNSUPPORTED, reason=f"unknown digest algorithm {alg}")
        return cls(first, count, chain, body, alg, digest)


__all__ = ["SealPayload", "SessionHeaderPayload"]
