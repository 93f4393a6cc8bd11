"""The rules of branches of investigation, checked inside the append's
transaction (:func:`trajlog.api.write_stages.check_rules` calls
:func:`check_branches`).

The check reads the log as the transaction sees it, under the same lock as
the append, so two writers cannot both merge a branch, or one append to a
branch the other just abandoned.  It runs only for a batch holding a
``branch/*`` event or an event carrying a ``branch_id`` other than
``main``.  The log's branches are folded once, from the ``branch/*``
events found through their index rows (in the log and in every log a fork
inherits), not by reading the log; the write state keeps the fold, so that
a branch append then costs the same whatever the log's length.
The rules themselves are :class:`trajlog.projections.branches.Branches`'.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from ..errors import index_mismatch
from ..events import Event
from ..projections.branches import MAIN, PREFIX, Branches
from ..storage import Reader
from .handles import LogRef
from .reading import LogReader


def concerns_branches(events: Sequence[Event]) -> bool:
    """Whether a batch holds anything the branch rules check."""
    return any(ev.type.startswith(PREFIX) or ev.branch_id not in (None, MAIN)
               for ev in events)


def check_branches(reading: LogReader, tx: Reader, ref: LogRef, events: Sequence[Event],
                   first: int, known: Branches | None = None) -> Branches | None:
    """Refuse (a :class:`~trajlog.errors.BranchError`) a batch about to be
    appended at ``first`` that breaks a branch rule.  ``known``: the log's
    branches up to ``first - 1`` (the write state keeps them: see
    :attr:`~trajlog.api.logstate.LogState.branches`), else folded from the
    index.  Returns the branches as the batch leaves them (None: the batch
    concerns no branch); ``known`` is left as it was."""
    if not concerns_branches(events):
        return None
    batch = [replace(ev, seq=first + i) for i, ev in enumerate(events)]

    def event_at(seq: int) -> Event | None:
        if seq >= first:
            return batch[seq - first] if seq - first < len(batch) else None
        return next(iter(reading.events(ref, seq, seq, reader=tx)), None)

    if known is None:
        known = Branches(ref.id, event_at=event_at)
        for ev in _logged(reading, tx, ref, first - 1):
            known.feed(ev)   # leniently: what is logged stands
    rules = known.copy(event_at)   # (a refused batch leaves ``known`` untouched)
    rules.strict = True
    for ev in batch:
        rules.feed(ev)
    return rules


def _logged(reading: LogReader, tx: Reader, ref: LogRef, upto: int) -> list[Event]:
    """The ``branch/*`` events of ``ref``'s log up to ``upto`` (its inherited
    prefix included), in log order, each read back from its frame."""
    found: list[Event] = []
    for level, hi in reversed(ref.levels(upto)):   # the oldest ancestor first
        for row in tx.index_rows(level.sid, level.seed - 1, hi):
            if row.type.startswith(PREFIX):
                ev = next(iter(reading.events(ref, row.seq, row.seq, reader=tx)), None)
                if ev is None or ev.type != row.type:
                    raise index_mismatch(ref.id, row.seq, f"indexed as {row.type!r}, the "
                                         f"frame is {None if ev is None else ev.type!r}")
                found.append(ev)
    return found


__all__ = ["Branches", "check_branches", "concerns_branches"]   # (the fold the write state keeps)
