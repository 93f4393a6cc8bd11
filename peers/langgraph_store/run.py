"""Run LangGraph's own store tests (``tests/test_store.py`` of the
langgraph-checkpoint sdist) against :class:`trajlog.adapters.langgraph.base_store.TrajlogStore`.

The suite tests ``InMemoryStore``: before it is collected, ``langgraph.store.memory.InMemoryStore``
is replaced by ``TrajlogInMemoryStore`` (a ``TrajlogStore`` on a fresh trajlog file per
instance), so every test that builds an ``InMemoryStore`` -- directly or inside the suite's
``MockAsyncBatchedStore`` -- runs on trajlog.  Exits non-zero when a test fails.

    python peers/langgraph_store/run.py [extra pytest args]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from fetch import sdist_tree  # type: ignore[import-not-found]  # noqa: E402  (peers/fetch.py)

from postgres import stores  # type: ignore[import-not-found]  # noqa: E402  (peers/postgres.py)

PEER = "langgraph-checkpoint==4.3.2"
TESTS = "tests/test_store.py"

# Every deselected test, with its reason.  Only vector search is out of scope: TrajlogStore
# declares it unsupported (index=... raises NotImplementedError).
VECTOR = "vector search (index=..., embeddings): declared unsupported by TrajlogStore"
DESELECT: dict[str, str] = {
    "test_vector_search_scores_every_item": VECTOR,
    "test_vector_store_initialization": VECTOR + " (asserts store.index_config)",
    "test_vector_insert_with_auto_embedding": VECTOR,
    "test_async_vector_insert_with_auto_embedding": VECTOR,
    "test_vector_update_with_embedding": VECTOR,
    "test_async_vector_update_with_embedding": VECTOR,
    "test_vector_search_with_filters": VECTOR,
    "test_async_vector_search_with_filters": VECTOR,
    "test_async_batched_vector_search_concurrent": VECTOR,
    "test_vector_search_pagination": VECTOR,
    "test_async_vector_search_pagination": VECTOR,
    "test_embed_with_path": VECTOR,
    "test_non_ascii": VECTOR + " (CharacterEmbeddings similarity on non-ASCII text)",
}


class TrajlogPlugin:
    """Swaps InMemoryStore for TrajlogStore and counts the outcomes."""

    def __init__(self) -> None:
        import langgraph.store.memory as lg_memory

        import trajlog
        from trajlog.adapters.langgraph.base_store import TrajlogStore

        self.tmp = tempfile.mkdtemp(prefix="trajlog-lg-store-")
        self.opened: list[Any] = []
        self.counts = {"passed": 0, "failed": 0, "skipped": 0, "deselected": 0}
        self.on_trajlog = 0   # tests that built at least one TrajlogStore
        self._before = 0
        plugin = self

        class TrajlogInMemoryStore(TrajlogStore):
            """InMemoryStore's constructor, a fresh trajlog store behind it."""

            def __init__(self, *, index: Any = None) -> None:
                if index is not None:
                    raise NotImplementedError("TrajlogStore: no vector search")
                fd, path = tempfile.mkstemp(suffix=".db", dir=plugin.tmp)
                os.close(fd)
                os.unlink(path)
                store = trajlog.open(path)
                plugin.opened.append(store)
                super().__init__(store)

        lg_memory.InMemoryStore = TrajlogInMemoryStore  # type: ignore[misc,assignment]

    def pytest_collection_modifyitems(self, config: Any, items: list[Any]) -> None:
        keep: list[Any] = []
        out: list[Any] = []
        for item in items:
            (out if item.originalname in DESELECT else keep).append(item)
        items[:] = keep
        config.hook.pytest_deselected(items=out)
        self.counts["deselected"] = len(out)

    def pytest_runtest_setup(self, item: Any) -> None:
        self._before = len(self.opened)

    def pytest_runtest_teardown(self, item: Any) -> None:
        self.on_trajlog += len(self.opened) > self._before

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            key = report.outcome if report.outcome in self.counts else "failed"
            self.counts[key] += 1

    def close(self) -> None:
        for store in self.opened:
            store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def main(argv: list[str]) -> int:
    tree = sdist_tree(PEER)
    with stores() as backend:
        plugin = TrajlogPlugin()
        os.chdir(tree)
        try:
            code = pytest.main([TESTS, "-q", "-p", "no:cacheprovider", "--rootdir", str(tree),
                                "-o", "addopts=--strict-markers", *argv], plugins=[plugin])
        finally:
            plugin.close()
    c = plugin.counts
    print(f"langgraph-checkpoint {PEER.split('==')[1]} {TESTS} on TrajlogStore ({backend}): "
          f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped, "
          f"{c['deselected']} deselected; {plugin.on_trajlog} of the tests run built a "
          "TrajlogStore (the others test LangGraph's own helpers)")
    if not plugin.on_trajlog:
        print("the InMemoryStore swap did not take: no test ran on trajlog")
        return 1
    for name, why in DESELECT.items():
        print(f"  deselected {name}: {why}")
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
