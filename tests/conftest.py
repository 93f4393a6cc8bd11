"""Shared fixtures: one test suite, run against both kernels.

A test that takes the ``kernel`` fixture runs once per kernel, with ids ``[c]``
and ``[python]``.  The C kernel is skipped only when it is not built *and*
``TRAJLOG_REQUIRE_C`` is unset; CI sets it, so a broken build cannot pass as
python-only.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

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
