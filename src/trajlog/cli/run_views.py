"""Runs and checkpoints: ``runs`` (the run envelopes, ``--tree`` across
subagents) and ``checkpoints`` (stage checkpoints and the recovery attempts
made from them).  Both read the log only: an envelope is a fold of it
(:func:`trajlog.projections.runs`), never a second record."""

from __future__ import annotations

from typing import Any

import click
import msgspec
from rich.table import Table
from rich.tree import Tree

from .. import projections
from ..projections.checkpoint_marks import read_marks
from ..projections.envelopes import COST_SURFACES, RunEnvelope, RunNode
from .app import EXIT_DEFECT, EXIT_OK, App, safe, session_argument, summary, when

INTEGRITY_STYLE = {"ok": "green", "mismatch": "bold red", "erased": "yellow",
                   "unverified": "yellow", "open": "cyan"}
STATE_STYLE = {"completed": "green", "failed": "red", "interrupted": "yellow", "open": "cyan",
               "erased": "yellow"}
# usage counters, as the cost cells name them (any other key is shown as is)
_SHORT = {"requests": "req", "input_tokens": "in", "output_tokens": "out", "calls": "calls",
          "events": "ev"}


def register(cli: click.Group) -> None:
    for command in (runs, checkpoints):
        cli.add_command(command)


def _number(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:.6g}"


def cost_cell(fields: Any) -> str:
    """One surface's cost: the amount (when any), then its usage counters."""
    if not isinstance(fields, dict):
        return "-"
    parts = []
    amount = fields.get("amount")
    if isinstance(amount, (int, float)) and amount:
        parts.append(_number(amount))
    for k, v in fields.items():
        if k != "amount" and isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{_number(v)} {_SHORT.get(k, k)}")
    return ", ".join(parts) or "-"


def _events(env: RunEnvelope) -> str:
    usage = env.cost.get("persistence", {})
    n = usage.get("events")
    return _number(n) if isinstance(n, (int, float)) else "-"


def _run_json(env: RunEnvelope) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(env)
    return out


def _style(table: dict[str, str], value: str) -> str:
    return f"[{table.get(value, 'default')}]{safe(value)}[/]"


@click.command()
@session_argument()
@click.option("--tree", "as_tree", is_flag=True,
              help="The run tree across forks and subagents, cost summed per delegation "
                   "path.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run (per node "
              "with --tree: its path and the path's total).")
@click.pass_obj
def runs(app: App, session: str, as_tree: bool, as_json: bool) -> int:
    """The runs of a session (Session.run): model, state, the integrity
    verdict of each run's integrity digest (ok, mismatch, erased, unverified, open),
    events, cost on four surfaces -- inference, retrieval, tools, persistence
    -- and parent run.  Exits 1 when a run's events do not hash to the digest
    its run/finalized recorded (integrity mismatch)."""
    s = app.session(session)
    if as_tree:
        roots = projections.run_tree(s)
        envelopes = [n.run for root in roots for n in root.walk()]
        if as_json:
            for root in roots:
                for node in root.walk():
                    app.json({"path": list(node.path), "depth": len(node.path) - 1,
                              "total": node.total, "run": _run_json(node.run)})
        else:
            _print_tree(app, s.id, roots)
    else:
        envelopes = projections.runs(s)
        if as_json:
            for env in envelopes:
                app.json(_run_json(env))
        else:
            _print_table(app, envelopes)
    if not envelopes and not as_json:
        app.err.print(f"session {s.id} records no run (see Session.run)")
    bad = [e.run_id for e in envelopes if e.integrity == "mismatch"]
    if bad:
        app.err.print(f"integrity mismatch in {len(bad)} run(s): {', '.join(bad)} "
                      "(hint: 'trajlog verify' checks the frames under them)", markup=False)
        return EXIT_DEFECT
    return EXIT_OK


def _print_table(app: App, envelopes: list[RunEnvelope]) -> None:
    if not envelopes:
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("run", "model", "state", "integrity", "seqs", "events", *COST_SURFACES,
                 "parent run", "started"):
        table.add_column(name, no_wrap=name in ("run", "seqs", "started"),
                         justify="right" if name == "events" else "left")
    for e in envelopes:
        table.add_row(safe(e.run_id), safe(summary(e.model or "-", 30)),
                      _style(STATE_STYLE, e.state), _style(INTEGRITY_STYLE, e.integrity),
                      f"{e.started_seq}..{'' if e.finalized_seq is None else e.finalized_seq}",
                      _events(e), *(safe(cost_cell(e.cost.get(k))) for k in COST_SURFACES),
                      safe(e.parent_run or "-"), when(e.started_at))
    app.out.print(table)
    for e in envelopes:
        if e.integrity_detail:
            app.out.print(f"  {safe(e.run_id)}: {_style(INTEGRITY_STYLE, e.integrity)} -- "
                          f"{safe(e.integrity_detail)}")
        for sw in e.switches:
            app.out.print(f"  {safe(e.run_id)}: model switch at seq {safe(sw.get('seq'))}: "
                          f"{safe(sw.get('old'))} -> {safe(sw.get('new'))} "
                          f"({safe(sw.get('reason'))})")


def _print_tree(app: App, session_id: str, roots: list[RunNode]) -> None:
    if not roots:
        return
    top = Tree(f"[bold]{safe(session_id)}[/]  runs across forks and subagents "
               "(cost: this run / the path below it)")

    def add(parent: Tree, node: RunNode) -> None:
        e = node.run
        label = (f"[bold]{safe(e.run_id)}[/] {safe(summary(e.model or '-', 30))}  "
                 f"{_style(STATE_STYLE, e.state)}  {_style(INTEGRITY_STYLE, e.integrity)}  "
                 f"session {safe((e.session_id or '-')[:8])}")
        branch = parent.add(label)
        for k in COST_SURFACES:
            own, total = cost_cell(e.cost.get(k)), cost_cell(node.total.get(k))
            if own != "-" or total != "-":
                branch.add(f"[dim]{k}[/] {safe(own)} / {safe(total)}")
        for child in node.children:
            add(branch, child)

    for root in roots:
        add(top, root)
    app.out.print(top)


@click.command()
@session_argument()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per checkpoint, "
              "recovery attempt and fork, with \"kind\" saying which.")
@click.pass_obj
def checkpoints(app: App, session: str, as_json: bool) -> None:
    """Stage checkpoints (stage, seq, workspace revision, valid or invalidated
    and why) and the recovery attempts made from them: each recovery check
    with its verdict, and the outcome (resumed, paused, restarted) -- plus the
    forks taken from a checkpoint."""
    s = app.session(session)
    marks = read_marks(s.events())
    if as_json:
        for kind, items in (("checkpoint", marks.checkpoints),
                            ("recovery", marks.recoveries), ("fork", marks.forks)):
            for item in items:
                app.json({"kind": kind, **item})
        return
    if not (marks.checkpoints or marks.recoveries or marks.forks):
        app.err.print(f"session {s.id} records no checkpoint (see Session.checkpoint)")
        return
    table = Table(box=None, pad_edge=False, header_style="bold", title_justify="left",
                  title=f"checkpoints ({len(marks.checkpoints)})")
    for name in ("seq", "stage", "revision", "run", "taken", "state"):
        table.add_column(name, no_wrap=name != "state", justify="right" if name == "seq"
                         else "left")
    for cp in marks.checkpoints:
        if cp["valid"]:
            state = "[green]valid[/]"
        else:
            moved = (f" ({cp['workspace_revision']} -> {cp['current_revision']})"
                     if cp["current_revision"] else "")
            state = (f"[red]invalidated[/] at seq {cp['invalidated_by']}: "
                     f"{safe((cp['reason'] or 'no reason') + moved)}")
        table.add_row(str(cp["seq"]), safe(cp["stage"] or "?"),
                      safe(cp["workspace_revision"] or "-"), safe(cp["run_id"] or "-"),
                      when(cp["time"]), state)
    app.out.print(table)
    app.out.print(f"\n[bold]recovery attempts[/] ({len(marks.recoveries)})")
    for rec in marks.recoveries:
        outcome = rec["outcome"] or "no outcome recorded"
        style = {"resumed": "green", "restarted": "green", "paused": "yellow"}.get(
            rec["outcome"] or "", "red")
        frm = (f"checkpoint {rec['checkpoint']} ({safe(rec['stage'])})"
               if rec["checkpoint"] is not None else "no valid checkpoint")
        app.out.print(f"  seq {rec['seq']}  {safe(rec['action'] or '?')} from {frm}  -> "
                      f"[{style}]{safe(outcome)}[/]"
                      + (f" at seq {rec['outcome_seq']}" if rec["outcome_seq"] is not None
                         else "")
                      + (f", awaiting {safe(rec['awaiting'])}" if rec["awaiting"] else ""))
        if rec["invalidated"]:
            app.out.print(f"    invalidated checkpoint(s) {rec['invalidated']} first")
        for c in rec["checks"]:
            verdict = "[green]ok  [/]" if c["ok"] else "[red]FAIL[/]"
            app.out.print(f"    {verdict} {safe(c['name']):<22} {safe(c['detail'])}")
    if marks.forks:
        app.out.print(f"\n[bold]forks from a checkpoint[/] ({len(marks.forks)})")
        for f in marks.forks:
            other = "child" if f["role"] == "parent" else "parent"
            app.out.print(f"  seq {f['seq']}  from checkpoint {f['checkpoint']} "
                          f"({safe(f['stage'])}), {other} session "
                          f"{safe(f['other_session'] or '-')}: {safe(f['reason'] or '')}")


__all__ = ["cost_cell", "register"]
