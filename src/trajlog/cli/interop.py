"""``trajlog export``, ``trajlog import`` and ``trajlog verify FILE``: sessions
in and out, with a progress bar on long work and a summary table at the end."""

from __future__ import annotations

import os
from collections import Counter

import click
from rich.table import Table

from ..interop.export import FORMATS as EXPORT_FORMATS
from ..interop.formats import FORMATS as IMPORT_FORMATS
from ..interop.sources.trajlog import verify_file
from ..storage.factory import exists
from .app import EXIT_DEFECT, EXIT_OK, App, session_argument, summary
from .reader import reader, view_options

EXPORT_SUFFIXES = tuple("." + f for f in EXPORT_FORMATS)


def register(cli: click.Group) -> None:
    cli.add_command(export)
    cli.add_command(import_command)


def is_export(path: str) -> bool:
    """Whether ``path`` names an export file (``trajlog verify FILE``)."""
    return path.lower().endswith(EXPORT_SUFFIXES) and os.path.isfile(path)


def verify_export(app: App, path: str, as_json: bool = False) -> int:
    """``trajlog verify FILE``: an export checked without any store."""
    verdict = verify_file(path)
    if as_json:
        app.json({"file": path, "verdict": verdict.verdict, "sessions": verdict.sessions,
                  "events": verdict.events, "reason": verdict.reason, "line": verdict.line,
                  "offset": verdict.offset})
    else:
        where = (f" line {verdict.line}" if verdict.line else "") + (
            f" byte {verdict.offset}" if verdict.offset is not None else "")
        app.echo(f"{path}  {verdict.verdict}  {verdict.sessions} session(s), "
                 f"{verdict.events:,} events" + (f"  {verdict.reason}"
                                                 f"{' at' + where if where else ''}"
                                                 if verdict.reason else ""))
    return EXIT_OK if verdict.verdict == "clean" else EXIT_DEFECT


@click.command()
@session_argument()
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The file to write: .tlog, .jsonl, .jsonl.zst or .zip (the whole tree).")
@click.option("--format", "format_", type=click.Choice(EXPORT_FORMATS),
              help="Override the format the file's suffix names.")
@view_options
@click.pass_obj
def export(app: App, session: str, output: str, format_: str | None, view: str | None,
           view_model: str | None) -> None:
    """Write a session (or, to a .zip, the session and its descendants) to a
    file that verifies on its own; it appears complete or not at all.  With
    --view: the session as that reader sees it (.jsonl or .jsonl.zst; a
    reading, it does not import back)."""
    as_reader = reader(view, view_model)
    s = app.session(session)
    total = None if (format_ == "zip" or output.lower().endswith(".zip")) else s.last_seq + 1
    with app.progress(f"export {s.id[:8]}", total, unit="events") as update:
        report = app.store().export(s.id, output, format=format_, progress=update,
                                    view=as_reader)
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("file", "format", "sessions", "events", "bytes", "sha256"):
        table.add_column(name, no_wrap=True)
    table.add_row(report.path, report.format, str(len(report.sessions)), f"{report.events:,}",
                  f"{report.bytes:,}", report.sha256[:16])
    app.out.print(table)


@click.command("import")
@click.argument("path", type=click.Path(exists=True))
@click.option("--format", "format_", default="auto", show_default=True,
              type=click.Choice(["auto", *(f.replace("_", "-") for f in IMPORT_FORMATS)]),
              help="The source format (detected by default).")
@click.option("--unmapped", is_flag=True, help="List every record that gave no event, and why.")
@click.option("--close", is_flag=True, help="Close what a source left open (a turn, a tool "
              "call) with trajlog's recovery, as load does.")
@click.pass_obj
def import_command(app: App, path: str, format_: str, unmapped: bool, close: bool) -> int:
    """Import a trajlog export, or another agent's sessions (a Claude Code
    project, a Codex rollout, Inspect AI, OpenHands, SWE-agent, aider).
    Creates the store if needed; importing the same file again writes nothing.
    Exits 1 if a session met a stored session with other events."""
    existed = exists(app.db)
    store = app.store(create=True)
    with app.progress(f"import {os.path.basename(path.rstrip('/'))}", unit="events") as update:
        try:
            imported = store.import_path(path, format=format_, close=close,
                                         progress=lambda n, events: update(events))
        except Exception as exc:
            report = getattr(exc, "report", None)
            if report is not None and report.sessions:
                app.err.print(f"{len(report.sessions)} session(s) before the error were "
                              "imported")
            elif not existed and not store.sessions(include_subagents=True):
                app.discard()   # the store this failed import made holds nothing
            raise
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("session", "status", "events", "kept", "parent"):
        table.add_column(name, no_wrap=True)
    for s in imported.sessions:
        table.add_row(s.session_id, s.status, f"{s.events:,}", f"{s.kept:,}",
                      (s.parent or "-")[:8])
    app.out.print(table)
    kinds = Counter(u.kind for u in imported.unmapped)
    app.echo(f"\n{imported.format}: {len(imported.created)} created, "
             f"{sum(s.status == 'extended' for s in imported.sessions)} extended, "
             f"{len(imported.skipped)} unchanged"
             + (f", {len(imported.conflicts)} in conflict" if imported.conflicts else "")
             + f"; {imported.events:,} events written; "
             f"{len(imported.unmapped)} records without an event"
             + (f" ({', '.join(f'{k} {n}' for k, n in kinds.most_common())})" if kinds else ""))
    if unmapped:
        for u in imported.unmapped:
            where = f"{u.file}:{u.line}" if u.line is not None else u.file
            app.echo(f"  {where} (byte {u.offset}) {u.kind}: {summary(u.reason, 200)}")
    for torn in imported.torn:
        app.echo(f"  torn: {torn.file} line {torn.line} at byte {torn.offset} "
                 f"({torn.size} bytes not imported)")
    for warning in imported.warnings:
        app.echo(f"  warning: {warning}")
    for sid in imported.closed:
        app.echo(f"  closed: {sid} was left open by its source; recovery closed it")
    for conflict in imported.conflicts:
        app.echo(f"  conflict: {conflict.reason}")
    return EXIT_DEFECT if imported.conflicts else EXIT_OK


__all__ = ["EXPORT_SUFFIXES", "is_export", "register", "verify_export"]
