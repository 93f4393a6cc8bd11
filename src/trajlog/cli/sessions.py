"""Finding and reading sessions: ``ls``, ``show``, ``tail``, ``tree``, ``stats``."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterable
from typing import Any

import click
from rich.table import Table
from rich.tree import Tree

from ..event_types import ENDS_LOG
from ..events import Event, SessionHeader
from ..projections.reader_views import view_events
from .app import (
    EXIT_DEFECT,
    EXIT_OK,
    App,
    clock,
    fail,
    kind,
    parse_time,
    safe,
    session_argument,
    summary,
    when,
)
from .reader import reader, view_options


def register(cli: click.Group) -> None:
    for command in (ls, show, tail, tree, stats):
        cli.add_command(command)


def _header_json(h: SessionHeader, events: int | None = None) -> dict[str, Any]:
    out = {"id": h.id, "kind": kind(h), "cwd": h.cwd, "parent": h.parent_session,
           "seed_length": h.seed_length, "origin": h.origin, "depth": h.delegation_depth,
           "agent_preset": h.agent_preset, "created_ms": h.created_at,
           "metadata": dict(h.metadata), "damage": h.damage}
    if events is not None:
        out["events"] = events
    return out


def event_json(ev: Event) -> dict[str, Any]:
    """An event as one JSON object (the envelope fields only when set)."""
    out: dict[str, Any] = {"seq": ev.seq, "type": ev.type, "time_ms": ev.time, "data": ev.data}
    for name in ("source", "causal_parent", "workspace_revision", "data_class",
                 "idempotency_key"):
        value = getattr(ev, name)
        if value is not None:
            out[name] = value
    return out


@click.command("ls")
@click.option("--cwd", help="Only sessions whose cwd starts with this path.")
@click.option("--preset", help="Only this agent preset.")
@click.option("--since", metavar="WHEN", help="Created at or after: 2026-11-30, 7d, 12h.")
@click.option("--until", metavar="WHEN", help="Created before: 2026-11-30, 7d, 12h.")
@click.option("-a", "--all", "include_subagents", is_flag=True,
              help="Include subagent sessions.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per session.")
@click.pass_obj
def ls(app: App, cwd: str | None, preset: str | None, since: str | None, until: str | None,
       include_subagents: bool, as_json: bool) -> None:
    """List the sessions of the store, oldest first."""
    store = app.store()
    lo = parse_time(since) if since else None
    hi = parse_time(until) if until else None
    rows = []
    for h in store.sessions(include_subagents=include_subagents):
        if cwd and not h.cwd.startswith(cwd):
            continue
        if preset and h.agent_preset != preset:
            continue
        if (lo is not None and h.created_at < lo) or (hi is not None and h.created_at >= hi):
            continue
        events = None if h.damage else store.session(h.id).last_seq + 1
        rows.append((h, events))
    if as_json:
        for h, events in rows:
            app.json(_header_json(h, events))
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("id", "created", "events", "kind", "preset", "cwd", "title"):
        table.add_column(name, no_wrap=name in ("id", "created"),
                         justify="right" if name == "events" else "left")
    for h, events in rows:
        title = h.metadata.get("title", "") if not h.damage else f"DAMAGED: {h.damage}"
        table.add_row(h.id, when(h.created_at), "-" if events is None else f"{events:,}",
                      kind(h), safe(h.agent_preset or "-"), safe(h.cwd),
                      safe(summary(title, 50)))
    app.out.print(table)
    if not rows:
        app.err.print("no sessions match" if store.sessions(include_subagents=True)
                      else f"the store {app.shown} holds no sessions")


def erased(data: Any) -> bool:
    """Whether ``data`` is an erased event's replacement (its tombstone)."""
    return isinstance(data, dict) and isinstance(data.get("erased"), dict) and (
        "tombstone" in data["erased"])


def _type_filter(patterns: tuple[str, ...]) -> Any:
    """``--type`` values: exact types, prefixes ending in ``/`` or globs."""
    if not patterns:
        return None

    def want(type_: str) -> bool:
        return any(type_ == p or (p.endswith("/") and type_.startswith(p))
                   or fnmatch.fnmatchcase(type_, p) for p in patterns)
    return want


def _print_events(app: App, events: Iterable[Event], as_json: bool, full: bool,
                  want: Any = None, classes: bool = False) -> int:
    width = max(app.out.width - 48, 40)
    last = -1
    for ev in events:
        last = ev.seq
        if want is not None and not want(ev.type):
            continue
        if as_json:
            app.json(event_json(ev))
            continue
        data = ev.data
        if erased(data):
            text = f"[erased: {summary(data['erased'], width - 10)}]"
        else:
            text = summary(data, 10**9 if full else width)
        source = f"  <{summary(ev.source, 200)}>" if ev.source else ""
        if classes:   # a reader view: each event's data class, stated or not
            source += f"  [{ev.data_class or 'unclassified'}]"
        app.echo(f"{ev.seq:>6}  {clock(ev.time)}  {ev.type:<20} {text}{source}")
    return last


@click.command()
@session_argument()
@click.option("--type", "types", multiple=True, metavar="TYPE",
              help="Only this type; 'tool/' or 'tool/*' for a family (repeatable).")
@click.option("--from", "from_seq", type=click.IntRange(min=0), default=0, metavar="SEQ",
              help="First seq.")
@click.option("--to", "to_seq", type=click.IntRange(min=0), metavar="SEQ", help="Last seq.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
@click.option("--full", is_flag=True, help="Print whole payloads, not one line each.")
@view_options
@click.pass_obj
def show(app: App, session: str, types: tuple[str, ...], from_seq: int, to_seq: int | None,
         as_json: bool, full: bool, view: str | None, view_model: str | None) -> None:
    """Print a session's events (verified as they are read); with --view, as
    that reader sees them (a withheld payload says so, every seq is kept)."""
    as_reader = reader(view, view_model)
    s = app.session(session)
    if to_seq is not None and to_seq < from_seq:
        fail(f"--to {to_seq} is before --from {from_seq}")
    events = s.events(from_seq, to_seq) if as_reader is None else view_events(
        s, as_reader, from_seq, to_seq)
    _print_events(app, events, as_json, full, _type_filter(types), as_reader is not None)


@click.command()
@session_argument()
@click.option("-n", "--lines", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many of the last events to print first.")
@click.option("-f", "--follow", is_flag=True,
              help="Keep printing events as they are appended (by any process).")
@click.option("--interval", type=click.FloatRange(min=0.01), default=0.2, show_default=True,
              help="Seconds between looks at the log while following.")
@click.option("--idle-exit", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Stop following after this long without a new event.")
@click.option("--type", "types", multiple=True, metavar="TYPE", help="As for show.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
@click.pass_obj
def tail(app: App, session: str, lines: int, follow: bool, interval: float,
         idle_exit: float | None, types: tuple[str, ...], as_json: bool) -> None:
    """Print the last events of a session; with -f, follow it live.

    Following polls the session head, so appends from other processes show up
    within --interval; it ends when the session closes (session/closed) or
    is deleted (session/deleted), and Ctrl-C stops it (exit code 0).
    """
    s = app.session(session)
    want = _type_filter(types)
    last = s.last_seq
    _print_events(app, s.events(max(0, last - lines + 1), last) if lines and last >= 0 else (),
                  as_json, False, want)
    if not follow or s.closed:
        return
    quiet_since = time.monotonic()
    try:
        while True:
            head = s.last_seq
            if head > last:
                new = list(s.events(last + 1, head))
                _print_events(app, new, as_json, False, want)
                last = head
                quiet_since = time.monotonic()
                if new[-1].type in ENDS_LOG:
                    return   # (closed or deleted: nothing follows it)
            elif idle_exit is not None and time.monotonic() - quiet_since >= idle_exit:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return


@click.command()
@session_argument()
@click.option("--json", "as_json", is_flag=True, help="The tree as nested JSON.")
@click.pass_obj
def tree(app: App, session: str, as_json: bool) -> None:
    """The lineage of a session: its root and every fork and subagent below."""
    store = app.store()
    s = app.session(session)
    root = s
    while root.header.parent_session is not None:
        parent = root.parent()
        if parent is None:
            break
        root = parent
    walk = list(root.tree().walk())
    counts = {h.id: store.session(h.id).last_seq + 1 for _, h in walk}
    if as_json:
        nodes: dict[str, dict[str, Any]] = {}
        top: dict[str, Any] = {}
        for _, h in walk:
            node = _header_json(h, counts[h.id]) | {"children": []}
            nodes[h.id] = node
            if h.parent_session in nodes:
                nodes[h.parent_session]["children"].append(node)
            else:
                top = node
        app.json(top)
        return
    branches: dict[str, Tree] = {}
    out: Tree | None = None
    for _, h in walk:
        seed = f", seed {h.seed_length}" if h.seed_length else ""
        mark = "  <-" if h.id == s.id else ""
        # a subagent's task through its header's pointer (erased: no title)
        title = h.metadata.get("title") or (None if h.damage else
                                             store.session(h.id).task()) or ""
        label = (f"{h.id[:8]}  {kind(h)}{seed}, {counts[h.id]:,} events, depth "
                 f"{h.delegation_depth}, preset {safe(h.agent_preset or '-')}"
                 + (f"  {safe(summary(title, 50))}" if title else "") + mark)
        if out is None or h.parent_session not in branches:
            out = branches[h.id] = Tree(label, guide_style="dim")
        else:
            branches[h.id] = branches[h.parent_session].add(label)
    if out is not None:
        app.out.print(out)


def _bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@click.command()
@click.argument("sessions", nargs=-1, metavar="[SESSION]...")
@click.option("--no-types", is_flag=True, help="Skip counting events by type (no scan).")
@click.option("--json", "as_json", is_flag=True, help="The figures as one JSON object.")
@click.pass_obj
def stats(app: App, sessions: tuple[str, ...], no_types: bool, as_json: bool) -> int:
    """Sessions, events, stored bytes and compression, events by type.
    Sessions that cannot be read are listed, left out of the totals, and make
    the exit code 1."""
    store = app.store()
    ids = [app.session(p).id for p in sessions] or None
    total = len(ids) if ids else len(store.sessions(include_subagents=True))
    with app.progress("measuring", total) as update:
        figures = store.stats(ids, by_type=not no_types, progress=update)
    headers = {h.id: h for h in store.sessions(include_subagents=True)}
    subagents = sum(headers[s.id].origin == "subagent" for s in figures.sessions)  # measured
    forks = sum(headers[s.id].origin is None and headers[s.id].parent_session is not None
                for s in figures.sessions)
    if as_json:
        app.json({"sessions": len(figures.sessions), "subagents": subagents, "forks": forks,
                  "events": figures.events,
                  "rows": sum(s.rows for s in figures.sessions),
                  "raw_bytes": figures.raw_bytes, "stored_bytes": figures.stored_bytes,
                  "compression": round(figures.compression, 3),
                  "file_bytes": figures.file_bytes, "by_type": figures.by_type,
                  "damaged": figures.damaged})
        return EXIT_DEFECT if figures.damaged else EXIT_OK
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for name, value in (
            ("sessions", f"{len(figures.sessions):,} ({subagents:,} subagents, {forks:,} forks)"),
            ("events", f"{figures.events:,}"),
            ("chunk rows", f"{sum(s.rows for s in figures.sessions):,}"),
            ("framed bytes", _bytes(figures.raw_bytes)),
            ("stored bytes", _bytes(figures.stored_bytes)),
            ("compression", f"{figures.compression:.2f}x"),
            ("database files", _bytes(figures.file_bytes))):
        table.add_row(name, value)
    app.out.print(table)
    if figures.by_type:
        types = Table(box=None, pad_edge=False, header_style="bold")
        types.add_column("type")
        types.add_column("events", justify="right")
        types.add_column("share", justify="right")
        for name, n in figures.by_type.items():
            types.add_row(name, f"{n:,}", f"{100 * n / max(figures.events, 1):.1f}%")
        app.out.print()
        app.out.print(types)
    for sid, why in figures.damaged.items():
        app.err.print(f"not measured: {sid}  {safe(why)}")
    return EXIT_DEFECT if figures.damaged else EXIT_OK


__all__ = ["event_json", "register"]
