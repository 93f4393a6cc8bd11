"""A session exported as one reader view sees it (``store.export(...,
view=...)``, ``trajlog export --view``): JSONL, one line per event with the
same seq as the log, each payload as the view shows it
(:mod:`trajlog.projections.reader_views`).

A view export is a reading, not a copy: its payloads differ from the frames'
(withheld, masked, annotated), so it carries no checksums and does not import
back.  The layout: a header line ``{"trajlog": "trajlog-view/1", "view",
"model", "session": {...}}``; one line per event ``{"seq", "type", "time",
"data", envelope fields...}``; a last line ``{"end": {"events", "withheld",
"last_seq"}}``.
"""

from __future__ import annotations

from typing import IO, Any, cast

import msgspec

from ..events import ENVELOPE_FIELDS
from ..projections.reader_views import ReaderView, view_events

VIEW_FORMAT = "trajlog-view/1"
#: the formats a view export can be written in
VIEW_FORMATS = ("jsonl", "jsonl.zst")


def write_view_jsonl(session: Any, out: IO[bytes], view: ReaderView, header: dict[str, Any],
                     counter: Any = None) -> None:
    """``session``'s events as ``view`` shows them, as JSONL (module docstring)."""
    encode = msgspec.json.Encoder().encode
    out.write(encode({"trajlog": VIEW_FORMAT, "view": view.role, "model": view.model,
                      "session": header}) + b"\n")
    count = withheld = last = 0
    for ev in view_events(cast(Any, session), view):
        rec: dict[str, Any] = {"seq": ev.seq, "type": ev.type, "time": ev.time, "data": ev.data}
        for name in ENVELOPE_FIELDS:
            value = getattr(ev, name)
            if value is not None:
                rec[name] = value
        out.write(encode(rec) + b"\n")
        count += 1
        last = ev.seq
        withheld += isinstance(ev.data, dict) and "withheld" in ev.data
        if counter is not None:
            counter.add(1)
    out.write(encode({"end": {"events": count, "withheld": withheld, "last_seq": last}})
              + b"\n")


__all__ = ["VIEW_FORMAT", "VIEW_FORMATS", "write_view_jsonl"]
