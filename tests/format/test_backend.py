"""Kernel selection by TRAJLOG_BACKEND, in fresh interpreters."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import kernel_or_skip

CODE = "import trajlog; print(trajlog.backend); trajlog.codec.session_key(bytes(16))"


def run(env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRAJLOG_BACKEND"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env)


def test_backend_python_is_selectable():
    kernel_or_skip("python")
    result = run({"TRAJLOG_BACKEND": "python"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "python"


@pytest.mark.parametrize("choice", ["", "auto", "c", "C"])
def test_backend_auto_and_c_mean_c(choice):
    kernel_or_skip("c")
    result = run({"TRAJLOG_BACKEND": choice} if choice else {})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "c"


def test_backend_unknown_choice_is_a_clear_error():
    result = run({"TRAJLOG_BACKEND": "rust"})
    assert result.returncode != 0
    assert "BackendUnavailableError" in result.stderr and "'rust'" in result.stderr


def test_backend_auto_without_c_core_fails_clearly(tmp_path):
    """Hide the built extension: auto must fail and say how to opt in to python."""
    import trajlog

    pkg = os.path.dirname(trajlog.__file__)
    shadow = tmp_path / "trajlog"
    shutil.copytree(pkg, shadow, ignore=lambda _d, names: [
        n for n in names if not (n.endswith(".py") or n == "py.typed" or
                                 (os.path.isdir(os.path.join(_d, n)) and n != "__pycache__"))])
    env = {"PYTHONPATH": str(tmp_path)}
    result = run(env)
    assert result.returncode != 0
    assert "TRAJLOG_BACKEND=python" in result.stderr
    result = run({**env, "TRAJLOG_BACKEND": "python"})
    assert result.returncode == 0 and result.stdout.strip() == "python"
