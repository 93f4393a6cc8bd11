"""Branches of investigation: a fold of one session's log into each branch's
state, and the rules its ``branch/*`` events follow.

A branch lives inside a session's log: its events carry the envelope's
``branch_id``; its life is told by four events on the main line (no
``branch_id``), each naming the branch in ``data.name``:

* ``branch/started`` ``{name, from_seq, frozen}`` -- the branch starts from
  ``from_seq``, an earlier main-line event; ``frozen`` records what it starts
  from: ``workspace_revision``, ``data_samples`` (ids), ``tool_versions``
  (tool -> version), ``permissions``;
* ``branch/rebased`` ``{name, onto_seq, reason}`` -- explicit and recorded: the
  branch now starts from ``onto_seq``, a later main-line event than its
  current start (the main line moved);
* ``branch/merged`` ``{name, common_facts, adopted, rejected, unresolved, gate,
  status, missing}`` -- evidence, not history: facts and conclusions are
  ``{subject, value}`` claims, unresolved questions are text.  The ``gate``
  has four parts -- a reproducible ``sample`` ``{ids}``, a deterministic
  ``check`` ``{name, result}`` that passed (``result`` one of
  :data:`PASSED`: ``"pass"``, ``"passed"``, ``"ok"`` in any case, or
  ``True``), a ``code_version`` (a hex hash) and a human ``decision``
  ``{by, verdict}`` (``by`` a ``human:`` / ``reviewer:`` source, ``verdict``
  ``"accept"``) that the merge event itself records from a source that may
  decide (:data:`DECIDERS`: a person, or the host recording the person's
  decision -- never a model, a tool, the user or an untrusted source: what
  its payload says of a human is only text).  :func:`gate_status` gives the
  status: ``fact`` with every part, else ``reference-only`` naming what is
  missing.  A ``fact`` merge closes the branch; a reference-only one leaves
  it open;
* ``branch/abandoned`` ``{name, reason}`` -- the branch is given up; its
  events stay in the log (and in search).

:class:`Branches` applies these rules.  The write path runs it strictly
inside the append's transaction (:mod:`trajlog.api.branch_checks`): a
refusal raises a typed :class:`~trajlog.errors.BranchError` before anything
is written.  Reading a log, it is lenient: an event that breaks a rule (a
log imported from elsewhere) is skipped, and a merge's status is always the
one its gate gives, whatever the event says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    BranchError,
    BranchNotFoundError,
    BranchPointError,
    BranchStateError,
    MergeGateError,
)
from ..event_types import source_class
from ..events import Event
from .evidence import branch_of

MAIN = "main"
STARTED, REBASED, MERGED, ABANDONED = ("branch/started", "branch/rebased", "branch/merged",
                                       "branch/abandoned")
PREFIX = "branch/"
#: the parts of a merge gate, in the order a missing part is named
GATE_PARTS = ("sample", "check", "code_version", "decision")
FACT, REFERENCE_ONLY = "fact", "reference-only"
#: the conclusions a merge lists as ``{subject, value}`` claims
CLAIM_LISTS = ("common_facts", "adopted", "rejected")
#: a check ``result`` that passed (a str compared case-insensitively); anything
#: else -- ``"fail"``, ``False``, a count of failures -- did not
PASSED = ("pass", "passed", "ok", True)
#: the source classes whose merge may carry a human decision
#: (:func:`trajlog.event_types.source_class`)
DECIDERS = ("human", "system")
_HEX = re.compile(r"[0-9a-f]{7,128}")
_FROZEN = {"workspace_revision": (str, type(None)), "data_samples": (list,),
           "tool_versions": (dict,), "permissions": (list,)}


def on_main(ev: Event) -> bool:
    """Whether ``ev`` belongs to the main line (no branch, or ``main``)."""
    return branch_of(ev) in (None, MAIN)


def passed(result: Any) -> bool:
    """Whether a check's ``result`` is one of :data:`PASSED`."""
    if isinstance(result, str):
        return result.lower() in PASSED
    return result is True


def merger_class(source: str | None) -> str:
    """The source class of a ``branch/merged`` written by ``source``."""
    return source_class(Event(seq=0, type=MERGED, time=0, data={}, source=source))


def gate_status(gate: Any, by: str = "system") -> tuple[str, list[str]]:
    """``(status, missing parts)`` of a merge gate recorded by a source of
    class ``by`` (:func:`merger_class`; from the event: ``source_class``):
    ``fact`` when each of :data:`GATE_PARTS` is there and holds, else
    ``reference-only``.  A decision recorded by a source not in
    :data:`DECIDERS` does not hold."""
    gate = gate if isinstance(gate, dict) else {}
    missing = []
    sample = gate.get("sample")
    ids = sample.get("ids") if isinstance(sample, dict) else None
    if not (isinstance(ids, list) and ids and all(isinstance(i, str) and i for i in ids)):
        missing.append("sample")
    check = gate.get("check")
    if not (isinstance(check, dict) and isinstance(check.get("name"), str) and check["name"]
            and passed(check.get("result"))):
        missing.append("check")
    code = gate.get("code_version")
    if not (isinstance(code, str) and _HEX.fullmatch(code)):
        missing.append("code_version")
    decision = gate.get("decision")
    who = decision.get("by") if isinstance(decision, dict) else None
    if not (isinstance(who, str) and who.startswith(("human:", "reviewer:"))
            and decision.get("verdict") == "accept" and by in DECIDERS):
        missing.append("decision")
    return (REFERENCE_ONLY if missing else FACT), missing


@dataclass(frozen=True, slots=True)
class Merge:
    """One ``branch/merged`` event, its status given by its gate."""

    seq: int
    status: str
    missing: tuple[str, ...]
    common_facts: tuple[tuple[str, Any], ...]
    adopted: tuple[tuple[str, Any], ...]
    rejected: tuple[tuple[str, Any], ...]
    unresolved: tuple[str, ...]
    gate: dict[str, Any]


@dataclass(slots=True)
class Branch:
    """A branch as its ``branch/*`` events leave it."""

    name: str
    started_seq: int
    from_seq: int
    frozen: dict[str, Any]
    #: where the branch starts now: ``from_seq``, or the latest rebase's ``onto_seq``
    base: int
    #: ``(seq, onto_seq, reason)`` of each rebase, in order
    rebases: list[tuple[int, int, str]] = field(default_factory=list)
    merges: list[Merge] = field(default_factory=list)
    #: ``open``, ``merged`` (through the full gate) or ``abandoned``
    state: str = "open"
    #: ``(seq, reason)`` of the ``branch/abandoned``
    abandoned: tuple[int, str] | None = None
    #: how many events the branch's own line holds
    events: int = 0


class Branches:
    """The branches of one log, folded event by event in log order.

    ``strict``: a rule broken raises its :class:`~trajlog.errors.BranchError`
    (the write path); else the event is skipped (a read).  ``event_at``
    looks up an earlier event by seq (a branch point must be one of the
    main line); without it, the events fed so far are used."""

    def __init__(self, session: str = "", *, strict: bool = False,
                 event_at: Callable[[int], Event | None] | None = None) -> None:
        self.session = session
        self.strict = strict
        self.by_name: dict[str, Branch] = {}
        self._seen: dict[int, bool] = {}   # seq -> on the main line (no event_at)
        self._shared: set[str] = set()   # branches shared with the fold copied (see copy)
        self._event_at = event_at

    def feed(self, ev: Event) -> None:
        """Apply one event (``ev.seq`` is its seq)."""
        try:
            self._apply(ev)
        except BranchError:
            if self.strict:
                raise
        if self._event_at is None:
            self._seen[ev.seq] = on_main(ev)

    def copy(self, event_at: Callable[[int], Event | None] | None = None) -> Branches:
        """A copy to feed on (what is fed to it leaves this one as it is),
        looking earlier events up with ``event_at``.  Cheap: a branch is
        copied only when an event fed to the copy changes it."""
        out = Branches(self.session, strict=self.strict, event_at=event_at)
        out.by_name = dict(self.by_name)
        out._shared = set(self.by_name)
        out._seen = dict(self._seen)
        return out

    def _mine(self, b: Branch) -> Branch:
        """``b``, copied first if it is shared with the fold this one was copied from."""
        if b.name not in self._shared:
            return b
        self._shared.discard(b.name)
        b = self.by_name[b.name] = Branch(b.name, b.started_seq, b.from_seq, b.frozen, b.base,
                                          list(b.rebases), list(b.merges), b.state,
                                          b.abandoned, b.events)
        return b

    def feed_all(self, events: Iterable[Event]) -> Branches:
        for ev in events:
            self.feed(ev)
        return self

    # -- the rules -------------------------------------------------------------------

    def _refuse(self, kind: type[BranchError], name: str, seq: int, why: str) -> BranchError:
        return kind(f"branch {name!r} of session {self.session} at seq {seq}: {why}")

    def _apply(self, ev: Event) -> None:
        t = ev.type
        if not t.startswith(PREFIX):
            name = branch_of(ev)
            own = self.by_name.get(name) if isinstance(name, str) else None
            if own is not None:
                if own.state != "open":
                    raise self._refuse(BranchStateError, own.name, ev.seq,
                                       f"the branch is {own.state}: it takes no more events "
                                       f"({ev.type})")
                self._mine(own).events += 1
            return
        d = ev.data if isinstance(ev.data, dict) else {}
        name = d.get("name")
        if not isinstance(name, str) or not name or name == MAIN:
            raise self._refuse(BranchNotFoundError, str(name), ev.seq,
                               f"{t} must name a branch (a non-empty str other than "
                               f"{MAIN!r})")
        if t == STARTED:
            self._start(ev, name, d)
            return
        if t not in (REBASED, MERGED, ABANDONED):
            return   # another branch/* type: nothing this fold knows
        b = self.by_name.get(name)
        if b is None:
            raise self._refuse(BranchNotFoundError, name, ev.seq,
                               "no branch/started names this branch")
        if b.state != "open":
            raise self._refuse(BranchStateError, name, ev.seq,
                               f"the branch is already {b.state}: it cannot be "
                               f"{t.removeprefix(PREFIX)}")
        b = self._mine(b)
        if t == REBASED:
            self._rebase(ev, b, d)
        elif t == MERGED:
            self._merge(ev, b, d)
        else:
            reason = d.get("reason")
            if not isinstance(reason, str) or not reason:
                raise self._refuse(BranchStateError, name, ev.seq,
                                   "an abandon needs a reason (a non-empty str)")
            b.state, b.abandoned = "abandoned", (ev.seq, reason)

    def _point(self, name: str, seq: int, value: Any, what: str) -> int:
        """``value`` as a branch point: an earlier event of the main line."""
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < seq:
            raise self._refuse(BranchPointError, name, seq,
                               f"{what} must be the seq of an earlier event, not {value!r}")
        if self._event_at is not None:
            found = self._event_at(value)
            main = None if found is None else on_main(found)
        else:
            main = self._seen.get(value)
        if main is None:
            raise self._refuse(BranchPointError, name, seq, f"{what} {value}: the log holds "
                               "no such event")
        if not main:
            raise self._refuse(BranchPointError, name, seq, f"{what} {value} is an event of "
                               "another branch, not of the main line")
        return value

    def _start(self, ev: Event, name: str, d: dict[str, Any]) -> None:
        if name in self.by_name:
            raise self._refuse(BranchStateError, name, ev.seq, "the branch was already "
                               f"started at seq {self.by_name[name].started_seq}")
        if not on_main(ev):
            raise self._refuse(BranchPointError, name, ev.seq, "a branch starts from the "
                               f"main line: branch/started carries branch_id {ev.branch_id!r}")
        frozen = d.get("frozen", {})
        if not isinstance(frozen, dict):
            raise self._refuse(BranchPointError, name, ev.seq, "frozen must be a dict")
        for key, kinds in _FROZEN.items():
            if key in frozen and not isinstance(frozen[key], kinds):
                raise self._refuse(BranchPointError, name, ev.seq,
                                   f"frozen.{key} must be {' or '.join(k.__name__ for k in kinds)}")
        for key in ("data_samples", "permissions"):
            if not all(isinstance(x, str) for x in frozen.get(key, [])):
                raise self._refuse(BranchPointError, name, ev.seq,
                                   f"frozen.{key} must be a list of str")
        if not all(isinstance(v, str) for v in frozen.get("tool_versions", {}).values()):
            raise self._refuse(BranchPointError, name, ev.seq,
                               "frozen.tool_versions must map each tool to a str version")
        start = self._point(name, ev.seq, d.get("from_seq"), "from_seq")
        self.by_name[name] = Branch(name, ev.seq, start, dict(frozen), start)

    def _rebase(self, ev: Event, b: Branch, d: dict[str, Any]) -> None:
        reason = d.get("reason")
        if not isinstance(reason, str) or not reason:
            raise self._refuse(BranchPointError, b.name, ev.seq,
                               "a rebase needs a reason (a non-empty str)")
        onto = self._point(b.name, ev.seq, d.get("onto_seq"), "onto_seq")
        if onto <= b.base:
            raise self._refuse(BranchPointError, b.name, ev.seq,
                               f"onto_seq {onto} does not move the branch forward: it starts "
                               f"from seq {b.base}")
        b.base = onto
        b.rebases.append((ev.seq, onto, reason))

    def _merge(self, ev: Event, b: Branch, d: dict[str, Any]) -> None:
        lists: dict[str, tuple[tuple[str, Any], ...]] = {}
        for key in CLAIM_LISTS:
            value = d.get(key, [])
            if not isinstance(value, list) or not all(
                    isinstance(c, dict) and isinstance(c.get("subject"), str) and c["subject"]
                    and "value" in c for c in value):
                raise self._refuse(MergeGateError, b.name, ev.seq, f"{key} must be a list of "
                                   "{subject: str, value} claims")
            lists[key] = tuple((c["subject"], c["value"]) for c in value)
        unresolved = d.get("unresolved", [])
        if not isinstance(unresolved, list) or not all(isinstance(q, str) and q
                                                       for q in unresolved):
            raise self._refuse(MergeGateError, b.name, ev.seq,
                               "unresolved must be a list of questions (non-empty str)")
        gate = d.get("gate", {})
        if not isinstance(gate, dict):
            raise self._refuse(MergeGateError, b.name, ev.seq, "gate must be a dict")
        status, missing = gate_status(gate, source_class(ev))
        if d.get("status") != status:
            raise self._refuse(MergeGateError, b.name, ev.seq,
                               f"the merge claims status {d.get('status')!r} but its gate "
                               f"gives {status!r}" + (f" (missing: {', '.join(missing)})"
                                                      if missing else ""))
        b.merges.append(Merge(ev.seq, status, tuple(missing), lists["common_facts"],
                              lists["adopted"], lists["rejected"], tuple(unresolved),
                              dict(gate)))
        if status == FACT:
            b.state = "merged"


def fold(events: Iterable[Event], session: str = "") -> dict[str, Branch]:
    """Each branch of a log, by name, as its events leave it (lenient)."""
    return Branches(session).feed_all(events).by_name


__all__ = ["ABANDONED", "CLAIM_LISTS", "DECIDERS", "FACT", "GATE_PARTS", "MAIN", "MERGED",
           "PASSED", "REBASED", "REFERENCE_ONLY", "STARTED", "Branch", "Branches", "Merge", "fold",
           "gate_status", "merger_class", "on_main", "passed"]
