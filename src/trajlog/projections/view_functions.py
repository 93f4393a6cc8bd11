"""The views, by name: what :mod:`trajlog.projections` offers a caller
(:func:`model_history`, :func:`chat`, :func:`trajectory`, :func:`goal`,
:func:`status`, :func:`runs`, :func:`stages`, ...), each a fold of one
session's log run by the incremental engine (:mod:`.engine`)."""


from __future__ import annotations

from typing import Any

from ..errors import ArgumentTypeError
from .checkpoint_marks import Marks, read_marks
from .engine import Projectable
from .engine import checkpoint as _checkpoint
from .engine import project as _project
from .engine import rebuild as _rebuild
from .envelopes import RunEnvelope, RunNode
from .envelopes import run_tree as _run_tree
from .envelopes import runs as _runs
from .folds import FOLDS
from .shapes import (
    ChatNode,
    GoalView,
    Message,
    RequestConfig,
    StatusView,
    Turn,
)

_FOLD_PARTS = ("name", "version", "state_type", "autosave", "init", "step", "view")


def _session(session: Any, needs: str = "fold_source") -> Any:
    """``session`` if it is one (a :class:`trajlog.Session`, or anything with
    what the view reads); an :class:`ArgumentTypeError` naming it otherwise."""
    if not callable(getattr(session, needs, None)):
        raise ArgumentTypeError(f"session must be a trajlog Session, not "
                                f"{type(session).__name__}")
    return session


def project(session: Projectable, fold: Any) -> Any:
    """Fold ``session``'s log with ``fold`` -- one of :data:`FOLDS`, or your own
    (see :mod:`.engine`) -- resuming from its newest valid saved state."""
    _session(session)
    missing = [n for n in _FOLD_PARTS if not hasattr(fold, n)]
    if missing:
        raise ArgumentTypeError(f"fold must be a fold (one of projections.FOLDS, or an object "
                                f"with {', '.join(_FOLD_PARTS)}); {type(fold).__name__} has "
                                f"no {', '.join(missing)}")
    return _project(session.fold_source(), fold)


def runs(session: Projectable) -> list[RunEnvelope]:
    """Every run of ``session``'s log (its inherited prefix first, for a
    fork), in the order they started, with their integrity checked."""
    return _runs(_session(session))


def run_tree(session: Any) -> list[RunNode]:
    """The runs of ``session`` and of every session below it (forks and
    subagents), as trees linked by ``parent_run``, with cost summed per
    delegation path."""
    return _run_tree(_session(session))


def _view(session: Projectable, name: str) -> Any:
    return _project(_session(session).fold_source(), FOLDS[name])


def model_history(session: Projectable) -> list[Message]:
    """Messages for the model: user, assistant (text, reasoning, tool calls)
    and tool results, with compactions applied."""
    result: list[Message] = _view(session, "model_history")
    return result


def request_config(session: Projectable) -> RequestConfig | None:
    """System prompt, tools and parameters from the last ``request/header``."""
    result: RequestConfig | None = _view(session, "request_config")
    return result


def chat(session: Projectable) -> list[ChatNode]:
    """Bubbles and tool cards for people."""
    result: list[ChatNode] = _view(session, "chat")
    return result


def stages(session: Any) -> Marks:
    """The stage checkpoints, recovery attempts and checkpoint forks of
    ``session``'s log (its own and inherited events), as recorded by
    :meth:`trajlog.Session.checkpoint` / ``resume`` / ``restart`` /
    ``fork_from``: :func:`trajlog.projections.checkpoint_marks.read_marks`."""
    return read_marks(_session(session, "events").events())


def trajectory(session: Projectable) -> list[Turn]:
    """Turn -> step -> model requests and tool spans, for debugging."""
    result: list[Turn] = _view(session, "trajectory")
    return result


def goal(session: Projectable) -> GoalView:
    """The current goal snapshot and the malformed changes that were skipped."""
    result: GoalView = _view(session, "goal")
    return result


def status(session: Projectable) -> StatusView:
    """What is open now: turn, step, tools running or requested."""
    result: StatusView = _view(session, "status")
    return result


def checkpoint(session: Projectable) -> list[str]:
    """Save the current state of every projection of ``session`` (computing it
    if needed) to the store's derived table; returns their names.  Projections
    whose state is small save themselves every SAVE_EVERY events; those that
    hold a copy of the history (model_history, chat, trajectory) save only
    here, so that a read never pays for writing megabytes."""
    return _checkpoint(_session(session).fold_source(), FOLDS)


def rebuild(session: Projectable) -> None:
    """Drop every saved and cached projection state of the session."""
    _rebuild(_session(session).fold_source(), FOLDS)
