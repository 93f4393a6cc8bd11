"""Shared fixtures: one test suite, run against both kernels and both backends.

A test that takes the ``kernel`` fixture runs once per kernel, with ids ``[c]``
and ``[python]``.  The C kernel is skipped only when it is not built *and*
``TRAJLOG_REQUIRE_C`` is unset; CI sets it, so a broken build cannot pass as
python-only.

``TRAJLOG_TEST_DB=postgresql`` (``make test-pg``) runs the suite with every store
on PostgreSQL (``kits/pgstores.py``: a throwaway cluster, one tenant per store
path, child processes included); a cluster that cannot start fails the run.  The
tests marked ``sqlite_only(reason)`` -- they need SQLite itself: its file's
bytes, apsw connections, the power-loss VFS -- are deselected there, and only there.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

from kits import pgstores
from trajlog._backend import load_kernel
from trajlog.errors import BackendUnavailableError

settings.register_profile("default", max_examples=200, deadline=None)
# `make check`, the inner loop: every property runs, on fewer examples
settings.register_profile("check", max_examples=25, deadline=None)
settings.register_profile("ci", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("expensive", max_examples=10000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

KERNEL_NAMES = ("c", "python")


def kernel_or_skip(name: str) -> ModuleType:
    try:
        return load_kernel(name)
    except BackendUnavailableError as exc:
        if name == "c" and os.environ.get("TRAJLOG_REQUIRE_C") == "1":
            pytest.fail(f"TRAJLOG_REQUIRE_C=1 but the C kernel is unavailable: {exc}")
        pytest.skip(str(exc))


_SERVER = pytest.StashKey[pgstores.Server]()


def pytest_configure(config: pytest.Config) -> None:
    if not pgstores.active():
        return
    server = pgstores.Server()
    try:
        server.start()
    except Exception as exc:  # the PostgreSQL run fails, never skips, without its server
        server.stop()
        raise pytest.UsageError(f"TRAJLOG_TEST_DB=postgresql: no PostgreSQL server: {exc!r}"
                                ) from exc
    config.stash[_SERVER] = server
    pgstores.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_SERVER, None)
    if server is not None:
        server.stop()


def pytest_report_header(config: pytest.Config) -> str | None:
    if _SERVER not in config.stash:
        return None
    cluster = config.stash[_SERVER].cluster
    return (f"stores on PostgreSQL: {cluster.admin_url.split('@')[-1]}, schema "
            f"{os.environ[pgstores.ENV_SCHEMA]}, one tenant per store path; sqlite_only tests "
            "deselected")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    server = terminalreporter.config.stash.get(_SERVER, None)
    if server is not None:   # (what the run stored on PostgreSQL, as tenants of one schema)
        terminalreporter.write_line(
            f"PostgreSQL: {server.stores()} stores held sessions or memories")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    dropped = []
    for item in items:
        mark = item.get_closest_marker("sqlite_only")
        if mark is None:
            continue
        if not (mark.kwargs.get("reason") or mark.args):
            raise pytest.UsageError(f"{item.nodeid}: sqlite_only needs its reason")
        if pgstores.active():
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(dropped)
        items[:] = [item for item in items if item not in gone]


@pytest.fixture(params=KERNEL_NAMES, scope="session")
def kernel(request: pytest.FixtureRequest) -> ModuleType:
    """Each kernel in turn."""
    return kernel_or_skip(request.param)


@pytest.fixture(scope="session")
def both_kernels() -> tuple[ModuleType, ModuleType]:
    """(C kernel, Python kernel) for differential tests."""
    return kernel_or_skip("c"), kernel_or_skip("python")


@pytest.fixture
def store(tmp_path):
    """A fresh store in the test's own directory, closed afterwards."""
    import trajlog

    with trajlog.open(str(tmp_path / "store.db")) as st:
        yield st


# The golden importer tests map other agents' files in pure Python: their
# outcome does not depend on the kernel, so the light runs (the pure-Python
# kernel, the sanitizer build, the sdist round trip: TRAJLOG_GOLDEN=0) skip
# them; the export tests, which frame and scan bytes, run everywhere.
GOLDEN = ["test_aider.py", "test_claude_code.py", "test_codex.py", "test_inspect_ai.py",
          "test_openhands.py", "test_realdata.py", "test_swe_agent.py"]
collect_ignore = ([f"interop/{name}" for name in GOLDEN]
                  if os.environ.get("TRAJLOG_GOLDEN", "1") == "0" else [])
# the frame codec's tests open no store, and the PostgreSQL backend's own tests start their own
# cluster in every run: the PostgreSQL run leaves both to the other runs
if pgstores.active():
    collect_ignore += ["format", "postgres"]
