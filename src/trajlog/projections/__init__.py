"""Projections: the views a model, a person and a debugger each need, computed
from one log by pure folds, made incremental by the engine.

* :func:`model_history` -- user messages, assistant messages (text, reasoning,
  tool calls) and tool results, in order, with ``surface-replace`` compactions
  applied: the range a compaction covers is hidden behind its summary (the raw
  events stay in the log).  :func:`request_config` -- the system prompt, tools
  and parameters of the last ``request/header``.
* :func:`chat` -- message bubbles and tool cards for people.
* :func:`trajectory` -- turns, steps, model requests and tool spans, for debugging.
* :func:`goal` -- the last valid full goal snapshot (malformed ones reported).
* :func:`status` -- what is open now: turn, step, tools running.
* :func:`runs` -- the run envelopes (``Session.run``) with their integrity
  checked; :func:`run_tree` -- runs across subagents, cost per delegation path.
* :func:`stages` -- stage checkpoints (valid or invalidated and why), recovery
  attempts with each check's verdict and the outcome, forks from a checkpoint.

:mod:`.folds` holds the folds, :mod:`.engine` the incremental engine (saved
states, :func:`checkpoint`, :func:`rebuild`), :mod:`.context` the context
builder and :mod:`.evidence` the evidence rules it applies.
"""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentTypeError
from . import context, evidence
from .engine import SAVE_EVERY, FoldSource, Projectable, from_scratch
from .engine import checkpoint as _checkpoint
from .engine import project as _project
from .engine import rebuild as _rebuild
from .folds import FOLDS, SURFACE_REPLACE
from .runs import RunEnvelope, RunNode
from .runs import run_tree as _run_tree
from .runs import runs as _runs
from .shapes import (
    ChatNode,
    GoalView,
    Message,
    ModelRequest,
    ModelSwitch,
    RequestConfig,
    RequestRetry,
    StatusView,
    Step,
    ToolSpan,
    Turn,
)
from .stages import Marks, read_marks

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
    ``fork_from``: :func:`trajlog.projections.stages.read_marks`."""
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


__all__ = [
    "FOLDS",
    "SAVE_EVERY",
    "SURFACE_REPLACE",
    "ChatNode",
    "FoldSource",
    "GoalView",
    "Marks",
    "Message",
    "ModelRequest",
    "ModelSwitch",
    "Projectable",
    "RequestConfig",
    "RequestRetry",
    "StatusView",
    "Step",
    "ToolSpan",
    "Turn",
    "chat",
    "checkpoint",
    "context",
    "evidence",
    "from_scratch",
    "goal",
    "model_history",
    "project",
    "rebuild",
    "request_config",
    "run_tree",
    "runs",
    "stages",
    "status",
    "trajectory",
]
