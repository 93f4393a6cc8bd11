"""Run envelopes, materialised from the log: :func:`runs` and :func:`run_tree`.

A run is the seq range of one session between a ``run/started`` event and
its ``run/finalized`` (written by :meth:`trajlog.Session.run`).  Nothing about
a run is kept anywhere but in those events and the ones between them: the
envelope is a fold of the log, and a run whose ``run/finalized`` is missing
(a crash) is reported as ``open``.  An erasure keeps both events' ``run_id``
(:mod:`trajlog.memory.replacement`), so an erased run is still listed: its
integrity ``erased``, and its state ``erased`` when its ``run/finalized`` was
(the state that event recorded is gone with it).

Integrity.  ``run/finalized`` records ``integrity.digest`` over the events
``first_seq .. last_seq`` of the run.  Algorithm ``frame-chain/1`` (what
:meth:`Session.run` writes; ``run/started`` declares it): SHA-256 of the run
id, the range and the log's frame chain at ``last_seq`` -- the chain of
FORMAT.md §3 already binds every frame's payload check to the one before,
so the run costs no hashing per event.  :func:`runs` reads the stored chain
(verified with its row) and recomputes the digest; the frames themselves are
checked as the fold reads them.  Algorithm ``sha256-chain/1`` (runs written
before): a SHA-256 hash chain over the events, each as ``seq || event
payload v1`` (:func:`trajlog.events.encode_event` of the event as read
back), recomputed by the fold.  Either way ``integrity`` is ``ok``,
``mismatch`` (the events the log holds now are not
the ones the run was finalized over), ``erased`` (an event of the run was
erased under a tombstone: its content is gone by design, so the digest cannot
be recomputed -- the frame chain still covers it, ``Session.verify()``),
``unverified`` (another writer appended between the run's last event and its
``run/finalized``), or ``open``.  Like the frame chain it is keyless: it
detects a changed log, not a forger who rewrites the digest too.

Usage and cost.  Each event is attributed to the innermost run open when it
was appended (the most recently started one).  Inference usage is the sum of
``assistant/message`` ``usage`` (the fields the trajectory reads), tools
usage counts ``tool/result`` events, persistence usage counts the events of
the run; amounts, and any further usage, come from ``run.add_cost`` and are
recorded in ``run/finalized``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

import msgspec

from ..event_types import USAGE
from ..events import Event, encode_event
from .engine import Projectable
from .engine import project as _project

STARTED, FINALIZED, SWITCH = "run/started", "run/finalized", "model/switch"
COST_SURFACES = ("inference", "retrieval", "tools", "persistence")
RUN_STATES = ("completed", "failed", "interrupted")
PRIVACY_MODES = ("full", "metadata", "none")
DIGEST = "sha256-chain/1"
CHAIN_DIGEST = "frame-chain/1"
_TOKENS = ("input_tokens", "output_tokens")


def prefix_hash(prefix: Any) -> str | None:
    """SHA-256 (hex) of a static prompt prefix: a str as UTF-8, any other JSON
    value as JSON with sorted keys (so equal prefixes hash equal)."""
    if prefix is None:
        return None
    raw = prefix.encode() if isinstance(prefix, str) else msgspec.json.encode(
        prefix, order="sorted")
    return hashlib.sha256(raw).hexdigest()


def digest_start(run_id: str) -> bytes:
    """The hash chain's seed: bound to the run id, so two runs never share it."""
    return hashlib.sha256(b"trajlog run\x00" + run_id.encode()).digest()


def digest_add(digest: bytes, ev: Event) -> bytes:
    """One link of the run's hash chain."""
    return hashlib.sha256(digest + ev.seq.to_bytes(8, "big") + encode_event(ev)).digest()


def chain_digest(run_id: str, first: int, last: int, chain: int) -> str:
    """The ``frame-chain/1`` digest: SHA-256 of the run id, its seq range and
    the log's own frame chain at ``last`` -- which already commits to every
    frame up to it, so a run needs no second hash over its events."""
    return hashlib.sha256(digest_start(run_id) + first.to_bytes(8, "big")
                          + last.to_bytes(8, "big") + chain.to_bytes(8, "big")).hexdigest()


def is_erased(ev: Event) -> bool:
    """An event read back as its tombstone's replacement (memory/versions.py)."""
    return isinstance(ev.data, dict) and isinstance(ev.data.get("erased"), dict)


def empty_cost() -> dict[str, dict[str, float]]:
    return {s: {"amount": 0.0} for s in COST_SURFACES}


#: the event types whose payload says something about usage (the registry's ``usage``)
USAGE_TYPES = USAGE


def tally(cost: dict[str, dict[str, float]], ev: Event) -> None:
    """Add what ``ev`` itself says about usage to ``cost`` (the run's own)."""
    usage = cost["persistence"]
    usage["events"] = usage.get("events", 0) + 1
    if ev.type in USAGE_TYPES:
        usage_of(cost, ev)


def usage_of(cost: dict[str, dict[str, float]], ev: Event) -> None:
    """The usage an ``assistant/message`` or ``tool/result`` states (not the
    event count: :func:`tally`)."""
    d = ev.data
    if not isinstance(d, dict):
        return
    if ev.type == "assistant/message":
        inference = cost["inference"]
        inference["requests"] = inference.get("requests", 0) + 1
        u = d.get("usage")
        if isinstance(u, dict):
            for k in _TOKENS:
                v = u.get(k)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    inference[k] = inference.get(k, 0) + v
    elif ev.type == "tool/result":
        cost["tools"]["calls"] = cost["tools"].get("calls", 0) + 1


def add_costs(into: dict[str, dict[str, float]], other: dict[str, dict[str, float]]) -> None:
    """Sum ``other`` into ``into``, surface by surface and key by key."""
    for surface, fields in other.items():
        mine = into.setdefault(surface, {"amount": 0.0})
        for k, v in fields.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                mine[k] = mine.get(k, 0) + v


class RunEnvelope(msgspec.Struct, frozen=True):
    """One run as the log records it.  ``state``: open, completed, failed,
    interrupted, or erased (its ``run/finalized`` was erased); ``integrity``:
    ok, mismatch, erased, unverified or open (see the module); ``cost``: per
    surface, ``amount`` and usage counters; ``switches``: the ``model/switch``
    events inside the run; ``artifacts``: the ids it pinned, by name
    (``run/started``)."""

    run_id: str
    session_id: str | None
    parent_run: str | None
    started_seq: int
    finalized_seq: int | None
    state: str
    model: str | None
    params: dict[str, Any]
    policy_version: Any
    tool_contract_version: Any
    static_prefix_hash: str | None
    privacy_mode: str | None
    identity: dict[str, Any]
    cost: dict[str, dict[str, float]]
    integrity: str
    integrity_detail: str | None
    switches: list[dict[str, Any]]
    error: str | None
    started_at: int
    finalized_at: int | None
    artifacts: dict[str, str] = msgspec.field(default_factory=dict)
    #: a ``frame-chain/1`` run not checked yet: (last seq, recorded digest);
    #: :func:`settle` checks it against the log's chain (None once settled)
    chain_check: tuple[int, str] | None = None


class RunsState(msgspec.Struct):
    runs: dict[str, dict[str, Any]]   # run id -> envelope fields
    open: list[str]                   # open run ids, in the order they started
    digests: dict[str, bytes]         # open run id -> hash chain so far
    digest_seq: dict[str, int]        # open run id -> last seq in its chain
    erased: dict[str, list[int]]      # open run id -> erased seqs met


class Runs:
    """The fold behind :func:`runs` (every event: a run covers all types)."""

    name: ClassVar[str] = "runs"
    version: ClassVar[int] = 4   # 2: artifacts; 3: frame-chain runs; 4: erased runs
    state_type: ClassVar[Any] = RunsState
    autosave: ClassVar[bool] = True

    def init(self) -> RunsState:
        return RunsState({}, [], {}, {}, {})

    def step(self, state: RunsState, ev: Event) -> RunsState:
        d = ev.data if isinstance(ev.data, dict) else {}
        rid = d.get("run_id")
        if ev.type == STARTED and isinstance(rid, str) and rid not in state.runs:
            state.runs[rid] = self._started(ev, d, rid)
            state.open.append(rid)
            state.erased[rid] = []
            if d.get("integrity") != CHAIN_DIGEST:   # an older run: hashed event by event
                state.digests[rid] = digest_start(rid)
        elif ev.type == FINALIZED and isinstance(rid, str) and rid in state.open:
            self._finalized(state, ev, d, rid)
        if ev.type == SWITCH and state.open:
            state.runs[state.open[-1]]["switches"].append(
                {"seq": ev.seq, **{k: d.get(k) for k in ("old", "new", "reason",
                                                          "context_version")}})
        for open_id in state.open:
            if open_id in state.digests:
                state.digests[open_id] = digest_add(state.digests[open_id], ev)
            state.digest_seq[open_id] = ev.seq
            if is_erased(ev):
                state.erased[open_id].append(ev.seq)
        if state.open:
            tally(state.runs[state.open[-1]]["tally"], ev)
        return state

    @staticmethod
    def _started(ev: Event, d: dict[str, Any], rid: str) -> dict[str, Any]:
        found, given, pinned = d.get("identity"), d.get("params"), d.get("artifacts")
        identity: dict[str, Any] = found if isinstance(found, dict) else {}
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        artifacts = {k: v for k, v in pinned.items() if isinstance(k, str) and isinstance(
            v, str)} if isinstance(pinned, dict) else {}
        return {"run_id": rid, "session_id": identity.get("session"),
                "parent_run": d.get("parent_run"), "started_seq": ev.seq,
                "finalized_seq": None, "state": "open", "model": d.get("model"),
                "params": params, "policy_version": d.get("policy_version"),
                "tool_contract_version": d.get("tool_contract_version"),
                "static_prefix_hash": d.get("static_prefix_hash"),
                "privacy_mode": d.get("privacy_mode"), "identity": identity,
                "cost": None, "integrity": "open", "integrity_detail": None, "switches": [],
                "error": None, "started_at": ev.time, "finalized_at": None,
                "artifacts": artifacts, "tally": empty_cost(), "chain_check": None}

    @staticmethod
    def _finalized(state: RunsState, ev: Event, d: dict[str, Any], rid: str) -> None:
        run = state.runs[rid]
        state.open.remove(rid)
        digest, last = state.digests.pop(rid, None), state.digest_seq.pop(rid)
        erased = state.erased.pop(rid)
        found = d.get("integrity")
        rec: dict[str, Any] = found if isinstance(found, dict) else {}
        if is_erased(ev):
            # its state, cost and digest went with it: the run ended, how is unknown
            run.update(finalized_seq=ev.seq, finalized_at=ev.time, state="erased",
                       integrity="erased", integrity_detail=f"erased seqs {[*erased, ev.seq]} "
                       "(run/finalized among them: the run's state, cost and digest are gone)")
            return
        if rec.get("first_seq") != run["started_seq"] or not isinstance(
                rec.get("last_seq"), int):
            verdict, detail = "mismatch", "the recorded range does not start at run/started"
        elif rec["last_seq"] != last:
            verdict = "unverified"
            detail = (f"recorded over seqs {rec['first_seq']}..{rec['last_seq']}, but "
                      f"events up to {last} came before run/finalized (another writer)")
        elif erased:
            verdict, detail = "erased", f"erased seqs {erased}"
        elif rec.get("algorithm") == CHAIN_DIGEST and isinstance(rec.get("digest"), str):
            # checked against the frame chain by settle(): the fold sees no chains
            verdict, detail = "pending", None
            run["chain_check"] = (last, rec["digest"])
        elif (rec.get("algorithm") != DIGEST or digest is None
              or rec.get("digest") != digest.hex()):
            verdict, detail = "mismatch", (f"the log's events {rec['first_seq']}..{last} "
                                           f"do not hash to the recorded digest")
        else:
            verdict, detail = "ok", None
        state_ = d.get("state")
        cost = d.get("cost")
        run.update(finalized_seq=ev.seq, finalized_at=ev.time,
                   state=state_ if state_ in RUN_STATES else "interrupted",
                   integrity=verdict, integrity_detail=detail,
                   error=d.get("error") if isinstance(d.get("error"), str) else None,
                   cost=cost if isinstance(cost, dict) else None)

    def view(self, state: RunsState) -> list[RunEnvelope]:
        out = []
        for run in state.runs.values():
            fields = {k: v for k, v in run.items() if k != "tally"}
            cost = run["cost"] if run["cost"] is not None else run["tally"]
            fields["cost"] = _json_copy(cost)
            fields["params"] = _json_copy(run["params"])
            fields["identity"] = _json_copy(run["identity"])
            fields["switches"] = _json_copy(run["switches"])
            fields["artifacts"] = dict(run.get("artifacts", {}))
            check = run.get("chain_check")
            fields["chain_check"] = None if check is None else (int(check[0]), str(check[1]))
            out.append(RunEnvelope(**fields))
        return out


def settle(envelopes: list[RunEnvelope],
           chain_at: Callable[[int], int]) -> list[RunEnvelope]:
    """Check each ``frame-chain/1`` run the fold left pending against the
    log's frame chain at its last seq (``chain_at``: a session's stored,
    verified chain value at a seq): ``ok`` or ``mismatch``."""
    out = []
    for env in envelopes:
        if env.chain_check is not None:
            last, recorded = env.chain_check
            found = chain_digest(env.run_id, env.started_seq, last, chain_at(last))
            verdict, detail = ("ok", None) if found == recorded else (
                "mismatch", f"the log's frame chain at seq {last} is not the one the run "
                            f"was finalized over: events {env.started_seq}..{last} (or before) "
                            "changed, or the run was copied into another log (an export and "
                            "import keep the chain)")
            env = msgspec.structs.replace(env, integrity=verdict, integrity_detail=detail,
                                          chain_check=None)
        out.append(env)
    return out


def _json_copy(value: Any) -> Any:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(value))


RUNS = Runs()


def runs(session: Projectable) -> list[RunEnvelope]:
    """Every run of ``session``'s log (its inherited prefix first, for a
    fork), in the order they started, with their integrity checked."""
    source = session.fold_source()
    result: list[RunEnvelope] = _project(source, RUNS)
    return settle(result, source.chain_at)


class RunNode(msgspec.Struct, frozen=True):
    """A run and the runs it delegated to.  ``path``: run ids from the root
    run down to this one; ``total``: the cost of this run and every run
    below it, per surface."""

    run: RunEnvelope
    path: tuple[str, ...]
    total: dict[str, dict[str, float]]
    children: list[RunNode]

    def walk(self) -> Iterator[RunNode]:
        """This node and every node below it, parents first."""
        yield self
        for child in self.children:
            yield from child.walk()


def run_tree(session: Any) -> list[RunNode]:
    """The runs of ``session`` and of every session below it (the handles of
    ``session.children()``, recursively: forks and subagents, as
    ``s.tree()``), as trees linked by ``parent_run``, with cost summed per
    delegation path (:attr:`RunNode.total`).  A run whose parent is in no
    session of the tree is a root.  Runs a fork inherited are counted once."""
    envelopes: dict[str, RunEnvelope] = {}
    for handle in _handles(session):
        for env in runs(handle):
            envelopes.setdefault(env.run_id, env)
    return build_tree(envelopes.values())


def _handles(session: Any) -> Iterator[Any]:
    yield session
    for child in session.children():
        yield from _handles(child)


def build_tree(envelopes: Iterable[RunEnvelope]) -> list[RunNode]:
    """Link runs by ``parent_run`` and sum cost along each delegation path."""
    by_id = {e.run_id: e for e in envelopes}
    kids: dict[str | None, list[RunEnvelope]] = {}
    for e in by_id.values():
        parent = e.parent_run if e.parent_run in by_id else None
        kids.setdefault(parent, []).append(e)

    def node(env: RunEnvelope, path: tuple[str, ...], seen: frozenset[str]) -> RunNode:
        path = (*path, env.run_id)
        children = [node(k, path, seen | {env.run_id}) for k in kids.get(env.run_id, [])
                    if k.run_id not in seen]
        total = _json_copy(env.cost)
        for child in children:
            add_costs(total, child.total)
        return RunNode(env, path, total, children)

    return [node(e, (), frozenset()) for e in kids.get(None, [])]


__all__ = ["COST_SURFACES", "DIGEST", "FINALIZED", "PRIVACY_MODES", "RUNS", "RUN_STATES",
           "STARTED", "SWITCH", "RunEnvelope", "RunNode", "Runs", "build_tree",
           "digest_add", "digest_start", "empty_cost", "is_erased",
           "prefix_hash", "run_tree", "runs", "tally"]
