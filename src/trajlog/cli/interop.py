"""``trajlog export``, ``trajlog import`` and ``trajlog verify FILE``: sessions
in and out, with a progress bar on long work and a summary table at the end."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from typing import Any, TextIO

from ..errors import ImportFormatError, InvalidArgumentError, TrajlogError
from ..interop.export import FORMATS as EXPORT_FORMATS
from ..interop.sources import FORMATS as IMPORT_FORMATS
from ..interop.sources.trajlog import verify_file
from ..interop.store import Store

EXPORT_SUFFIXES = tuple("." + f for f in EXPORT_FORMATS)


def add_commands(sub: Any) -> None:
    p = sub.add_parser("export", help="write a session (or a .zip of its tree) to a file")
    p.add_argument("session", help="session id (or a unique prefix of one)")
    p.add_argument("-o", "--output", required=True,
                   help="file to write: .tlog, .jsonl, .jsonl.zst or .zip")
    p.add_argument("--format", choices=EXPORT_FORMATS, help="override the file's suffix")
    p.add_argument("--db", default="trajlog.db")
    p = sub.add_parser("import", help="import a trajlog export or another agent's sessions")
    p.add_argument("path", help="a file or folder (Claude Code project, Codex rollout, ...)")
    p.add_argument("--format", default="auto",
                   choices=["auto", *(f.replace("_", "-") for f in IMPORT_FORMATS)])
    p.add_argument("--db", default="trajlog.db")
    p.add_argument("--unmapped", action="store_true",
                   help="list every record that gave no event, and why")
    p.add_argument("--close", action="store_true",
                   help="close what a source left open (a turn, a tool call) with trajlog's "
                        "recovery, as load() does")


class Bar:
    """A one-line progress bar on stderr, drawn only on a terminal and only
    once the work has taken half a second (short work prints nothing)."""

    def __init__(self, label: str, total: int | None = None,
                 stream: TextIO | None = None) -> None:
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.shown = False
        self._last = 0.0

    def update(self, done: int, unit: str = "events") -> None:
        now = time.monotonic()
        if not self.stream.isatty() or now - self.start < 0.5 or now - self._last < 0.1:
            return
        self._last = now
        rate = done / max(now - self.start, 1e-9)
        if self.total:
            filled = int(30 * min(done / self.total, 1.0))
            bar = "#" * filled + "." * (30 - filled)
            text = f"{self.label} [{bar}] {done:,}/{self.total:,} {unit} ({rate:,.0f}/s)"
        else:
            text = f"{self.label} {done:,} {unit} ({rate:,.0f}/s)"
        self.stream.write("\r" + text[:120])
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def table(rows: list[list[str]], out: TextIO) -> None:
    """Print ``rows`` (the first is the header) as aligned columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                  + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def resolve(store: Store, prefix: str) -> str:
    """The session id that ``prefix`` starts, or a typed error."""
    found = [h.id for h in store.sessions(include_subagents=True) if h.id.startswith(prefix)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InvalidArgumentError(f"no session id starts with {prefix!r} (see trajlog ls)")
    raise InvalidArgumentError(f"{prefix!r} starts {len(found)} session ids; give more of it")


def run(args: argparse.Namespace, store: Store) -> int:
    out = sys.stdout
    if args.command == "export":
        sid = resolve(store, args.session)
        total = store.session(sid).last_seq + 1
        bar = Bar(f"export {sid[:8]}", total if args.format != "zip" else None)
        try:
            report = store.export(sid, args.output, format=args.format, progress=bar.update)
        finally:
            bar.close()
        table([["file", "format", "sessions", "events", "bytes", "sha256"],
               [report.path, report.format, str(len(report.sessions)), f"{report.events:,}",
                f"{report.bytes:,}", report.sha256[:16]]], out)
        return 0
    bar = Bar(f"import {os.path.basename(args.path)}")
    try:
        imported = store.import_path(args.path, format=args.format, close=args.close,
                                     progress=lambda n, events: bar.update(events))
    finally:
        bar.close()
    rows = [["session", "status", "events", "kept", "parent"]]
    for s in imported.sessions:
        rows.append([s.session_id, s.status, f"{s.events:,}", f"{s.kept:,}",
                     (s.parent or "-")[:8]])
    table(rows, out)
    kinds = Counter(u.kind for u in imported.unmapped)
    out.write(f"\n{imported.format}: {len(imported.created)} created, "
              f"{sum(s.status == 'extended' for s in imported.sessions)} extended, "
              f"{len(imported.skipped)} unchanged"
              + (f", {len(imported.conflicts)} in conflict" if imported.conflicts else "")
              + f"; {imported.events:,} events written; "
              f"{len(imported.unmapped)} records without an event"
              + (f" ({', '.join(f'{k} {n}' for k, n in kinds.most_common())})" if kinds else "")
              + "\n")
    if args.unmapped:
        for u in imported.unmapped:
            where = f"{u.file}:{u.line}" if u.line is not None else u.file
            out.write(f"  {where} (byte {u.offset}) {u.kind}: {u.reason}\n")
    for torn in imported.torn:
        out.write(f"  torn: {torn.file} line {torn.line} at byte {torn.offset} "
                  f"({torn.size} bytes not imported)\n")
    for warning in imported.warnings:
        out.write(f"  warning: {warning}\n")
    for sid in imported.closed:
        out.write(f"  closed: {sid} was left open by its source; recovery closed it\n")
    for conflict in imported.conflicts:
        out.write(f"  conflict: {conflict.reason}\n")
    return 1 if imported.conflicts else 0


def verify_export(path: str) -> int:
    """``trajlog verify FILE``: an export checked without any store."""
    verdict = verify_file(path)
    where = "".join(f" line {verdict.line}" if verdict.line else "") + (
        f" byte {verdict.offset}" if verdict.offset is not None else "")
    print(f"{path}  {verdict.verdict}  {verdict.sessions} session(s), {verdict.events:,} "
          f"events" + (f"  {verdict.reason}{' at' + where if where else ''}"
                       if verdict.reason else ""))
    return 0 if verdict.verdict == "clean" else 1


def is_export(path: str) -> bool:
    return path.lower().endswith(EXPORT_SUFFIXES) and os.path.isfile(path)


def failed(exc: TrajlogError) -> int:
    print(f"trajlog: {type(exc).__name__}: {exc}", file=sys.stderr)
    if isinstance(exc, ImportFormatError):
        report = getattr(exc, "report", None)
        if report is not None and report.sessions:
            print(f"trajlog: {len(report.sessions)} session(s) before it were imported",
                  file=sys.stderr)
    return 1


__all__ = ["Bar", "add_commands", "failed", "is_export", "resolve", "run", "table",
           "verify_export"]
