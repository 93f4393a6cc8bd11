"""The documentation holds together, and cites nothing a reader cannot open.

* README.md, CHANGELOG.md, docs/, src/ and tests/ never point at a document
  outside the repository (a design document, seeds, research notes, an issue
  of a tracker): a newcomer who followed one would find nothing.
* Every relative link of README.md and docs/*.md names a file that exists.
* Every test a page names (``tests/...py`` or ``tests/...py::name``, or a
  bare ``test_...`` name in guarantees.md) exists, so a moved or renamed test
  cannot leave a guarantee pointing at nothing.
* Every ``TRAJLOG_*`` switch read by the package, its tests, benchmarks,
  fuzzers, build or Makefile is listed in docs/testing.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
TEXT = {".py", ".md", ".txt", ".pyi", ".sql", ".js", ".css", ".html", ".c", ".h", ".toml"}
# Recorded data, not prose: the real agent files the importers are tested on quote their own
# authors' notes, and fixtures are bytes.
DATA = {"realdata", "data", "vectors", "corpus", "__pycache__"}

# Citations of documents that are not in the repository.  Spelled in pieces so that this
# file does not match itself.
OUTSIDE = re.compile("|".join([
    r"\bDESIGN" + r"\.md\b",
    r"\bseeds?[ /]+0\d\d\b",
    r"\bresearch" + r"/",
    r"\bhot-paths" + r"\.md\b",
    r"\breal-material" + r"\.md\b",
    r"\b[Ii]ssues? #?\d+\b",
]))


def _files(*roots: str) -> list[Path]:
    out = []
    for name in roots:
        root = ROOT / name
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in paths:
            rel = path.relative_to(ROOT).parts
            if path.is_file() and path.suffix in TEXT and not DATA & set(rel) and not any(
                    part.endswith(".egg-info") for part in rel):
                out.append(path)
    return out


def _outside_citations(paths: list[Path]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            m = OUTSIDE.search(line)
            if m:
                found.setdefault(path.relative_to(ROOT).as_posix(), []).append(
                    f"{number}: {m.group(0)!r}")
    return found


def test_docs_cite_nothing_outside_the_repository() -> None:
    found = _outside_citations(_files("README.md", "CHANGELOG.md", "docs"))
    assert not found, found


def test_src_and_tests_cite_nothing_outside_the_repository() -> None:
    found = _outside_citations(_files("src", "tests"))
    assert not found, found


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, broken


TEST_REF = re.compile(r"(?<![\w/.-])tests/[\w/.-]+\.py(?:::[\w*]+)?")
DEFINED = r"^\s*(?:(?:async )?def |class )?{}\b(?:\(| =|:)"
TEST_NAMES = {m for path in _files("tests")
              for m in re.findall(DEFINED.format(r"((?:test_|Test)\w*)"),
                                  path.read_text(encoding="utf-8", errors="replace"), re.M)}


def _named_tests(page: Path) -> list[str]:
    """The test files and tests a page names; a peer's own suite (a line naming the sdist
    or wheel it comes in) names paths of that peer, not ours."""
    return sorted({ref for line in page.read_text(encoding="utf-8").splitlines()
                   if "sdist" not in line and "wheel" not in line
                   for ref in TEST_REF.findall(line)})


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_named_tests_exist(page: Path) -> None:
    missing = []
    for ref in _named_tests(page):
        if "<" in ref:
            continue
        path, _, name = ref.partition("::")
        file = ROOT / path
        if not file.is_file() or (name and "*" not in name and not re.search(
                DEFINED.format(re.escape(name)), file.read_text(encoding="utf-8"), re.M)):
            missing.append(ref)
    assert not missing, missing


MODULE_REF = re.compile(r"`([\w/.-]+\.py)(?:::\w+)?`")
NAMES = {path.name for name in ("src", "tests", "benchmarks", "fuzz", "csrc", "peers",
                                 "examples", "docs") for path in (ROOT / name).rglob("*.py")}


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_named_modules_exist(page: Path) -> None:
    """A file a page names exists: a path from the root or from the package
    (``api/writer.py``), or, named bare (``bench_store.py``), somewhere in the tree."""
    missing = []
    for line in page.read_text(encoding="utf-8").splitlines():
        if "sdist" in line or "wheel" in line:
            continue
        for ref in MODULE_REF.findall(line):
            if "/" in ref:
                found = any((base / ref).is_file()
                            for base in (ROOT, ROOT / "src" / "trajlog", ROOT / "src"))
            else:
                found = ref in NAMES
            if not found:
                missing.append(ref)
    assert not missing, missing


def test_guarantees_name_tests_that_exist() -> None:
    text = (DOCS / "guarantees.md").read_text(encoding="utf-8")
    assert len(_named_tests(DOCS / "guarantees.md")) >= 20
    names = set(re.findall(r"`((?:test_|Test)\w+)`", text))
    assert names, "guarantees.md names no test by its name"
    assert names <= TEST_NAMES, sorted(names - TEST_NAMES)


SWITCH = re.compile(r"\bTRAJLOG_[A-Z0-9_]*[A-Z0-9]\b(?!_)")


def test_every_trajlog_switch_is_documented() -> None:
    used: dict[str, str] = {}
    for path in _files("src", "tests", "benchmarks", "fuzz", "csrc", "peers", "examples",
                       "Makefile", ".ci"):
        for name in SWITCH.findall(path.read_text(encoding="utf-8", errors="replace")):
            used.setdefault(name, path.relative_to(ROOT).as_posix())
    for name in SWITCH.findall((ROOT / "Makefile").read_text(encoding="utf-8")):
        used.setdefault(name, "Makefile")
    assert {"TRAJLOG_BACKEND", "TRAJLOG_REQUIRE_C", "TRAJLOG_SOAK"} <= set(used), used
    page = (DOCS / "testing.md").read_text(encoding="utf-8")
    missing = {name: where for name, where in used.items() if f"`{name}`" not in page}
    assert not missing, missing


def test_readme_is_a_front_door() -> None:
    """README.md stays short: the mechanisms live under docs/, each page linked from it or
    from the index."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) <= 15_000
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        if page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/README.md does not list {page.name}"
    assert "](docs/README.md)" in readme and "make test" in readme


def test_where_each_public_name_lives() -> None:
    """The table of docs/architecture.md names only what its modules hold, and every name
    of ``trajlog.__all__``."""
    import importlib

    import trajlog

    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = text[text.index("## Where a public name lives"):]
    rows = re.findall(r"^\| `(?:import )?(trajlog[\w.]*)` \| (.*) \|$", table, re.M)
    assert len(rows) >= 8, rows
    for module_name, names in rows:
        module = importlib.import_module(module_name)
        for name in re.findall(r"`([A-Za-z_]\w*)`", names):
            assert hasattr(module, name), f"{module_name} has no {name}"
    top = dict(rows)["trajlog"]
    missing = [n for n in trajlog.__all__ if not n.startswith("_") and n != "backend"
               and f"`{n}`" not in top]
    assert not missing, missing
