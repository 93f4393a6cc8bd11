"""The package's shape, as docs/architecture.md draws it: one direction of
dependency, SQL only in storage/, the byte layout only in codec/, exceptions
with status codes only from the errors room, no room that holds two.

Each check parses the source (ast): nothing here imports the modules it
judges, so a violation is found even in code no test runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import trajlog

PKG = Path(trajlog.__file__).parent
MAX_LINES = 600

# Layer of each top-level room, bottom (low) to top (high).  A module may
# import its own room and rooms below it, never above.
LAYERS = {
    "_format": 0, "_version": 0, "errors": 1, "event_types": 2, "events": 2, "_backend": 3,
    "_kernel_c": 3, "_kernel_py": 3, "_tlcore": 3, "redaction": 3, "codec": 4, "storage": 5,
    "lifecycle": 6, "recovery": 7, "memory": 8, "projections": 9, "interop": 10,
    "providers": 10, "api": 11, "aio": 11, "adapters": 12, "viewer": 12, "cli": 13,
}
TOP = {"__init__", "__main__"}   # the package's front doors import what they expose
KERNEL_MODULES = {"_backend", "_kernel_c", "_kernel_py", "_tlcore"}
LAYOUT_NAMES = {"HEADER_SIZE", "ALIGN", "MAGIC", "SECTOR"}   # byte layout of a frame
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|"
                 r"DELETE\s+FROM|CREATE\s+(TABLE|INDEX|TRIGGER|VIEW)|DROP\s+(TABLE|TRIGGER)|"
                 r"PRAGMA\s+\w+|BEGIN(\s+IMMEDIATE)?\s*$|SAVEPOINT\s+\w+|ROLLBACK)\b",
                 re.DOTALL)
STATUS_ERRORS = {"FormatError", "TornTailError", "CorruptionError", "ChecksumError",
                 "ChainError", "SequenceError", "UnsupportedFormatError", "HeadMismatchError"}


def _modules() -> dict[str, Path]:
    """Dotted name (without the ``trajlog.`` prefix) -> file."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(), str(MODULES[name]))


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str) -> list[tuple[str, int, list[str]]]:
    """(imported trajlog module, line, imported names) for every import in
    ``name`` -- at any depth, also inside functions."""
    out = []
    base = name.split(".") if _is_package(name) else name.split(".")[:-1]
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "trajlog" or alias.name.startswith("trajlog."):
                    out.append((alias.name[len("trajlog."):] or "__init__", node.lineno, []))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*anchor, *([node.module] if node.module else [])])
            elif node.module and (node.module == "trajlog" or node.module.startswith("trajlog.")):
                target = node.module[len("trajlog."):] if node.module != "trajlog" else ""
            else:
                continue
            names = [a.name for a in node.names]
            # "from . import codec" imports the module trajlog.codec
            submodules = [f"{target}.{n}".lstrip(".") for n in names
                          if f"{target}.{n}".lstrip(".") in MODULES]
            if submodules:
                out += [(m, node.lineno, []) for m in submodules]
            else:
                out.append((target or "__init__", node.lineno, names))
    return out


def _room(name: str) -> str:
    return name.split(".")[0]


def test_architecture_no_import_cycle_between_files():
    graph = {m: {t for t, _, _ in _imports(m) if t in MODULES and t != m} for m in MODULES}
    graph = {m: ts - {"__init__"} for m, ts in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle = [*stack[stack.index(t):], t]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_architecture_every_layer_imports_only_layers_below():
    wrong = []
    for name in MODULES:
        if name in TOP:
            continue
        mine = LAYERS[_room(name)]
        for target, line, _ in _imports(name):
            if target == "__init__":
                wrong.append(f"{name}:{line} imports the package front door")
            elif LAYERS[_room(target)] > mine:
                wrong.append(f"{name}:{line} ({_room(name)}) imports {target} "
                             f"({_room(target)}, a higher layer)")
    assert not wrong, "\n".join(wrong)


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    """String constants and f-string pieces, docstrings left out."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else " x "
                           for v in node.values)
            out.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                id(node) not in docs):
            out.append((node.lineno, node.value))
    return out


def test_architecture_sql_and_apsw_only_in_storage():
    wrong = []
    for name in MODULES:
        if _room(name) == "storage":
            continue
        tree = _tree(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "apsw"
                                                    for a in node.names):
                wrong.append(f"{name}:{node.lineno} imports apsw")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "apsw":
                wrong.append(f"{name}:{node.lineno} imports from apsw")
        for line, text in _strings(tree):
            if SQL.search(text):
                wrong.append(f"{name}:{line} holds SQL: {text[:60]!r}")
    assert not wrong, "\n".join(wrong)


def test_architecture_the_sql_check_can_fail():
    """The pattern the check above relies on recognises SQL trajlog writes."""
    for text in ("SELECT frame FROM events WHERE rid = ?", "INSERT INTO sessions(id) VALUES (?)",
                 "UPDATE session_heads SET last_seq = ?", "BEGIN IMMEDIATE", "PRAGMA user_version",
                 "INSERT OR REPLACE INTO events VALUES (?)", "SAVEPOINT request"):
        assert SQL.search(text), text
    for text in ("select the events", "a turn's BEGIN marker is turn/start", "update me"):
        assert not SQL.search(text), text


def test_architecture_kernel_and_byte_layout_only_in_codec():
    wrong = []
    for name in MODULES:
        room = _room(name)
        if room == "codec" or room in KERNEL_MODULES or name in TOP or room == "_format":
            continue
        for target, line, names in _imports(name):
            if _room(target) in KERNEL_MODULES:
                wrong.append(f"{name}:{line} imports the kernel ({target})")
            if target == "_format" and LAYOUT_NAMES.intersection(names):
                wrong.append(f"{name}:{line} reads the frame layout "
                             f"({', '.join(sorted(LAYOUT_NAMES.intersection(names)))})")
            if _room(target) == "codec" and any(n.startswith("_") for n in names):
                wrong.append(f"{name}:{line} reaches into codec's privates {names}")
    assert not wrong, "\n".join(wrong)


def test_architecture_status_coded_errors_are_built_in_errors_py():
    wrong = []
    for name in MODULES:
        if _room(name) == "errors":
            continue
        for node in ast.walk(_tree(name)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else None)
            status_arg = bool(node.args) and isinstance(node.args[0], ast.Attribute) and \
                isinstance(node.args[0].value, ast.Name) and node.args[0].value.id == "Status"
            if called in STATUS_ERRORS or (called and called.endswith("Error") and status_arg):
                wrong.append(f"{name}:{node.lineno} builds {called}(...)")
    assert not wrong, "\n".join(wrong)


def test_architecture_no_module_over_the_size_limit():
    big = {name: n for name, path in MODULES.items()
           if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_architecture_every_room_has_a_layer():
    assert {_room(m) for m in MODULES} - TOP <= set(LAYERS)


def test_architecture_session_offers_design_section_9():
    s, st = trajlog.Session, trajlog.Store
    for name in ("append", "append_batch", "turn", "step", "get", "tail", "events", "verify",
                 "inspect", "fork", "spawn_subagent", "fork_subagent", "id", "last_seq"):
        assert hasattr(s, name), name
    for name in ("create_session", "session", "load", "sessions", "close"):
        assert hasattr(st, name), name
    # The handle delegates: no SQL, no storage, no kernel in the session module.
    imported = {t for t, _, _ in _imports("api.session")}
    assert not {t for t in imported if _room(t) in KERNEL_MODULES | {"codec"}}
    assert "storage.sqlite" not in imported


def test_architecture_package_front_doors_only_re_export():
    """An ``__init__.py`` holds a docstring, imports and ``__all__``: the code
    of a room lives in a module named after what it does."""
    wrong = []
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        for node in _tree(name).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue   # the docstring
            if isinstance(node, ast.Assign) and [getattr(t, "id", None)
                                                 for t in node.targets] == ["__all__"]:
                continue
            if (name == "__init__" and isinstance(node, ast.FunctionDef)
                    and node.name == "__getattr__"):
                continue   # trajlog.backend, resolved when first asked for
            wrong.append(f"{path.relative_to(PKG)}:{node.lineno} {type(node).__name__}")
    assert not wrong, "logic in a package's __init__.py:\n" + "\n".join(wrong)


def test_architecture_no_two_modules_share_a_name():
    """A module name says what it holds, once: two ``store.py`` (or a module
    named like a function its package exports) send a reader to the wrong file."""
    by_name: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if path.name != "__init__.py" and not path.name.startswith("_"):
            by_name.setdefault(path.stem, []).append(name)
    twice = {stem: names for stem, names in by_name.items() if len(names) > 1}
    assert not twice, twice
