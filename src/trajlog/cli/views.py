"""The readings of one log: ``chat`` (people), ``trajectory`` (debugging),
``context`` (what a recorded build admitted and excluded, and why) and
``view`` (all of them in one self-contained HTML page)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import click
import msgspec
from rich.tree import Tree

from .. import projections
from ..api import Session
from ..event_types import CONTEXT_TOOL_RESULTS as CHAT_RESULTS
from ..projections.evidence import ref as source_ref
from ..projections.reader_views import view_events, view_fold
from ..viewer import write_html
from .app import App, duration, fail, safe, session_argument, summary
from .reader import reader, view_options

STATUS_STYLE = {"done": "green", "error": "red", "unknown": "yellow", "not_started": "yellow",
                "running": "cyan", "requested": "cyan"}


def register(cli: click.Group) -> None:
    for command in (chat, trajectory, context, view):
        cli.add_command(command)


#: lines of a message or tool output ``chat`` prints without ``--full``
CHAT_LINES = 12


def seq_range(start: int | None, end: int | None) -> str:
    """``start..end``, a bound not recorded left empty (seq 0 is a seq)."""
    return f"{'' if start is None else start}..{'' if end is None else end}"


def _excerpt(value: Any, width: int, full: bool, indent: str = "") -> str:
    """Untrusted text for rich with its own line breaks kept (controls shown,
    markup escaped); without ``full`` cut to ``CHAT_LINES`` lines and
    ``width`` characters, a cut marked ``...``."""
    text = value if isinstance(value, str) else summary(value, 10**9)
    lines = text.replace("\r\n", "\n").split("\n")
    if not full:
        kept = "\n".join(lines[:CHAT_LINES])
        kept = kept[:width]
        if len(kept) < len(text.replace("\r\n", "\n")):
            kept += "..."
        lines = kept.split("\n")
    return textwrap.indent(safe("\n".join(lines)), indent, lambda _: True)


def _times(s: Session, seqs: set[int]) -> dict[int, int]:
    """Event times of ``seqs`` (one verified pass over the log)."""
    if not seqs:
        return {}
    out = {}
    for ev in s.events(min(seqs), max(seqs), lazy=True):
        if ev.seq in seqs:
            out[ev.seq] = ev.time
    return out


@click.command()
@session_argument()
@click.option("--full", is_flag=True, help="Whole messages and tool outputs.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per bubble or card.")
@view_options
@click.pass_obj
def chat(app: App, session: str, full: bool, as_json: bool, view: str | None,
         view_model: str | None) -> None:
    """The conversation as people read it: bubbles and tool cards (with
    --view, as that reader sees it)."""
    as_reader = reader(view, view_model)
    s = app.session(session)
    width = 10**9 if full else max(app.out.width - 12, 40)
    nodes = projections.chat(s) if as_reader is None else view_fold(s, "chat", as_reader)
    viewed: dict[int, Any] | None = None
    for node in nodes:
        if as_json:
            app.json(msgspec.to_builtins(node))
        elif node.kind == "message":
            style = {"user": "bold blue", "assistant": "bold green"}.get(node.role or "", "bold")
            app.out.print(f"[{style}]{safe(node.role or '?')}[/]  [dim]#{node.seq}[/]")
            app.out.print(_excerpt(node.text or "", width * 4, full), soft_wrap=True)
            app.out.print()
        else:
            style = STATUS_STYLE.get(node.status or "", "default")
            args = summary(node.arguments, 60)
            app.out.print(f"  [bold]tool[/] {safe(node.name or '?')}({safe(args)})  "
                          f"[{style}]{safe(node.status)}[/]  [dim]#{node.seq}"
                          + (f"..{node.result_seq}" if node.result_seq is not None else "")
                          + "[/]")
            output: Any = node.output
            if full and output and node.result_seq is not None:
                # the projection keeps a cut of each output: --full reads it whole
                if as_reader is None:
                    result = s.get(node.result_seq).data
                else:   # the view's payloads, read in one pass for every card
                    if viewed is None:
                        viewed = {e.seq: e.data for e in view_events(s, as_reader)
                                  if e.type in CHAT_RESULTS}
                    result = viewed.get(node.result_seq)
                if isinstance(result, dict) and "output" in result:
                    output = result["output"]
            if output:
                app.out.print(_excerpt(output, width * 4, full, "    "), soft_wrap=True)
            app.out.print()


@click.command()
@session_argument()
@click.option("--json", "as_json", is_flag=True, help="The turn tree as JSON.")
@click.pass_obj
def trajectory(app: App, session: str, as_json: bool) -> None:
    """Turns, steps, model requests and tool spans, with timings and errors."""
    s = app.session(session)
    turns = projections.trajectory(s)
    if as_json:   # one turn per line
        for turn in turns:
            app.json(msgspec.to_builtins(turn))
        return
    marks = {seq for t in turns for seq in (t.start_seq, t.end_seq) if seq is not None}
    marks |= {seq for t in turns for st in t.steps for seq in (st.start_seq, st.end_seq)
              if seq is not None}
    times = _times(s, marks)

    def span(a: int | None, b: int | None) -> str:
        if a is None or b is None or a not in times or b not in times:
            return "open" if b is None else "-"
        return duration(times[b] - times[a])

    root = Tree(f"[bold]{s.id}[/]  {len(turns)} turn(s), last seq {s.last_seq}")
    for n, turn in enumerate(turns, 1):
        state = ("[yellow]interrupted[/]" if turn.interrupted else
                 "[cyan]open[/]" if turn.end_seq is None else span(turn.start_seq, turn.end_seq))
        t = root.add(f"[bold]turn {n}[/]  seq {seq_range(turn.start_seq, turn.end_seq)}  "
                     f"{state}")
        for k, step in enumerate(turn.steps, 1):
            errors = sum(bool(x.error) or x.status == "error" for x in step.tools)
            st = t.add(f"step {k}  seq {seq_range(step.start_seq, step.end_seq)}  "
                       f"{span(step.start_seq, step.end_seq)}"
                       + (f"  [red]{errors} error(s)[/]" if errors else ""))
            for r in step.requests:
                tokens = (f", {r.tokens_in} -> {r.tokens_out} tokens"
                          if r.tokens_in is not None or r.tokens_out is not None else "")
                st.add(f"[magenta]model[/] {safe(r.model or 'request')}  #{r.seq}  latency "
                       f"{duration(r.latency_ms)}" + (f", first token {duration(r.ttft_ms)}"
                                                      if r.ttft_ms is not None else "")
                       + f"{tokens}, {r.tool_calls} tool call(s)")
            for x in step.tools:
                style = STATUS_STYLE.get(x.status, "default")
                st.add(f"[bold]tool[/] {safe(x.name or '?')} [{style}]{safe(x.status)}[/]  "
                       f"#{x.requested_seq}..{x.result_seq if x.result_seq is not None else ''}"
                       f"  {duration(x.duration_ms)}"
                       + (f"  {safe(summary(x.result_summary, 60))}"
                          if x.result_summary else ""))
    app.out.print(root)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _excluded_total(d: dict[str, Any]) -> int:
    excluded = d.get("excluded")
    return sum(n for n in excluded.values() if type(n) is int) if isinstance(
        excluded, dict) else 0


def _runs(value: Any) -> dict[str, list[list[int]]]:
    """A build's ``excluded_seqs``, keeping only well-formed runs."""
    if not isinstance(value, dict):
        return {}
    return {str(k): [r for r in v if isinstance(r, list) and len(r) == 2
                     and all(type(x) is int for x in r) and r[0] <= r[1]]
            for k, v in value.items() if isinstance(v, list)}


def _ranges(runs: list[list[int]]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


@click.command()
@session_argument()
@click.option("--seq", type=click.IntRange(min=0), help="This context/injection event "
              "(default: the last one).")
@click.option("--list", "list_all", is_flag=True, help="List every recorded build.")
@click.option("--json", "as_json", is_flag=True, help="The recorded build as JSON.")
@click.pass_obj
def context(app: App, session: str, seq: int | None, list_all: bool, as_json: bool) -> None:
    """A recorded context build: what was included, what was excluded and why."""
    s = app.session(session)
    builds = [ev for ev in s.events() if ev.type == "context/injection"
              and isinstance(ev.data, dict)]   # anything else is not a build
    if not builds:
        fail(f"session {s.id} records no context build",
             "build one with trajlog.projections.context.build_context(session)", code=3)
    if list_all:
        for ev in builds:
            d = ev.data
            app.echo(f"{ev.seq:>6}  policy {summary(d.get('policy'), 40)} "
                     f"v{summary(d.get('policy_version'), 10)}  "
                     f"{len(_list(d.get('selected')))} included, "
                     f"{_excluded_total(d)} excluded, {summary(d.get('chars'), 12)} chars")
        return
    chosen = builds[-1] if seq is None else next((e for e in builds if e.seq == seq), None)
    if chosen is None:
        fail(f"seq {seq} is not a context/injection of {s.id}", "see --list")
    d = chosen.data
    if as_json:
        app.json({"seq": chosen.seq} | d)
        return
    app.out.print(f"[bold]context build at seq {chosen.seq}[/]: policy "
                  f"{safe(summary(d.get('policy'), 40))} v{safe(d.get('policy_version'))}, "
                  f"target model {safe(summary(d.get('target_model'), 60))}, "
                  f"{safe(d.get('chars'))} characters")
    selected = [q for q in _list(d.get("selected")) if type(q) is int]
    app.out.print(f"\n[bold]included[/] ({len(selected)})")
    wanted = set(selected)
    runs_by = _runs(d.get("excluded_seqs"))
    for runs in runs_by.values():
        for a, b in runs:
            if b - a < 20:
                wanted.update(range(a, b + 1))
    wanted = {q for q in wanted if 0 <= q <= s.last_seq}
    events = {ev.seq: ev for ev in s.events(min(wanted), max(wanted))} if wanted else {}
    for q in selected:
        item = events.get(q)
        if item is not None:
            app.out.print(f"  {q:>6}  [green]{source_ref(item):<12}[/] {item.type:<20} "
                          f"{safe(summary(item.data, 70))}")
    app.out.print(f"\n[bold]excluded[/] ({_excluded_total(d)})")
    excluded = d.get("excluded") if isinstance(d.get("excluded"), dict) else {}
    for reason, count in excluded.items():
        app.out.print(f"  [yellow]{safe(reason)}[/]  x{safe(count)}")
        runs = runs_by.get(reason, [])
        if any(b - a >= 20 for a, b in runs) or len(runs) > 12:
            app.out.print(f"    seqs {_ranges(runs[:40])}" + (" ..." if len(runs) > 40 else ""))
            continue
        for a, b in runs:
            for q in range(a, b + 1):
                item = events.get(q)
                if item is not None:
                    app.out.print(f"    {q:>6}  {item.type:<20} "
                                  f"{safe(summary(item.data, 60))}")


@click.command()
@session_argument()
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="The HTML file to write (default: trajlog-<id>.html here).")
@view_options
@click.pass_obj
def view(app: App, session: str, output: str | None, view: str | None,
         view_model: str | None) -> None:
    """Write one self-contained HTML page of a session and its subagents:
    chat, trajectory and timeline, model history, context builds, goals,
    the session tree, erased events as tombstones; search within the page.
    It loads nothing from the network.  With --view, as that reader sees it."""
    as_reader = reader(view, view_model)
    s = app.session(session)
    if s.header.damage is not None:
        fail(f"session {s.id} has a damaged header: {s.header.damage}",
             "see 'trajlog verify'", code=3)
    path = output or f"trajlog-{s.id[:8]}.html"
    with app.err.status(f"rendering {s.id[:8]}", spinner="dots") if app.err.is_terminal \
            else _nothing():
        report: Any = write_html(app.store(), s.id, path, view=as_reader)
    app.echo(f"wrote {report.path}: {report.sessions} session(s), {report.events:,} events, "
             f"{report.bytes:,} bytes")
    app.echo(f"open it in a browser: {Path(os.path.abspath(report.path)).as_uri()}")


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


__all__ = ["register", "seq_range"]
