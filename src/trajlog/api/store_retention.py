"""The store's retention face: its rules, their plan and application, the
background sweeper's status (the logic is in :mod:`.sweeper`,
:mod:`..memory.retention_rules` and :mod:`..memory.stored_rules`; this mixin
keeps :class:`~trajlog.api.store.Store` small)."""

from __future__ import annotations

from collections.abc import Callable

from ..memory import RetentionReport
from ..memory.retention_rules import RetentionRules
from ..memory.stored_rules import load_rules, save_rules
from .forget import Forgetting
from .session import Engines
from .sweeper import Sweeper, SweeperStatus, SweepReport, apply_all, plan_all


class RetentionFace:
    """Retention methods of :class:`~trajlog.api.store.Store`."""

    _e: Engines
    _forget: Forgetting
    _sweeper: Sweeper

    _check_open: Callable[[], None]   # (Store's: raises once the store is closed)

    def apply_retention(self, now_ms: int | None = None) -> RetentionReport:
        """Apply every recorded retention policy now: items past their TTL or
        their ``until_event`` are revoked, event payloads past their
        session's ``retention/policy`` erased, then the store's
        :attr:`retention` rules -- each under a tombstone with its reason (the
        rule), with the same purge.  Idempotent."""
        self._check_open()
        return apply_all(self._forget, self._sweeper, now_ms)

    def retention_plan(self, now_ms: int | None = None) -> tuple[
            list[tuple[str, str]], list[tuple[str, list[int], str]]]:
        """What :meth:`apply_retention` would remove at ``now_ms``, writing
        nothing: ``(item id, reason)`` pairs and ``(session id, seqs, reason)``."""
        self._check_open()
        return plan_all(self._forget, self._sweeper, now_ms)

    @property
    def retention(self) -> RetentionRules | None:
        """The retention rules in effect (None: only sessions' own policies):
        those given to :func:`open`, else those saved in the store when it
        was opened.  Assigning new rules applies them to this store object
        only, from the next pass (a sweeper starts if they ask for one and
        none runs); :meth:`set_retention` also saves them."""
        return self._sweeper.rules

    @retention.setter
    def retention(self, rules: RetentionRules | None) -> None:
        if rules is not None and not isinstance(rules, RetentionRules):
            raise TypeError(f"retention must be RetentionRules, not {type(rules).__name__}")
        self._check_open()
        self._sweeper.set_rules(rules)

    def set_retention(self, rules: RetentionRules | None, *, actor: str) -> str:
        """Save ``rules`` in the store (None: clear them) -- the next version
        of a global ``policy`` item, audited like any deployment -- so every
        store opened on it later applies them, and apply them here now (as
        :attr:`retention`).  Idempotent; returns the item id."""
        self._check_open()
        item_id = save_rules(self._e.backend, rules, actor=actor)
        self._sweeper.set_rules(rules)
        return item_id

    def stored_retention(self) -> RetentionRules | None:
        """The rules saved in the store now (None: none), whatever this store
        object applies; a stored value that is not rules is a
        :class:`~trajlog.errors.StoredRetentionRulesError`."""
        self._check_open()
        return load_rules(self._e.backend)

    def sweeper_status(self) -> SweeperStatus:
        """Whether the background sweeper runs, its passes and the errors
        its background passes hit (never raised into a caller)."""
        return self._sweeper.status()

    def sweep_retention(self, now_ms: int | None = None) -> SweepReport:
        """One bounded pass of the store's rules, as the background sweeper
        runs it (at most ``per_pass`` events read; :mod:`.sweeper`)."""
        self._check_open()
        rules = self._sweeper.rules
        return self._sweeper.sweep(now_ms, limit=rules.per_pass if rules is not None else 1)


__all__ = ["RetentionFace"]
