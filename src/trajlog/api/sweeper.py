"""Store retention rules applied: planned, applied at once, or by the
background sweeper in bounded passes.

The rules (:class:`~trajlog.memory.retention_rules.RetentionRules`) cover
every session's own events by kind, and session-scope memory.  Every removal
goes through the erasure path (:meth:`Forgetting.erase`, and revocation for
memory): a tombstone whose reason names the rule, the same purge.

The sweeper is a thread the store owns, started only when the rules name
``sweep_seconds`` and stopped (joined) by :meth:`Store.close`.  It is never
on a caller's durable path: appends do not wait for it or call it.  A pass
is bounded: it reads at most ``per_pass`` events (and memory versions), so
it erases at most that many, one transaction per session and rule; each
session keeps a cursor (in this process) below which everything is decided
-- erased, or kept for good -- so passes go on where the last one stopped,
round-robin over the sessions, and purges once, after its last erasure (the
erasures of a pass defer theirs: a WAL checkpoint on SQLite, a VACUUM on
PostgreSQL, each a pause for the writers); events due later (a message kept 90 days
among tool outputs kept 7) hold the cursor back, and the passes read on past
them to the log's end, then again from the cursor -- but only once one of
them is due (or the session closed): a log the passes caught up with costs a
head read, no event read, until then.  Before each transaction it waits for a
quiet moment (no append committed in the store for :data:`QUIET_SECONDS`),
at most :data:`MAX_YIELD_SECONDS` -- a host that never stops appending
still gets swept, one bounded transaction at a time.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import SessionDeletedError, TrajlogError
from ..memory import retention as rt
from ..memory.model import PurgeReport, RetentionReport
from ..memory.retention_rules import KINDS, RetentionRules, Rule
from ..memory.revoke import revoke_item
from ..memory.versions import read_item
from ..storage import Backend
from . import closing
from .forget import Forgetting
from .handles import LogRef
from .reading import LogReader

QUIET_SECONDS = 0.02      # no append this long: the sweeper may take the write lock
MAX_YIELD_SECONDS = 2.0   # ... and it waits for that at most this long
ACTOR = rt.ACTOR
_PAGE = 256               # memory versions read at a time
_NEVER = 1 << 62          # (no event read is due at any time: only a close or new events)


@dataclass(frozen=True, slots=True)
class SweepReport:
    """One pass: ``read`` (events and memory versions looked at),
    ``erased`` ((session id, seq) erased), ``revoked`` (memory item ids),
    ``transactions`` (erasures and revocations, one transaction each),
    ``yielded`` (times it waited for appends to pause)."""

    read: int
    erased: tuple[tuple[str, int], ...]
    revoked: tuple[str, ...]
    transactions: int
    yielded: int
    purges: tuple[PurgeReport, ...] = ()
    purged: tuple[str, ...] = ()   # a bounded pass: its one purge, after its last erasure


@dataclass(frozen=True, slots=True)
class SweeperStatus:
    """What the background sweeper is doing: ``running`` (its thread is
    alive), ``passes`` (sweeps run by this store object: the thread's,
    ``sweep_retention``'s and ``apply_retention``'s), ``last`` (the last pass's
    report, or None) and ``errors`` (what background passes hit, oldest
    first, the last 64: they are kept here, never raised into a caller)."""

    running: bool
    passes: int
    last: SweepReport | None
    errors: tuple[BaseException, ...]


Plan = tuple[list[tuple[str, str]], list[tuple[str, list[int], str]]]


class Sweeper:
    """The store's rules, planned and applied (see the module docstring)."""

    def __init__(self, backend: Backend, reading: LogReader, forget: Forgetting,
                 appends: Callable[[], int], rules: RetentionRules | None) -> None:
        self._backend = backend
        self._reading = reading
        self._forget = forget
        self._appends = appends
        self.rules = rules
        self._cursor: dict[int, int] = {}   # sid -> every own seq below it is decided
        self._scan: dict[int, int] = {}     # sid -> where the next pass reads on from
        # sid -> (when the soonest event read since the cursor, not due then, is due;
        # whether the session was closed): a caught-up log is not read again before
        self._pending: dict[int, tuple[int, tuple[bool, int]]] = {}
        self._next = 0                      # round-robin: the session a pass starts at
        self._mid = 0                       # memory versions looked at up to this mid
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.passes: deque[SweepReport] = deque(maxlen=64)   # the last passes, for hosts
        self.errors: deque[BaseException] = deque(maxlen=64)  # what background passes hit
        self.count = 0   # passes run

    def set_rules(self, rules: RetentionRules | None) -> None:
        """New rules: every cursor starts over (what was kept for good may go
        now), and a sweeper starts if they ask for one."""
        with self._cond:
            self.rules = rules
            self._cursor.clear()
            self._scan.clear()
            self._pending.clear()
            self._mid = 0
        self.start()

    # -- planning --------------------------------------------------------------

    def plan(self, now_ms: int, limit: int | None = None) -> tuple[Plan, int]:
        """What the rules remove at ``now_ms`` -- ``(item id, reason)`` and
        ``(session id, seqs, reason)`` -- reading at most ``limit`` events and
        memory versions (None: all), and how many it read."""
        rules = self.rules
        if rules is None or not rules.active:
            return ([], []), 0
        budget = limit if limit is not None else 1 << 62
        read = 0
        events: list[tuple[str, list[int], str]] = []
        refs = [r for r in self._refs()]
        closed: dict[int, bool] = {}
        waits = any(getattr(rules, kind).until_closed for kind in KINDS)
        start = self._next % len(refs) if refs and limit is not None else 0
        for i in range(len(refs)):
            if read >= budget:
                break
            ref = refs[(start + i) % len(refs)]
            self._next = start + i + 1
            is_closed = closing.closed_at(self._reading, self._backend.reader(), ref) is not None
            closed[ref.sid] = is_closed
            hold = self._held(ref) if is_closed and waits else 0
            found, n = self._due(ref, rules, now_ms, (is_closed, hold), budget - read,
                                 limit is not None)
            read += n
            events += found
        items: list[tuple[str, str]] = []
        if rules.session_memory == "until_closed" and read < budget:
            found_items, n = self._due_items(refs, closed, budget - read, limit is not None)
            read += n
            items += found_items
        return (items, events), read

    def _refs(self) -> list[LogRef]:
        out = []
        for h in self._reading.sessions(include_subagents=True):
            if h.damage is None:
                try:
                    out.append(self._reading.ref_by_id(h.id))
                except TrajlogError:
                    continue   # (gone or damaged since it was listed)
        return out

    def _held(self, ref: LogRef) -> int:
        """The seq below which ``ref``'s log is still read by an open session
        (a fork or subagent of it, or one of theirs, not closed): an
        ``until_closed`` rule waits for those too (0: none)."""
        reader = self._backend.reader()

        def open_below(r: LogRef) -> bool:
            return closing.closed_at(self._reading, reader, r) is None or any(
                open_below(c) for c in self._reading.children(r))
        return max((c.seed for c in self._reading.children(ref) if open_below(c)), default=0)

    def _due(self, ref: LogRef, rules: RetentionRules, now_ms: int, state: tuple[bool, int],
             budget: int, bounded: bool) -> tuple[list[tuple[str, list[int], str]], int]:
        """The seqs of ``ref``'s own log due under the rules, grouped by rule,
        from its cursor (``bounded``: moved on), reading at most ``budget``;
        ``state``: whether the session is closed, and the seq below which an
        open fork still reads its log (:meth:`_held`)."""
        is_closed, hold = state
        sid = ref.sid
        last = self._reading.head(ref).last_seq
        low = max(ref.seed, self._cursor.get(sid, 0)) if bounded else ref.seed
        first = max(low, self._scan.get(sid, 0)) if bounded else low
        if first > last:   # caught up with the log
            soonest, seen = self._pending.get(sid, (0, state))
            if now_ms < soonest and state == seen:
                return [], 0   # nothing read since can be due yet: no read at all
            # something may be due among what was left: read again from the cursor
            first = low
            if first > last:
                return [], 0
        if first == low:
            self._pending[sid] = (_NEVER, state)
        upto = min(last, first + budget - 1)
        soonest = self._pending.get(sid, (_NEVER, state))[0]
        groups: dict[str, tuple[Rule, list[int]]] = {}
        decided = first == low   # (the cursor moves only over what it reads from it)
        cursor = low
        for ev in self._reading.events(ref, first, upto):
            under = rules.rule_for(ev.type)
            gone = isinstance(ev.data, dict) and isinstance(ev.data.get("erased"), dict)
            if under is None or gone or under[1].kept:
                pass   # decided for good (a later rule change starts a new process)
            elif (under[1].until_closed and is_closed and ev.seq >= hold) or (
                    under[1].ttl_ms is not None and ev.time <= now_ms - under[1].ttl_ms):
                groups.setdefault(under[0], (under[1], []))[1].append(ev.seq)
            else:
                decided = False   # due later: the cursor stays here
                if under[1].ttl_ms is not None:
                    soonest = min(soonest, ev.time + under[1].ttl_ms + 1)
            if decided:
                cursor = ev.seq + 1
        if bounded:
            self._cursor[sid] = cursor
            self._scan[sid] = upto + 1
            self._pending[sid] = (soonest, state)
        return [(ref.id, seqs, f"retention rule {kind}: {rule.describe()}")
                for kind, (rule, seqs) in groups.items()], upto - first + 1

    def _due_items(self, refs: list[LogRef], closed: dict[int, bool], budget: int,
                   bounded: bool) -> tuple[list[tuple[str, str]], int]:
        """Session-scope items whose session is closed (those not revoked)."""
        by_id = {r.id: r for r in refs}
        reader = self._backend.reader()
        after = self._mid if bounded else 0
        read = 0
        out: list[tuple[str, str]] = []
        while read < budget:
            rows = reader.memory_latest(after, min(_PAGE, budget - read))
            if not rows:
                after = 0   # (the end: the next pass starts over)
                break
            read += len(rows)
            after = rows[-1].mid
            for row in rows:
                ref = by_id.get(row.scope_key) if row.scope == "session" else None
                if ref is None or row.state == "revoked":
                    continue
                if ref.sid not in closed:
                    closed[ref.sid] = closing.closed_at(self._reading, reader, ref) is not None
                if closed[ref.sid]:
                    out.append((row.item_id, "retention rule session_memory: until "
                                "session/closed"))
        if bounded:
            self._mid = after
        return out, read

    # -- applying ----------------------------------------------------------------

    def sweep(self, now_ms: int | None = None, *, limit: int | None = None,
              yield_to_appends: bool = False) -> SweepReport:
        """Apply what :meth:`plan` finds: one bounded pass when ``limit``
        (the sweeper's), everything when None."""
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        # what the cursors were: a pass that fails puts them back, so that what
        # it found and did not erase is found again by the next pass
        saved = (dict(self._cursor), dict(self._scan), dict(self._pending), self._next,
                 self._mid)
        (items, events), read = self.plan(now, limit)
        erased: list[tuple[str, int]] = []
        revoked: list[str] = []
        purges: list[PurgeReport] = []
        transactions = yielded = 0
        purged: tuple[str, ...] = ()
        try:
            for session_id, seqs, why in events:
                if yield_to_appends:
                    yielded += self._yield()
                if self._closed:
                    break
                try:
                    purges.append(self._forget.erase(session_id, seqs, reason=why,
                                                     actor=ACTOR, now_ms=now,
                                                     purge_now=limit is None))
                except SessionDeletedError:
                    continue   # deleted since the plan: its deletion erased it all
                transactions += 1
                erased += [(session_id, s) for s in seqs]
            for item_id, why in items:
                if self._closed:
                    break
                versions = read_item(self._backend.reader(), item_id)
                if not versions or versions[-1].state == "revoked":
                    continue
                if yield_to_appends:
                    yielded += self._yield()
                purges.append(revoke_item(self._backend, item_id, reason=why, actor=ACTOR,
                                          now_ms=now, check=lambda item: None))
                transactions += 1
                revoked.append(item_id)
        except BaseException:
            with self._cond:
                (self._cursor, self._scan, self._pending, self._next, self._mid) = saved
            raise
        finally:
            if revoked:
                self._forget.after_purge()
            if erased and limit is not None:   # (one purge a pass, even a failed one's)
                done = self._backend.purge()
                purged = done.done + done.residues
        report = SweepReport(read, tuple(erased), tuple(revoked), transactions, yielded,
                             tuple(purges), purged)
        self.passes.append(report)
        self.count += 1
        return report

    def _yield(self) -> int:
        """Wait for a quiet moment (no append for :data:`QUIET_SECONDS`), at
        most :data:`MAX_YIELD_SECONDS`; 1 if it waited."""
        waited = 0
        deadline = time.monotonic() + MAX_YIELD_SECONDS
        with self._cond:
            while not self._closed and time.monotonic() < deadline:
                seen = self._appends()
                self._cond.wait(QUIET_SECONDS)
                if self._appends() == seen:
                    break
                waited = 1
        return waited

    # -- the background thread -------------------------------------------------------

    def start(self) -> None:
        """Start the background sweeper if the rules ask for one."""
        rules = self.rules
        if rules is None or rules.sweep_seconds is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, args=(rules.sweep_seconds,),
                                        name="trajlog-retention", daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while True:
            with self._cond:
                self._cond.wait(every)
                if self._closed:
                    return
            rules = self.rules
            try:
                if rules is not None:
                    self.sweep(limit=rules.per_pass, yield_to_appends=True)
            except Exception as exc:   # (damage, the store closing: not a caller's)
                self.errors.append(exc)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def status(self) -> SweeperStatus:
        """(:meth:`Store.sweeper_status`.)"""
        return SweeperStatus(self.running, self.count, self.passes[-1] if self.passes else None,
                             tuple(self.errors))

    def close(self) -> None:
        """Stop the background sweeper (a pass under way ends after its
        current transaction) and wait for its thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()


def apply_all(forget: Forgetting, sweeper: Sweeper, now_ms: int | None) -> RetentionReport:
    """Every session's ``retention/policy`` applied, then the store's rules
    (unbounded): what :meth:`Store.apply_retention` does."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    policies = forget.apply_retention(now)
    rules = sweeper.sweep(now)
    return RetentionReport(now, policies.items_revoked + rules.revoked,
                           policies.events_erased + rules.erased,
                           policies.purges + rules.purges)


def plan_all(forget: Forgetting, sweeper: Sweeper, now_ms: int | None) -> Plan:
    """What :func:`apply_all` would remove, writing nothing (a seq due under a
    session's policy and a store rule is listed under each)."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    items, events = forget.plan_retention(now)
    (more_items, more_events), _ = sweeper.plan(now)
    seen = {i for i, _ in items}
    return items + [(i, why) for i, why in more_items if i not in seen], events + more_events


__all__ = ["MAX_YIELD_SECONDS", "QUIET_SECONDS", "SweepReport", "Sweeper", "SweeperStatus",
           "apply_all", "plan_all"]
