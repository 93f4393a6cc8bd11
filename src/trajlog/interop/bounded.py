"""Bounded reading of what an import is handed: the one home of the rules
every importer (``interop/sources/*``) follows.

* Only regular files are read.  A FIFO, a device or a socket is refused
  without ever blocking on it (:func:`open_regular`), and a folder import
  refuses a link that leads out of the folder (:func:`inside`).
* Nothing is read whole without a bound: a line is at most
  :data:`LINE_LIMIT` bytes, a whole-document file or a zip member (once
  decompressed) at most :data:`DOCUMENT_LIMIT`, and a sniffer looks at
  :data:`SNIFF_LIMIT` bytes at most.
* What decoding builds is bounded too: before a JSON text is decoded, its
  values are counted (at most :data:`VALUE_LIMIT`) and its nesting measured
  (at most :data:`DEPTH_LIMIT` deep), so that a few bytes (``[],[],...``)
  cannot become gigabytes of objects and no decoder recursion can overflow.

So reading holds one record at a time: at most its bytes and
:data:`VALUE_LIMIT` decoded values (about 100 bytes each at worst), which is
what :data:`MEMORY_BOUND` states.  Every refusal is an
:class:`~trajlog.errors.ImportFormatError` naming the file, the line and the
byte offset.
"""

from __future__ import annotations

import fcntl
import os
import stat
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from ..errors import ImportFormatError

#: the longest line read from a line-based file (an event's payload is at
#: most 16 MiB, so a longer line cannot be stored whatever it holds)
LINE_LIMIT = 128 << 20
#: the largest whole-document file (``.json``, ``.traj``) or zip member, as
#: decompressed, read at once
DOCUMENT_LIMIT = 256 << 20
#: the most JSON values (containers, keys and scalars) one decode may build
VALUE_LIMIT = 1 << 22
#: the deepest nesting of a decoded JSON value (an event's data holds at most
#: 64 levels: room is left for the source's own wrapping)
DEPTH_LIMIT = 128
#: what a format sniffer reads of a file, at most
SNIFF_LIMIT = 1 << 20
#: the largest zip central directory read (46 bytes and a name per member)
ZIP_DIRECTORY_LIMIT = 16 << 20
#: the memory reading may hold, beyond the interpreter, whatever the input:
#: one document's bytes and the values decoded from it, with room for the
#: copies made on the way (the tests run hostile files under this limit)
MEMORY_BOUND = 1 << 30

_DECODER = msgspec.json.Decoder()
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_OPENS = bytes(b for b in range(256) if b not in b"[{")
_WINDOW = 1 << 20
# depth only: an object's braces count as brackets
_SQUARE = bytes.maketrans(b"{}", b"[]")
#: the most opening brackets of a text whose depth is measured on its decoded
#: value (each is at most one container to walk) rather than on its bytes
_WALKED = 1 << 16
#: nothing decoded: :func:`try_decode`'s answer for a text that is not JSON
#: or is over a bound
INVALID: Any = object()


class _Over(Exception):
    """Internal: a JSON text over a bound (the message says which)."""


def regular(path: str | os.PathLike[str]) -> None:
    """Raise :class:`ImportFormatError` unless ``path`` is a regular file
    (following links: the file named is what is read)."""
    with open_regular(path):
        pass


def open_regular(path: str | os.PathLike[str], name: str | None = None) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file.  A FIFO is opened
    without blocking (no writer is waited for) and refused like a device."""
    where = name or os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ImportFormatError(where, f"cannot be read ({exc.strerror})", offset=0) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ImportFormatError(where, f"not a regular file ({_kind(mode)}): only "
                                    "regular files are imported", offset=0)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return what
    return "not a plain file"


def inside(root: Path, path: Path) -> Path:
    """``path``, met while walking the folder ``root``, if it is a regular
    file that stays inside ``root`` once its links are followed; else
    :class:`ImportFormatError` (a link out of the folder would import
    another file's content)."""
    real_root = root.resolve()
    target = path.resolve()
    if target != real_root and real_root not in target.parents:
        raise ImportFormatError(os.fspath(path), f"a link out of the imported folder (to "
                                f"{target}): links are not followed out of it", offset=0)
    try:
        mode = target.stat().st_mode
    except OSError as exc:
        raise ImportFormatError(os.fspath(path), f"cannot be read ({exc.strerror})",
                                offset=0) from None
    if not stat.S_ISREG(mode):
        raise ImportFormatError(os.fspath(path), f"not a regular file ({_kind(mode)}): only "
                                "regular files are imported", offset=0)
    return path


def head(path: str | os.PathLike[str], size: int = SNIFF_LIMIT) -> bytes:
    """The first ``size`` bytes of a regular file (what a sniffer looks at);
    a FIFO or a device raises :class:`ImportFormatError`."""
    with open_regular(path) as f:
        return f.read(min(size, SNIFF_LIMIT))


def first_line(path: str | os.PathLike[str]) -> bytes | None:
    """The first line of a regular file if it ends within
    :data:`SNIFF_LIMIT` bytes (or the whole file is shorter); else None."""
    data = head(path, SNIFF_LIMIT + 1)
    end = data.find(b"\n")
    if end >= 0:
        return data[:end + 1]
    return data if len(data) <= SNIFF_LIMIT else None


def lines(stream: IO[bytes], file: str, *, offset: int = 0,
          number: int = 0) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, raw line)`` of ``stream``; a line longer
    than :data:`LINE_LIMIT` raises :class:`ImportFormatError`."""
    for raw in iter(lambda: stream.readline(LINE_LIMIT), b""):
        number += 1
        if len(raw) >= LINE_LIMIT and not raw.endswith(b"\n"):
            raise ImportFormatError(file, f"a line longer than {LINE_LIMIT} bytes",
                                    line=number, offset=offset, valid=max(0, number - 1))
        yield number, offset, raw
        offset += len(raw)


def read_document(source: str | os.PathLike[str] | IO[bytes], file: str,
                  offset: int | None = None) -> bytes:
    """The bytes of a whole-document file (a path) or of an open stream (a
    zip member: read as decompressed), at most :data:`DOCUMENT_LIMIT`."""
    if isinstance(source, (str, os.PathLike)):
        with open_regular(source, file) as f:
            return read_document(f, file, offset)
    data = source.read(DOCUMENT_LIMIT + 1)
    if len(data) > DOCUMENT_LIMIT:
        raise ImportFormatError(file, f"larger than {DOCUMENT_LIMIT} bytes "
                                f"({DOCUMENT_LIMIT >> 20} MiB), the most read at once",
                                offset=DOCUMENT_LIMIT if offset is None else offset)
    return data


def open_zip(path: str | os.PathLike[str], file: str | None = None) -> zipfile.ZipFile:
    """``path`` opened as a zip if it is a regular file whose central
    directory (which :mod:`zipfile` reads whole) is at most
    :data:`ZIP_DIRECTORY_LIMIT` bytes; a zip without an end record raises
    :class:`zipfile.BadZipFile` as :class:`zipfile.ZipFile` does."""
    where = file or os.fspath(path)
    with open_regular(path, where) as f:
        end = zipfile._EndRecData(f)  # type: ignore[attr-defined]
    if end is not None and end[zipfile._ECD_SIZE] > ZIP_DIRECTORY_LIMIT:  # type: ignore[attr-defined]
        raise ImportFormatError(where, f"a zip directory of {end[zipfile._ECD_SIZE]} bytes, "  # type: ignore[attr-defined]
                                f"more than {ZIP_DIRECTORY_LIMIT}",
                                offset=end[zipfile._ECD_OFFSET])  # type: ignore[attr-defined]
    return zipfile.ZipFile(path)


def read_member(zf: zipfile.ZipFile, member: str | zipfile.ZipInfo, file: str) -> bytes:
    """A zip member's bytes, decompressed, at most :data:`DOCUMENT_LIMIT`
    (checked as it is read: a member's declared size is not trusted).
    ``file`` names the member in errors (``archive!member``)."""
    info = member if isinstance(member, zipfile.ZipInfo) else zf.getinfo(member)
    if info.file_size > DOCUMENT_LIMIT:
        raise ImportFormatError(file, f"a zip member of {info.file_size} bytes, more than "
                                f"{DOCUMENT_LIMIT} ({DOCUMENT_LIMIT >> 20} MiB)",
                                offset=info.header_offset)
    try:
        with zf.open(info) as stream:
            return read_document(stream, file, info.header_offset)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError,
            NotImplementedError) as exc:
        raise ImportFormatError(file, f"a damaged zip member ({exc})",
                                offset=info.header_offset) from None


def _outside_strings(raw: bytes) -> bytes:
    """The bytes of ``raw`` outside its JSON strings, in C-speed passes:
    escaped backslashes, then escaped quotes, dropped (no backslash is valid
    outside a string), then every other run between quotes -- a window at a
    time, so that many short strings never become as many objects at once."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    out = []
    inside = False
    for at in range(0, len(raw), _WINDOW):
        parts = raw[at:at + _WINDOW].split(b'"')
        out.append(b"".join(parts[1 if inside else 0::2]))
        if len(parts) % 2 == 0:   # an odd number of quotes in the window
            inside = not inside
    return b"".join(out)


def _check(raw: bytes) -> None:
    """Raise :class:`_Over` if decoding ``raw`` would build more than
    :data:`VALUE_LIMIT` values or nest deeper than :data:`DEPTH_LIMIT`.

    A text of n bytes holds at most n / 2 + 1 values and nests at most as
    deep as it has opening brackets, so the common line passes on its length
    and one C scan.  Else: every value but the outermost follows a ``[``,
    ``,`` or ``:`` and every key a ``{`` or ``,``, so those bytes, counted
    outside strings, bound the values; and the depth is measured by removing
    the innermost bracket pairs, one level per pass."""
    if len(raw) < 2 * VALUE_LIMIT and len(raw.translate(None, _NOT_OPENS)) <= DEPTH_LIMIT:
        return
    # each string is a value (a quote not after a backslash is a string's end)
    strings = (raw.count(b'"') - raw.count(b'\\"')) // 2
    if strings > VALUE_LIMIT:
        raise _Over(f"more than {VALUE_LIMIT} JSON values (at least {strings} strings), "
                    "the most decoded from one record")
    bare = _outside_strings(raw)
    opens = bare.count(b"[") + bare.count(b"{")
    values = opens + bare.count(b",") + bare.count(b":") + 1
    if values > VALUE_LIMIT:
        raise _Over(f"more than {VALUE_LIMIT} JSON values (about {values}), the most "
                    "decoded from one record")
    if opens <= DEPTH_LIMIT:
        return
    brackets = bare.translate(_SQUARE, _NOT_BRACKETS)
    del bare
    for _ in range(DEPTH_LIMIT):
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets) or not shorter:
            return
        brackets = shorter
    if b"[]" in brackets:
        raise _Over(f"JSON nested deeper than {DEPTH_LIMIT} levels")


def _deeper(value: Any, limit: int) -> bool:
    """Whether the decoded ``value`` nests more than ``limit`` containers deep:
    a walk of its containers only, one level at a time (no recursion)."""
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        inner = []
        for c in level:
            for v in (c.values() if type(c) is dict else c):
                if type(v) is dict or type(v) is list:
                    inner.append(v)
        level = inner
    return False


def _bounded_decode(raw: bytes) -> Any:
    """:data:`_DECODER`'s value of ``raw`` if within the bounds, else
    :class:`_Over` -- with one C scan of the bytes for the common line.

    A text shorter than ``2 * VALUE_LIMIT`` bytes cannot hold too many values
    (:func:`_check`), so only its depth is left: its opening brackets bound
    it, and when there are more of them than :data:`DEPTH_LIMIT` (brackets in
    strings: code, nested JSON text) but at most :data:`_WALKED`, the value is
    decoded (no more than the length allows) and its containers walked --
    at most that many -- instead of scanning the bytes again outside their
    strings.  A longer text gets the byte checks of :func:`_check` before
    anything is decoded, and so does one that the walk (or the decoder)
    refuses, so that its error is the one it always was."""
    if len(raw) < 2 * VALUE_LIMIT:
        opens = len(raw.translate(None, _NOT_OPENS))
        if opens <= DEPTH_LIMIT:
            return _DECODER.decode(raw)
        if opens <= _WALKED:
            try:
                value = _DECODER.decode(raw)
            except (RecursionError, msgspec.DecodeError, UnicodeDecodeError):
                value = INVALID   # refused below as before: over a bound, or not JSON
            if value is not INVALID and not _deeper(value, DEPTH_LIMIT):
                return value
    _check(raw)
    return _DECODER.decode(raw)


def decode(raw: bytes | memoryview, file: str, *, line: int | None = None,
           offset: int | None = None, valid: int = 0, what: str = "JSON") -> Any:
    """The JSON value of ``raw`` within the bounds (module docstring); a
    text that is over one or is not JSON raises :class:`ImportFormatError`."""
    try:
        return _bounded_decode(bytes(raw) if isinstance(raw, memoryview) else raw)
    except _Over as exc:
        raise ImportFormatError(file, str(exc), line=line, offset=offset, valid=valid) from None
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ImportFormatError(file, f"not valid {what} ({exc})", line=line, offset=offset,
                                valid=valid) from None


def try_decode(raw: bytes | memoryview | str) -> Any:
    """The JSON value of ``raw`` within the bounds, or :data:`INVALID` (for
    sniffing, and for JSON held in a string that is kept as the string when
    it does not decode)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    try:
        return _bounded_decode(data)
    except (_Over, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return INVALID


def over(raw: bytes | memoryview) -> str | None:
    """Why decoding ``raw`` would be over a bound, or None."""
    try:
        _check(bytes(raw))
    except _Over as exc:
        return str(exc)
    return None


__all__ = ["DEPTH_LIMIT", "DOCUMENT_LIMIT", "INVALID", "LINE_LIMIT", "MEMORY_BOUND",
           "SNIFF_LIMIT", "VALUE_LIMIT", "ZIP_DIRECTORY_LIMIT", "decode", "first_line", "head",
           "inside", "lines", "open_regular", "open_zip", "over", "read_document",
           "read_member", "regular", "try_decode"]
