"""The ``.tlog`` export file: a session's frames, byte for byte, in a file that
verifies without the database (FORMAT.md section 8).

Layout: a SESSION_HEADER frame (outer seq 0; its ``ext`` is the session header
as JSON), CHUNK frames (outer seqs 1..N, with TOMBSTONE frames among them),
each holding a run of the session's own frames exactly as the store keeps
them -- zstd-compressed when that pays -- and a SEAL frame (outer seq N+1):
first event seq, event count, the chain of the last event frame and the
SHA-256 of every byte before it.  The outer frames have their own seq and
chain, seeded with the session key; the inner frames keep the session's seq
and chain (a fork's start at its seed length, continuing its parent's chain,
given in the header).

A frame erased under a tombstone is exported as the store keeps it: its
header, and a payload of zeros; a TOMBSTONE frame just before its CHUNK names
it and gives the payload readers see instead (the tombstone's replacement), so
the file still verifies and never holds what was erased.

:class:`TlogWriter` writes one, streaming; :class:`TlogReader` reads and
verifies one from any buffer (an ``mmap`` of the file: bounded memory).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid as uuid_mod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import zstandard

from .._format import FRAME_STRUCT as _FRAME
from .._format import HEADER_SIZE, MAX_STORED, Cursor, FrameTable, FrameType, Status
from ..errors import PayloadTooLargeError, error_for
from .chunks import step_over_blank
from .frames import Verdict, checksum, encode, iter_frames, session_key
from .frames import _kernel as kernel_of
from .special import SealPayload, SessionHeaderPayload

FLAG_ZSTD = 1
LEVEL = 3
#: the ``format`` of a .tlog's header ext (and of the JSONL export's header line)
EXPORT_FORMAT = "trajlog-export/1"
_SEAL_LEN = 72


@dataclass(frozen=True, slots=True)
class Run:
    """A verified run of a session's own frames from a .tlog: the raw bytes,
    their frame table, and the payloads of erased frames (seq -> replacement)."""

    raw: bytes
    table: FrameTable
    erased: dict[int, bytes]


class TlogWriter:
    """Writes a .tlog to ``out`` (a binary file), one CHUNK at a time.

    ``header`` is the session header as a JSON-compatible dict; ``seed`` and
    ``seed_chain`` where the session's own frames start; ``erased`` the
    replacement payload of each erased seq."""

    def __init__(self, out: BinaryIO, session_id: str, header: dict[str, Any], *, seed: int,
                 seed_chain: int, created_ms: int) -> None:
        self._out = out
        self._uuid = uuid_mod.UUID(session_id)
        self._key = session_key(self._uuid)
        self._digest = hashlib.sha256()
        self._offset = 0
        self._zstd = zstandard.ZstdCompressor(level=LEVEL, write_content_size=True)
        ext = {"format": EXPORT_FORMAT, "session": header, "seed_chain": seed_chain}
        payload = SessionHeaderPayload(self._uuid, created_ms,
                                       json.dumps(ext, separators=(",", ":")).encode()).pack()
        self._cursor = Cursor(0, 0, self._key)
        self._write(payload, FrameType.SESSION_HEADER)
        self.first_seq = seed
        self.next_seq = seed
        self.last_chain = seed_chain

    def _write(self, payload: bytes, type_: int, flags: int = 0, raw_len: int | None = None,
               ) -> None:
        blob, self._cursor = encode(
            [payload], self._key, self._cursor, types=[type_], flags=[flags],
            raw_lens=[len(payload) if raw_len is None else raw_len])
        self._out.write(blob)
        self._digest.update(blob)
        self._offset += len(blob)

    def chunk(self, frames: bytes | memoryview, first_seq: int, n: int, last_chain: int,
              erased: dict[int, bytes] | None = None) -> None:
        """Add a run of ``n`` verified frames starting at ``first_seq``; for
        each erased frame among them, a TOMBSTONE frame before the CHUNK gives
        the payload readers see instead."""
        if first_seq != self.next_seq or n < 1:
            raise ValueError(f"a run must start at seq {self.next_seq}")
        for seq, replacement in sorted((erased or {}).items()):
            note = {"seq": seq, "replacement": base64.b64encode(replacement).decode()}
            self._write(json.dumps(note, separators=(",", ":")).encode(), FrameType.TOMBSTONE)
        raw = bytes(frames)
        packed = self._zstd.compress(raw)
        if len(packed) < len(raw) - (len(raw) >> 4) or len(raw) > MAX_STORED:
            if len(packed) > MAX_STORED:
                raise PayloadTooLargeError(
                    f"seq {first_seq} does not fit in a .tlog CHUNK ({len(raw)} bytes, "
                    f"{len(packed)} compressed; the limit is {MAX_STORED}): export it as "
                    ".jsonl.zst")
            self._write(packed, FrameType.CHUNK, FLAG_ZSTD, len(raw))
        else:
            self._write(raw, FrameType.CHUNK)
        self.next_seq = first_seq + n
        self.last_chain = last_chain

    def seal(self) -> SealPayload:
        """Write the SEAL; the file is complete."""
        seal = SealPayload(self.first_seq, self.next_seq - self.first_seq, self.last_chain,
                           self._offset, 1, self._digest.digest())
        self._write(seal.pack(), FrameType.SEAL)
        return seal


class TlogReader:
    """Reads and verifies a .tlog held in ``buf`` (bytes or an mmap).

    :meth:`runs` yields the verified runs of event frames.  When it is done,
    ``verdict`` is ``clean`` (sealed, every check passed), ``torn`` (the file
    ends before its SEAL in the shape of an interrupted write: what was
    yielded is sound, the rest was never written) -- or it raised: a damaged
    file is corrupt (:class:`~trajlog.errors.CorruptionError` with the offset).
    """

    def __init__(self, buf: Any, *, name: str = "the file") -> None:
        self._buf = memoryview(buf)
        self._name = name
        if len(self._buf) < HEADER_SIZE + 48:
            raise error_for(Status.TRUNCATED, reason=f"{name} ends inside its header",
                            offset=len(self._buf), corrupt=False)
        raw_uuid = bytes(self._buf[HEADER_SIZE + 8:HEADER_SIZE + 24])
        self.key = session_key(uuid_mod.UUID(bytes=raw_uuid))
        self._frames = iter_frames(self._buf, self.key, strict=False)
        first = next(self._frames, None)
        if first is None:  # (damage raised; this is a header cut short)
            raise error_for(Status.TRUNCATED, reason=f"{name} ends inside its header",
                            offset=len(self._buf), corrupt=False)
        if first.type != FrameType.SESSION_HEADER:
            raise error_for(Status.BAD_FIELD, reason=f"{name} does not start with a "
                            "SESSION_HEADER frame", offset=0, corrupt=True)
        self.header = SessionHeaderPayload.unpack(first.payload)
        try:
            ext = json.loads(bytes(self.header.ext))
        except ValueError:
            ext = None
        if not isinstance(ext, dict) or ext.get("format") != EXPORT_FORMAT:
            raise error_for(Status.UNSUPPORTED, reason=f"{name}: the header is not a "
                            f"{EXPORT_FORMAT} header", offset=0, corrupt=True)
        self.ext: dict[str, Any] = ext
        session = ext.get("session")
        self.session: dict[str, Any] = session if isinstance(session, dict) else {}
        if self.session.get("id") != str(self.header.session_uuid):
            raise error_for(Status.BAD_FIELD, reason=f"{name}: the header's session id is not "
                            "the SESSION_HEADER's UUID", offset=0, corrupt=True)
        seed = self.session.get("seed_length", 0)
        chain = ext.get("seed_chain")
        if type(seed) is not int or type(chain) is not int or not 0 <= chain < 2**64:
            raise error_for(Status.BAD_FIELD, reason=f"{name}: bad seed in the header",
                            offset=0, corrupt=True)
        self.erased: dict[int, bytes] = {}
        self.cursor = Cursor(0, seed, chain)
        self.seal: SealPayload | None = None
        self.verdict: Verdict | None = None
        self.events = 0

    def runs(self) -> Iterator[Run]:
        """The verified runs of event frames, in order (see the class)."""
        k = kernel_of(None)
        seal_offset = None
        for frame in self._frames:
            if self.seal is not None:
                raise error_for(Status.BAD_FIELD, reason="a frame after the SEAL",
                                offset=frame.offset, corrupt=True)
            if frame.type == FrameType.SEAL:
                self.seal = SealPayload.unpack(frame.payload)
                seal_offset = frame.offset
                if frame.offset + HEADER_SIZE + _SEAL_LEN != len(self._buf):
                    raise error_for(Status.BAD_FIELD, reason="bytes after the SEAL",
                                    offset=frame.offset + HEADER_SIZE + _SEAL_LEN,
                                    corrupt=True)
                continue
            if frame.type == FrameType.TOMBSTONE:
                self._tombstone(frame.payload, frame.offset)
                continue
            if frame.type != FrameType.CHUNK:
                raise error_for(Status.BAD_FIELD, reason=f"unexpected frame type {frame.type}",
                                offset=frame.offset, corrupt=True)
            raw = bytes(frame.payload)
            if frame.flags & FLAG_ZSTD:
                try:
                    if zstandard.frame_content_size(raw) != frame.raw_len:
                        raise zstandard.ZstdError("content size")
                    raw = zstandard.ZstdDecompressor().decompress(
                        raw, max_output_size=frame.raw_len)
                except zstandard.ZstdError:
                    raise error_for(Status.BAD_FIELD, reason="a CHUNK does not decompress to "
                                    "its raw length", offset=frame.offset,
                                    corrupt=True) from None
            yield self._inner(raw, frame.offset, k)
        if self.seal is None:
            self.verdict = Verdict.TORN
            return
        seal = self.seal
        digest = hashlib.sha256(self._buf[:seal_offset]).digest()
        problems = []
        if seal.body_bytes != seal_offset:
            problems.append("its body length")
        if seal.first_event_seq != self.session.get("seed_length", 0) or (
                seal.first_event_seq + seal.event_count != self.cursor.next_seq):
            problems.append(f"its events ({seal.event_count} from seq {seal.first_event_seq})")
        if seal.last_event_chain != self.cursor.chain:
            problems.append("the chain of the last event")
        if seal.digest_alg == 1 and seal.digest != digest:
            problems.append("its SHA-256 digest")
        if problems:
            raise error_for(Status.BAD_CHAIN, reason="the SEAL disagrees with the file: "
                            + ", ".join(problems), offset=seal_offset, corrupt=True)
        self.verdict = Verdict.CLEAN

    def _tombstone(self, payload: Any, offset: int) -> None:
        try:
            note = json.loads(bytes(payload))
            seq, replacement = note["seq"], base64.b64decode(note["replacement"],
                                                             validate=True)
        except (ValueError, KeyError, TypeError):
            raise error_for(Status.BAD_FIELD, reason="a TOMBSTONE frame that does not parse",
                            offset=offset, corrupt=True) from None
        if type(seq) is not int or seq < self.cursor.next_seq:
            raise error_for(Status.BAD_FIELD, reason="a TOMBSTONE for a seq already read",
                            offset=offset, corrupt=True)
        self.erased[seq] = replacement

    def _inner(self, raw: bytes, outer_offset: int, k: Any) -> Run:
        """Scan the session's frames in one CHUNK, stepping over erased ones."""
        cur = Cursor(0, self.cursor.next_seq, self.cursor.chain)
        parts: list[bytes] = []
        found: dict[int, bytes] = {}
        while True:
            status, table, cur, _ = k.scan_table(raw, self.key, cur, 1 << 30)
            parts.append(table.packed)
            if status == Status.END:
                break
            replacement = self.erased.get(cur.next_seq)
            if status == Status.BAD_PAYLOAD and replacement is not None:
                stepped = step_over_blank(raw, cur, self.key)
                if stepped is not None:
                    header, cur = stepped
                    found[header.seq] = replacement
                    parts.append(_FRAME.pack(*header))
                    continue
            raise error_for(status, reason=f"{k.strerror(status)} inside a CHUNK",
                            offset=outer_offset + HEADER_SIZE + cur.offset, seq=cur.next_seq,
                            corrupt=True)
        out = FrameTable(b"".join(parts))
        if not len(out):
            raise error_for(Status.BAD_FIELD, reason="an empty CHUNK", offset=outer_offset,
                            corrupt=True)
        out.erased = found or None
        self.events += len(out)
        self.cursor = Cursor(0, cur.next_seq, cur.chain)
        return Run(raw, out, found)


def payload_check(payload: bytes, key: int, seq: int) -> int:
    """The payload check of an event frame (FORMAT.md 2.1)."""
    return checksum(payload, key ^ seq)


def header_bytes(frames: Any, offset: int) -> bytes:
    """The 40 header bytes of the frame at ``offset`` of ``frames``."""
    return bytes(memoryview(frames)[offset:offset + HEADER_SIZE])


def stored_payload(frames: Any, offset: int) -> bytes:
    """The stored payload of the (verified) frame at ``offset`` of ``frames``."""
    view = memoryview(frames)
    stored = int.from_bytes(view[offset + 4:offset + 8], "little")
    return bytes(view[offset + HEADER_SIZE:offset + HEADER_SIZE + stored])


def frame_bytes(raw: Any, table: FrameTable, lo: int, hi: int) -> memoryview:
    """The bytes of frames ``lo .. hi - 1`` of a verified ``table`` over ``raw``."""
    last = hi - 1
    stored = table.stored_len(last)
    end = table.offset(last) + HEADER_SIZE + stored + (-stored & 7)
    return memoryview(raw)[table.offset(lo):end]


def event_chains(payloads: list[bytes], key: int, seq: int, prev_chain: int,
                 ) -> list[tuple[int, int]]:
    """``(payload check, chain)`` of each EVENT frame holding ``payloads`` from
    ``seq`` on, after a frame whose chain is ``prev_chain`` -- what the lines of
    a JSONL export say of their events, recomputed (one kernel call)."""
    blob, _ = encode(payloads, key, Cursor(0, seq, prev_chain))
    out = []
    at = 0
    for payload in payloads:
        out.append((int.from_bytes(blob[at + 24:at + 32], "little"),
                    int.from_bytes(blob[at + 32:at + 40], "little")))
        n = len(payload)
        at += HEADER_SIZE + n + (-n & 7)
    return out


def header_chain(header: bytes, key: int, seq: int, prev_chain: int) -> tuple[int, int] | None:
    """``(payload check, chain)`` of a frame given only its 40 header bytes
    (an erased frame in a JSONL export), or None when the header does not
    verify: magic, header check, the seq, and its chain continuing
    ``prev_chain``."""
    k = kernel_of(None)
    if len(header) != HEADER_SIZE or header[0:2] != b"\xa7\xf1":
        return None
    if k.checksum(header[0:12] + header[16:40], key) & 0xFFFFFFFF != int.from_bytes(
            header[12:16], "little"):
        return None
    if int.from_bytes(header[16:24], "little") != seq:
        return None
    chain = int.from_bytes(header[32:40], "little")
    if k.checksum(header[0:12] + header[16:32], prev_chain) != chain:
        return None
    return int.from_bytes(header[24:32], "little"), chain


# A .jsonl.zst export ends with a zstd *skippable frame* (which zstdcat and
# every zstd reader skip) holding the SHA-256 of the compressed bytes before
# it: the seal line covers the decompressed text, this covers the file, so a
# flipped bit that zstd itself would not notice is found too.
_SKIPPABLE = 0x184D2A5E
TRAILER_SIZE = 8 + 32


def zst_trailer(digest: bytes) -> bytes:
    """The skippable frame that ends a .jsonl.zst export."""
    return _SKIPPABLE.to_bytes(4, "little") + (32).to_bytes(4, "little") + digest


def trailer_digest(tail: bytes) -> bytes | None:
    """The digest in a .jsonl.zst trailer (the file's last 40 bytes), or None."""
    if len(tail) != TRAILER_SIZE or int.from_bytes(tail[:4], "little") != _SKIPPABLE or (
            int.from_bytes(tail[4:8], "little") != 32):
        return None
    return tail[8:]


__all__ = ["EXPORT_FORMAT", "TRAILER_SIZE", "Run", "TlogReader", "TlogWriter", "event_chains",
           "frame_bytes", "header_bytes", "header_chain", "payload_check", "stored_payload",
           "trailer_digest", "zst_trailer"]
