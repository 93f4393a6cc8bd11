"""The shapes the folds return: messages for the model, chat nodes for
people, turns / steps / tool spans for debugging, the goal and the open-state
views.  Plain frozen structs (msgspec), so that every view is immutable and
cheap to copy; the folds that build them are in :mod:`.folds`."""

from __future__ import annotations

from typing import Any

import msgspec


class Message(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One entry of the model history.  ``role`` is ``user``, ``assistant``,
    ``tool`` or ``summary`` (a compaction's summary of ``seq .. until``)."""

    role: str
    content: Any
    seq: int
    tool_calls: list[Any] | None = None
    reasoning: Any = None
    tool_call_id: str | None = None
    is_error: bool | None = None
    status: str | None = None
    until: int | None = None


class RequestConfig(msgspec.Struct, frozen=True):
    """What the last ``request/header`` said about the model request."""

    seq: int
    model: str | None
    system_prompt: Any
    tools: list[Any]
    parameters: dict[str, Any]


class ChatNode(msgspec.Struct, frozen=True):
    """A bubble (``kind="message"``) or a tool card (``kind="tool"``).  A tool
    card's ``status``: requested, running, done, error, unknown, not_started,
    cancelled (a ``tool/cancel``: ``output`` holds its reason)."""

    kind: str
    seq: int
    role: str | None = None
    text: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    status: str | None = None
    output: str | None = None
    result_seq: int | None = None


class ToolSpan(msgspec.Struct, frozen=True):
    call_id: str
    name: str | None
    arguments: Any
    requested_seq: int
    started_seq: int | None
    result_seq: int | None
    duration_ms: int | None
    error: bool | None
    status: str
    result_summary: str | None


class ModelRequest(msgspec.Struct, frozen=True):
    seq: int
    model: str | None
    latency_ms: int | None
    ttft_ms: int | None
    tokens_in: int | None
    tokens_out: int | None
    tool_calls: int


class Step(msgspec.Struct, frozen=True):
    start_seq: int | None
    end_seq: int | None
    requests: list[ModelRequest]
    tools: list[ToolSpan]


class ModelSwitch(msgspec.Struct, frozen=True):
    """A ``model/switch``: the old and new logical model, why, the context
    version re-injected, and the run it happened in."""

    seq: int
    old: str | None
    new: str | None
    reason: str | None
    context_version: Any
    run_id: str | None


class RequestRetry(msgspec.Struct, frozen=True):
    """A ``request/retry``: an idempotent request seen again -- its key, the
    seq of the original, which attempt, and how it was handled."""

    seq: int
    idempotency_key: str | None
    original: int | None
    attempt: int | None
    outcome: str | None


class Turn(msgspec.Struct, frozen=True):
    """``switches`` / ``retries``: the model switches and retried requests
    inside the turn, and those appended since the turn before it (their seq
    is below ``start_seq``); those no turn followed yet end the list in a
    turn with no steps and no seqs."""

    start_seq: int | None
    end_seq: int | None
    interrupted: bool | None
    steps: list[Step]
    switches: list[ModelSwitch] = []
    retries: list[RequestRetry] = []


class GoalView(msgspec.Struct, frozen=True):
    """The current goal: ``goal`` is None when none was set or it was cleared."""

    goal: Any
    revision: int | None
    seq: int | None
    cleared: bool
    skipped: list[dict[str, Any]]


class StatusView(msgspec.Struct, frozen=True):
    turn_open_since: int | None
    step_open_since: int | None
    tools_running: list[str]
    tools_requested: list[str]
    last_seq: int


# ---------------------------------------------------------------------------
# The folds.  State objects are msgspec Structs or plain containers so that the
# engine can persist them with MessagePack.


__all__ = ["ChatNode", "GoalView", "Message", "ModelRequest", "ModelSwitch", "RequestConfig",
           "RequestRetry", "StatusView", "Step", "ToolSpan", "Turn"]
