"""``trajlog probes``: plant the five pollutants in a scratch fork of a
session and report which reached the model input under a policy
(:mod:`trajlog.api.probes`, docs/probes.md)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..api.probes import run_probes
from ..errors import InvalidArgumentError
from ..projections.context import ContextPolicy
from .app import EXIT_DEFECT, EXIT_OK, App, fail, safe, session_argument


def register(cli: click.Group) -> None:
    cli.add_command(probes)


def policy_named(spec: str) -> ContextPolicy:
    """``default``, ``strict``, or a JSON file holding a policy's
    :meth:`ContextPolicy.config` (what a ``context/injection`` records)."""
    if spec == "default":
        return ContextPolicy()
    if spec == "strict":
        return ContextPolicy.strict()
    path = Path(spec)
    if not path.is_file():
        fail(f"--policy {spec}: not 'default', 'strict' or a JSON file")
    try:
        return ContextPolicy.from_config(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, InvalidArgumentError) as exc:
        fail(f"--policy {spec}: {exc}")


@click.command()
@session_argument()
@click.option("--policy", "policy_spec", default="default", show_default=True,
              metavar="default|strict|FILE.json",
              help="The context policy to probe: a named one, or a JSON file with a policy's "
                   "config (as a context/injection records it).")
@click.option("--model", help="The target model the context is built for.")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@click.pass_obj
def probes(app: App, session: str, policy_spec: str, model: str | None, as_json: bool) -> int:
    """Plant a stale file snapshot, a rejected conclusion, another branch's
    log, an injected web instruction and an expired approval into a scratch
    fork of SESSION (deleted afterwards; SESSION is only read), build the
    context under the policy and report which reached the model input.
    Exit status 1 when any did: gate an upgrade on it."""
    policy = policy_named(policy_spec)
    s = app.session(session)
    report = run_probes(app.store(), s.id, policy, target_model=model)
    if as_json:
        app.json({"session": report.session, "policy": report.policy,
                  "policy_version": report.policy_version, "ok": report.ok,
                  "probes": [{"name": p.name, "leaked": p.leaked, "where": list(p.where),
                              "reason": p.reason, "inconclusive": p.inconclusive,
                              "marker": p.marker}
                             for p in report.probes]})
    else:
        app.out.print(f"[bold]pollution probes[/] of {s.id} under policy "
                      f"{safe(report.policy)} v{report.policy_version}")
        for p in report.probes:
            verdict = (f"[red]LEAKED[/] into the {' and '.join(p.where)}" if p.leaked
                       else f"[yellow]inconclusive[/] (only {safe(p.reason or 'not shown')}: "
                            "no rule kept it out)" if p.inconclusive
                       else f"[green]kept out[/] ({safe(p.reason or 'not shown')})")
            app.out.print(f"  {p.name:<20} {verdict}")
        app.out.print("no pollutant reached the model input" if report.ok else
                      f"[red]{len(report.leaked)} pollutant(s) reached the model input, "
                      f"{len(report.inconclusive)} inconclusive[/]")
    return EXIT_OK if report.ok else EXIT_DEFECT


__all__ = ["policy_named", "register"]
