"""Exports under damage and at the edges (found in review): a damaged .zip,
sessions migrated from trajlog 0.1 (payloads stored compressed frame by
frame), over-long lines, a header line or erased line altered in a file that
has no seal to cover it, a failed commit during an import, an event too big
for a CHUNK."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
from pathlib import Path

import pytest

import trajlog
from trajlog.errors import StoreError
from trajlog.interop.sources import trajlog_jsonl
from trajlog.interop.sources.trajlog import verify_file

SQLITE_FAILTX = "fails a commit inside the SQLite backend's transaction"

DATA = Path(__file__).resolve().parent.parent / "data"
LIGHT = os.environ.get("TRAJLOG_GOLDEN", "1") == "0"   # (see test_export.py)


def _tree(store: trajlog.Store) -> trajlog.Session:
    s = store.create_session(cwd="/w")
    s.append_batch([("note/x", {"i": i}) for i in range(4)])
    child = s.spawn_subagent("go")
    child.append("assistant/message", {"content": "done"})
    return s


def test_a_damaged_zip_is_never_clean_and_never_a_crash(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a:
        root = _tree(a)
        out = tmp_path / "t.zip"
        a.export(root.id, out)
    data = out.read_bytes()
    probe = tmp_path / "p.zip"
    verdicts = set()
    for pos in range(0, len(data), 15 if LIGHT else 3):
        flipped = bytearray(data)
        flipped[pos] ^= 1 << (pos % 8)
        probe.write_bytes(bytes(flipped))
        verdict = verify_file(probe)            # (raises nothing but the typed error)
        assert verdict.verdict != "clean", pos
        verdicts.add(verdict.verdict)
    assert "corrupt" in verdicts
    for cut in range(0, len(data), 35 if LIGHT else 7):
        probe.write_bytes(data[:cut])
        assert verify_file(probe).verdict in ("torn", "corrupt"), cut


def test_sessions_migrated_from_trajlog_0_1_export_verify_and_import(tmp_path: Path) -> None:
    db = tmp_path / "v01.db"
    shutil.copyfile(DATA / "store_v01.db", db)
    with trajlog.open(str(db)) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        packed = []
        for h in a.sessions(include_subagents=True):
            if h.seed_length:
                continue
            for fmt in ("jsonl", "tlog"):
                out = tmp_path / f"{h.id}.{fmt}"
                a.export(h.id, out)
                assert verify_file(out).verdict == "clean", (h.id, fmt)
            report = b.import_path(tmp_path / f"{h.id}.jsonl")
            assert report.created == [h.id]
            if any("trajlog 0.1" in w for w in report.warnings):
                packed.append(h.id)
            theirs = [(e.type, e.time, e.data) for e in a.session(h.id).events()]
            assert [(e.type, e.time, e.data) for e in b.session(h.id).events()] == theirs
        assert packed, "the 0.1 store holds frames stored compressed one by one"


def test_an_over_long_line_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a:
        s = a.create_session()
        s.append("note/x", {"text": "y" * 5000})
        a.export(s.id, tmp_path / "s.jsonl")
    monkeypatch.setattr(trajlog_jsonl, "LINE_LIMIT", 2000)
    verdict = verify_file(tmp_path / "s.jsonl")
    assert verdict.verdict == "corrupt" and "longer than 2000 bytes" in verdict.reason
    assert verdict.line == 2


def test_the_header_and_erased_lines_are_checked_without_a_seal(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a:
        s = a.create_session(cwd="/real")
        s.append("note/x", {"secret": "s3cr3t"})
        s.append("note/x", {"i": 2})
        a.erase(s.id, 0, reason="test", actor="human:t")
        a.export(s.id, tmp_path / "s.jsonl")
    lines = (tmp_path / "s.jsonl").read_bytes().splitlines(keepends=True)
    unsealed = lines[:-1]          # an interrupted export: torn, but what it has must verify
    probe = tmp_path / "p.jsonl"
    probe.write_bytes(b"".join(unsealed))
    assert verify_file(probe).verdict == "torn"
    forged = [unsealed[0].replace(b'"cwd":"/real"', b'"cwd":"/fake"'), *unsealed[1:]]
    probe.write_bytes(b"".join(forged))
    bad = verify_file(probe)
    assert bad.verdict == "corrupt" and "header_check" in bad.reason
    rec = json.loads(unsealed[1])
    assert "erased" in rec
    rec["data"]["forged"] = True
    forged = [unsealed[0], json.dumps(rec, separators=(",", ":")).encode() + b"\n",
              *unsealed[2:]]
    probe.write_bytes(b"".join(forged))
    bad = verify_file(probe)
    assert bad.verdict == "corrupt" and "replacement" in bad.reason and bad.line == 2


@pytest.mark.sqlite_only(reason=SQLITE_FAILTX)
def test_a_failed_commit_takes_its_sessions_out_of_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trajlog.api import bulk
    from trajlog.storage import sqlite as sqlite_backend
    with trajlog.open(str(tmp_path / "a.db")) as a:
        root = _tree(a)
        a.export(root.id, tmp_path / "t.zip")
    original = sqlite_backend._Transaction.__exit__
    calls = {"n": 0}

    def failing_exit(self, exc_type, exc, tb):  # type: ignore[no-untyped-def]
        if exc is None and calls["n"] == 0:
            calls["n"] += 1
            original(self, RuntimeError, RuntimeError("disk full"), None)   # rolls back
            raise StoreError("simulated: the commit failed")
        return original(self, exc_type, exc, tb)

    monkeypatch.setattr(bulk, "BULK_SESSIONS", 2)   # both sessions in one commit
    with trajlog.open(str(tmp_path / "b.db")) as b:
        monkeypatch.setattr(sqlite_backend._Transaction, "__exit__", failing_exit)
        with pytest.raises(StoreError, match="simulated") as caught:
            b.import_path(tmp_path / "t.zip")
        monkeypatch.setattr(sqlite_backend._Transaction, "__exit__", original)
        report = caught.value.report  # type: ignore[attr-defined]
        assert report.sessions == [] and b.sessions(include_subagents=True) == []
        assert any("rolled back" in w for w in report.warnings)
        again = b.import_path(tmp_path / "t.zip")     # and the store is fine afterwards
        assert len(again.created) == 2
        assert all(b.session(sid).verify().ok for sid in again.created)


@pytest.mark.skipif(LIGHT, reason="16 MB of event: runs once, in the C-kernel run")
def test_an_event_too_big_for_a_raw_chunk_is_exported_compressed(tmp_path: Path) -> None:
    rng = random.Random(5)
    floats = [rng.random() for _ in range(1_800_000)]   # ~16.2 MB of msgpack, barely compressible
    with trajlog.open(str(tmp_path / "a.db"), "normal") as a:
        s = a.create_session()
        s.append("note/x", {"v": floats})
        assert len(struct.pack(f"{len(floats)}d", *floats)) > 14_000_000
        a.export(s.id, tmp_path / "big.tlog")
    assert verify_file(tmp_path / "big.tlog").verdict == "clean"


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst", ".tlog", ".zip"])
def test_an_export_with_erased_messages_and_results_imports(tmp_path: Path,
                                                            suffix: str) -> None:
    """Found by the CLI tests: an erased user/message's replacement has no
    'content', and importing the export refused it (ValidationError)."""
    with trajlog.open(str(tmp_path / "a.db")) as a:
        s = a.create_session(cwd="/w")
        with s.turn():
            s.append("user/message", {"content": "my key is SECRET-ERASED-1"})
            with s.step():
                s.append("assistant/message", {"content": "reading", "tool_calls": [
                    {"id": "c1", "name": "cat", "arguments": {}}]})
                s.append("tool/call", {"call_id": "c1", "name": "cat", "arguments": {}})
                s.append("tool/result", {"call_id": "c1", "output": "SECRET-ERASED-2"})
        a.erase(s.id, [1, 4, 5], reason="secret", actor="human:a")
        out = tmp_path / f"s{suffix}"
        a.export(s.id, out)
        sid = s.id
    with trajlog.open(str(tmp_path / "b.db")) as b:
        report = b.import_path(str(out))
        assert [x.status for x in report.sessions] == ["created"]
        got = b.session(sid)
        assert got.verify().ok and got.last_seq == 7
        for seq in (1, 4, 5):
            assert "erased" in got.get(seq).data
        assert got.get(5).data["call_id"] == "c1"
        assert [n.status for n in trajlog.projections.chat(got) if n.kind == "tool"] == ["done"]
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("b.db*"))
    assert b"SECRET-ERASED" not in raw
