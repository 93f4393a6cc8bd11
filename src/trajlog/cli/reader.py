"""``--view ROLE`` / ``--model MODEL``: the reader view ``show``, ``chat``,
``view`` and ``export`` apply (docs/reader-views.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..projections.reader_views import VIEWS, ReaderView

F = TypeVar("F", bound=Callable[..., Any])


def view_options(command: F) -> F:
    """Add ``--view`` and ``--model`` to ``command`` (its ``view`` and
    ``view_model`` parameters)."""
    command = click.option(
        "--model", "view_model", metavar="MODEL",
        help="The model an external-model view is for (default: the session's current "
             "model).")(command)
    return click.option(
        "--view", "view", type=click.Choice(VIEWS),
        help="Read as this reader: developer (secrets and restricted data hidden), auditor "
             "(permissions, data classes, what left for models), external-model (only what "
             "the model may receive). Every event keeps its seq.")(command)


def reader(view: str | None, model: str | None) -> ReaderView | None:
    """The view the options name, or None (``--model`` alone: refused)."""
    if view is None:
        if model is not None:
            raise click.UsageError("--model goes with --view external-model")
        return None
    if model is not None and view != "external-model":
        raise click.UsageError("--model goes with --view external-model")
    return ReaderView(view, model)


__all__ = ["reader", "view_options"]
