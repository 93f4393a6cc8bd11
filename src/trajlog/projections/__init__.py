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

from . import context, evidence
from .checkpoint_marks import Marks
from .engine import SAVE_EVERY, FoldSource, Projectable, from_scratch
from .folds import FOLDS, SURFACE_REPLACE
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
from .view_functions import (
    chat,
    checkpoint,
    goal,
    model_history,
    project,
    rebuild,
    request_config,
    run_tree,
    runs,
    stages,
    status,
    trajectory,
)

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
