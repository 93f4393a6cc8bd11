"""Importing trajlog's own exports: ``.tlog``, ``.jsonl`` / ``.jsonl.zst``
and ``.zip`` (see :mod:`trajlog.interop.export`).

Everything is verified before and while it is written: every frame of a
``.tlog`` (its SEAL included), every JSONL line's payload check and chain
recomputed from the line, the seal line's count, chain and SHA-256 -- and the
store's own chain after each written batch must equal the source's, so the
imported frames are the exported frames, byte for byte.  A file that ends
before its seal is *torn* (an interrupted export): the verified events before
the cut are imported and the cut is reported; any other defect is
*corruption*: an error that names the offset, and nothing of the session is
written.

An erased event (blank in the source store) is imported as its tombstone's
replacement -- the erased content is in no export -- so from that seq on the
imported frames differ from the source's; the import says so in a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zlib import error as zlib_error

import zstandard

from ...codec.compression import Compressor
from ...codec.stream import decode_events
from ...codec.tlog import (
    EXPORT_FORMAT,
    TRAILER_SIZE,
    TlogReader,
)
from ...errors import FormatError, ImportFormatError, TornTailError
from ...event_types import VERSIONS
from ...events import ENVELOPE_FIELDS, Event
from .. import bounded
from ..export import ZIP_MARK
from ..mapping import MappedEvent, MappedSession, Notes, Torn
from .trajlog_jsonl import (
    _PACKED,
    _bounded,
    _checker,
    _jsonl_sessions,
    _lines,
    _session,
    _trailer,
)

NAME = "trajlog"
_MAGIC = b"\xa7\xf1\x01"  # a SESSION_HEADER frame
# how the exporter starts a JSONL export's header line
_HEADER_START = b'{"trajlog":"' + EXPORT_FORMAT.encode() + b'"'


def sniff(path: Path) -> bool:
    """A .tlog (its first frame), a .zip holding a ``manifest.json`` (named in
    its central directory: no member is read), or a JSONL export whose first
    line starts as a header line does -- from a bounded head of the file (a
    FIFO or a device raises :class:`ImportFormatError`)."""
    if path.is_dir():
        return False
    name = path.name.lower()
    head = bounded.head(path, 4)
    if name.endswith(".tlog") or head[:3] == _MAGIC:
        return head[:3] == _MAGIC
    try:
        if name.endswith(".zip"):
            with bounded.open_zip(path) as zf:
                return "manifest.json" in zf.namelist()
        if name.endswith(".jsonl") or name.endswith(".jsonl.zst"):
            with _lines(path) as lines:
                first = lines.readline(bounded.SNIFF_LIMIT + 1)
            if first.startswith(_HEADER_START):
                return True
            value = bounded.try_decode(first) if first.endswith(b"\n") else None
            return isinstance(value, dict) and value.get("trajlog") == EXPORT_FORMAT
    except (OSError, ValueError, zipfile.BadZipFile, zstandard.ZstdError):
        return False
    return False


def read(path: Path, notes: Notes) -> Iterator[MappedSession]:
    name = path.name.lower()
    if name.endswith(".zip"):
        yield from _read_zip(path, notes)
    elif name.endswith(".jsonl") or name.endswith(".jsonl.zst"):
        trailer = _trailer(path) if name.endswith(".zst") else "ok"
        if trailer == "bad":
            raise ImportFormatError(os.fspath(path), "the file's SHA-256 trailer does not "
                                    "match its compressed bytes (the file was damaged)",
                                    offset=path.stat().st_size - TRAILER_SIZE)
        with _lines(path) as lines:
            yield from _jsonl_sessions(_bounded(lines), os.fspath(path), notes,
                                       trailer=trailer)
    else:
        yield from _read_tlog(path, notes)


# -- .tlog -----------------------------------------------------------------------------


def _read_tlog(path: Path, notes: Notes) -> Iterator[MappedSession]:
    file = os.fspath(path)
    with bounded.open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise ImportFormatError(file, "an empty file (an export cut off before its "
                                    "header)", offset=0, torn=True)
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            try:
                reader = TlogReader(buf, name=file)
            except FormatError as exc:
                raise ImportFormatError(file, exc.reason, offset=exc.offset,
                                        torn=isinstance(exc, TornTailError)) from None
            session = reader.session
            seed = reader.cursor.next_seq   # (before any frame is read: the seed)
            # the seed chain, compared with what the store links the session to
            checks: dict[int, int] = {seed - 1: reader.cursor.chain}
            state = {"erased": False, "packed": False}

            def events() -> Iterator[MappedEvent]:
                compressor = Compressor()
                try:
                    for run in reader.runs():
                        for ev in decode_events(run.raw, run.table, 0, len(run.table),
                                                compressor, session.get("id")):
                            i = ev.seq - run.table.seq(0)
                            if ev.seq in run.erased:
                                state["erased"] = True
                            elif run.table.flags(i) and not state["packed"]:
                                state["packed"] = True
                                notes.warn(_PACKED.format(file=file, seq=ev.seq))
                            if not state["erased"] and not state["packed"]:
                                checks[ev.seq] = run.table.chain(i)
                            yield _mapped(ev)
                except FormatError as exc:
                    raise ImportFormatError(file, str(exc), offset=exc.offset,
                                            valid=reader.events) from None
                if reader.verdict is not None and reader.verdict.value == "torn":
                    notes.torn.append(Torn(file, 0, 0, 0))
                    notes.warn(f"{file}: the export ends before its SEAL (an interrupted "
                               f"export); its {reader.events} verified events were imported")
                if state["erased"]:
                    notes.warn(f"{file}: erased events were imported as their tombstones' "
                               "replacements")
            yield _session(session, events(), _checker(checks, file, seed))
        finally:
            with contextlib.suppress(BufferError):  # (views still held: closed by gc)
                buf.close()


def _mapped(ev: Event) -> MappedEvent:
    envelope = {name: getattr(ev, name) for name in ENVELOPE_FIELDS
                if getattr(ev, name) is not None}
    if ev.type in VERSIONS:   # an older event stays of its version (docs/event-schemas.md)
        envelope.setdefault("schema_version", None)
    return MappedEvent(ev.type, ev.data, ev.time, envelope=envelope or None)


# -- .zip ------------------------------------------------------------------------------


def _zip_digest_ok(path: Path) -> bool:
    """Whether the zip ends with its comment ``ZIP_MARK`` + the hex SHA-256
    of every byte before the digest (what the exporter writes)."""
    digest = hashlib.sha256()
    with bounded.open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        left = max(0, size - 64)
        while left:
            block = f.read(min(left, 1 << 20))
            digest.update(block)
            left -= len(block)
        tail = f.read()
        f.seek(max(0, size - 64 - len(ZIP_MARK)))
        mark = f.read(len(ZIP_MARK))
    return mark == ZIP_MARK and tail == digest.hexdigest().encode()


def _zip_cut(path: Path) -> bool:
    """A zip that does not open is torn when its bytes are the start of a zip
    (a local file header) and it has no end record: written, then cut."""
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(max(0, path.stat().st_size - 65_558))
        tail = f.read()
    return head == b"PK\x03\x04" and b"PK\x05\x06" not in tail


def _manifest(zf: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    member = f"{os.fspath(path)}!manifest.json"
    try:
        data = bounded.read_member(zf, "manifest.json", member)
    except KeyError:
        raise ImportFormatError(os.fspath(path), "the zip has no manifest.json") from None
    value = bounded.decode(data, member, line=1, offset=0)
    if not isinstance(value, dict):
        raise ImportFormatError(os.fspath(path), "manifest.json is not an object")
    return value


def _read_zip(path: Path, notes: Notes) -> Iterator[MappedSession]:
    file = os.fspath(path)
    if not _zip_digest_ok(path):
        # what the exporter wrote ends with its digest: without it, a cut file
        # (no end record) is torn; anything else was damaged
        torn = _zip_cut(path)
        raise ImportFormatError(file, "the zip ends before its end record (an interrupted "
                                "export)" if torn else "the zip's SHA-256 (its comment) does "
                                "not match its bytes (the file was damaged)",
                                offset=path.stat().st_size, torn=torn)
    try:
        zf = bounded.open_zip(path)
    except ImportFormatError:
        raise
    except (zipfile.BadZipFile, ValueError, NotImplementedError, OSError) as exc:
        raise ImportFormatError(file, f"not a complete zip ({exc})",
                                offset=path.stat().st_size) from None
    with zf:
        manifest = _manifest(zf, path)
        if manifest.get("trajlog") != EXPORT_FORMAT:
            raise ImportFormatError(file, f"manifest.json is not a {EXPORT_FORMAT} manifest")
        for entry in manifest.get("sessions") or []:
            member = f"{file}!{entry.get('path')}"
            try:
                data = zf.open(str(entry.get("path")))
            except KeyError:
                raise ImportFormatError(member, "listed in the manifest, missing from the "
                                        "zip") from None
            except (zipfile.BadZipFile, zlib_error, ValueError, NotImplementedError) as exc:
                raise ImportFormatError(member, f"the zip entry is damaged ({exc})") from None
            # (zipfile checks the member's CRC as it is read: a mismatch is damage)
            with data, _lines(data) as lines:
                yield from _jsonl_sessions(_bounded(lines), member, notes)




@dataclass(frozen=True, slots=True)
class FileVerdict:
    """What :func:`verify_file` found in an export, without any store:
    ``verdict`` is ``clean`` (complete, every check passed), ``torn`` (it
    ends before its seal, as an interrupted export does: ``events`` verified
    before the cut) or ``corrupt`` (``reason``, at ``line`` / ``offset``)."""

    path: str
    verdict: str
    sessions: int
    events: int
    reason: str = ""
    line: int | None = None
    offset: int | None = None


def verify_file(path: str | os.PathLike[str]) -> FileVerdict:
    """Verify a trajlog export (``.tlog``, ``.jsonl``, ``.jsonl.zst``, ``.zip``)
    on its own: every frame or line, the chain, the seal."""
    where = Path(os.fspath(path))
    notes = Notes()
    sessions = events = 0
    try:
        for mapped in read(where, notes):
            sessions += 1
            for _ in mapped.events:
                events += 1
    except ImportFormatError as exc:
        return FileVerdict(os.fspath(where), "torn" if exc.torn else "corrupt", sessions,
                           events, exc.reason, exc.line, exc.offset)
    return FileVerdict(os.fspath(where), "torn" if notes.torn else "clean", sessions, events,
                       "; ".join(notes.warnings) if notes.torn else "")


__all__ = ["NAME", "FileVerdict", "read", "sniff", "verify_file"]
