"""The session handle: the public methods of one session, each delegating to
the store's parts (writing, reading, recovery, lineage)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..errors import InvalidArgumentError, InvalidStateError, TrajlogError, ValidationError
from ..event_types import STATUSES, SURFACE_REPLACE
from ..events import Event, SessionHeader
from ..projections.branches import Branch
from ..projections.engine import FoldSource, StateCache
from ..recovery import RecoveryReport
from ..storage import Backend
from . import branch_ops as _branches
from . import checkpoints as _cp
from . import checks, delegation, run_scope
from . import closing as _closing
from .handles import LogRef, Options
from .lineage import Lineage, SessionTree
from .reading import FrameRun, LogReader, SessionFolds, VerifyReport
from .recover import BalancedView, Recovery
from .repack import Repacker
from .writer import WriteEngine


@dataclass(frozen=True, slots=True)
class Engines:
    """A store's parts, shared by its session handles."""

    backend: Backend
    options: Options
    reading: LogReader
    writer: WriteEngine
    recovery: Recovery
    lineage: Lineage
    views: StateCache
    repacker: Repacker



_NO_ENVELOPE: Mapping[str, Any] = MappingProxyType({})


def envelope_of(source: str | None, causal_parent: int | None,
                workspace_revision: str | None, data_class: str | None,
                idempotency_key: str | None, supersedes: int | None,
                branch_id: str | None) -> Mapping[str, Any]:
    """The envelope fields of an append that were given."""
    return {k: v for k, v in (("source", source), ("causal_parent", causal_parent),
                              ("workspace_revision", workspace_revision),
                              ("data_class", data_class),
                              ("idempotency_key", idempotency_key),
                              ("supersedes", supersedes), ("branch_id", branch_id))
            if v is not None}

class Session:
    """One session: its immutable header and its append-only log.

    Get one from :meth:`Store.create_session` or :meth:`Store.session`.
    Handles are cheap; several handles of one session may coexist.
    """

    def __init__(self, engines: Engines, ref: LogRef) -> None:
        self._e = engines
        self._ref = ref
        self.header: SessionHeader = ref.header
        self._turn_depth = 0
        self._step_depth = 0

    @property
    def id(self) -> str:
        return self.header.id

    def __repr__(self) -> str:
        return f"<trajlog.Session {self.id} cwd={self.header.cwd!r}>"

    # Internal handles for tests and tools that look beneath the API.
    @property
    def _sid(self) -> int:
        return self._ref.sid

    @property
    def _key(self) -> int:
        return self._ref.key

    def _chain_at(self, seq: int) -> int:
        return self._e.reading.chain_at(self._ref, seq)

    def _head(self) -> tuple[int, int]:
        """(last seq, its chain) in one read -- what a run's digest binds to."""
        head = self._e.reading.head(self._ref)
        return head.last_seq, head.chain

    def _wrap(self, ref: LogRef) -> Session:
        return Session(self._e, ref)

    # -- appending ----------------------------------------------------------

    def append(self, type: str, data: Any = None, *, time: int | None = None,
               source: str | None = None, causal_parent: int | None = None,
               workspace_revision: str | None = None, data_class: str | None = None,
               idempotency_key: str | None = None,
               supersedes: int | None = None, branch_id: str | None = None) -> Event:
        """Append one event; return it with its seq once it is durable.

        ``data`` must be JSON-compatible.  With an ``idempotency_key`` already
        used in this session for the same event, the event is not written
        again: the original is returned (also across processes) and a
        ``request/retry`` event records the repeated request
        (:mod:`trajlog.api.retries`); for a different event,
        :class:`IdempotencyConflictError`.  ``supersedes``: the seq of an
        earlier event whose fact this one replaces (a later seq is refused);
        ``branch_id``: the branch (approach) the event belongs to -- the
        context builder keeps other branches' facts out.
        """
        if (source is None and causal_parent is None and workspace_revision is None
                and data_class is None and idempotency_key is None and supersedes is None
                and branch_id is None):   # (most appends: no envelope, no call, no dict)
            envelope = _NO_ENVELOPE
        else:
            envelope = envelope_of(source, causal_parent, workspace_revision, data_class,
                                   idempotency_key, supersedes, branch_id)
        writer = self._e.writer
        header = self.header
        checks.check_append_type(header, type)
        rows = [writer.prepare(type, data, time, envelope)]
        events = writer.submit(self._ref, rows)
        run_scope.observe(header.id, events)
        return events[0]

    def append_batch(self, items: Iterable[Any]) -> list[Event]:
        """Append several events in one transaction: all of them or none.

        Each item is ``(type, data)`` or ``(type, data, envelope)``, where
        ``envelope`` is a dict of ``time`` and the envelope fields.  A batch
        whose every keyed event repeats the original batch is a retry: the
        originals are returned and one ``request/retry`` event is appended,
        named by the batch's first key; a batch mixing used and new keys is
        refused (:class:`IdempotencyConflictError`).
        """
        writer = self._e.writer
        header = self.header
        rows = writer.prepare_items(header, items)
        events = writer.submit(self._ref, rows)
        run_scope.observe(header.id, events)
        return events

    # -- the writer lease, turns and steps -------------------------------------

    @contextlib.contextmanager
    def lease(self, wait: float | bool = False) -> Iterator[Session]:
        """Hold the session's writer lease: no other writer may append meanwhile.

        A second writer gets :class:`LeaseHeldError` at once, or, with ``wait``
        (seconds, or True for no limit), polls until the lease is free.  A
        lease whose holder died (same host: its process is gone; other hosts:
        no heartbeat for ``lease_ttl_ms``) is taken over.  Re-entrant.
        """
        leases = self._e.writer.leases
        leases.acquire(self._ref.sid, self.id, wait)
        try:
            yield self
        finally:
            leases.release(self._ref.sid)

    @contextlib.contextmanager
    def turn(self, *, wait: float | bool = False) -> Iterator[Session]:
        """Append ``turn/start`` ... ``turn/end``, holding the writer lease.

        An exception escaping the block ends the turn with
        ``{"interrupted": true}`` and propagates.
        """
        if self._turn_depth:
            raise InvalidStateError("a turn is already open on this handle")
        with self.lease(wait):
            self.append("turn/start", {})
            self._turn_depth = 1
            try:
                yield self
            except BaseException:
                self._turn_depth = 0
                with contextlib.suppress(TrajlogError):
                    if self._step_depth:
                        self._step_depth = 0
                        self.append("step/end", {"interrupted": True})
                    self.append("turn/end", {"interrupted": True})
                raise
            self._turn_depth = 0
            self.append("turn/end", {"interrupted": False})

    @contextlib.contextmanager
    def step(self) -> Iterator[Session]:
        """Append ``step/start`` ... ``step/end`` inside a turn."""
        if not self._turn_depth:
            raise InvalidStateError("a step belongs inside a turn: use session.turn()")
        if self._step_depth:
            raise InvalidStateError("a step is already open on this handle")
        self.append("step/start", {})
        self._step_depth = 1
        try:
            yield self
        except BaseException:
            if self._step_depth:
                self._step_depth = 0
                with contextlib.suppress(TrajlogError):
                    self.append("step/end", {"interrupted": True})
            raise
        self._step_depth = 0
        self.append("step/end", {})

    # -- runs and model switches ------------------------------------------------

    def run(self, *, model: str, params: Mapping[str, Any] | None = None,
            policy_version: Any = None, tool_contract_version: Any = None,
            privacy_mode: str | None = None, parent_run: str | None = None,
            static_prefix: Any = None, run_id: str | None = None,
            artifacts: Mapping[str, str] | None = None,
            ) -> contextlib.AbstractContextManager[run_scope.Run]:
        """A run envelope: append ``run/started`` (identity, model and
        ``params``, policy and tool-contract versions, the SHA-256 of
        ``static_prefix``, privacy mode, parent run) and, when the block is
        left, ``run/finalized`` (state ``completed``, ``failed`` on an
        exception -- which propagates -- or ``interrupted``; cost on four
        surfaces; a hash over the run's events).  ``parent_run`` defaults to
        the innermost run of this session open in this context; a subagent's
        run names its parent's run id, else the run open at its spawn -- and
        keeps that run's tenant, user, policy version and privacy mode
        (``privacy_mode`` default: the parent run's, else ``"full"``; a weaker
        one, or another policy version, raises :class:`DelegationPinError`:
        docs/delegation.md).  ``artifacts``: the ids of what the run
        is pinned to, by name (a repository revision, an index build, a
        dataset), which :func:`trajlog.replay` hands the model again.  Read
        runs back with :func:`trajlog.projections.runs`."""
        return run_scope.run(self, model=model, params=params, policy_version=policy_version,
                         tool_contract_version=tool_contract_version,
                         privacy_mode=privacy_mode, parent_run=parent_run,
                         static_prefix=static_prefix, run_id=run_id, artifacts=artifacts)

    def switch_model(self, *, old: str | None, new: str, reason: str,
                     context_version: Any = None, context: Any = None) -> Event:
        """Append ``model/switch`` (the old and new logical model, why, and the
        version of the context re-injected into the new one), naming the
        open run if any; the trajectory shows it.  When ``new`` has a
        recorded ``model/policy``, the context re-injected (``context``: a
        :class:`~trajlog.projections.context.ContextBuild`; default: a build
        under the default policy) is checked first: a data class ``new`` may
        not receive refuses the switch (:class:`~trajlog.errors.ModelDataClassError`,
        nothing written; docs/reader-views.md)."""
        return run_scope.switch_model(self, old=old, new=new, reason=reason,
                                      context_version=context_version, context=context)

    # -- stage checkpoints and resumption (api/checkpoints.py) -----------------------

    def checkpoint(self, stage: str, *, preconditions: Mapping[str, bool] | None = None,
                   workspace_revision: str | None = None, policy_version: str | None = None,
                   plugin_versions: Mapping[str, str] | None = None,
                   run_id: str | None = None, now: int | None = None,
                   source: str = "system") -> Event:
        """Append a ``checkpoint/stage`` once the stage's preconditions hold:
        :func:`trajlog.api.checkpoints.checkpoint`."""
        return _cp.checkpoint(self, stage, preconditions=preconditions,
                              workspace_revision=workspace_revision,
                              policy_version=policy_version, plugin_versions=plugin_versions,
                              run_id=run_id, now=now, source=source)

    def resume(self, checkpoint_seq: int | None = None, *, now: int | None = None,
               workspace_revision: str | None = None, policy_version: str | None = None,
               plugin_versions: Mapping[str, str] | None = None, run_id: str | None = None,
               source: str = "system") -> _cp.Recovery:
        """Run and record the recovery checks, then ``run/resume`` or
        ``run/paused``: :func:`trajlog.api.checkpoints.resume`."""
        return _cp.resume(self, checkpoint_seq, now=now, workspace_revision=workspace_revision,
                          policy_version=policy_version, plugin_versions=plugin_versions,
                          run_id=run_id, source=source)

    def restart(self, checkpoint_seq: int | None = None, *, reason: str,
                now: int | None = None, workspace_revision: str | None = None,
                policy_version: str | None = None,
                plugin_versions: Mapping[str, str] | None = None, run_id: str | None = None,
                source: str = "system") -> _cp.Recovery:
        """Run a checkpoint's stage again (``run/restart``):
        :func:`trajlog.api.checkpoints.restart`."""
        return _cp.restart(self, checkpoint_seq, reason=reason, now=now,
                           workspace_revision=workspace_revision,
                           policy_version=policy_version, plugin_versions=plugin_versions,
                           run_id=run_id, source=source)

    def fork_from(self, checkpoint_seq: int | None = None, *, reason: str,
                  workspace_revision: str | None = None, run_id: str | None = None,
                  metadata: Mapping[str, Any] | None = None,
                  source: str = "system") -> _cp.Recovery:
        """A trajlog fork at a checkpoint, ``run/fork`` in both logs:
        :func:`trajlog.api.checkpoints.fork_from`."""
        return _cp.fork_from(self, checkpoint_seq, reason=reason,
                             workspace_revision=workspace_revision, run_id=run_id,
                             metadata=metadata, source=source)

    # -- reading --------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """Seq of the last durable event (-1 for an empty log)."""
        return self._e.reading.head(self._ref).last_seq

    def events(self, from_seq: int = 0, to_seq: int | None = None, *,
               lazy: bool = False) -> Iterator[Event]:
        """Stream events ``from_seq`` .. ``to_seq`` (default: the last durable
        one), verified as they are read, in bounded memory.  ``lazy=True``
        yields :class:`~trajlog.events.LazyEvent` values, whose ``data`` is
        decoded on first access (every frame is still verified as read).

        From seq 0 every frame and the whole chain are checked, and the chain
        must end at the session head.  From a later seq the chain is checked
        from that point on, seeded by the stored chain of the event before it.
        Corruption raises :class:`CorruptionError` (or a subclass).
        """
        if not isinstance(from_seq, int) or not isinstance(to_seq, (int, type(None))):
            raise TypeError("seqs must be int")
        if from_seq < 0:
            raise InvalidArgumentError("from_seq must be >= 0")
        return self._e.reading.events(self._ref, from_seq, to_seq, lazy=lazy)

    def get(self, seq: int) -> Event:
        """The event at ``seq`` (verified against the frame before it)."""
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise TypeError(f"seq must be int, not {type(seq).__name__}")
        if seq >= 0:
            event = self._e.reading.event_at(self._ref, seq)
            if event is not None:
                return event
        raise InvalidArgumentError(f"session {self.id} has no event {seq} "
                                   f"(last seq {self.last_seq})")

    def tail(self, n: int = 50) -> list[Event]:
        """The last ``n`` events, oldest first.  Costs O(n) whatever the log's length."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InvalidArgumentError("n must be a non-negative int")
        return self._e.reading.tail(self._ref, n) if n else []

    @property
    def seed_chain(self) -> int:
        """The chain this session's own first frame continues: its session key,
        or for a fork its parent's chain at ``seed_length - 1`` (FORMAT.md 2.2)."""
        return self._ref.seed_chain

    def frames(self) -> Iterator[FrameRun]:
        """This session's own frames (from its seed to its head), verified, run
        by run exactly as stored -- an erased payload blank -- with their
        decoded events: what an export writes (:mod:`trajlog.interop`)."""
        return self._e.reading.own_runs(self._ref)

    def verify(self) -> VerifyReport:
        """Recompute every frame check and the whole chain, and compare the end
        of the chain with the session head (the durable watermark).  For a
        fork, the inherited prefix of every ancestor is verified too, and the
        chain must pass from the parent's frame ``seed_length - 1`` into this
        log's first frame.

        Never repairs.  Returns a report whose ``scan`` says clean or names the
        first defect (seq, byte offset in that session's log stream, reason)
        and whose ``session`` names the session holding it; a defect raises
        nothing -- call ``report.scan.raise_for(report.session)`` to raise it.
        """
        return self._e.reading.verify(self._ref)

    def inspect(self) -> tuple[BalancedView, RecoveryReport]:
        """The balanced view of this session and what recovery would do; writes
        nothing.  A log that cannot be trusted gives a report whose
        ``outcome`` is ``"refused"`` and whose ``refusal`` is the typed error
        :meth:`Store.load` would raise."""
        return self._e.recovery.recover(self._ref, repair=False)

    def fold_source(self) -> FoldSource:
        """What the projection engine reads of this session (for
        :func:`trajlog.projections.project` with a fold of your own)."""
        e = self._e
        return SessionFolds(e.reading, e.backend, e.writer.transaction, self._ref, e.views)

    # -- compaction and event status -------------------------------------------

    def compact(self, from_seq: int, to_seq: int, summary: str, *,
                source: str | None = "model") -> Event:
        """Append a ``compaction/apply`` event whose ``surface-replace`` op hides
        events ``from_seq .. to_seq`` behind ``summary`` in the model history.
        Nothing is deleted: the raw events stay in the log.  The range must not
        split a tool call from its result, and must nest with earlier ones
        (checked inside the write transaction)."""
        if not isinstance(summary, str) or not summary:
            raise TypeError("summary must be a non-empty str")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (from_seq, to_seq)):
            raise TypeError("from_seq and to_seq must be int")
        return self.append("compaction/apply", {"op": SURFACE_REPLACE, "from_seq": from_seq,
                                                "to_seq": to_seq, "summary": summary},
                           source=source)

    def mark(self, seq: int, status: str, reason: str, *, source: str) -> Event:
        """Append an ``event/status`` event: event ``seq`` becomes ``superseded``,
        ``rejected``, ``expired``, ``audit-only`` (or ``active`` again), with
        the reason and who decided."""
        if status not in STATUSES:
            raise ValidationError(f"status must be one of {', '.join(STATUSES)}")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise InvalidArgumentError(f"session {self.id} has no event {seq}")
        if not isinstance(reason, str) or not reason:
            raise TypeError("reason must be a non-empty str")
        return self.append("event/status", {"target": seq, "status": status,
                                            "reason": reason}, source=source)

    # -- branches of investigation (api/branch_ops.py) ------------------------------

    def start_branch(self, name: str, *, from_seq: int, workspace_revision: str | None = None,
                     data_samples: Sequence[str] = (),
                     tool_versions: Mapping[str, str] | None = None,
                     permissions: Sequence[str] = (), source: str = "system") -> Event:
        """Start branch ``name`` from the main-line event ``from_seq``, its
        start frozen (``branch/started``); append to it with ``branch_id=name``:
        :func:`trajlog.api.branch_ops.start`."""
        return _branches.start(self, name, from_seq=from_seq,
                               workspace_revision=workspace_revision, data_samples=data_samples,
                               tool_versions=tool_versions, permissions=permissions,
                               source=source)

    def rebase_branch(self, name: str, *, onto_seq: int, reason: str,
                      source: str = "system") -> Event:
        """Move a branch's start to a later main-line event (``branch/rebased``)."""
        return _branches.rebase(self, name, onto_seq=onto_seq, reason=reason, source=source)

    def merge_branch(self, name: str, *, common_facts: Sequence[Mapping[str, Any]] = (),
                     adopted: Sequence[Mapping[str, Any]] = (),
                     rejected: Sequence[Mapping[str, Any]] = (),
                     unresolved: Sequence[str] = (), sample: Sequence[str] | None = None,
                     check: Mapping[str, Any] | None = None, code_version: str | None = None,
                     decision: Mapping[str, Any] | None = None,
                     source: str = "system", data_class: str | None = None) -> Event:
        """Bring a branch's evidence back through the merge gate
        (``branch/merged``, its status ``fact`` only with every gate part;
        its data class by default the branch's most sensitive):
        :func:`trajlog.api.branch_ops.merge`."""
        return _branches.merge(self, name, common_facts=common_facts, adopted=adopted,
                               rejected=rejected, unresolved=unresolved, sample=sample,
                               check=check, code_version=code_version, decision=decision,
                               source=source, data_class=data_class)

    def abandon_branch(self, name: str, *, reason: str, source: str = "system") -> Event:
        """Give a branch up (``branch/abandoned``); its events stay."""
        return _branches.abandon(self, name, reason=reason, source=source)

    def branches(self) -> dict[str, Branch]:
        """Each branch of this session, by name: start, rebases, merges, state."""
        return _branches.branches(self)

    # -- lineage --------------------------------------------------------------

    def parent(self) -> Session | None:
        """The session this one was forked or spawned from, if any."""
        return None if self._ref.parent is None else self._wrap(self._ref.parent)

    def children(self, *, include_subagents: bool = True) -> list[Session]:
        """Sessions forked or spawned from this one, oldest first."""
        return [self._wrap(r) for r in self._e.reading.children(self._ref)
                if include_subagents or r.header.origin is None]

    def tree(self) -> SessionTree:
        """This session and all its descendants."""
        return self._e.lineage.tree(self._ref)

    def fork(self, at_seq: int, *, metadata: Mapping[str, Any] | None = None,
             session_id: str | None = None) -> Session:
        """A new ordinary session that shares this log up to the end of the turn
        containing ``at_seq`` (:class:`ForkUnavailableError` if that turn is
        still open).  Nothing is copied; the cost does not grow with the log.
        ``session_id`` (a UUID string) names the fork, as in
        :meth:`Store.create_session`."""
        return self._wrap(self._e.lineage.fork(self._ref, at_seq, metadata, session_id))

    def spawn_subagent(self, task: str, agent_preset: str | None = None, *,
                       call_id: str | None = None, background: bool = False,
                       sandbox: Mapping[str, Any] | None = None,
                       metadata: Mapping[str, Any] | None = None) -> Session:
        """A subagent session with no seed: ``origin="subagent"``, one more level
        of delegation (:class:`DelegationLimitError` beyond the store's limit),
        the task as its first user message, the parent's explicit sandbox
        settings snapshotted.  ``call_id`` names the parent's spawning tool call
        that :meth:`finish` answers; ``background=True`` answers it at once with
        a job id and notifies the parent when the child finishes."""
        return self._wrap(self._e.lineage.spawn(
            self._ref, task, agent_preset, seeded=False, call_id=call_id,
            background=background, sandbox=sandbox, metadata=metadata))

    def fork_subagent(self, task: str, agent_preset: str | None = None, *,
                      call_id: str | None = None, background: bool = False,
                      sandbox: Mapping[str, Any] | None = None,
                      metadata: Mapping[str, Any] | None = None) -> Session:
        """As :meth:`spawn_subagent`, seeded with this log up to its last
        completed turn (never the turn in progress); its approval policy is
        fixed to never."""
        return self._wrap(self._e.lineage.spawn(
            self._ref, task, agent_preset, seeded=True, call_id=call_id,
            background=background, sandbox=sandbox, metadata=metadata))

    def task(self) -> str | None:
        """This subagent's task as its log holds it now (the header only
        points at that event): masked if redaction masked it, None once it
        is erased, and None for a session that is not a subagent."""
        return self._e.lineage.task(self._ref)

    def finish(self, status: str = "done") -> Event:
        """Report this subagent's outcome to its parent, exactly once: a
        ``tool/result`` for the spawning call (foreground) or a
        ``subagent/notification`` (background)."""
        return self._e.lineage.finish(self._ref, status)

    def report(self, kind: str, content: Any, *, sensitivity: str = "internal",
               run: Any = None, model: str | None = None) -> Event:
        """Report a typed result of this subagent to its parent: a
        ``subagent/result`` there with ``kind`` (fact, episode, suggestion,
        tool_result), ``content``, ``sensitivity`` and its provenance -- this
        session, ``run`` (default: its run open in this context; a
        :class:`Run` or run id) and that run's model (or ``model``).
        :class:`SubagentResultError` when untyped or unprovenanced
        (docs/delegation.md)."""
        data = delegation.result_data(
            self, kind, content, sensitivity=sensitivity, model=model,
            run=run_scope.current_run(self.id) if run is None else run)
        return self._e.lineage.report(self._ref, data)

    def remember_result(self, memory: Any, seq: int) -> Any:
        """Write the ``subagent/result`` at ``seq`` of this session into its
        session scope of ``memory`` (a :class:`trajlog.memory.MemoryView` for
        this session), provisional and sourced from that event: only
        ``memory.promote`` moves it further, through the gates."""
        return delegation.remember_result(memory, self, seq)

    def close(self, reason: str | None = None) -> Event:
        """End this session's log with ``session/closed`` and return it: later
        appends raise :class:`~trajlog.errors.SessionClosedError` (closing is
        final: fork the session to go on); "until the session closes"
        retention and ``trajlog tail -f`` end here.  Refused while a turn, a
        step or a tool call is open, or a background subagent has not
        reported yet (its result would be refused).  Idempotent (:mod:`.closing`)."""
        running = [] if self.closed else self._e.lineage.running_background(self._ref)
        if running:
            raise InvalidStateError(f"session {self.id} has background subagents still "
                                    f"running ({', '.join(c.id for c in running)}): close "
                                    "it once they have finished (or close them)")
        return _closing.close(self._e.reading, self._e.backend.reader(), self._e.writer,
                              self._ref, reason)

    @property
    def closed(self) -> bool:
        """Whether this session's own log holds ``session/closed``."""
        return _closing.closed_at(self._e.reading, self._e.backend.reader(),
                                  self._ref) is not None

    def missed_notifications(self) -> list[Session]:
        """Background subagents that settled without notifying this session."""
        return [self._wrap(r) for r in self._e.lineage.missed_notifications(self._ref)]

    def approvals(self) -> list[Event]:
        """The ``approval/grant`` events in force (inherited one-time grants never
        count; a forked subagent has none)."""
        return self._e.lineage.effective_approvals(self._ref)


__all__ = ["Engines", "Session"]
