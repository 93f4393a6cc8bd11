"""An importer never copies payload text into a session header.

A header is immutable and outside what redaction scans and an erasure
reaches; text an agent wrote (a scorer's explanation, an error message, a
subagent's task description) stays in the events, where both do.  Each case
plants a marker in one such field of a real file and checks that every
imported header is free of it while some event still holds it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import trajlog
from trajlog.interop.mapping import Notes
from trajlog.interop.sources import claude_code, inspect_ai, openhands

REAL = Path(__file__).resolve().parents[1] / "realdata"
MARK = "PAYLOAD-MARKER-7f3a"


def _headers_and_events(sessions: list[Any]) -> tuple[str, str]:
    headers, events = [], []
    for session in sessions:
        headers.append(json.dumps(session.metadata, default=str))
        events.extend(json.dumps(e.data, default=str) for e in session.events)
    return "\n".join(headers), "\n".join(events)


def test_inspect_scores_errors_and_reductions_stay_in_the_events(tmp_path: Path) -> None:
    doc = json.loads((REAL / "inspect-ai" / "2025-05-12T20-28-13-04-00_popularity.json")
                     .read_text())
    doc["status"] = "error"
    doc["error"] = {"message": f"run failed {MARK}", "traceback": MARK}
    doc["reductions"] = [{"scorer": "match", "samples": [{"answer": MARK, "value": 1}]}]
    sample = doc["samples"][0]
    sample["error"] = {"message": f"the sandbox died {MARK}"}
    sample["scores"] = {"match": {"value": "C", "answer": MARK, "explanation": MARK}}
    sample["limit"] = {"type": "custom", "message": MARK}
    sample["model_usage"] = {"m": {"input_tokens": 1, "note": MARK}}
    target = tmp_path / "marked.json"
    target.write_text(json.dumps(doc))
    headers, events = _headers_and_events(list(inspect_ai.read(target, Notes())))
    assert MARK not in headers
    assert MARK in events


def test_an_openhands_record_error_stays_in_its_closing_event(tmp_path: Path) -> None:
    source = REAL / "openhands" / "legacy-v0" / "multi_swe_bench_output.jsonl"
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    records[0]["error"] = f"RuntimeError: {MARK}"
    target = tmp_path / "output.jsonl"
    target.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    notes = Notes()
    headers, events = _headers_and_events(list(openhands.read(target, notes)))
    assert MARK not in headers
    assert MARK in events


def test_a_subagent_meta_description_stays_in_the_task_call(tmp_path: Path) -> None:
    project = REAL / "claude-code" / "claude-code-log" / "projects" / "-experiments-worktrees"
    copy = tmp_path / "-experiments-worktrees"
    shutil.copytree(project, copy)
    meta = next(copy.rglob("*.meta.json"))
    info = json.loads(meta.read_text())
    info["description"] = MARK
    info["notes"] = f"free text {MARK}"
    meta.write_text(json.dumps(info))
    with trajlog.open(str(tmp_path / "s.db")) as store:
        store.import_path(str(copy), format="claude-code")
        headers = "\n".join(json.dumps(h.metadata, default=str) for h in store.sessions())
    assert MARK not in headers
    notes = Notes()
    list(claude_code.read(copy, notes))
    assert any("not kept in the header" in w and "notes" in w for w in notes.warnings)
