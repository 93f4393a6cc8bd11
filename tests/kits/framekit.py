"""Test helpers: build logs and forge frames with chosen (even invalid) fields.

Forging uses the ``xxhash`` package directly, not a kernel, so a kernel bug
cannot hide itself by forging the frames it is then asked to judge.
"""

from __future__ import annotations

import struct
import uuid
from types import ModuleType

import xxhash

from trajlog import codec
from trajlog._format import HEADER_SIZE, Cursor

KEY = xxhash.xxh3_64_intdigest(uuid.UUID(int=0x1B4E28BA2FA111D2883F0016D3CCA427).bytes, seed=0)
OTHER_KEY = xxhash.xxh3_64_intdigest(uuid.UUID(int=42).bytes, seed=0)
_PREFIX = struct.Struct("<2sBBII")


def payloads(n: int, size: int = 100) -> list[bytes]:
    """n distinct, deterministic payloads of about ``size`` bytes."""
    return [(f"event {i} ".encode() * (size // 8 + 1))[: size + i % 9] for i in range(n)]


def make_log(kernel: ModuleType, items: list[bytes], key: int = KEY,
             cursor: Cursor | None = None, types: int | list[int] = 2) -> tuple[bytes, list[int]]:
    """Encode ``items`` and return (log bytes, offset of each frame)."""
    log, _ = codec.encode(items, key, cursor or codec.start_cursor(key), types=types,
                          kernel=kernel)
    offsets, pos = [], 0
    for item in items:
        offsets.append(pos)
        pos += HEADER_SIZE + len(item) + (-len(item) & 7)
    return log, offsets


def reseal_header(frame: bytearray, key: int, prev_chain: int | None = None) -> None:
    """Recompute hdr_check (and the chain, when ``prev_chain`` is given) of the
    header at ``frame[0:40]`` after a test edited its fields."""
    if prev_chain is not None:
        chain = xxhash.xxh3_64_intdigest(bytes(frame[0:12] + frame[16:32]), seed=prev_chain)
        frame[32:40] = chain.to_bytes(8, "little")
    check = xxhash.xxh3_64_intdigest(bytes(frame[0:12] + frame[16:40]), seed=key) & 0xFFFFFFFF
    frame[12:16] = check.to_bytes(4, "little")


def forge(payload: bytes, *, key: int = KEY, seq: int = 0, prev_chain: int | None = None,
          type_: int = 2, flags: int = 0, stored_len: int | None = None,
          raw_len: int | None = None, pad: bytes | None = None,
          payload_seed: int | None = None) -> bytes:
    """A frame with any field chosen; the checks are computed over whatever
    was chosen, so only the chosen field is wrong."""
    stored = len(payload) if stored_len is None else stored_len
    raw = len(payload) if raw_len is None else raw_len
    pcheck = xxhash.xxh3_64_intdigest(payload, seed=(key ^ seq) if payload_seed is None
                                      else payload_seed)
    head = bytearray(_PREFIX.pack(b"\xa7\xf1", type_, flags, stored, raw) + bytes(4)
                     + struct.pack("<QQQ", seq, pcheck, 0))
    reseal_header(head, key, key if prev_chain is None else prev_chain)
    return bytes(head) + payload + (bytes(-len(payload) & 7) if pad is None else pad)
