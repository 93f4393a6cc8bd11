"""The ``trajlog`` command: one click group, the commands registered from
the modules named after what they do, and one place that turns every error
into a single line with a hint and an exit code (see :mod:`.app`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click
from click.exceptions import NoArgsIsHelpError
from click.shell_completion import get_completion_class

from .._version import __version__
from ..errors import TrajlogError
from . import (
    branch_views,
    interop,
    maintenance,
    memory,
    pollution,
    run_views,
    search,
    sessions,
    views,
)
from .app import (
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    App,
    Failure,
    one_line,
    refused,
)
from .demo import demo as run_demo

HELP = f"""Record, inspect, verify and view AI-agent session logs.

Every command reads the store at --db (default ./trajlog.db, or the TRAJLOG_DB
environment variable; a postgresql:// URL names a PostgreSQL store, --tenant its
tenant); a session is named by its id or a unique prefix of it.
Read commands refuse a store that does not exist; 'import' and 'demo' create
one.

Start with 'trajlog demo', then 'trajlog ls'.

{EXIT_CODES}
"""


@click.group(help=HELP, context_settings={"help_option_names": ["-h", "--help"],
                                          "max_content_width": 100})
@click.option("--db", envvar="TRAJLOG_DB", default="trajlog.db", show_default=True,
              metavar="PATH", help="The store: a file, or a postgresql:// URL (env TRAJLOG_DB).")
@click.option("--tenant", envvar="TRAJLOG_TENANT", default=None, metavar="NAME",
              help="The tenant of a postgresql:// store to work in (env TRAJLOG_TENANT).")
@click.version_option(__version__, prog_name="trajlog")
@click.pass_context
def cli(ctx: click.Context, db: str, tenant: str | None) -> None:
    app = App(db, tenant=tenant)
    ctx.obj = app
    ctx.call_on_close(app.close)


@cli.command("demo")
@click.pass_obj
def demo_command(app: App) -> int:
    """Tour the product on the store at --db: record, crash and load, fork,
    subagents, views, context, memory, erase, export, view; then print the
    commands that explore what it made."""
    if app.db == ":memory:" or app.db.startswith("file:"):
        raise Failure("the tour needs a store file (a second process crashes into it)",
                      "give a path with --db, or none for ./trajlog.db")
    return run_demo(app.db)


@cli.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    Load it with: eval "$(trajlog completion bash)" (or zsh; for fish:
    trajlog completion fish | source). Session ids complete from the store.
    """
    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(cli, {}, "trajlog", "_TRAJLOG_COMPLETE").source())


for module in (sessions, views, run_views, maintenance, interop, memory, search, pollution,
               branch_views):
    module.register(cli)


def _set_db(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.find_object(App).db = value   # type: ignore[union-attr]


def _db_everywhere(group: click.Group) -> None:
    """``--db`` works after the command name too (``trajlog ls --db x.db``,
    ``trajlog memory --db x.db ls``)."""
    for command in group.commands.values():
        command.params.append(click.Option(
            ["--db"], metavar="PATH", expose_value=False, callback=_set_db,
            help="The store (default: the one before the command, ./trajlog.db, or "
                 "TRAJLOG_DB)."))
        if isinstance(command, click.Group):
            _db_everywhere(command)


_db_everywhere(cli)


def _usage(exc: click.UsageError) -> str:
    command = exc.ctx.command_path if exc.ctx is not None else "trajlog"
    return (f"trajlog: error: {one_line(exc.format_message())} "
            f"(hint: see '{command} --help')")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit code (raises only SystemExit,
    and only for shell completion, whose protocol exits)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get("_TRAJLOG_COMPLETE"):
        cli.main(args=args, prog_name="trajlog")
    try:
        # not cli.main(): it turns a broken pipe into exit code 1 and prints
        # usage errors on several lines; every outcome is mapped here instead
        with cli.make_context("trajlog", args) as ctx:
            result: Any = cli.invoke(ctx)
        return result if isinstance(result, int) else EXIT_OK
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except NoArgsIsHelpError as exc:   # `trajlog`, `trajlog memory`: the help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(
            click.Context(cli, info_name="trajlog")))
        return EXIT_OK
    except click.UsageError as exc:
        click.echo(_usage(exc), err=True)
        return EXIT_USAGE
    except Failure as exc:
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:
        click.echo(f"trajlog: error: {one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("trajlog: interrupted", err=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:   # `trajlog show ... | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except TrajlogError as exc:
        failure = refused(exc)
        failure.show()
        return failure.exit_code
    except OSError as exc:
        click.echo(f"trajlog: error: {one_line(str(exc))} (hint: check the path and its "
                   "permissions)", err=True)
        return 3
    except Exception as exc:
        if os.environ.get("TRAJLOG_DEBUG"):
            raise
        click.echo(f"trajlog: internal error: {type(exc).__name__}: {one_line(str(exc))} "
                   "(hint: TRAJLOG_DEBUG=1 shows the traceback; please report it)", err=True)
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
