"""The conftest that injects trajlog into the Agents SDK's own tests (loaded
by ``run.py`` as ``-p trajlog_agents_plugin``, before any test module is
imported): the SDK's ``SQLiteSession`` and the suite's in-memory
``tests.utils.simple_session`` sessions become trajlog-backed sessions, so
every test written against them runs on a trajlog log."""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar, cast

import agents
import agents.extensions.memory.advanced_sqlite_session as advanced
import agents.memory

from trajlog.adapters.openai_agents import TrajlogSession

T = TypeVar("T")


def _blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end from sync code, even inside a running loop
    (the in-memory list sessions are read and filled synchronously)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append((True, asyncio.run(make())))
        except BaseException as exc:  # handed to the caller
            out.append((False, exc))

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    ok, value = out[0]
    if not ok:
        raise value
    return cast(T, value)


class SQLiteSession(TrajlogSession):
    """Stands in for ``agents.SQLiteSession``: same constructor, a trajlog
    store at ``db_path`` (``":memory:"``, the SDK's default, is a private
    in-memory trajlog store).  The table names have no meaning here."""

    def __init__(self, session_id: str, db_path: str | Path = ":memory:",
                 sessions_table: str = "agent_sessions", messages_table: str = "agent_messages",
                 session_settings: Any = None) -> None:
        super().__init__(session_id, os.fspath(db_path), session_settings=session_settings)
        self.db_path = db_path
        self.sessions_table, self.messages_table = sessions_table, messages_table


class AdvancedSQLiteSession(SQLiteSession):
    """Stands in for ``AdvancedSQLiteSession``: its keyword constructor; the
    branching methods are TrajlogSession's (a branch is a trajlog fork)."""

    def __init__(self, *, session_id: str, db_path: str | Path = ":memory:",
                 create_tables: bool = False, logger: Any = None,
                 session_settings: Any = None, **kwargs: Any) -> None:
        super().__init__(session_id, db_path, session_settings=session_settings, **kwargs)


class SimpleListSession(TrajlogSession):
    """``tests.utils.simple_session.SimpleListSession`` on an in-memory trajlog store."""

    def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
        super().__init__(session_id, ":memory:")
        self._ignore_ids_for_matching = False
        if history:
            items = list(history)
            _blocking(lambda: TrajlogSession.add_items(self, items))

    @property
    def saved_items(self) -> list[Any]:
        """What the store holds now (the original mirrors its list)."""
        return _blocking(lambda: TrajlogSession.get_items(self, None))


class CountingSession(SimpleListSession):
    def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
        super().__init__(session_id=session_id, history=history)
        self.pop_calls = 0

    async def pop_item(self) -> Any:
        self.pop_calls += 1
        return await super().pop_item()


class IdStrippingSession(CountingSession):
    def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
        super().__init__(session_id=session_id, history=history)
        self._ignore_ids_for_matching = True

    async def add_items(self, items: list[Any]) -> None:
        await super().add_items([{k: v for k, v in i.items() if k != "id"}
                                 if isinstance(i, dict) else i for i in items])


# the modules the suite imports these names from (setattr: they are typed as the SDK's)
for module in (agents, agents.memory):
    setattr(module, "SQLiteSession", SQLiteSession)  # noqa: B010
setattr(advanced, "AdvancedSQLiteSession", AdvancedSQLiteSession)  # noqa: B010
ext_memory: Any = importlib.import_module("agents.extensions.memory")
ext_memory.AdvancedSQLiteSession = AdvancedSQLiteSession

# the sdist's tree is on sys.path (run.py runs pytest from it)
_simple: Any = importlib.import_module("tests.utils.simple_session")
_simple.SimpleListSession = SimpleListSession
_simple.CountingSession = CountingSession
_simple.IdStrippingSession = IdStrippingSession


def pytest_report_header() -> str:
    return "trajlog: SQLiteSession and tests.utils.simple_session sessions are trajlog-backed"
