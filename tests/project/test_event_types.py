"""The event-type registry (``trajlog.event_types``): every type literal in
``src/`` is declared there, every entry is consistent, and the modules that
read it derive the sets they kept before it existed.

The scan parses the source (ast) and never imports what it judges.  What
counts as a type literal: a string constant (docstrings left out) that is a
type name with a ``/`` (``tool/result``, ``claude-code/tool_use``); a string
that ends with ``/`` (a ``startswith`` prefix such as ``"compaction/"``) and the
constant head of an f-string (``f"codex/{kind}"``) must be a declared family's
prefix.  :data:`NOT_TYPES` lists the few strings of that form that are not
event types, each with what it is.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import trajlog
from trajlog import event_types as et
from trajlog.events import _KINDS, Event, check_type
from trajlog.memory import replacement
from trajlog.redaction import machine
from trajlog.storage import event_index

PKG = Path(trajlog.__file__).parent
TYPE_LITERAL = re.compile(r"[a-z][a-z0-9_.-]*(/[a-z0-9_.*-]+)+")
PREFIX_LITERAL = re.compile(r"[a-z][a-z0-9_.-]*/")
HEAD = re.compile(r"([a-z][a-z0-9_.-]*/)([a-z0-9_.*-]*)")

#: strings in src/ that look like event types and are not
NOT_TYPES = {
    "code-index/1": "a demo memory's name (cli/demo.py)",
    "coding-default/4": "a context policy's name and version (cli/demo.py)",
    "frame-chain/1": "an integrity digest's algorithm (projections/envelopes.py)",
    "sha256-chain/1": "an integrity digest's algorithm (projections/envelopes.py)",
    "src/login.ts": "a file path in the demo (cli/demo.py)",
    "trajlog-export/1": "the export format's name (codec/tlog.py)",
    "trajlog-view/1": "a reader view export's format name (interop/view_export.py)",
    "subagents/": "a directory inside an export (interop/export.py)",
    "image/png": "an inline image's media type (providers/common.py)",
    "application/octet-stream": "an inline image's media type (providers/common.py)",
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def undeclared(source: str) -> Iterator[tuple[int, str]]:
    """(line, literal) of each event-type literal in ``source`` that the
    registry does not declare (see the module docstring for what counts)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)   # and the pieces of f-strings, judged as a whole below
    docs |= {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
             for v in node.values}
    prefixes = {f.prefix for f in et.FAMILIES}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            # f"codex/{kind}": a family's prefix; f"turn/end at seq {seq}": a type
            head = node.values[0] if node.values else None
            m = HEAD.match(head.value) if (isinstance(head, ast.Constant)
                                           and isinstance(head.value, str)) else None
            if m is None or m.group(1) in NOT_TYPES:
                continue
            if m.group(2) and m.end() < len(head.value):
                if not et.declared(m.group()):
                    yield node.lineno, m.group()
            elif m.group(1) not in prefixes:
                yield node.lineno, m.group(1)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docs and node.value not in NOT_TYPES):
            text = node.value
            if (TYPE_LITERAL.fullmatch(text) and not et.declared(text)) or (
                    PREFIX_LITERAL.fullmatch(text) and text not in prefixes):
                yield node.lineno, text


def test_every_type_literal_in_src_is_declared():
    found = [f"{path.relative_to(PKG)}:{line}: {text!r}"
             for path in sorted(PKG.rglob("*.py"))
             for line, text in undeclared(path.read_text())]
    assert not found, ("event types used in src/ but not declared in "
                       "trajlog/event_types.py:\n" + "\n".join(found))


def test_the_scan_flags_an_undeclared_literal():
    """The scan finds what it must: a misspelt type, an unknown prefix, an
    f-string of an unknown family -- and not a docstring or a declared type."""
    planted = '''
"""A module about "tool/cancle" (a docstring: not code)."""
def f(ev, kind):
    if ev.type == "tool/cancle":
        return ev.type.startswith("retentoin/")
    if ev.type in ("tool/result", "tool/cancel", "compaction/anything"):
        return f"swe-agnt/{kind}"
    raise ValueError(f"tool/cancle {kind}: no such call" + f"codex/{kind}")
'''
    assert sorted(undeclared(planted)) == [(4, "tool/cancle"), (5, "retentoin/"),
                                           (7, "swe-agnt/"), (8, "tool/cancle")]


def own_type_lists(source: str) -> Iterator[tuple[int, list[str]]]:
    """(line, types) of each set, tuple or list literal in ``source`` that
    lists two or more event types: a module's own list of types treated
    alike, which belongs in the registry.  Names given to types one by one
    (``A, B = ("x/a", "x/b")``) are not a list, nor a table of what differs
    per type (a dict: a view's labels, the partial index of each marker)."""
    tree = ast.parse(source)
    named = {id(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple)
             and any(isinstance(t, ast.Tuple) for t in node.targets)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)) and id(node) not in named:
            items = node.elts
        else:
            continue
        types = [k.value for k in items if isinstance(k, ast.Constant)
                 and isinstance(k.value, str) and TYPE_LITERAL.fullmatch(k.value)
                 and et.declared(k.value)]
        if len(types) >= 2:
            yield node.lineno, types


def test_no_module_keeps_its_own_list_of_types():
    """Every set of types a module treats alike is a column of the registry
    (derived in event_types.py), never a literal of its own."""
    found = [f"{path.relative_to(PKG)}:{line}: {types}"
             for path in sorted(PKG.rglob("*.py")) if path.name != "event_types.py"
             for line, types in own_type_lists(path.read_text())]
    assert not found, "lists of event types outside the registry:\n" + "\n".join(found)


def test_the_list_scan_can_fail():
    planted = '''
A, B = ("checkpoint/stage", "checkpoint/invalidated")
MINE = frozenset({"user/message", "assistant/message"})
def f(t):
    return t in ("turn/start", "turn/end") or t in {"tool/result": 1, "tool/cancel": 2}
'''
    assert [line for line, _ in own_type_lists(planted)] == [3, 5]


def test_not_types_are_really_in_src():
    """The exemptions stay few and real: each one is still used in src/."""
    text = "\n".join(p.read_text() for p in PKG.rglob("*.py"))
    assert all(f'"{s}' in text for s in NOT_TYPES)


# -- the table is consistent ---------------------------------------------------------

LIFECYCLE = {"", "opens turn", "closes turn", "opens step", "closes step", "requests calls",
             "starts call", "answers call", "cancels call"}
CLOSES = {"opens turn": "closes turn", "opens step": "closes step",
          "requests calls": "answers call", "starts call": "answers call"}
VIEWS = {"history": {"", "user", "assistant", "tool", "cut", "compaction", "request"},
         "chat": {"", "message", "card", "cut"},
         "trajectory": {"", "turn", "step", "request", "span", "note"},
         "context": {"", "structural", "conversation", "tool result", "task", "file", "plan"}}


@pytest.mark.parametrize("t", et.TYPES, ids=lambda t: t.name)
def test_each_entry_is_consistent(t: et.EventType):
    assert check_type(t.name) == t.name and t.about
    assert t.lifecycle in LIFECYCLE
    if t.closer:   # a declared type that closes what this one opens
        closer = et.BY_NAME[t.closer]
        assert closer.lifecycle == CLOSES[t.lifecycle]
        assert not closer.family
    else:
        assert t.lifecycle not in CLOSES, "what it opens must have a closer"
    for spec in t.shape.values():
        assert all(kind in _KINDS for kind in spec.rstrip("?").split("|"))
    for path, form in t.machine.items():
        assert form in machine._FORMS
        if path in t.shape:   # a machine field is a string where the shape names it
            assert t.shape[path].rstrip("?") == "str"
    for form in t.keeps.values():
        assert form in replacement._FORMS
    assert t.index == "" or t.index == "row" or t.index in event_index._BY_MARK
    assert t.pause in ("", "passes", "pauses", "resumes")
    for column, allowed in VIEWS.items():
        assert getattr(t, column) in allowed, column
    if t.lifecycle in ("starts call", "answers call", "cancels call"):
        # a call's events name it, are found by the marks, and keep the id when erased
        assert t.shape["call_id"] == "str"
        assert t.keeps["call_id"] == "call id"
        assert t.index.startswith("mark:")
    if t.lifecycle in ("opens turn", "closes turn", "opens step", "closes step"):
        assert t.index, "a fork's cut and recovery find the markers without the log"
    for fam in et.FAMILIES:   # a member shares its family's index row and pause
        if t.name.startswith(fam.prefix) and not t.family:
            assert t.index == fam.index or fam.index == ""
            assert fam.pause != "passes" or t.pause in ("passes", "pauses", "resumes")


def test_unknown_types_are_stored_as_they_are(store):
    s = store.create_session()
    data = {"anything": [1, {"x": None}], "call_id": 5}
    ev = s.append("acme/custom-thing", data)
    assert et.describe("acme/custom-thing") is None
    assert s.get(ev.seq).type == "acme/custom-thing" and s.get(ev.seq).data == data


def test_describe_finds_a_family_member():
    assert et.describe("compaction/other").name == "compaction/*"
    assert et.describe("tool/result").name == "tool/result"


# -- the modules derive what they had before ------------------------------------------
# (pinned: the sets each module kept as literals before the registry; the stored
# frames and index rows are proved unchanged by tests/format/test_vectors.py)

OLD_SPARSE = {"turn/start", "turn/end", "sandbox/mode", "event/status", "session/closed",
              "redaction/paused", "redaction/resumed", "session/deleted"}
OLD_PREFIXES = ("compaction/", "approval/", "subagent/", "retention/")
# added since: a branch's life, which the write path's branch check finds by its rows
NEW_PREFIXES = ("branch/",)
BRANCH_LIFE = ("branch/started", "branch/rebased", "branch/merged", "branch/abandoned")


@pytest.mark.parametrize("type_", sorted({*et.BY_NAME, "compaction/x", "approval/y",
                                          "subagent/z", "retention/w", "note/x", "run/q"}))
def test_index_rows_are_the_ones_before(type_):
    ev = Event(type_, 1, {})
    had = type_ in OLD_SPARSE or type_.startswith(OLD_PREFIXES + NEW_PREFIXES)
    assert (event_index.entry(ev, 0) is not None) == had


def test_marks_are_the_ones_before():
    assert event_index._CODES == {"step/start": 1, "step/end": 2, "tool/call": 4,
                                  "tool/result": 5, "tool/cancel": 5}
    assert {"assistant/message"} == event_index._REQUESTS


@pytest.mark.parametrize("type_", sorted({*et.BY_NAME, "note/x", "run/q", "redaction/q"}))
def test_pause_passes_the_types_it_did(type_):
    from trajlog.redaction.pause import passes_pause
    had = (type_ in {"turn/end", "step/end", "event/status"}
           or type_.startswith(("redaction/", "run/")))
    assert passes_pause(type_, {}) == (had or type_ in ("tool/cancel", "session/deleted"))


def test_the_other_derived_sets():
    from trajlog.projections import context, folds
    # (compaction/apply was skipped by its prefix before, and still is)
    assert {
        "turn/start", "turn/end", "step/start", "step/end", "tool/call", "context/injection",
        "event/status", "request/header", "approval/policy", "sandbox/mode", "goal/change",
        "workspace/revision", "compaction/apply", *BRANCH_LIFE} == context.STRUCTURAL
    assert {"user/message", "assistant/message", "tool/result",
            "tool/cancel"} == folds._HISTORY_TYPES
    assert {t for t in et.BY_NAME if folds.Chat.wants(t)} == {
        "user/message", "assistant/message", "tool/call", "tool/result", "tool/cancel",
        "history/pop", "history/clear"}
    assert {t for t in et.BY_NAME if folds.Trajectory.wants(t)} == {
        "turn/start", "turn/end", "step/start", "step/end", "request/header",
        "assistant/message", "tool/call", "tool/result", "tool/cancel", "model/switch",
        "request/retry"}
    assert {"assistant/message", "tool/call", "tool/result", "tool/cancel",
            "turn/start", "turn/end", "step/start", "step/end",
            "redaction/paused", "redaction/resumed", "session/closed", "session/deleted",
            } == et.WRITE_STATE
    assert et.CHECKED_PREFIXES == ("compaction/", "branch/") and "event/status" in et.CHECKED


def test_the_write_side_reads_no_projection():
    """api/checks.py (run inside the append) reads its rules from the registry."""
    tree = ast.parse((PKG / "api" / "checks.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m and "projections" in m}


def test_the_second_modules_derive_their_old_literals():
    """The sets the next modules kept as literals, now read from the registry."""
    from trajlog.adapters.langgraph import _mirror
    from trajlog.api import lineage
    from trajlog.interop.sources import codex, openhands
    from trajlog.memory import gates, retention
    from trajlog.projections import envelopes, evidence
    from trajlog.viewer import document
    assert {"turn/start", "turn/end"} == lineage._TURN_MARKERS
    assert {"approval/grant", "lease/grant"} == evidence.GRANTS
    assert {"turn/start", "turn/end", "step/start", "step/end", "retention/policy",
            "session/closed", "session/deleted", "schema/migration", *BRANCH_LIFE
            } == retention.KEEP_TYPES
    assert {"user/message", "tool/call", "tool/result", "assistant/message",
            "subagent/result", "subagent/output"} == gates.INPUT_EVENTS
    assert {"assistant/message", "tool/result"} == envelopes.USAGE_TYPES
    assert {"user/message", "assistant/message", "tool/result",
            "langgraph/message"} == _mirror.MIRRORED
    assert {"user/message", "assistant/message", "tool/result"} == openhands._HISTORY
    assert {"user/message", "assistant/message", "tool/result"} == codex._HISTORY
    # (each erased message's tombstone names its role: what t.split("/")[0] gave)
    assert document._ROLE == {"user/message": "user", "assistant/message": "assistant"}


def test_the_agents_adapter_reads_a_cancel_too():
    """The Agents SDK adapter's sets are the ones before plus ``tool/cancel``:
    a cancelled call reads back as its output and closes the call for the
    adapter's plan (tests/adapters test the behaviour)."""
    pytest.importorskip("agents")
    from trajlog.adapters.openai_agents import items
    assert {"user/message", "assistant/message", "tool/result", "agents/item",
            "tool/cancel"} == items._ITEM_TYPES
    assert {"assistant/message", "tool/call", "tool/result",
            "tool/cancel"} == items._CALL_TYPES
