"""What a newcomer installs is what the suite ran on.

``make install-test`` installs every package under ``constraints.txt``; these tests hold that file
to the project's own requirements (each one pinned, exactly), hold this interpreter to the pins
(so a run of the suite is a run on the pinned set), and hold the README's documented ``make``
targets to the Makefile.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    tomllib = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep, f"constraints.txt: {line!r} is not pinned with =="
        pins[_canonical(name)] = version
    return pins


def _requirements() -> list[str]:
    names = []
    if tomllib is not None:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        lines = list(project["dependencies"])
        for extra in ("test", "lint", "fuzz", "pure"):
            lines += project["optional-dependencies"][extra]
    else:  # pragma: no cover
        lines = []
    lines += (ROOT / "peers" / "requirements.txt").read_text().splitlines()
    for line in lines:
        line = line.split("#", 1)[0]
        match = NAME.match(line)
        if match:
            names.append(_canonical(match.group(1)))
    return names


def test_every_requirement_is_pinned() -> None:
    if tomllib is None:  # pragma: no cover
        pytest.skip("tomllib needs Python 3.11")
    pins = _pins()
    missing = [name for name in _requirements() if name not in pins]
    assert not missing, f"not pinned in constraints.txt: {missing}"


def test_this_environment_runs_the_pins() -> None:
    """Each pinned package that is installed here is at its pinned version."""
    drift = []
    for name, version in _pins().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # an extra this run did not install (atheris outside make fuzz-api)
        if installed != version:
            drift.append(f"{name}: installed {installed}, pinned {version}")
    assert not drift, "; ".join(drift)


def test_installs_are_constrained() -> None:
    makefile = (ROOT / "Makefile").read_text()
    installs = [line for line in makefile.splitlines()
                if re.search(r"pip install|PIP\) install", line)]
    assert installs, "no pip install in the Makefile"
    for line in installs:
        if "$(BUILD)/lock/" in line:
            continue  # make lock resolves unpinned on purpose
        assert "-c $(CONSTRAINTS)" in line, line
    pinned = r"^PIP_INSTALL = \$\(PIP\) install .*-c \$\(CONSTRAINTS\)$"
    assert re.search(pinned, makefile, flags=re.M)


def test_ci_runs_in_a_fresh_virtualenv() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    venv = ci.index("-m venv")
    assert ci.index("rm -rf build/ci-venv") < venv < ci.index(". build/ci-venv/bin/activate")
    activated = ci.index(". build/ci-venv/bin/activate")
    assert re.search(r"^(stage )?make test\b", ci[activated:], flags=re.M), \
        ".ci/run calls make test after it activates the virtualenv"
    assert not re.search(r"^(stage )?make test\b", ci[:activated], flags=re.M)


def _documented_targets() -> list[str]:
    # README.md names the two commands; docs/testing.md every other target
    readme = (ROOT / "README.md").read_text() + (ROOT / "docs" / "testing.md").read_text()
    return sorted(set(re.findall(r"^make ([a-z-]+)", readme, flags=re.M)))


def _closure(makefile: str, target: str) -> set[str]:
    """Every target ``make target`` builds first, order-only prerequisites included."""
    seen: set[str] = set()
    todo = [target]
    while todo:
        name = todo.pop()
        for rule in re.finditer(rf"^{re.escape(name)}:([^#\n]*)", makefile, flags=re.M):
            for prereq in rule.group(1).replace("|", " ").split():
                if not prereq.startswith("$") and prereq not in seen:
                    seen.add(prereq)
                    todo.append(prereq)
    return seen


def test_documented_targets_install_what_they_need() -> None:
    targets = _documented_targets()
    assert {"demo", "test", "fuzz", "fuzz-api", "lint"} <= set(targets)
    makefile = (ROOT / "Makefile").read_text()
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target
        dry = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"PYTHON={sys.executable}"],
                             capture_output=True, text=True, check=False)
        assert dry.returncode == 0, f"make -n {target}: {dry.stderr}"
    # a target that needs a tool the interpreter does not bring builds the step installing it
    needs = {"demo": "build", "test": "install-test", "peers": "deps-test",
             "sanitize": "deps-test", "lint": "c-tools", "fuzz-atheris": "install-fuzz",
             "fuzz-api": "install-fuzz", "soak": "deps-test", "bench": "deps-test",
             "check": "deps-check"}
    for target, step in needs.items():
        assert step in _closure(makefile, target), f"make {target} does not build {step}"
    fuzz_binaries = re.search(r"^\$\(BUILD\)/fuzz/%_libfuzzer:.*\| fuzz-tools$", makefile,
                              flags=re.M)
    assert fuzz_binaries, "the libFuzzer binaries do not build fuzz-tools first"


def test_pytest_config_is_clean_under_the_pinned_plugins(tmp_path: Path) -> None:
    """pytest starts with this project's configuration (warnings are errors) and the plugins."""
    probe = tmp_path / "test_probe.py"
    probe.write_text("def test_probe():\n    assert True\n")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(probe)]
    run = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
