"""Scoped memory and forgetting: ``memory ls|show|search``, ``erase``, ``rm``
and ``retention``."""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any

import click

from ..errors import RetentionRulesError
from ..memory import Identity, MemoryItem
from ..memory.retention_rules import KINDS, SESSION_MEMORY, RetentionRules
from .app import App, fail, printable, session_argument, summary


def register(cli: click.Group) -> None:
    cli.add_command(memory)
    cli.add_command(erase)
    cli.add_command(rm)
    cli.add_command(retention)


def _identity(f: Any) -> Any:
    for option in reversed((
            click.option("--tenant", required=True, help="The tenant (every query is scoped)."),
            click.option("--user", help="The user within the tenant."),
            click.option("--session", "session_id", metavar="SESSION",
                         help="The session (its session-scope items)."),
            click.option("--type", "types", multiple=True,
                         help="Only this type: policy, preference, fact, episode, trajectory "
                              "(repeatable)."),
            click.option("--json", "as_json", is_flag=True, help="One JSON object per item."))):
        f = option(f)
    return f


def _line(app: App, item: MemoryItem, as_json: bool) -> None:
    # a key (like content) is untrusted text: its controls are shown, never obeyed
    if as_json:
        app.json(dataclasses.asdict(item))   # (C1 controls escaped too)
        return
    key = printable(item.key, newlines=False) if item.key is not None else "-"
    app.echo(f"{item.id}  v{item.version}  {item.scope:<7} {item.type:<10} {item.state:<11} "
             f"{key:<12} {summary(item.content, 70)}")


def _view(app: App, tenant: str, user: str | None, session_id: str | None) -> Any:
    sid = app.session(session_id).id if session_id else None
    return app.store().memory(Identity(tenant, user=user, session=sid))


@click.group()
def memory() -> None:
    """List, show and search scoped memory (as one identity sees it)."""


@memory.command("ls")
@_identity
@click.option("--state", "states", multiple=True,
              help="Only this state: provisional, active, quarantined, revoked (repeatable; "
                   "default: all but revoked).")
@click.pass_obj
def memory_ls(app: App, tenant: str, user: str | None, session_id: str | None,
              types: tuple[str, ...], as_json: bool, states: tuple[str, ...]) -> None:
    """The items an identity may see."""
    view = _view(app, tenant, user, session_id)
    for item in view.list(types=list(types) or None,
                          states=list(states) or ("provisional", "active", "quarantined")):
        _line(app, item, as_json)


@memory.command("show")
@click.argument("item")
@_identity
@click.pass_obj
def memory_show(app: App, item: str, tenant: str, user: str | None, session_id: str | None,
                types: tuple[str, ...], as_json: bool) -> None:
    """One item and every version of it."""
    for version in _view(app, tenant, user, session_id).history(item):
        _line(app, version, as_json)


@memory.command("search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@_identity
@click.pass_obj
def memory_search(app: App, query: str, limit: int, tenant: str, user: str | None,
                  session_id: str | None, types: tuple[str, ...], as_json: bool) -> None:
    """Full-text search within an identity's scopes."""
    view = _view(app, tenant, user, session_id)
    for item in view.search(query, limit=limit, types=list(types) or None):
        _line(app, item, as_json)


def _confirm(command: str, question: str, done: str) -> None:
    """An irreversible command asks on a terminal first, and is refused
    without one (``--yes`` skips the question)."""
    verb = "delete" if command == "rm" else command
    if not sys.stdin.isatty():
        fail(f"{command} cannot be undone and there is no terminal to ask",
             f"pass --yes to {verb} without asking")
    if not click.confirm(f"{question} This cannot be undone"):
        fail(f"nothing {done}", "pass --yes to skip the question")


@click.command()
@session_argument()
@click.argument("seqs", nargs=-1, required=True, type=click.IntRange(min=0), metavar="SEQ...")
@click.option("--reason", required=True, help="Why (kept in the tombstone).")
@click.option("--actor", help="Who asked (kept in the tombstone).")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def erase(app: App, session: str, seqs: tuple[int, ...], reason: str, actor: str | None,
          yes: bool) -> None:
    """Erase event payloads under a tombstone and purge every copy (caches,
    full-text index, free pages, the WAL); the log still verifies."""
    s = app.session(session)
    if not yes:
        _confirm("erase", f"erase {len(seqs)} event payload(s) of {s.id}?", "erased")
    report = app.store().erase(s.id, list(seqs), reason=reason, actor=actor)
    for name, value in dataclasses.asdict(report).items():
        app.echo(f"{name:<26} {printable(str(value), newlines=False)}")


def _rules(given: tuple[str, ...], session_memory: str | None) -> RetentionRules | None:
    """The store rules named on the command line (None: none)."""
    if not given and session_memory is None:
        return None
    values: dict[str, str] = {}
    for text in given:
        kind, sep, value = text.partition("=")
        if not sep:
            fail(f"--rule {text!r} is not KIND=VALUE", f"kinds: {', '.join(KINDS)}")
        values[kind.strip()] = value.strip()
    if session_memory is not None:
        values["session_memory"] = session_memory
    try:
        return RetentionRules.of(values)
    except RetentionRulesError as exc:
        fail(str(exc), f"kinds: {', '.join(KINDS)}; values: a span (7d, 12h, 30m, 90s, "
             "500ms), kept or until_closed")


@click.command()
@session_argument()
@click.option("--reason", required=True, help="Why (kept in the deletion record).")
@click.option("--actor", help="Who asked (kept in the deletion record).")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def rm(app: App, session: str, reason: str, actor: str | None, yes: bool) -> None:
    """Delete a session: every payload erased under tombstones and purged,
    the session gone from every listing, its id refused from then on; a
    record of who deleted it, when and why stays.  Refused while forks or
    subagents of it remain (delete them first)."""
    s = app.session(session)
    if not yes:
        _confirm("rm", f"delete session {s.id} ({s.last_seq + 1} events)?", "deleted")
    report = app.store().delete_session(s.id, reason=reason, actor=actor)
    for name, value in dataclasses.asdict(report).items():
        if name != "purge":
            app.echo(f"{name:<16} {printable(str(value), newlines=False)}")
    for line in (report.purge.purged + report.purge.residues) if report.purge else ():
        app.echo(f"{'purge':<16} {printable(line, newlines=False)}")


@click.command()
@click.option("--plan", "plan_only", is_flag=True,
              help="List what would go, writing nothing (the default).")
@click.option("--apply", "apply_now", is_flag=True, help="Revoke and erase now.")
@click.option("--rule", "rules", multiple=True, metavar="KIND=VALUE",
              help=f"A store rule for one kind ({', '.join(KINDS)}): a span (7d, 12h, 30m), "
                   "kept or until_closed; repeatable.")
@click.option("--session-memory", type=click.Choice(SESSION_MEMORY),
              help="until_closed: revoke session-scope memory once its session is closed.")
@click.option("--now-ms", type=click.IntRange(0, 2**63 - 1),
              help="The time to apply them at, in ms since the epoch (default: now).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per removal.")
@click.option("--save", is_flag=True,
              help="Save the rules given with --rule in the store: every store opened on it "
                   "applies them.")
@click.option("--clear", is_flag=True, help="Remove the rules saved in the store.")
@click.option("--actor", default="trajlog-cli", show_default=True,
              help="Who saves or clears the rules (kept in the rules' audit).")
@click.pass_obj
def retention(app: App, plan_only: bool, apply_now: bool, rules: tuple[str, ...],
              session_memory: str | None, now_ms: int | None, as_json: bool, save: bool,
              clear: bool, actor: str) -> None:
    """Show (--plan, the default) or --apply what retention removes: the
    sessions' recorded policies and the store rules -- those given with
    --rule, else those saved in the store (each removal a tombstone whose
    reason names its rule).  --save stores the --rule rules, --clear removes
    them."""
    if plan_only and apply_now:
        fail("--plan and --apply exclude each other")
    parsed = _rules(rules, session_memory)
    if save and parsed is None:
        fail("--save saves the rules given with --rule or --session-memory")
    if save and clear:
        fail("--save and --clear exclude each other")
    store = app.store()
    if save or clear:
        item = store.set_retention(parsed if save else None, actor=actor)
        if as_json:
            app.json({"saved" if save else "cleared": item, "rules": None if parsed is None
                      else parsed.to_dict()})
        else:
            app.echo(f"{'saved' if save else 'cleared'} the store's retention rules "
                     f"(memory item {item})")
        if not (plan_only or apply_now):
            return
    stored = store.stored_retention() if parsed is None else parsed
    # (this command applies the rules itself: no background sweeper)
    store.retention = None if stored is None else dataclasses.replace(stored, sweep_seconds=None)
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    if not apply_now:
        due_items, due_events = store.retention_plan(now)
        for item_id, why in due_items:   # (a reason may quote an event type: untrusted)
            if as_json:
                app.json({"revoke": item_id, "reason": why})
            else:
                app.echo(f"would revoke item {item_id}  ({printable(why, newlines=False)})")
        for session_id, seqs, why in due_events:
            if as_json:
                app.json({"erase": session_id, "seqs": seqs, "reason": why})
            else:
                app.echo(f"would erase {len(seqs)} event(s) of {session_id}  "
                         f"({printable(why, newlines=False)})")
        if not due_items and not due_events and not as_json:
            app.echo("nothing is due")
        return
    done = store.apply_retention(now)
    if as_json:
        for item_id in done.items_revoked:
            app.json({"revoked": item_id})
        for session_id, seq in done.events_erased:
            app.json({"erased": session_id, "seq": seq})
        return
    app.echo(f"revoked {len(done.items_revoked)} item(s), erased {len(done.events_erased)} "
             f"event payload(s), {len(done.purges)} purge(s)")


__all__ = ["register"]
