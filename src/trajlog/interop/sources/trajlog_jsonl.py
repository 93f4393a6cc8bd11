"""Reading trajlog's JSONL exports (``.jsonl``, ``.jsonl.zst``, and the members
of a ``.zip``), FORMAT.md section 8.2: every line's event re-encoded and its
payload check and chain recomputed (a batch of lines per kernel call), the
header line's and erased lines' own checks, the seal line, the ``.zst``
trailer; what :mod:`.trajlog` yields for each export.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec
import zstandard

from ..._format import MAX_STORED
from ...codec import checksum, session_key
from ...codec.compression import Compressor
from ...codec.records import header_check
from ...codec.tlog import (
    EXPORT_FORMAT,
    TRAILER_SIZE,
    event_chains,
    header_chain,
    trailer_digest,
    zst_trailer,
)
from ...errors import ImportFormatError, TrajlogError
from ...event_types import VERSIONS
from ...events import ENVELOPE_FIELDS, Event, SessionHeader, decode_event, encode_event
from .. import bounded
from ..bounded import LINE_LIMIT
from ..mapping import MappedEvent, MappedSession, Notes, Torn

_HEX = frozenset("0123456789abcdef")  # (lowercase only: one spelling per value)
#: the bytes of lines verified together, at most (besides BATCH_LINES): what
#: a batch of lines decodes to stays bounded, however many lines it holds
BATCH_BYTES = 1 << 20
BATCH_LINES = 1000
_PACKED = ("{file}: seq {seq} on were stored by trajlog 0.1 (payloads compressed frame by "
           "frame); they are imported re-encoded, so from seq {seq} on the frames differ "
           "from the source's (each event was verified against its stored checksum)")


def _checker(checks: dict[int, int], file: str, seed: int = 0) -> Any:
    """The chain check of one export's session: ``checks`` maps seqs to the
    export's chains, ``seed - 1`` to its seed chain -- which the store checks
    first, against the chain it links the session to (the stored parent's at
    the cut, or the session's key), before anything is written."""
    def check(seq: int, chain: int) -> None:
        want = checks.pop(seq, None)
        for old in [s for s in checks if s < seq]:
            del checks[old]
        if want is not None and want != chain:
            if seq == seed - 1:
                raise ImportFormatError(file, (
                    f"the export's seed chain is not its stored parent's chain at seq {seq}: "
                    "the file is not a fork of the session it names as its parent"
                    if seed else "the export's seed chain is not its session's key"))
            raise ImportFormatError(file, f"the imported frames' chain at seq {seq} differs "
                                    "from the export's (the events were not reproduced "
                                    "byte for byte)")
    return check


def _session(header: dict[str, Any], events: Iterator[MappedEvent],
             check: Any, parent_key: str | None = None) -> MappedSession:
    sid = str(header.get("id"))
    parent = header.get("parent_session")
    metadata = header.get("metadata")
    return MappedSession(
        key=f"trajlog:{sid}", events=events, cwd=str(header.get("cwd") or "."),
        session_id=sid, created_ms=header.get("created_at"),
        agent_preset=header.get("agent_preset"),
        metadata=metadata if isinstance(metadata, dict) else {},
        parent=parent_key or (f"trajlog:{parent}" if parent else None),
        parent_id=str(parent) if parent else None,
        origin=header.get("origin"), delegation_depth=int(header.get("delegation_depth") or 0),
        seed_length=int(header.get("seed_length") or 0), check=check)


# -- .jsonl / .jsonl.zst -----------------------------------------------------------------


def _trailer(path: Path) -> str:
    """The trailer of a .jsonl.zst export: ``ok``; ``bad`` (the bytes before
    it are not the ones it hashed: damage); ``missing`` (the file ends where
    the zstd frame does, or inside the trailer: cut off); or ``damaged`` (the
    trailer itself was hit)."""
    digest = hashlib.sha256()
    with bounded.open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        left = max(0, size - TRAILER_SIZE)
        while left:
            block = f.read(min(left, 1 << 20))
            digest.update(block)
            left -= len(block)
        want = trailer_digest(f.read())
    if want is not None:
        return "ok" if want == digest.digest() else "bad"
    extra = _after_frame(path)
    if extra is None or (0 <= extra < TRAILER_SIZE and _trailer_prefix(path, extra)):
        return "missing"
    return "damaged"


def _after_frame(path: Path) -> int | None:
    """Bytes after the end of the file's zstd frame (None: it does not end)."""
    d = zstandard.ZstdDecompressor().decompressobj()
    with bounded.open_regular(path) as f:
        try:
            # small pieces: what one piece decompresses to stays small, whatever
            # the stream (zstd blocks are at most 128 KiB, RLE ones 4 bytes)
            for piece in iter(lambda: f.read(256), b""):
                d.decompress(piece)
                if d.eof:
                    return len(d.unused_data) + len(f.read(TRAILER_SIZE + 1))
        except zstandard.ZstdError:
            return -1
    return None


def _trailer_prefix(path: Path, extra: int) -> bool:
    """Whether the last ``extra`` bytes (< 40) are the start of a trailer."""
    if not extra:
        return True
    with bounded.open_regular(path) as f:
        f.seek(-extra, os.SEEK_END)
        tail = f.read()
    head = zst_trailer(bytes(32))[:8]
    return tail[:8] == head[:len(tail[:8])]


@contextlib.contextmanager
def _lines(path: Path | IO[bytes], compressed: bool | None = None) -> Iterator[IO[bytes]]:
    if isinstance(path, Path):
        zst = path.name.lower().endswith(".zst") if compressed is None else compressed
        with bounded.open_regular(path) as raw:
            if not zst:
                yield raw
                return
            with zstandard.ZstdDecompressor().stream_reader(raw) as z:
                yield io.BufferedReader(z)
        return
    with zstandard.ZstdDecompressor().stream_reader(path) as z:
        yield io.BufferedReader(z)


def _bounded(stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``stream``, none longer than :data:`LINE_LIMIT` (a longer
    one comes out cut there, without its newline)."""
    return iter(lambda: stream.readline(LINE_LIMIT), b"")


def _jsonl_sessions(lines: Iterator[bytes], file: str, notes: Notes,
                    parent_key: str | None = None, trailer: str = "ok",
                    ) -> Iterator[MappedSession]:
    digest = hashlib.sha256()
    try:
        first = next(lines)
    except StopIteration:
        raise ImportFormatError(file, "an empty file (an export cut off before its header)",
                                line=1, offset=0, torn=True) from None
    except (zstandard.ZstdError, zipfile.BadZipFile) as exc:
        raise ImportFormatError(file, f"the stream is damaged in the header line "
                                f"({exc})", line=1, offset=0) from None
    if not first.endswith(b"\n"):
        if len(first) >= LINE_LIMIT:
            raise ImportFormatError(file, f"a line longer than {LINE_LIMIT} bytes", line=1,
                                    offset=0)
        raise ImportFormatError(file, "the file ends inside its header line (an export cut "
                                "off)", line=1, offset=len(first), torn=True)
    digest.update(first)
    head = _decode(first, file, 1, 0, 0)
    if not isinstance(head, dict) or head.get("trajlog") != EXPORT_FORMAT:
        raise ImportFormatError(file, f"the first line is not a {EXPORT_FORMAT} header",
                                line=1, offset=0)
    header = head.get("session")
    seed_chain = _hex(head.get("seed_chain"))
    if not isinstance(header, dict) or seed_chain is None:
        raise ImportFormatError(file, "the header line has no session or seed chain",
                                line=1, offset=0)
    try:
        key = session_key(uuid.UUID(str(header.get("id"))))
    except ValueError:
        raise ImportFormatError(file, "the header's session id is not a UUID", line=1,
                                offset=0) from None
    if _hex(head.get("header_check")) != _header_check(header, key):
        raise ImportFormatError(file, "the header line does not match its header_check",
                                line=1, offset=0)
    seed = int(header.get("seed_length") or 0)
    # the seed chain, compared with what the store links the session to
    checks: dict[int, int] = {seed - 1: seed_chain}

    def events() -> Iterator[MappedEvent]:
        seq = seed
        batch = _Batch(key, seq, seed_chain, file, checks, notes)
        offset, number = len(first), 1
        sealed = False
        try:
            for raw in lines:
                number += 1
                start, offset = offset, offset + len(raw)
                if sealed:
                    raise ImportFormatError(file, "a line after the seal", line=number,
                                            offset=start, valid=number - 2)
                if not raw.endswith(b"\n"):
                    if len(raw) >= LINE_LIMIT:
                        raise ImportFormatError(file, f"a line longer than {LINE_LIMIT} bytes",
                                                line=number, offset=start, valid=number - 2)
                    yield from batch.flush()
                    if _terminator_damaged(raw):
                        raise ImportFormatError(file, "the last line's newline is damaged",
                                                line=number, offset=offset - 1,
                                                valid=number - 2)
                    notes.torn.append(Torn(file, number, start, len(raw)))
                    notes.warn(f"{file}: line {number} is incomplete (an interrupted "
                               f"export); the {number - 2} events before it were imported")
                    return
                rec = _decode(raw, file, number, start, number - 2)
                if "seal" in rec:
                    yield from batch.flush()
                    _check_seal(rec["seal"], digest.hexdigest(), header, batch.seq,
                                batch.chain, file, number, start)
                    sealed = True
                    continue
                digest.update(raw)
                batch.add(rec, number, start, len(raw))
                if len(batch.pending) >= BATCH_LINES or batch.size >= BATCH_BYTES:
                    yield from batch.flush()
            yield from batch.flush()
        except (zstandard.ZstdError, zipfile.BadZipFile) as exc:
            raise ImportFormatError(file, f"the stream is damaged after line {number} "
                                    f"({exc})", line=number + 1, valid=number - 1) from None
        if sealed and trailer == "damaged":
            raise ImportFormatError(file, "the file's SHA-256 trailer is damaged",
                                    valid=number - 1)
        if sealed and trailer == "missing":
            notes.torn.append(Torn(file, number, offset, 0))
            notes.warn(f"{file}: the export ends inside its trailer (an interrupted export); "
                       "every event line verified and was imported")
        if not sealed:
            notes.torn.append(Torn(file, number, offset, 0))
            notes.warn(f"{file}: the export has no seal line (an interrupted export); its "
                       f"{number - 1} verified events were imported")
        if batch.erased:
            notes.warn(f"{file}: erased events were imported as their tombstones' "
                       "replacements")

    yield _session(header, events(), _checker(checks, file, seed), parent_key)


def _header_check(header: dict[str, Any], key: int) -> int | None:
    """The store's header check of a header line's session, or None if the
    session does not have the fields of a header."""
    try:
        value = SessionHeader(header["id"], header["cwd"], header["parent_session"],
                              header["seed_length"], header["origin"],
                              header["delegation_depth"], header["agent_preset"],
                              header["created_at"], header["metadata"])
        return header_check(value, key)
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def _terminator_damaged(raw: bytes) -> bool:
    """A last line without its newline is a cut-off write -- unless everything
    but its last byte is a whole JSON value: then that byte replaced the
    newline (a write never ends in a byte that is not in the line)."""
    return bounded.try_decode(raw[:-1]) is not bounded.INVALID


def _hex(value: Any) -> int | None:
    """A 64-bit value written as 16 hex digits, or None."""
    if not isinstance(value, str) or len(value) != 16 or not _HEX.issuperset(value):
        return None
    return int(value, 16)


def _decode(raw: bytes, file: str, line: int, offset: int, valid: int) -> Any:
    value = bounded.decode(raw, file, line=line, offset=offset, valid=valid, what="JSON line")
    if not isinstance(value, dict):
        raise ImportFormatError(file, "a line that is not a JSON object", line=line,
                                offset=offset, valid=valid)
    return value


class _Batch:
    """Event lines verified a batch at a time (one kernel call per batch):
    each line's event re-encoded, its payload check and chain recomputed from
    the chain before it and compared with what the line says."""

    def __init__(self, key: int, seq: int, chain: int, file: str,
                 checks: dict[int, int], notes: Notes) -> None:
        self.key, self.seq, self.chain, self.file = key, seq, chain, file
        self.checks = checks   # seq -> chain, for the store's own chain check
        self.notes = notes
        self.pending: list[tuple[dict[str, Any], int, int]] = []
        self.size = 0   # bytes of the pending lines
        self.erased = self.packed = False

    def add(self, rec: dict[str, Any], line: int, offset: int, size: int) -> None:
        self.pending.append((rec, line, offset))
        self.size += size

    def _bad(self, why: str, line: int, offset: int) -> ImportFormatError:
        return ImportFormatError(self.file, why, line=line, offset=offset, valid=line - 2)

    def flush(self) -> Iterator[MappedEvent]:
        pending, self.pending, self.size = self.pending, [], 0
        run: list[tuple[MappedEvent, bytes, int, int, int, int]] = []
        for rec, line, offset in pending:
            seq = self.seq + len(run)
            if rec.get("seq") != seq:
                raise self._bad(f"expected seq {seq}, the line has {rec.get('seq')!r}", line,
                                offset)
            check, want = _hex(rec.get("check")), _hex(rec.get("chain"))
            if check is None or want is None:
                raise self._bad("an event line without its check and chain (16 hex digits "
                                "each)", line, offset)
            envelope = {name: rec[name] for name in ENVELOPE_FIELDS
                        if rec.get(name) is not None}
            if rec.get("type") in VERSIONS:   # an older event stays of its version
                envelope.setdefault("schema_version", None)
            try:
                ev = Event(rec["type"], rec["time"], rec.get("data"), *[  # type: ignore[arg-type]
                    envelope.get(name) for name in ENVELOPE_FIELDS])
            except (KeyError, TypeError) as exc:
                raise self._bad(f"an event line without {exc}", line, offset) from None
            mapped = MappedEvent(ev.type, ev.data, ev.time, envelope=envelope or None,
                                 line=line)
            try:
                payload = encode_event(ev)
            except (TypeError, ValueError, OverflowError) as exc:
                raise self._bad(f"an event that cannot be encoded ({exc})", line,
                                offset) from None
            if "erased" in rec or "frame" in rec:
                yield from self._verified(run)
                run = []
                self._by_header(rec, payload, ev, check, want, line, offset)
                yield mapped
                continue
            run.append((mapped, payload, check, want, line, offset))
        yield from self._verified(run)

    def _verified(self, run: list[tuple[MappedEvent, bytes, int, int, int, int]],
                  ) -> Iterator[MappedEvent]:
        if not run:
            return
        got = event_chains([r[1] for r in run], self.key, self.seq, self.chain)
        for (_, _, check, want, line, offset), (got_check, got_chain) in zip(
                run, got, strict=True):
            if got_check != check:
                raise self._bad("payload check mismatch: the line's event is not the "
                                "exported one", line, offset)
            if got_chain != want:
                raise self._bad("chain mismatch: the line does not continue the lines "
                                "before it", line, offset)
        for i, (_, (_, got_chain)) in enumerate(zip(run, got, strict=True)):
            if not self.erased and not self.packed:
                self.checks[self.seq + i] = got_chain
        self.seq += len(run)
        self.chain = got[-1][1]
        for r in run:
            yield r[0]

    def _by_header(self, rec: dict[str, Any], payload: bytes, ev: Event, check: int,
                   want: int, line: int, offset: int) -> None:
        """A line whose frame cannot be re-encoded from it: an erased event
        (``erased``: its header; ``replacement_check`` covers what the line
        says instead), or one stored compressed on its own by trajlog 0.1
        (``frame``: its header, ``stored``: its stored payload, which must
        hold the line's event).  The header proves the chain either way."""
        field = "erased" if "erased" in rec else "frame"
        try:
            header = bytes.fromhex(str(rec[field]))
        except ValueError:
            raise self._bad(f"the {field} header is not hex", line, offset) from None
        if header_chain(header, self.key, self.seq, self.chain) != (check, want):
            raise self._bad(f"the line's frame header ({field}) does not verify", line, offset)
        if field == "erased":
            # the replacement as the store encodes it (memory.versions.replacement_event)
            replacement = msgspec.msgpack.encode(ev)
            if _hex(rec.get("replacement_check")) != checksum(replacement, self.key ^ self.seq):
                raise self._bad("an erased event's replacement does not match its check",
                                line, offset)
            self.erased = True
        else:
            try:
                stored = base64.b64decode(str(rec.get("stored")), validate=True)
                raw_len = int.from_bytes(header[8:12], "little")
                if raw_len > MAX_STORED:   # (no event is larger: not a size to allocate)
                    raise ValueError(raw_len)
                original = decode_event(Compressor().decompress(stored, raw_len), self.seq)
            except (ValueError, TrajlogError, msgspec.DecodeError):
                raise self._bad("a compressed frame's stored payload does not decode",
                                line, offset) from None
            if checksum(stored, self.key ^ self.seq) != check or (
                    encode_event(original) != payload):
                raise self._bad("a compressed frame's stored payload is not the line's event",
                                line, offset)
            if not self.packed:
                self.packed = True
                self.notes.warn(_PACKED.format(file=self.file, seq=self.seq))
        self.seq += 1
        self.chain = want


def _check_seal(seal: Any, digest: str, header: dict[str, Any], next_seq: int, chain: int,
                file: str, line: int, offset: int) -> None:
    first = int(header.get("seed_length") or 0)
    if not isinstance(seal, dict) or seal.get("sha256") != digest or seal.get(
            "first_event_seq") != first or seal.get("event_count") != next_seq - first or (
            _hex(seal.get("last_event_chain")) != chain):
        raise ImportFormatError(file, "the seal line disagrees with the lines before it "
                                "(count, chain or SHA-256)", line=line, offset=offset,
                                valid=line - 2)


