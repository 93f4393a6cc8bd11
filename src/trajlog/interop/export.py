"""Exports: a session as ``.tlog`` (its frames), ``.jsonl`` / ``.jsonl.zst``
(one JSON line per event, checksums carried), or a ``.zip`` of a session
tree (the root and every descendant under ``subagents/<id>/``).

Every export streams: one run of frames at a time, whatever the session's
size.  Every export reads through the verified reader, so a damaged store is
refused before a byte of it is exported, and an erased payload stays erased:
a ``.tlog`` holds the blank frame the store holds (and its tombstone), a JSONL
line the tombstone's replacement with the frame's header as proof.

The JSONL layout (FORMAT.md section 8): a header line ``{"trajlog":
"trajlog-export/1", "session": {...}, "seed_chain": "<16 hex>"}``; one line per event
``{"seq", "type", "time", "data", envelope fields..., "check", "chain"}``
(``check`` and ``chain`` are the frame's payload check and chain, 16 hex
digits; an erased event also has ``"erased": "<its 40 header bytes, hex>"``);
and a last line ``{"seal": {"first_event_seq", "event_count",
"last_event_chain", "sha256"}}`` -- the SHA-256 of every byte before that line.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

import msgspec
import zstandard

from ..codec import checksum, session_key
from ..codec.records import header_check
from ..codec.tlog import (
    EXPORT_FORMAT,
    TlogWriter,
    header_bytes,
    stored_payload,
    zst_trailer,
)
from ..errors import InvalidArgumentError
from ..events import ENVELOPE_FIELDS, SessionHeader
from ..projections.reader_views import ReaderView, as_view
from .protocols import StoredSession, StoreLike
from .view_export import VIEW_FORMATS, write_view_jsonl

FORMATS = ("tlog", "jsonl", "jsonl.zst", "zip")
#: a .zip export's comment: this, then the hex SHA-256 of every byte before it
ZIP_MARK = b"trajlog-sha256:"
_JSON = msgspec.json.Encoder()
#: progress(events written so far)
Progress = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What an export wrote: the file, its format, the sessions and events in
    it, its size and the SHA-256 of the file."""

    path: str
    format: str
    sessions: list[str]
    events: int
    bytes: int
    sha256: str


def format_of(path: str | os.PathLike[str]) -> str:
    """The export format a file name asks for."""
    name = os.fspath(path).lower()
    for fmt in ("jsonl.zst", "tlog", "jsonl", "zip"):
        if name.endswith("." + fmt):
            return fmt
    raise InvalidArgumentError(f"{os.fspath(path)}: say the format (.tlog, .jsonl, "
                               ".jsonl.zst or .zip), or pass format=")


def header_dict(header: SessionHeader) -> dict[str, Any]:
    """A session header as the JSON an export carries."""
    return {"id": header.id, "cwd": header.cwd, "parent_session": header.parent_session,
            "seed_length": header.seed_length, "origin": header.origin,
            "delegation_depth": header.delegation_depth,
            "agent_preset": header.agent_preset, "created_at": header.created_at,
            "metadata": dict(header.metadata)}


def export(store: StoreLike, session_id: str, path: str | os.PathLike[str], *,
           format: str | None = None, progress: Progress | None = None,
           view: ReaderView | str | None = None) -> ExportReport:
    """Export a session (``.zip``: the session and all its descendants) to
    ``path``.  The file appears complete or not at all: it is written beside
    ``path`` and renamed into place once synced.  ``view``: the session as
    that reader view shows it (JSONL only; :mod:`.view_export`)."""
    fmt = format or format_of(path)
    if fmt not in FORMATS:
        raise InvalidArgumentError(f"unknown export format {fmt!r} (known: "
                                   f"{', '.join(FORMATS)})")
    reader = as_view(view)
    if reader is not None and fmt not in VIEW_FORMATS:
        raise InvalidArgumentError(f"the {reader.role} view exports as "
                                   f"{' or '.join(VIEW_FORMATS)}, not {fmt} (its payloads "
                                   "are a reading, not the frames)")
    session = store.session(session_id)
    target = Path(os.fspath(path))
    counter = _Counter(progress)
    with _atomic(target) as out:
        if reader is not None:
            with _maybe_zstd(out, fmt == "jsonl.zst") as sink:
                write_view_jsonl(session, sink, reader, header_dict(session.header), counter)
            ids = [session.id]
        elif fmt == "tlog":
            write_tlog(session, out, counter)
            ids = [session.id]
        elif fmt == "zip":
            ids = write_zip(store, session, out, counter)
        else:
            with _maybe_zstd(out, fmt == "jsonl.zst") as sink:
                write_jsonl(session, sink, counter)
            ids = [session.id]
    digest = hashlib.sha256()
    with open(target, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return ExportReport(os.fspath(target), fmt, ids, counter.events, target.stat().st_size,
                        digest.hexdigest())


class _Counter:
    def __init__(self, progress: Progress | None) -> None:
        self.events = 0
        self._progress = progress

    def add(self, n: int) -> None:
        self.events += n
        if self._progress is not None:
            self._progress(self.events)


@contextlib.contextmanager
def _atomic(target: Path) -> Iterator[BinaryIO]:
    """A temporary file beside ``target``, renamed onto it once complete."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "w+b") as out:
            yield out
            out.flush()
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(out.fileno(), 0o666 & ~umask)   # (mkstemp makes it 0600)
            os.fsync(out.fileno())
        os.replace(tmp, target)
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)   # the rename itself survives a power loss
        finally:
            os.close(folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _maybe_zstd(out: BinaryIO, compress: bool) -> Iterator[BinaryIO]:
    """``out``, or a zstd stream into it that ends with the trailer of
    :func:`~trajlog.codec.tlog.zst_trailer` (the SHA-256 of the compressed bytes)."""
    if not compress:
        yield out
        return
    digest = hashlib.sha256()
    hashing = _Hashing(out, digest)
    writer: Any = zstandard.ZstdCompressor(level=3, write_checksum=True).stream_writer(
        hashing, closefd=False)  # type: ignore[arg-type]
    yield writer
    writer.close()
    out.write(zst_trailer(digest.digest()))


def write_tlog(session: StoredSession, out: BinaryIO, counter: _Counter | None = None) -> None:
    """``session``'s own frames as a .tlog (see :mod:`trajlog.codec.tlog`)."""
    header = session.header
    writer = TlogWriter(out, header.id, header_dict(header), seed=header.seed_length,
                        seed_chain=_seed_chain(session), created_ms=header.created_at)
    for run in session.frames():
        writer.chunk(run.frames, run.first_seq, len(run.headers), run.headers[-1].chain,
                     run.erased)
        if counter is not None:
            counter.add(len(run.headers))
    writer.seal()


def _seed_chain(session: StoredSession) -> int:
    return session.seed_chain


def write_jsonl(session: StoredSession, out: IO[bytes], counter: _Counter | None = None) -> None:
    """``session``'s own events as JSONL (module docstring)."""
    digest = hashlib.sha256()
    encode = _JSON.encode

    def line(value: Any) -> None:
        blob = encode(value) + b"\n"
        digest.update(blob)
        out.write(blob)

    header = session.header
    seed_chain = _seed_chain(session)
    key = session_key(uuid.UUID(header.id))
    line({"trajlog": EXPORT_FORMAT, "session": header_dict(header),
          "seed_chain": f"{seed_chain:016x}",
          "header_check": f"{header_check(header, key):016x}"})
    chain, count = seed_chain, 0
    for run in session.frames():
        erased = run.erased
        for ev, h in zip(run.events, run.headers, strict=True):
            rec: dict[str, Any] = {"seq": ev.seq, "type": ev.type, "time": ev.time,
                                   "data": ev.data}
            for name in ENVELOPE_FIELDS:
                value = getattr(ev, name)
                if value is not None:
                    rec[name] = value
            rec["check"] = f"{h.payload_check:016x}"
            rec["chain"] = f"{h.chain:016x}"
            at = h.offset - run.headers[0].offset
            if ev.seq in erased:
                # the frame's header proves the chain; the replacement gets a check
                rec["erased"] = header_bytes(run.frames, at).hex()
                rec["replacement_check"] = f"{checksum(erased[ev.seq], key ^ ev.seq):016x}"
            elif h.flags:
                # stored compressed on its own (trajlog 0.1): the check covers the
                # stored bytes, which the line carries
                rec["frame"] = header_bytes(run.frames, at).hex()
                rec["stored"] = base64.b64encode(stored_payload(run.frames, at)).decode()
            blob = encode(rec) + b"\n"
            digest.update(blob)
            out.write(blob)
            chain = h.chain
        count += len(run.headers)
        if counter is not None:
            counter.add(len(run.headers))
    line({"seal": {"first_event_seq": header.seed_length, "event_count": count,
                   "last_event_chain": f"{chain:016x}", "sha256": digest.hexdigest()}})


def write_zip(store: StoreLike, root: StoredSession, out: BinaryIO, counter: _Counter) -> list[str]:
    """``root`` and every descendant, each as ``.jsonl.zst``: the root's at
    ``session.jsonl.zst``, a descendant's at ``subagents/<id>/session.jsonl.zst``
    (a fork's inherited prefix is its parent's file, referenced by
    ``parent`` and ``seed_length`` in the manifest, not copied)."""
    order = [root]
    i = 0
    while i < len(order):
        order.extend(order[i].children(include_subagents=True))
        i += 1
    entries = []
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        for s in order:
            name = ("session.jsonl.zst" if s.id == root.id
                    else f"subagents/{s.id}/session.jsonl.zst")
            digest = hashlib.sha256()
            with zf.open(name, "w", force_zip64=True) as member:
                hashing = _Hashing(member, digest)
                with _maybe_zstd(hashing, True) as sink:  # type: ignore[arg-type]
                    before = counter.events
                    write_jsonl(s, sink, counter)
            h = s.header
            entries.append({"id": s.id, "path": name, "parent": h.parent_session,
                            "seed_length": h.seed_length, "origin": h.origin,
                            "delegation_depth": h.delegation_depth,
                            "events": counter.events - before, "sha256": digest.hexdigest()})
        manifest = {"trajlog": EXPORT_FORMAT, "root": root.id, "sessions": entries}
        zf.writestr("manifest.json", json.dumps(manifest, indent=1))
        zf.comment = ZIP_MARK + bytes(64)   # a placeholder, the size of the digest
    _seal_zip(out)
    return [s.id for s in order]


def _seal_zip(out: BinaryIO) -> None:
    """Write into the zip's comment (its last 64 bytes) the SHA-256 of every
    byte before them: the zip's own CRCs leave header fields uncovered."""
    out.flush()
    size = out.seek(0, os.SEEK_END)
    out.seek(0)
    digest = hashlib.sha256()
    left = size - 64
    while left:
        block = out.read(min(left, 1 << 20))
        digest.update(block)
        left -= len(block)
    out.seek(size - 64)
    out.write(digest.hexdigest().encode())


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes what passes through it."""

    def __init__(self, out: IO[bytes], digest: Any) -> None:
        self._out, self._digest = out, digest

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._digest.update(data)
        self._out.write(data)
        return len(data)


__all__ = ["FORMATS", "ExportReport", "export", "format_of", "header_dict", "write_jsonl",
           "write_tlog", "write_zip"]
