"""The page: the viewer's assets and a session tree's document in one
self-contained HTML file (no network: a CSP forbids every fetch)."""

from __future__ import annotations

import base64
import gzip
import html
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from ..api import Store
from ..errors import InvalidArgumentError
from ..projections.reader_views import ReaderView
from .document import Sink, build_document

_DATA = "__TRAJLOG_DATA__"
_CSS = "/*__TRAJLOG_CSS__*/"
_JS = "/*__TRAJLOG_JS__*/"
_TITLE = "__TRAJLOG_TITLE__"
_BLOBS = "__TRAJLOG_BLOBS__"
_BLOB_TAG = '<script type="application/x-trajlog-gzip" class="trajlog-blob">'
# The viewer's script, by responsibility, in order: the body of the one
# function viewer.html wraps around _JS, so the parts share its scope.
_SCRIPTS = ("data.js", "views.js", "runs.js", "shell.js")
# gzip level 6: a sixth smaller than level 1 for about twice the (threaded)
# time -- the page's open time is mostly the browser reading its bytes.
_LEVEL = 6
# Inside <script type="application/json"> the HTML parser ends the element at
# "</script" and treats "<!--" specially; JSON allows \uXXXX for any character,
# so these never appear raw.  U+2028/2029 are escaped for old JS parsers.
_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
            ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


@dataclass(frozen=True, slots=True)
class ViewReport:
    """What :func:`write_html` wrote: the file, the sessions it shows, the
    events embedded (a fork's inherited prefix counted once, in its parent's
    log) and its size in bytes."""

    path: str
    sessions: int
    events: int
    bytes: int


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _template() -> tuple[bytes, bytes, bytes, bytes]:
    """The page cut around the title, the data and the blobs."""
    script = "\n".join(_asset(name) for name in _SCRIPTS)
    page = _asset("viewer.html").replace(_CSS, _asset("viewer.css")).replace(_JS, script)
    head, rest = page.split(_TITLE, 1)
    mid, rest = rest.split(_DATA, 1)
    tail, end = rest.split(_BLOBS, 1)
    return head.encode(), mid.encode(), tail.encode(), end.encode()


def embed_json(value: Any) -> bytes:
    """``value`` as JSON that is safe inside a ``<script>`` element."""
    data = msgspec.json.encode(value)
    for raw, escaped in _ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def _compress(chunks: list[list[bytes]]) -> list[bytes]:
    """Each chunk of long strings gzipped and base64-encoded (threads: zlib
    releases the GIL)."""
    def one(parts: list[bytes]) -> bytes:
        return base64.b64encode(gzip.compress(b"".join(parts), _LEVEL, mtime=0))
    todo = chunks if any(chunks) else []     # refs name chunks by index: keep them all
    if len(todo) <= 1:
        return [one(c) for c in todo]
    with ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 1)) as pool:
        return list(pool.map(one, todo))


def _page(store: Store, session_id: str, view: ReaderView | str | None = None,
          ) -> tuple[bytes, dict[str, Any]]:
    sink = Sink()
    doc = build_document(store, session_id, sink=sink, view=view)
    head, mid, tail, end = _template()
    root = doc["sessions"][0]
    title = (root["meta"].get("title") if isinstance(root["meta"].get("title"), str)
             else None) or root["id"]
    if doc["view"] is not None:   # the page says whose reading it is
        title = f"{title} ({doc['view']} view)"
    # the long strings, gzipped: base64's alphabet cannot end a <script>
    blobs = [part for b in _compress(sink.chunks) for part in (_BLOB_TAG.encode(), b,
                                                               b"</script>\n")]
    # pieces are joined, never substituted into one another: session content
    # that happens to contain a placeholder stays inert
    body = b"".join((head, html.escape(f"trajlog: {title}").encode(), mid, embed_json(doc),
                     tail, *blobs, end))
    return body, doc


_DATA_RE = re.compile(r'<script type="application/json" id="trajlog-data">(.*?)</script>', re.S)
_BLOB_RE = re.compile(re.escape(_BLOB_TAG) + r"([A-Za-z0-9+/=]*)</script>")


def read_document(page: str) -> dict[str, Any]:
    """The document embedded in a viewer page, its long strings put back
    (what the page's script sees once it has decoded them)."""
    found = _DATA_RE.search(page)
    if found is None:
        raise InvalidArgumentError("not a trajlog viewer page: no trajlog-data element")
    doc: dict[str, Any] = msgspec.json.decode(found.group(1))
    chunks = [gzip.decompress(base64.b64decode(b)) for b in _BLOB_RE.findall(page)]
    for session in doc["sessions"]:
        for row in session["ev"]:
            if len(row) < 7:
                continue
            for path, chunk, at, size in row.pop():
                text = chunks[chunk][at:at + size].decode()
                if not path:
                    row[4] = text
                    continue
                node = row[4]
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = text
            if row[5] == 0:
                row.pop()
    return doc


def render_html(store: Store, session_id: str, *, view: ReaderView | str | None = None) -> str:
    """The viewer page of ``session_id`` and its descendants, as a string;
    ``view``: as that reader view shows them (docs/reader-views.md)."""
    return _page(store, session_id, view)[0].decode()


def write_html(store: Store, session_id: str, path: str | os.PathLike[str], *,
               view: ReaderView | str | None = None) -> ViewReport:
    """Write the viewer page of ``session_id`` to ``path`` atomically (a
    temporary file in the same directory, then a rename); ``view``: as that
    reader view shows it (docs/reader-views.md)."""
    body, doc = _page(store, session_id, view)
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                               dir=str(target.parent.resolve()))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    events = sum(len(s["ev"]) for s in doc["sessions"])
    return ViewReport(str(target), len(doc["sessions"]), events, len(body))


__all__ = ["ViewReport", "embed_json", "read_document", "render_html", "write_html"]
