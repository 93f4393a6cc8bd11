"""Run the OpenAI Agents SDK's own session tests (from the ``openai-agents``
sdist; the wheel ships no tests) against
:class:`trajlog.adapters.openai_agents.TrajlogSession`.

``trajlog_agents_plugin.py`` (the injecting conftest, loaded with ``-p``
before any test module is imported) replaces ``agents.SQLiteSession``,
``AdvancedSQLiteSession`` and the suite's ``tests.utils.simple_session``
sessions with trajlog-backed ones, so every test that builds one runs on a
trajlog log.  Exits non-zero when a test fails.

    python peers/agents/run.py [extra pytest args]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from fetch import sdist_tree  # type: ignore[import-not-found]  # noqa: E402  (peers/fetch.py)

from postgres import stores  # type: ignore[import-not-found]  # noqa: E402  (peers/postgres.py)

PEER = "openai-agents==0.24.0"

# The core session suites, then every test module built on tests/utils/simple_session.py
# (the runner's own tests: resume, HITL, rewinds, deferred writes, compaction, ...) but two
# that fail here against the SDK's own classes too, so they say nothing about trajlog:
# tests/models/test_openai_chatcompletions_stream.py (4 tracing-span tests) and
# tests/test_error_logging_redaction.py (log-capture assertions).
CORE = ["tests/utils/test_simple_session.py", "tests/memory/test_session.py",
        "tests/memory/test_session_limit.py", "tests/memory/test_session_persistence_sanitize.py"]
USERS = [
    "tests/deferred_session_writes", "tests/memory/test_compaction_model_visibility.py",
    "tests/memory/test_openai_conversations_session.py",
    "tests/memory/test_openai_responses_compaction_session.py", "tests/sandbox/test_runtime.py",
    "tests/test_agent_runner.py", "tests/test_agent_runner_streamed.py",
    "tests/test_cancel_streaming.py", "tests/test_handoff_history_duplication.py",
    "tests/test_hitl_session_scenario.py", "tests/test_invalid_final_output_handler.py",
    "tests/test_max_turns.py", "tests/test_prompt_cache_key.py",
    "tests/test_run_impl_resume_paths.py", "tests/test_run_state_pending_input.py",
    "tests/test_runner_guardrail_resume.py", "tests/test_runner_tracing_disabled.py",
    "tests/test_runtime_symmetry_contract.py",
]
# Not run: tests/extensions/memory/test_advanced_sqlite_session.py (179 tests).  It
# specifies AdvancedSQLiteSession as a whole, not the Session protocol: with SQLAlchemy
# installed and our class injected, most of its tests fail on that class's private state
# (_connections_lock, _current_branch_id, its message_structure and turn_usage tables),
# on its usage API (store_run_usage, get_tool_usage, ...), and one hangs on its
# cross-process claim of SQLite rows.  The branching it describes is mapped onto trajlog
# forks and tested in tests/adapters/test_adapter_agents.py.

# Every deselected test (a node id prefix), with its reason.
CONN = "reads SQLiteSession's per-thread sqlite3 connection pool (session._connections)"
CORRUPT = ("writes a corrupt JSON row into the agent_messages table with sqlite3; a trajlog "
           "frame that fails its checks is refused as corruption, never skipped")
LOCK = "SQLite write-lock / rollback internals (drops SQLite tables, probes the write lock)"
SNAP = ("needs SQLiteSession's private _get_compaction_snapshot hook (offered only by the "
        "exact SQLiteSession class), which the runner's compaction uses to read and "
        "replace history in one SQLite transaction")
INSERT = "calls SQLiteSession._insert_items on a raw sqlite3 connection"
CONNLOCK = "patches SQLiteSession._connections_lock / _get_connection with a fake connection"
M = "tests/memory/test_session.py::"
DESELECT: dict[str, str] = {
    M + "test_sqlite_session_close_closes_worker_thread_connections": CONN,
    M + "test_sqlite_session_reaps_connections_from_exited_worker_threads": CONN,
    M + "test_sqlite_session_closes_retired_connections_before_the_next_allocation": CONN,
    M + "test_sqlite_session_keeps_connections_of_live_worker_threads": CONN,
    M + "test_sqlite_session_closed_rejects_empty_add_items": (
        "expects the builtin RuntimeError; a closed TrajlogSession raises "
        "trajlog.errors.StoreClosedError (also for add_items([]))"),
    M + "test_sqlite_session_pop_item_skips_corrupt_most_recent": CORRUPT,
    M + "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": CORRUPT,
    M + "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": CORRUPT,
    M + "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": CORRUPT,
    M + "test_sqlite_session_file_lock_is_shared_across_instances": (
        "asserts SQLiteSession._lock / _file_lock_counts (trajlog shares one Store per path)"),
    M + "test_sqlite_session_failed_add_items_releases_write_lock": LOCK + (
        "; also expects TypeError for object() content, trajlog raises SerializationError"),
    M + "test_sqlite_session_failed_clear_session_rolls_back": LOCK,
    M + "test_sqlite_session_failed_pop_item_releases_write_lock": LOCK,
    M + "test_sqlite_session_rollback_failure_evicts_connection": CONNLOCK,
    M + "test_sqlite_session_close_retries_quarantined_connection": CONNLOCK,
    M + "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": CONNLOCK,
    "tests/memory/test_compaction_model_visibility.py::"
    "test_backend_read_limit_cannot_hide_retained_history_from_compaction": SNAP,
    "tests/memory/test_compaction_model_visibility.py::"
    "test_automatic_compaction_does_not_reload_unbounded_hidden_history": SNAP,
    "tests/memory/test_compaction_model_visibility.py::"
    "test_expired_read_overhead_does_not_authorize_hidden_history": SNAP,
    "tests/memory/test_openai_responses_compaction_session.py::TestOpenAIResponsesCompactionSession"
    "::test_automatic_compaction_rollback_budget": SNAP,
    "tests/memory/test_openai_responses_compaction_session.py::TestOpenAIResponsesCompactionSession"
    "::test_settled_pop_failure_invalidates_response_chain": CONNLOCK,
    "tests/memory/test_openai_responses_compaction_session.py::TestOpenAIResponsesCompactionSession"
    "::test_settled_clear_failure_invalidates_response_chain": CONNLOCK,
    "tests/memory/test_openai_responses_compaction_session.py::TestOpenAIResponsesCompactionSession"
    "::test_run_compaction_restores_history_when_cancelled_again_during_restore": SNAP,
    "tests/test_run_impl_resume_paths.py::test_handoff_resume_after_cancelled_compaction_commits":
        INSERT,
}


class Counter:
    """Counts the outcomes (a parametrized test counts once per case)."""

    def __init__(self) -> None:
        self.counts = {"passed": 0, "failed": 0, "skipped": 0, "deselected": 0}

    def pytest_deselected(self, items: list[Any]) -> None:
        self.counts["deselected"] += len(items)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.counts[report.outcome] += 1


def main(extra: list[str]) -> int:
    tree = sdist_tree(PEER)
    os.chdir(tree)                       # the suite imports itself as the package ``tests``
    sys.path[:0] = [str(tree), str(HERE)]
    args = ["-q", "-p", "no:cacheprovider", "-p", "trajlog_agents_plugin",
            *CORE, *USERS, *(f"--deselect={d}" for d in DESELECT), *extra]
    counter = Counter()
    with stores() as backend:
        code = pytest.main(args, plugins=[counter])
    c = counter.counts
    print(f"agents suite on trajlog ({backend}): {c['passed']} passed, {c['failed']} failed, "
          f"{c['skipped']} skipped, {c['deselected']} deselected ({len(DESELECT)} entries)")
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
