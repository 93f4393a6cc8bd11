"""Evidence rules: event status, who said it, and what wins when events disagree.

From the seed article on context governance: an append-only log still needs
status semantics, and facts must be told apart from interpretations.

* **Status.**  An ``event/status`` event ``{target, status, reason}`` marks an
  earlier event ``superseded`` (newer evidence replaced it), ``rejected`` (a
  person overruled it), ``expired`` (an authorization or cache lapsed) or
  ``audit-only`` (kept for review, never for the model); ``active`` restores it.
  The latest status event for a target wins -- among those whose source may
  decide it: never an untrusted source, never a lower rank than the decision
  it would overrule, only a human for a human's event.  Nothing is rewritten.
* **Source class**, from the envelope's ``source`` and the type: ``human``
  (``human``, ``human:<name>``, ``reviewer``; type ``human/decision``), ``tool``
  (a tool's name; tool results), ``system`` (the host, trajlog itself, another
  session), ``user``, ``model`` (``model``, ``assistant``; assistant messages,
  plans), and ``untrusted`` (``external:*``, ``web:*``, or data marked
  ``trust: "untrusted"``) whose text is data, never instructions.
* **Claims.**  An event whose data has a string ``subject`` and a ``value`` is a
  claim about that subject.  Facts (human, tool, system) and interpretations
  (model) are ranked: a human decision outranks a tool fact, which outranks a
  model interpretation.  When the active claims of the top rank disagree: two
  humans -- the later decision stands; two deterministic tools -- a
  **conflict marker**, no silent pick (check the environment and inputs);
  models only -- nothing is confirmed.  A lower-ranked claim that disagrees
  with the winner is reported as a conflict too, but does not change it.
* **Supersedes.**  An event whose envelope names ``supersedes=<seq>`` (an
  earlier seq; the append refuses any other) marks that event ``superseded``,
  as an ``event/status`` from the same source would -- under the same
  authority rules, so an untrusted source supersedes nothing and a model never
  supersedes a human's event.  A later ``event/status`` ``active`` of enough
  authority restores the target.  Logs written before the envelope field
  carry it as ``data["supersedes"]``, still honoured when the envelope has
  none (:func:`supersedes_of`).
* **Branch.**  The envelope's ``branch_id`` -- else, in older logs,
  ``data["branch_id"]``, else ``data["branch"]`` -- scopes an event to a
  branch (:func:`branch_of`).  With :attr:`Evidence.branch` set, an event of
  another branch supersedes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..event_types import GRANTS, STATUSES, source_class
from ..events import Event

# GRANTS (re-exported): the types that grant a permission with an expiry that
# expires_at reads (the registry's ``grants`` column)


def expires_at(ev: Event) -> int | None:
    """When the permission ``ev`` grants lapses (epoch ms), or None: its
    ``expires_at``, else its time plus ``ttl_ms``."""
    d = ev.data if isinstance(ev.data, dict) else {}
    at, ttl = d.get("expires_at"), d.get("ttl_ms")
    if isinstance(at, int) and not isinstance(at, bool):
        return at
    if isinstance(ttl, int) and not isinstance(ttl, bool):
        return ev.time + ttl
    return None


RANK = {"human": 3, "tool": 2, "system": 2, "user": 1, "model": 0, "untrusted": -1}


def branch_of(ev: Event) -> Any:
    """The branch an event is scoped to (its envelope's ``branch_id``; for a
    version-1 event -- logs written before that field -- ``data.branch_id``,
    else ``data.branch``), or None for an event of every branch."""
    if ev.branch_id is not None or (ev.schema_version or 1) > 1:   # (projections/schemas.py)
        return ev.branch_id
    data = ev.data if isinstance(ev.data, dict) else {}
    value = data.get("branch_id")
    return data.get("branch") if value is None else value


def supersedes_of(ev: Event) -> Any:
    """The seq whose fact ``ev`` replaces (its envelope's ``supersedes``; for
    a version-1 event, ``data.supersedes``), or None."""
    if ev.supersedes is not None or (ev.schema_version or 1) > 1:
        return ev.supersedes
    data = ev.data if isinstance(ev.data, dict) else {}
    return data.get("supersedes")


def ref(ev: Event) -> str:
    """A short source reference for people and models, e.g. ``HUMAN-12``,
    ``TEST-31``, ``FILE-7`` -- the kind of evidence and its seq."""
    cls = source_class(ev)
    t = ev.type
    data = ev.data if isinstance(ev.data, dict) else {}
    if t == "task/contract":
        kind = "TASK"
    elif cls == "human":
        kind = "HUMAN"
    elif t == "file/snapshot":
        kind = "FILE"
    elif t.startswith("schema/"):
        kind = "SCHEMA"
    elif t == "plan/update":
        kind = "PLAN"
    elif t == "tool/result" or cls == "tool":
        name = str(data.get("name") or ev.source or "")
        kind = "TEST" if "test" in name.lower() else "TOOL"
    elif cls == "untrusted":
        kind = "EXT"
    else:
        kind = {"user": "USER", "model": "MODEL"}.get(cls, "SYS")
    return f"{kind}-{ev.seq}"


@dataclass(frozen=True, slots=True)
class Claim:
    subject: str
    value: Any
    seq: int
    source: str
    ref: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """Active claims about one subject that disagree.  ``blocking``: two facts
    of the deciding rank (deterministic tools) -- stop and check."""

    subject: str
    claims: tuple[Claim, ...]
    blocking: bool
    note: str


@dataclass(slots=True)
class Evidence:
    """Statuses, claims and their resolution for one log."""

    status: dict[int, tuple[str, str, str | None, int]] = field(default_factory=dict)
    claims: dict[str, list[Claim]] = field(default_factory=dict)
    # who spoke for each event seen (rank), and the rank of each status decision
    ranks: dict[int, int] = field(default_factory=dict)
    decided: dict[int, int] = field(default_factory=dict)
    #: the branch being built; None: every branch's ``supersedes`` counts
    branch: str | None = None

    def see(self, ev: Event) -> None:
        """Note who an event speaks for (a later status event may target it)."""
        self.ranks[ev.seq] = RANK[source_class(ev)]

    def feed(self, ev: Event) -> None:
        """Apply ``ev``'s status effects (:meth:`decide`) and its claim."""
        self.decide(ev)
        self.claim(ev)

    def decide(self, ev: Event) -> None:
        """Apply what ``ev`` says about other events' status: an
        ``event/status``, or a ``supersedes`` field (see the module
        docstring).  Each event must be decided once, in log order."""
        if ev.type == "event/status":
            self.set_status(ev, ev.data if isinstance(ev.data, dict) else {})
            return
        self.see(ev)
        target = supersedes_of(ev)
        if target is None or (self.branch is not None
                              and branch_of(ev) not in (None, self.branch)):
            return
        # only an earlier event: a forward reference would let an event
        # retire a fact nobody has seen yet
        if isinstance(target, int) and not isinstance(target, bool) and 0 <= target < ev.seq:
            self._set(target, "superseded", f"superseded by seq {ev.seq}", ev)

    def claim(self, ev: Event) -> None:
        """Note ``ev``'s claim (a string ``subject`` and a ``value``), if any."""
        data = ev.data if isinstance(ev.data, dict) else {}
        subject = data.get("subject")
        if ev.type != "event/status" and isinstance(subject, str) and "value" in data:
            self.claims.setdefault(subject, []).append(
                Claim(subject, data["value"], ev.seq, source_class(ev), ref(ev)))

    def set_status(self, ev: Event, data: dict[str, Any]) -> None:
        """Apply one ``event/status`` event -- if its source may decide it.

        A status decision is only as strong as its source: an untrusted one
        (``web:*``, ``external:*``) decides nothing; nobody may overrule a
        decision of a higher rank (a model cannot re-activate what a person
        rejected); and a human event's status changes only by a human."""
        target, status = data.get("target"), data.get("status")
        if not isinstance(target, int) or isinstance(target, bool) or status not in STATUSES:
            return
        self._set(target, str(status), str(data.get("reason", "")), ev)

    def _set(self, target: int, status: str, reason: str, ev: Event) -> None:
        authority = RANK[source_class(ev)]
        if authority < 0 or authority < self.decided.get(target, -1):
            return
        if self.ranks.get(target, -1) >= RANK["human"] > authority:
            return
        self.status[target] = (status, reason, ev.source, ev.seq)
        self.decided[target] = authority

    def status_of(self, seq: int) -> str:
        entry = self.status.get(seq)
        return entry[0] if entry else "active"

    def resolve(self) -> tuple[dict[str, Claim], list[Conflict], list[Claim]]:
        """(confirmed winner per subject, conflicts, unconfirmed interpretations)."""
        confirmed: dict[str, Claim] = {}
        conflicts: list[Conflict] = []
        unconfirmed: list[Claim] = []
        for subject, claims in self.claims.items():
            active = [c for c in claims if self.status_of(c.seq) == "active"
                      and c.source != "untrusted"]
            if not active:
                continue
            top = max(RANK[c.source] for c in active)
            best = [c for c in active if RANK[c.source] == top]
            values = {_key(c.value) for c in best}
            if top <= RANK["model"]:
                unconfirmed.extend(best)
                continue
            if len(values) > 1 and top == RANK["tool"]:
                conflicts.append(Conflict(subject, tuple(best), True,
                                          "deterministic results disagree: stop and check the "
                                          "environment and input versions"))
                continue
            winner = max(best, key=lambda c: c.seq)
            confirmed[subject] = winner
            losers = tuple(c for c in active if _key(c.value) != _key(winner.value))
            if losers:
                conflicts.append(Conflict(subject, (winner, *losers), False,
                                          f"{winner.ref} ({winner.source}) outranks "
                                          + ", ".join(f"{c.ref} ({c.source})" for c in losers)))
        return confirmed, conflicts, unconfirmed


def _key(value: Any) -> str:
    return repr(value)


def collect(events: Iterable[Event]) -> Evidence:
    ev = Evidence()
    for e in events:
        ev.feed(e)
    return ev


__all__ = ["GRANTS", "RANK", "STATUSES", "Claim", "Conflict", "Evidence", "branch_of",
           "collect", "ref", "source_class", "supersedes_of"]
