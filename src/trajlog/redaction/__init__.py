"""Redaction before write, and privacy modes: what a payload becomes before it
is framed.

Every event payload (user and assistant messages, tool calls and results,
any other type) and every memory item's content passes through a
:class:`Redactor` before it is serialized, so a secret it masks never reaches
a frame, a chunk row, the WAL, a projection state, the full-text index or an
export: they are all made from the stored bytes.  The scanners are in
:mod:`.scanners`, the table of trajlog's own fields left unscanned in
:mod:`.machine`, the policy and the redactor in :mod:`.policy`, the privacy
modes in :mod:`.privacy` and the pause in :mod:`.pause`; this package's
front door re-exports them.

* **Scanners** (:class:`Scanner`): ``scan(value) -> [Finding(kind, path,
  start, end)]`` over a string or a JSON value; ``path`` names the string
  (``$``, ``$.output``, ``$.content[0].text``, ``$["a b"]``) as
  :func:`strings` walks it, ``start``/``end`` the span in it.  The built-in
  :data:`BUILTIN` finds secrets (AWS access keys, GitHub, OpenAI and Slack
  tokens, private-key blocks, bearer tokens, high-entropy ``password=`` /
  ``api_key=`` values) and PII (e-mail addresses, phone numbers, card
  numbers that pass the Luhn check).  JSON held in a string (a tool call's
  ``arguments`` as OpenAI-style hosts store them) is scanned value by value,
  its keys too, and encoded again, so masking never leaves invalid JSON
  (:mod:`.embedded`).  Dict keys are not scanned, nor the
  ids and digests trajlog writes itself (:data:`MACHINE_FIELDS`: a value is
  skipped only at its path in its event type, and only in its format).
  Each rule has a cheap ``trigger`` and a ``min_len``: a rule that cannot
  match a string is not run on it (benchmarks/bench_redaction.py).
* **Policy** (:class:`RedactionPolicy`), per finding kind: ``mask`` (the
  span becomes ``[REDACTED:<kind>]``; the event's data class is raised to at
  least ``internal-redacted``), ``refuse`` (:class:`RedactionRefusedError`
  naming the event type, the path and the kind; nothing is written),
  ``hash`` (the span becomes ``sha256:<hex of the match>``, the data class
  becomes ``restricted`` -- so a context build excludes it -- and the session
  **pauses**: a ``redaction/paused {seq, findings}`` event is appended in
  the same transaction, and until a ``redaction/resumed`` event every
  append of a content type is refused with :class:`RedactionPausedError`;
  markers that close what is open, recovery's synthetic closers,
  ``event/status`` and ``run/*`` / ``redaction/*`` still pass), or
  ``allow``.  A fork or subagent of a paused session starts paused
  (:mod:`trajlog.api.lineage`).  In memory ``hash`` stores the item *provisional* (never
  retrieved until a human activates it): memory has no session to pause.
* **Privacy modes**, per identity (the ``tenant`` / ``user`` metadata of the
  session header, which forks and subagents inherit): ``full`` stores the
  redacted payload; ``metadata`` replaces it by its structural fields (call
  ids, tool names, flags, seq ranges) and ``privacy: {mode, shape, bytes,
  sha256}``; ``none`` keeps the structural fields and ``privacy: {mode,
  sha256}`` only.  Memory follows :class:`~trajlog.memory.Identity`'s own
  ``privacy`` (``none`` writes no memory, ``metadata`` no content).

What ``none`` does **not** cover: the session header (cwd, agent preset,
metadata: written at creation, never scanned), event types and times, the
envelope (``source``, ``workspace_revision``, ``idempotency_key``, ...),
frame and row sizes (they still say roughly how long a payload was), the
structural fields above (call ids and tool names pair calls with results),
memory keys, evidence and decisions, and the SHA-256 of the payload (it
confirms a guessed payload; a short one can be guessed).
"""

from __future__ import annotations

from .machine import MACHINE_FIELDS
from .pause import PAUSE_TYPES, PAUSED, RESUMED, check_paused, passes_pause, pause_rows, pause_state
from .policy import ACTIONS, PRIVACY_MODES, Outcome, RedactionPolicy, Redactor, raise_class
from .privacy import STRUCTURAL, prepare_payload, route, route_rows
from .scanners import (
    BUILTIN,
    PII_KINDS,
    SECRET_KINDS,
    Finding,
    PatternScanner,
    Rule,
    Scanner,
    strings,
)

__all__ = [
    "ACTIONS",
    "BUILTIN",
    "MACHINE_FIELDS",
    "PAUSED",
    "PAUSE_TYPES",
    "PII_KINDS",
    "PRIVACY_MODES",
    "RESUMED",
    "SECRET_KINDS",
    "STRUCTURAL",
    "Finding",
    "Outcome",
    "PatternScanner",
    "RedactionPolicy",
    "Redactor",
    "Rule",
    "Scanner",
    "check_paused",
    "passes_pause",
    "pause_rows",
    "pause_state",
    "prepare_payload",
    "raise_class",
    "route",
    "route_rows",
    "strings",
]
