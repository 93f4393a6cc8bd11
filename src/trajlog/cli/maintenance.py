"""Keeping a store whole: ``verify``, ``inspect`` / ``load`` (crash recovery),
``fork``, ``repack`` and ``migrate``."""

from __future__ import annotations

from typing import Any

import click

from ..api import migrate as migrate_store
from ..errors import CorruptionError, SchemaError, StoreDamagedError, TrajlogError
from ..events import Event
from ..storage.factory import exists, kind
from . import interop
from .app import EXIT_DEFECT, EXIT_OK, EXIT_REFUSED, App, fail, safe, session_argument


def register(cli: click.Group) -> None:
    for command in (verify, inspect, load, fork, repack, migrate):
        cli.add_command(command)


def _closer(ev: Event) -> str:
    d = ev.data if isinstance(ev.data, dict) else {}
    what = " ".join(str(d[k]) for k in ("status", "call_id") if k in d)
    return f"  {ev.type:<12} {what}".rstrip()


@click.command()
@click.argument("target", required=False, metavar="[SESSION | FILE]")
@click.option("--json", "as_json", is_flag=True, help="One JSON report per session.")
@click.pass_obj
def verify(app: App, target: str | None, as_json: bool) -> int:
    """Verify every frame, checksum and chain: of every session and the memory
    (default), of one SESSION, or of an export FILE on its own (.tlog, .jsonl,
    .jsonl.zst, .zip). Reports each session and never stops at the first bad
    one; exits 1 if anything is wrong."""
    if target and interop.is_export(target):
        return interop.verify_export(app, target, as_json)
    if target and target.lower().endswith(interop.EXPORT_SUFFIXES):
        fail(f"no file {target}", "give the export's path")
    try:
        store = app.store()
        ids = ([app.session(target).id] if target else
               [h.id for h in store.sessions(include_subagents=True)])
    except (StoreDamagedError, SchemaError, CorruptionError) as exc:
        # the database itself is damaged: that is what verify is asked to find
        what = f"{type(exc).__name__}: {exc}"
        if as_json:
            app.json({"store": app.db, "ok": False, "defect": what})
        else:
            app.echo(f"store  CORRUPT  {what}")
        return EXIT_DEFECT
    defects = 0
    with app.progress("verifying", len(ids)) as update:
        for n, sid in enumerate(ids, 1):
            try:   # one session's damage never stops the others' verification
                report = store.session(sid).verify()
                ok, events = report.ok, report.events
                why = None if ok else str(report.scan.error(sid))
            except TrajlogError as exc:
                ok, events, why = False, None, f"{type(exc).__name__}: {exc}"
            defects += not ok
            update(n)
            if as_json:
                app.json({"session": sid, "ok": ok, "events": events, "defect": why})
            else:
                app.echo(f"{sid}  " + (f"ok  {events:,} events" if ok else f"CORRUPT  {why}"))
    if not target:
        audit = store.verify_memory()
        defects += not audit.ok
        if as_json:
            app.json({"memory": audit.ok, "items": audit.items, "versions": audit.versions,
                      "tombstones": audit.tombstones, "defects": list(map(str, audit.defects))})
        else:
            app.echo(f"memory  {'ok' if audit.ok else 'CORRUPT'}  {audit.items} items, "
                     f"{audit.versions} versions, {audit.tombstones} tombstones")
            for defect in audit.defects:
                app.echo(f"memory  {defect}")
    if not as_json:
        app.err.print(f"{len(ids)} session(s) verified: "
                      + (f"{defects} with a defect" if defects else "all ok"))
    return EXIT_DEFECT if defects else EXIT_OK


@click.command()
@session_argument()
@click.pass_obj
def inspect(app: App, session: str) -> None:
    """What a crash left open, and the closers load would append (writes nothing)."""
    s = app.session(session)
    view, report = s.inspect()
    app.echo(f"{s.id}  {report.outcome}: {report.events} events, last seq {report.last_seq}")
    if report.open_turn_seq is not None:
        app.echo(f"  open turn since seq {report.open_turn_seq}")
    if report.open_step_seq is not None:
        app.echo(f"  open step since seq {report.open_step_seq}")
    if report.closers:
        app.echo(f"load would append {len(report.closers)} closer(s):")
        for ev in view.closers:
            app.echo(_closer(ev))
    elif report.outcome == "refused":
        fail(f"recovery refuses {s.id}: {report.refusal}", "see 'trajlog verify'", code=3)


@click.command()
@session_argument()
@click.pass_obj
def load(app: App, session: str) -> None:
    """Verify a session and close what a crash left open (synthetic closers for
    calls, steps and turns without an end); a balanced log is left as it is."""
    sid = app.session(session).id
    before = app.store().session(sid).last_seq
    s = app.store().load(sid)
    added = list(s.events(before + 1)) if s.last_seq > before else []
    if not added:
        app.echo(f"{sid}  balanced: nothing to close ({s.last_seq + 1} events)")
        return
    app.echo(f"{sid}  repaired: appended {len(added)} closer(s) at seq {added[0].seq}.."
             f"{added[-1].seq}")
    for ev in added:
        app.echo(_closer(ev))


@click.command()
@session_argument()
@click.option("--at", "at_seq", type=click.IntRange(min=0), metavar="SEQ",
              help="Cut at the end of this seq's turn (default: the last event).")
@click.option("--title", help="A title for the fork (its metadata).")
@click.pass_obj
def fork(app: App, session: str, at_seq: int | None, title: str | None) -> None:
    """Fork a session: the child reads the parent's events up to the cut
    (copying none) and continues with its own."""
    s = app.session(session)
    if s.last_seq < 0:
        fail(f"session {s.id} is empty: nothing to fork", code=3)
    child = s.fork(s.last_seq if at_seq is None else at_seq,
                   metadata={"title": title} if title else None)
    app.echo(child.id)
    app.err.print(f"forked {s.id[:8]} -> {child.id[:8]}: {child.header.seed_length} "
                  "inherited event(s), none copied")


@click.command()
@click.argument("session", required=False, metavar="[SESSION]")
@click.pass_obj
def repack(app: App, session: str | None) -> None:
    """Merge small chunk rows into full compressed ones now (of one session or
    of all); frames and chain stay byte for byte."""
    store = app.store()
    if session:
        one = app.session(session)
        if one.header.damage is not None:
            fail(f"session {one.id} has a damaged header: {one.header.damage}",
                 "see 'trajlog verify'", code=EXIT_REFUSED)
    ids = [app.session(session).id] if session else [
        h.id for h in store.sessions(include_subagents=True) if h.damage is None]
    merged, failed = 0, 0
    with app.progress("repacking", len(ids)) as update:
        for n, sid in enumerate(ids, 1):
            try:   # one damaged session never stops the others' repack
                merged += store.repack(sid)
            except TrajlogError as exc:
                failed += 1
                app.err.print(f"not repacked: {sid}  {safe(f'{type(exc).__name__}: {exc}')}")
            update(n)
    app.echo(f"repacked {len(ids) - failed} session(s): {merged} row(s) merged away")
    if failed:
        fail(f"{failed} session(s) could not be repacked (listed above)",
             "see 'trajlog verify'", code=EXIT_REFUSED)


@click.command()
@click.pass_obj
def migrate(app: App) -> None:
    """Bring a store written by an older trajlog to this version's schema
    (each session verified, rewritten and compared in its own transaction;
    an interrupted migration resumes)."""
    if not exists(app.db):
        fail(f"no store at {app.shown}", "give one with --db or TRAJLOG_DB")
    seen: dict[str, Any] = {}

    with app.progress("migrating") as update:
        def progress(done: int, total: int) -> None:
            seen["sessions"] = total
            update(done, total)
        found = migrate_store(app.db, progress=progress)
    current = kind(app.db).schema_version
    if found >= current:
        app.echo(f"{app.shown}: schema {current}, already current")
    else:
        app.echo(f"{app.shown}: schema {found} -> {current}"
                 + (f", {seen['sessions']} session(s) rewritten" if seen else ""))


__all__ = ["register"]
