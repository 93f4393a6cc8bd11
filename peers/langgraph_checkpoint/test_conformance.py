"""LangGraph's checkpointer conformance suite (``langgraph-checkpoint-conformance``)
against :class:`trajlog.adapters.langgraph.TrajlogSaver`.

``validate()`` runs every capability the saver overrides: the five base ones
and ``copy_thread``.  ``delete_for_runs`` and ``prune`` are not claimed (the
saver does not override them), so ``validate()`` reports them "not
implemented" -- they are skipped by the suite itself, not deselected here.

Three variants, each on a fresh file store per capability suite:

* ``aio`` -- the async methods append through ``trajlog.aio`` (the default);
* ``executor`` -- the async methods run the sync ones in the loop's executor;
* ``sync`` -- a facade whose async methods call the sync methods directly, so
  the same spec drives the sync interface.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import CapabilityReport

from trajlog.adapters.langgraph import TrajlogSaver

CLAIMED = {"put", "put_writes", "get_tuple", "list", "delete_thread", "copy_thread"}
NOT_CLAIMED = {"delete_for_runs", "prune"}


class SyncFacade(TrajlogSaver):
    """The sync interface behind the async names the suite calls."""

    async def aget_tuple(self, config: Any) -> Any:
        return self.get_tuple(config)

    async def alist(self, config: Any, *, filter: Any = None, before: Any = None,
                    limit: Any = None) -> AsyncIterator[Any]:
        for tup in self.list(config, filter=filter, before=before, limit=limit):
            yield tup

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)


def _registered(variant: str) -> Any:
    async def factory() -> AsyncGenerator[TrajlogSaver, None]:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trajlog.db")
            saver: TrajlogSaver = (SyncFacade.open(path) if variant == "sync" else
                                   TrajlogSaver.open(path, async_appends=variant == "aio"))
            try:
                yield saver
            finally:
                saver.close()
    return checkpointer_test(name=f"TrajlogSaver[{variant}]")(factory)


@pytest.mark.parametrize("variant", ["aio", "executor", "sync"])
def test_conformance(variant: str) -> None:
    report: CapabilityReport = asyncio.run(validate(_registered(variant)))
    report.print_report()
    failures = [f for r in report.results.values() for f in r.failures]
    assert not failures, failures
    assert {c for c, r in report.results.items() if r.detected} == CLAIMED
    assert all(report.results[c].passed for c in CLAIMED)
    assert all(not report.results[c].detected for c in NOT_CLAIMED)
    passed = sum(r.tests_passed for r in report.results.values())
    print(f"\n[{variant}] conformance: {passed} passed, "
          f"{len(NOT_CLAIMED)} capabilities not claimed ({', '.join(sorted(NOT_CLAIMED))})")
