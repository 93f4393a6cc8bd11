"""Search across sessions: ``trajlog search`` (and the derived index's
drop and rebuild)."""

from __future__ import annotations

import click

from .app import App, fail, parse_time, printable, when


def register(cli: click.Group) -> None:
    cli.add_command(search)


@click.command()
@click.argument("words", nargs=-1, metavar="[QUERY]...")
@click.option("--limit", type=click.IntRange(min=1, max=10_000), default=20, show_default=True)
@click.option("--session", "sessions", multiple=True, metavar="SESSION",
              help="Only this session (id or unique prefix; repeatable).")
@click.option("--identity", metavar="TENANT[/USER]",
              help="Only sessions whose header names this tenant (and user).")
@click.option("--cwd", help="Only sessions recorded in this directory.")
@click.option("--type", "types", multiple=True, metavar="TYPE",
              help="Only this event type; 'tool/' or 'tool/*' for a family (repeatable).")
@click.option("--since", metavar="WHEN", help="Events at or after: 2026-11-30, 7d, 12h.")
@click.option("--until", metavar="WHEN", help="Events at or before: 2026-11-30, 7d, 12h.")
@click.option("--branch", help="Only events of this branch_id.")
@click.option("--data-class", type=click.Choice(["public", "internal", "internal-redacted",
                                                 "restricted"]), help="Only this data class.")
@click.option("--no-catch-up", is_flag=True,
              help="Search what is indexed; do not index new events first.")
@click.option("--rebuild-index", is_flag=True,
              help="Drop the derived index and make it again from the logs (then search, if "
                   "QUERY is given).")
@click.option("--drop-index", is_flag=True, help="Drop the derived index and exit.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per hit.")
@click.pass_obj
def search(app: App, words: tuple[str, ...], limit: int, sessions: tuple[str, ...],
           identity: str | None, cwd: str | None, types: tuple[str, ...], since: str | None,
           until: str | None, branch: str | None, data_class: str | None, no_catch_up: bool,
           rebuild_index: bool, drop_index: bool, as_json: bool) -> None:
    """Search the text of every session's events (messages, tool calls and
    results, summaries) for every word of QUERY: ranked hits, each with its
    session, seq, a snippet and the command that shows it. The index is
    derived from the logs and caught up before the search."""
    query = " ".join(words)
    store = app.store()
    if drop_index:
        store.drop_search_index()
        app.echo("the search index was dropped (the next search makes it again)")
        return
    if rebuild_index:
        n = store.rebuild_search_index()
        app.echo(f"the search index was rebuilt: {n:,} event(s)")
    if not query:
        if rebuild_index:
            return
        fail("give a QUERY", "trajlog search 'flaky test'")
    tenant, user = None, None
    if identity is not None:
        tenant, _, rest = identity.partition("/")
        user = rest or None
        if not tenant:
            fail(f"not an identity: {identity!r}", "use TENANT or TENANT/USER")
    ids = [app.session(s).id for s in sessions] or None
    result = store.search(query, limit=limit, sessions=ids, tenant=tenant, user=user, cwd=cwd,
                          since_ms=parse_time(since) if since else None,
                          until_ms=parse_time(until) if until else None,
                          types=list(types) or None, branch=branch, data_class=data_class,
                          catch_up=not no_catch_up)
    for hit in result:
        if as_json:
            app.json({"session": hit.session_id, "seq": hit.seq, "type": hit.type,
                      "time": hit.time, "score": hit.score, "snippet": hit.snippet,
                      "command": hit.command, "viewer": hit.viewer_anchor})
        else:
            app.echo(f"{hit.session_id} {hit.seq:>6}  {when(hit.time)}  {hit.type}")
            app.echo("    " + printable(hit.snippet, newlines=False))
            app.echo("    " + hit.command)
    if not as_json:
        app.echo(f"{len(result)} hit(s); events committed before {when(result.as_of_ms)} "
                 "searched" if result.caught_up else f"{len(result)} hit(s) in the index")
