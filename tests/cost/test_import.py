"""What the import of the real Claude Code files (``tests/realdata``) costs, in
counts: JSON decodes per record, the bytes of a record scanned again by the
bounds check, Python frames the interop layer enters per record, and
transactions per imported file.

Each line is decoded once: the first lines of a session file (up to one with a
timestamp) are read ahead only to order the session files of a folder, never
to "order" a single file (24 lines of these files were, before).  The depth
bound of a line whose brackets outnumber ``DEPTH_LIMIT`` (code and JSON text
inside its strings) is measured on its decoded containers, not by rewriting
its bytes outside their strings (``bytes.replace`` / ``split`` of up to 115 kB
lines: a decode's cost again).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import trajlog
import trajlog.interop
from kits.costkit import metered

SQLITE_COST = "counts what SQLite runs (statements, VM steps, pages, compiles)"

REAL = Path(__file__).parent.parent / "realdata" / "claude-code"
INTEROP = str(Path(trajlog.interop.__file__).parent)
#: Python frames entered in trajlog/interop per record read (16236 / 1146
#: today; 19648 before the reading loop and the depth bound were made lean).
#: Lower it with the work that lowers it.
FRAMES_PER_RECORD = 15.0


def _lines(files: list[Path]) -> int:
    return sum(1 for f in files for line in f.read_bytes().splitlines() if line.strip())


def _import(store: Any, paths: list[Path]) -> tuple[Counter[str], int]:
    """C calls made from trajlog/interop by kind, and its Python frames
    (``"frames"``), while ``paths`` are imported; and the events written."""
    calls: Counter[str] = Counter()

    def count(frame: Any, event: str, arg: Any) -> None:
        if frame.f_code.co_filename.startswith(INTEROP):
            if event == "call":
                calls["frames"] += 1
            elif event == "c_call":
                calls[getattr(arg, "__qualname__", "?")] += 1

    events = 0
    sys.setprofile(count)
    try:
        for path in paths:
            events += store.import_path(path, format="claude-code").events
    finally:
        sys.setprofile(None)
    return calls, events


@pytest.mark.sqlite_only(reason=SQLITE_COST)
def test_an_import_decodes_each_line_once_and_rescans_no_bytes(tmp_path):
    # every session file and subagent file of the projects, and the other shapes
    shapes = sorted((REAL / "synthetic-shapes").glob("*.jsonl"))
    paths = [REAL / "claude-code-log" / "projects", *shapes]
    with trajlog.open(str(tmp_path / "s.db"), "normal") as store, \
            metered(store) as meter, meter.window() as cost:
        calls, events = _import(store, paths)
    records = _lines(sorted(REAL.rglob("*.jsonl")))
    assert events > 900 and records > 1000
    # one parse per line, and 2 more: a subagent's .meta.json, and the first
    # line of a session file read again to order the two of its folder (the
    # other is empty); a folder of one session file is not ordered (24 lines
    # were read ahead here for that)
    assert calls["Decoder.decode"] == records + 2, (calls["Decoder.decode"], records)
    # no line's bytes rewritten outside its strings to bound its depth
    rescans = {k: calls[k] for k in ("bytes.replace", "bytes.split", "bytes.count")}
    assert not any(rescans.values()), rescans
    assert calls["frames"] <= FRAMES_PER_RECORD * records, calls["frames"] / records
    # the sessions of a path commit together: one transaction per path (and
    # one more each time the bulk loader's quarter second runs out: a clock)
    commits = sum(n for sql, n in cost.by_sql.items() if sql.strip().upper() == "COMMIT")
    begins = sum(n for sql, n in cost.by_sql.items() if sql.strip().upper().startswith("BEGIN"))
    assert begins == commits < calls["Decoder.decode"] / 50, (begins, commits)


def test_one_session_file_is_read_once(tmp_path):
    """A file imported alone (with no subagent beside it): its lines decoded
    once each, none read ahead to order a single file."""
    path = next((REAL / "claude-code-log" / "projects" / "-experiments-ideas").glob("*.jsonl"))
    with trajlog.open(str(tmp_path / "s.db"), "normal") as store:
        calls, events = _import(store, [path])
    assert events > 0
    assert calls["Decoder.decode"] == _lines([path]), calls["Decoder.decode"]
