"""What every command shares: the store option, session ids by prefix,
output (rich tables on a terminal, JSON on request), progress bars, and the
one-line errors with a hint and a documented exit code.

Exit codes (``trajlog --help`` prints them too):

* 0 -- done;
* 1 -- a check found a defect (``verify``) or an import met a conflict;
* 2 -- usage: a bad option or argument, no store at ``--db``, no session with
  that id (or a prefix that starts several);
* 3 -- trajlog refused the operation with a typed error (a damaged log, a
  lease held by a live writer, a fork inside an open turn, a bad input file);
* 70 -- an internal error (a bug: ``TRAJLOG_DEBUG=1`` shows the traceback);
* 130 -- interrupted (Ctrl-C).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from .. import errors
from ..api import Session, schema_of
from ..api.store import Store
from ..api.store import open as open_store
from ..memory.retention_rules import RetentionRules
from ..storage.factory import exists, is_server, redact
from ..storage.factory import kind as backend_kind

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_DEFECT, EXIT_USAGE, EXIT_REFUSED, EXIT_INTERNAL, EXIT_INTERRUPTED = (
    0, 1, 2, 3, 70, 130)
EXIT_CODES = f"""Exit codes: {EXIT_OK} done; {EXIT_DEFECT} a check found a defect (verify) or an
import met a conflict; {EXIT_USAGE} usage (bad option, no store at --db, no such session);
{EXIT_REFUSED} trajlog refused the operation (a damaged log, a live writer's lease, a bad input
file); {EXIT_INTERNAL} internal error (TRAJLOG_DEBUG=1 shows the traceback); {EXIT_INTERRUPTED}
interrupted."""

# The hint printed after each kind of refusal (the most specific class wins).
HINTS: dict[type[Exception], str] = {
    errors.CorruptionError: "run 'trajlog verify' to list every defect; nothing was changed",
    errors.TornTailError: "the last write was cut; 'trajlog load SESSION' drops and closes it",
    errors.LiveWriterError: "its writer is still running; stop it, or look with "
                            "'trajlog inspect SESSION' (writes nothing)",
    errors.LeaseHeldError: "another writer holds the session's lease; retry when it is done",
    errors.ForkUnavailableError: "fork at a seq whose turn has ended "
                                 "(see 'trajlog trajectory SESSION')",
    errors.ImportFormatError: "check the file at that line, or name its format with --format",
    errors.ImportConflictError: "the stored session holds other events; import into "
                                "another store with --db",
    errors.SchemaError: "this is not a trajlog store, or another program changed its schema",
    errors.StoreBusyError: "another process holds the database; retry",
    errors.StoreDamagedError: "the database file itself is damaged: 'trajlog verify' reports "
                              "it; restore a backup, or export the sessions that still read",
    errors.StoreError: "check the path, the disk and its permissions",
    errors.MemoryAccessError: "give the identity that owns it (--tenant, --user, --session)",
    errors.MemoryNotFoundError: "list the items with 'trajlog memory ls --tenant T'",
    errors.SessionDeletedError: "it was deleted; only the record of its deletion remains",
    errors.DependentSessionsError: "delete its forks and subagents first ('trajlog tree "
                                   "SESSION')",
    errors.ErasureError: "see 'trajlog erase --help'",
    errors.InvalidArgumentError: "see the command's --help",
}


class Failure(click.ClickException):
    """A refusal the CLI reports as one line, with a hint and an exit code."""

    def __init__(self, message: str, hint: str | None = None, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        if hint is None:   # every error says where to look next
            ctx = click.get_current_context(silent=True)
            hint = f"see '{ctx.command_path if ctx else 'trajlog'} --help'"
        self.hint = hint
        # click declares exit_code a ClassVar but reads it from the instance: each
        # refusal carries its own code
        self.exit_code = code  # type: ignore[misc]

    def format_message(self) -> str:
        return one_line(self.message) + (f" (hint: {self.hint})" if self.hint else "")

    def show(self, file: Any = None) -> None:
        click.echo(f"trajlog: error: {self.format_message()}", err=True)


def one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", "; ", str(text).strip())


def refused(exc: errors.TrajlogError) -> Failure:
    """The :class:`Failure` for a typed trajlog error: a bad argument is a
    usage error (2), anything else a refusal (3)."""
    hint = next((HINTS[k] for k in type(exc).__mro__ if k in HINTS), "see 'trajlog --help'")
    usage = isinstance(exc, (errors.SessionNotFoundError, errors.InvalidArgumentError)) and \
        not isinstance(exc, errors.SerializationError)
    return Failure(f"{type(exc).__name__}: {exc}", hint, EXIT_USAGE if usage else EXIT_REFUSED)


# C0 controls but tab and newline, DEL, and the C1 controls (a terminal obeys
# ESC and CSI sequences): session content is untrusted, shown, never obeyed.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_C1 = re.compile("[\x80-\x9f]")


def printable(text: str, newlines: bool = True) -> str:
    """``text`` with control characters shown as ``\\xNN`` (and newlines as
    ``\\n`` unless ``newlines``), so that stored content cannot drive the
    terminal it is printed on."""
    text = _CONTROLS.sub(lambda m: f"\\x{ord(m[0]):02x}", text)
    return text if newlines else text.replace("\n", "\\n")


def safe(text: Any) -> str:
    """Untrusted text for rich: control characters shown, markup escaped."""
    return escape(printable(str(text)))


def _width() -> int:
    # a pipe or a file gets whole lines: nothing cut to a terminal's width
    return shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else 100_000


@dataclass
class App:
    """The state of one invocation: the store path and the consoles."""

    db: str
    tenant: str | None = None
    out: Console = field(default_factory=lambda: Console(width=_width(), soft_wrap=False,
                                                         highlight=False))
    err: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))
    _store: Store | None = None

    def store(self, *, create: bool = False) -> Store:
        """The store at ``--db``; a read command (``create=False``) refuses a
        path that does not exist instead of making an empty store there."""
        if self._store is None:
            if not create:
                self._readable()
            # no background sweeper in a command (a read writes nothing): the
            # stored rules are applied only by `trajlog retention`, when asked
            self._store = open_store(self.db, tenant=self.tenant, retention=RetentionRules())
        return self._store

    def _readable(self) -> None:
        """Refuse, before opening, what a read must not change: no store, a
        file that is not a store (opening would make one of it), a store of
        an older schema (opening would migrate it)."""
        if not exists(self.db):
            raise Failure(f"no store at {self.shown}",
                          "give one with --db or TRAJLOG_DB; 'trajlog demo' makes one")
        if not is_server(self.db) and os.path.isdir(self.db):
            raise Failure(f"{self.shown} is a directory", "give the store's file with --db")
        version = schema_of(self.db)
        if version is None:
            raise Failure(f"{self.shown} is not a trajlog store",
                          "give a store with --db; 'trajlog import' or 'trajlog demo' make one")
        current = backend_kind(self.db).schema_version
        if version < current:
            raise Failure(f"{self.shown} was written by an older trajlog (schema {version}; this "
                          f"one reads {current})",
                          f"run 'trajlog migrate --db {self.shown}' first: it verifies and "
                          "rewrites each session")

    @property
    def shown(self) -> str:
        """``--db`` as messages print it (a URL's password hidden)."""
        return redact(self.db)

    def session(self, prefix: str) -> Session:
        """The session whose id starts with ``prefix`` (unique)."""
        store = self.store()
        return store.session(resolve(store, prefix))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def discard(self) -> None:
        """Close and delete the store this invocation created (and left empty)."""
        self.close()
        if is_server(self.db):
            return   # (a server store's schema stays; it holds nothing)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.db + suffix)

    def echo(self, text: str = "") -> None:
        """Plain text to stdout, flushed (so ``tail -f | grep`` sees it now)."""
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def json(self, value: Any) -> None:
        """One JSON object on one line (C1 controls escaped as well: json
        leaves them raw, and a terminal may obey them)."""
        text = json.dumps(value, ensure_ascii=False, default=str)
        self.echo(_C1.sub(lambda m: f"\\u{ord(m[0]):04x}", text))

    @contextmanager
    def progress(self, label: str, total: int | None = None,
                 unit: str = "sessions") -> Iterator[Any]:
        """A progress bar on stderr while the block runs -- only on a
        terminal; yields ``update(done)``."""
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn(unit), TimeRemainingColumn(), console=self.err,
                       transient=True, disable=not self.err.is_terminal,
                       # stdout to a file or pipe stays stdout (rich would send it to
                       # the bar's console); on the same terminal it prints above the bar
                       redirect_stdout=sys.stdout.isatty(), redirect_stderr=False)
        with bar:
            task = bar.add_task(label, total=total)

            def update(done: int, of: int | None = None) -> None:
                bar.update(task, completed=done, total=of or bar.tasks[0].total)
            yield update


def resolve(store: Store, prefix: str) -> str:
    """The one session id that starts with ``prefix``."""
    prefix = prefix.strip().lower()
    if not prefix:
        raise Failure("an empty session id", "see 'trajlog ls'")
    found = [h.id for h in store.sessions(include_subagents=True) if h.id.startswith(prefix)]
    if len(found) == 1:
        return found[0]
    if not found and len(prefix) == 36:
        store.session(prefix)   # (a deleted one says so: who, when, why)
    if not found:
        raise Failure(f"no session id starts with {prefix!r}", "see 'trajlog ls --all'")
    raise Failure(f"{prefix!r} starts {len(found)} session ids ("
                  + ", ".join(f[:12] for f in found[:4]) + ("..." if len(found) > 4 else "")
                  + ")", "give more of the id")


def fail(message: str, hint: str | None = None, code: int = EXIT_USAGE) -> NoReturn:
    raise Failure(message, hint, code)


def when(ms: int | None) -> str:
    """A time in milliseconds since the epoch, as local date and time."""
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def clock(ms: int | None) -> str:
    """A time of day with milliseconds (event lists)."""
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S.%f")[:-3]


def duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms // 60_000} min {ms % 60_000 // 1000} s"


def summary(data: Any, width: int = 60) -> str:
    """``data`` as compact JSON, cut to ``width`` characters."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"),
                                                          ensure_ascii=False, default=str)
    text = printable(text, newlines=False)
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def parse_time(value: str) -> int:
    """``2026-11-30``, ``2026-11-30T12:00``, or ``7d`` / ``12h`` / ``30m`` ago,
    as milliseconds since the epoch."""
    ago = re.fullmatch(r"(\d+)([dhm])", value.strip())
    if ago:
        seconds = int(ago[1]) * {"d": 86_400, "h": 3_600, "m": 60}[ago[2]]
        return int((dt.datetime.now().timestamp() - seconds) * 1000)
    try:
        return int(dt.datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        fail(f"not a date: {value!r}", "use 2026-11-30, 2026-11-30T12:00, or 7d / 12h / 30m")


def kind(header: Any) -> str:
    if header.origin == "subagent":
        return "subagent"
    return "fork" if header.parent_session else "session"




def complete_session(ctx: click.Context, param: click.Parameter,
                     incomplete: str) -> list[click.shell_completion.CompletionItem]:
    """Shell completion of a SESSION argument: the ids in the store at --db."""
    db = ctx.find_root().params.get("db") or os.environ.get("TRAJLOG_DB", "trajlog.db")
    if not exists(db):
        return []
    try:
        with open_store(db, retention=RetentionRules()) as store:
            return [click.shell_completion.CompletionItem(h.id, help=kind(h))
                    for h in store.sessions(include_subagents=True)
                    if h.id.startswith(incomplete.lower())][:200]
    except errors.TrajlogError:
        return []


def session_argument(name: str = "session", **kw: Any) -> Callable[[F], F]:
    """A SESSION argument: an id or a unique prefix, completed from the store."""
    decorator: Callable[[F], F] = click.argument(name, metavar="SESSION",
                                                 shell_complete=complete_session, **kw)
    return decorator


__all__ = [
    "EXIT_CODES",
    "App",
    "Failure",
    "clock",
    "complete_session",
    "duration",
    "fail",
    "kind",
    "one_line",
    "parse_time",
    "refused",
    "resolve",
    "session_argument",
    "summary",
    "when",
]
