"""``trajlog branches``: the branches of investigation of a session -- each
one's frozen start, rebases, merges (status and missing gate parts) and
state, read from the log (:func:`trajlog.projections.branches.fold`)."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from ..projections.branches import Branch
from .app import EXIT_OK, App, safe, session_argument

STATE_STYLE = {"open": "cyan", "merged": "green", "abandoned": "yellow"}


def register(cli: click.Group) -> None:
    cli.add_command(branches)


def branch_json(b: Branch) -> dict[str, Any]:
    """One branch as JSON values."""
    return {"name": b.name, "state": b.state, "started_seq": b.started_seq,
            "from_seq": b.from_seq, "base": b.base, "frozen": b.frozen, "events": b.events,
            "rebases": [{"seq": s, "onto_seq": o, "reason": r} for s, o, r in b.rebases],
            "merges": [{"seq": m.seq, "status": m.status, "missing": list(m.missing),
                        "adopted": len(m.adopted), "rejected": len(m.rejected),
                        "unresolved": len(m.unresolved)} for m in b.merges],
            "abandoned": None if b.abandoned is None else {
                "seq": b.abandoned[0], "reason": b.abandoned[1]}}


def _frozen(frozen: dict[str, Any]) -> str:
    parts = []
    if frozen.get("workspace_revision"):
        parts.append(f"rev {frozen['workspace_revision']}")
    if frozen.get("data_samples"):
        parts.append(f"samples {','.join(map(str, frozen['data_samples']))}")
    tools = frozen.get("tool_versions") or {}
    parts += [f"{k} {v}" for k, v in tools.items()]
    if frozen.get("permissions"):
        parts.append(f"perms {','.join(map(str, frozen['permissions']))}")
    return "; ".join(parts) or "-"


def _merges(b: Branch) -> str:
    return ", ".join(f"seq {m.seq} {m.status}" + (f" (missing {'+'.join(m.missing)})"
                                                   if m.missing else "")
                     for m in b.merges) or "-"


@click.command()
@session_argument()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per branch.")
@click.pass_obj
def branches(app: App, session: str, as_json: bool) -> int:
    """The branches of investigation of a session (Session.start_branch):
    where each started and what its start froze (workspace revision, data
    samples, tool versions, permissions), its rebases, its merges -- fact or
    reference-only, with the gate parts missing -- and its state (open,
    merged, abandoned)."""
    s = app.session(session)
    found = s.branches()
    if as_json:
        for b in found.values():
            app.json(branch_json(b))
        return EXIT_OK
    if not found:
        app.err.print(f"session {s.id} records no branch (see Session.start_branch)")
        return EXIT_OK
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("branch", "state", "from", "frozen start", "rebases", "events", "merges"):
        table.add_column(name)
    for b in found.values():
        rebases = ", ".join(f"seq {o} ({r})" for _, o, r in b.rebases) or "-"
        style = STATE_STYLE.get(b.state, "default")
        state = b.state if b.abandoned is None else f"{b.state}: {b.abandoned[1]}"
        table.add_row(safe(b.name), f"[{style}]{safe(state)}[/]", f"seq {b.from_seq}",
                      safe(_frozen(b.frozen)), safe(rebases), str(b.events), safe(_merges(b)))
    app.out.print(table)
    return EXIT_OK
