"""Exports (.tlog, .jsonl, .jsonl.zst, .zip) and their import: byte-identical
round trips, standalone verification (a flipped bit anywhere is found, a cut
anywhere is torn), erased payloads that stay erased, idempotent and atomic
imports."""

from __future__ import annotations

import io
import json
import os
import tracemalloc
import zipfile
from pathlib import Path

import pytest
import zstandard

import trajlog
from trajlog.api.bulk import SessionSpec
from trajlog.errors import (
    CorruptionError,
    ImportConflictError,
    ImportFormatError,
    InvalidArgumentError,
)
from trajlog.interop.export import ZIP_MARK, _seal_zip
from trajlog.interop.sources.trajlog import verify_file

SQLITE_APSW = "tampers with the store through an apsw connection of its own"

FORMATS = ("tlog", "jsonl", "jsonl.zst", "zip")
# The C-kernel run tries every byte position; the light runs (the pure-Python
# kernel, the sanitizer build, the sdist: TRAJLOG_GOLDEN=0) every 5th.
LIGHT = os.environ.get("TRAJLOG_GOLDEN", "1") == "0"
STRIDE = 5 if LIGHT else 1
SECRET = "hunter2-the-erased-secret"


def _tree(store: trajlog.Store, extra: int = 40) -> trajlog.Session:
    """A root session with a turn and tool call, a subagent and a fork."""
    s = store.create_session(cwd="/work", agent_preset="coder", metadata={"k": [1, 2.5]})
    with s.turn():
        s.append("user/message", {"content": "hello"}, source="user")
        s.append("assistant/message", {"content": "run it",
                                       "tool_calls": [{"id": "c1", "name": "Bash"}]})
        s.append("tool/call", {"call_id": "c1", "name": "Bash"}, causal_parent=1)
        s.append("tool/result", {"call_id": "c1", "output": "ok", "is_error": False},
                 source="Bash", causal_parent=2, workspace_revision="git:abc")
    s.append_batch([("note/x", {"i": i, "f": i / 3, "s": "é" * (i % 5)}) for i in range(extra)])
    child = s.spawn_subagent("look around")
    child.append("assistant/message", {"content": "looked"})
    fork = s.fork(s.last_seq)
    fork.append("user/message", {"content": "forked"}, idempotency_key="k-1")
    return s


def _frames(store: trajlog.Store, sid: str) -> bytes:
    return b"".join(run.frames for run in store.session(sid).frames())


def _decompressed(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".zst"):
        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    if path.name.endswith(".zip"):
        out = []
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                blob = zf.read(name)
                if name.endswith(".zst"):
                    blob = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(blob)).read()
                out.append(blob)
        return b"".join(out)
    return data


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_gives_the_same_frames(tmp_path: Path, fmt: str) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        root = _tree(a)
        out = tmp_path / f"tree.{fmt}"
        exported = a.export(root.id, out)
        wanted = [root.id] if fmt != "zip" else [h.id for h in a.sessions(
            include_subagents=True)]
        assert sorted(exported.sessions) == sorted(wanted)
        assert verify_file(out).verdict == "clean"
        report = b.import_path(out)
        assert report.format == "trajlog"
        assert sorted(report.created) == sorted(wanted)
        assert not report.unmapped and not report.torn and not report.warnings
        for sid in wanted:
            assert _frames(b, sid) == _frames(a, sid)
            assert b.session(sid).header == a.session(sid).header
            assert b.session(sid).verify().ok
        again = b.import_path(out)
        assert sorted(again.skipped) == sorted(wanted) and again.events == 0


def test_import_extends_a_session_that_grew_and_refuses_a_different_one(
        tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        s = a.create_session()
        s.append_batch([("note/x", {"i": i}) for i in range(10)])
        a.export(s.id, tmp_path / "first.jsonl")
        s.append_batch([("note/x", {"i": i}) for i in range(10, 15)])
        a.export(s.id, tmp_path / "second.jsonl")
        assert b.import_path(tmp_path / "first.jsonl").sessions[0].events == 10
        grown = b.import_path(tmp_path / "second.jsonl").sessions[0]
        assert (grown.status, grown.events, grown.kept) == ("extended", 5, 10)
        assert _frames(b, s.id) == _frames(a, s.id)
        # the same id holding other events: refused, nothing written
        b.session(s.id).append("note/x", {"other": True})
        before = _frames(b, s.id)
        a.session(s.id).append("note/x", {"i": 15})
        a.export(s.id, tmp_path / "third.jsonl")
        report = b.import_path(tmp_path / "third.jsonl")
        (conflict,) = report.conflicts
        assert conflict.session_id == s.id and "different event at seq 15" in conflict.reason
        assert report.events == 0 and _frames(b, s.id) == before
        # the low-level call raises
        with pytest.raises(ImportConflictError, match="different event at seq 15"):
            b.load_session(SessionSpec(s.id), [(e.type, e.data, e.time, {})
                                               for e in a.session(s.id).events()])


@pytest.mark.parametrize("fmt", ["tlog", "jsonl", "jsonl.zst"])
def test_every_flipped_bit_is_found_and_every_cut_is_torn(tmp_path: Path, fmt: str) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a:
        s = a.create_session(cwd="/w")
        s.append_batch([("note/x", {"i": i}) for i in range(6)])
        out = tmp_path / f"s.{fmt}"
        a.export(s.id, out)
    data = out.read_bytes()
    probe = tmp_path / f"probe.{fmt}"
    missed = []
    for pos in range(0, len(data), STRIDE):
        flipped = bytearray(data)
        flipped[pos] ^= 1 << (pos % 8)
        probe.write_bytes(bytes(flipped))
        verdict = verify_file(probe)
        if verdict.verdict != "corrupt":
            missed.append((pos, verdict.verdict))
    assert missed == []
    wrong = []
    for cut in range(0, len(data), STRIDE):
        probe.write_bytes(data[:cut])
        verdict = verify_file(probe)
        if verdict.verdict != "torn":
            wrong.append((cut, verdict.verdict, verdict.reason))
    assert wrong == []
    probe.write_bytes(data)
    assert verify_file(probe).verdict == "clean"


def test_a_cut_export_imports_what_verified_and_says_so(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        s = a.create_session()
        s.append_batch([("note/x", {"i": i}) for i in range(50)])
        a.export(s.id, tmp_path / "s.jsonl")
        lines = (tmp_path / "s.jsonl").read_bytes().splitlines(keepends=True)
        (tmp_path / "cut.jsonl").write_bytes(b"".join(lines[:21]) + lines[21][:7])
        report = b.import_path(tmp_path / "cut.jsonl")
        assert report.events == 20 and report.torn and report.torn[0].line == 22
        assert [e.data["i"] for e in b.session(s.id).events()] == list(range(20))
        # the complete export later brings it up to date
        assert b.import_path(tmp_path / "s.jsonl").sessions[0].events == 30
        assert _frames(b, s.id) == _frames(a, s.id)


def test_a_damaged_line_fails_its_session_only_and_says_where(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        root = _tree(a, extra=5)
        out = tmp_path / "tree.zip"
        a.export(root.id, out)
        # damage the fork's event (the last session of the zip)
        with zipfile.ZipFile(out) as zf:
            manifest = json.loads(zf.read("manifest.json"))
            members = {n: zf.read(n) for n in zf.namelist()}
        last = manifest["sessions"][-1]["path"]
        text = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(members[last])).read()
        lines = text.splitlines(keepends=True)
        assert b'"forked"' in lines[1]
        lines[1] = lines[1].replace(b'"forked"', b'"forged"')
        members[last] = zstandard.ZstdCompressor().compress(b"".join(lines))
        bad = tmp_path / "bad.zip"
        with zipfile.ZipFile(bad, "w") as zf:   # re-zipped and re-sealed, as a tool could
            for name, blob in members.items():
                zf.writestr(name, blob)
            zf.comment = ZIP_MARK + bytes(64)
        with open(bad, "r+b") as f:
            _seal_zip(f)
        with pytest.raises(ImportFormatError) as caught:
            b.import_path(bad)
        assert caught.value.line == 2 and "payload check" in caught.value.reason
        assert caught.value.offset == len(lines[0])
        done = caught.value.report.created  # type: ignore[attr-defined]
        assert len(done) == len(manifest["sessions"]) - 1
        stored = {h.id for h in b.sessions(include_subagents=True)}
        assert stored == set(done)  # the damaged session left nothing behind


def test_erased_payloads_stay_erased_in_every_export(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        s = a.create_session()
        s.append("user/message", {"content": "before"})
        s.append("tool/output", {"text": SECRET})
        s.append("user/message", {"content": "after"})
        a.erase(s.id, 1, reason="user asked", actor="human:ann")
        for fmt in FORMATS:
            out = tmp_path / f"s.{fmt}"
            a.export(s.id, out)
            assert SECRET.encode() not in _decompressed(out), fmt
            assert verify_file(out).verdict == "clean", fmt
        report = b.import_path(tmp_path / "s.tlog")
        assert any("erased" in w for w in report.warnings)
        got = [e.data for e in b.session(s.id).events()]
        assert got[0] == {"content": "before"} and got[2] == {"content": "after"}
        assert SECRET not in json.dumps(got)
        assert got[1] == next(iter(a.session(s.id).events(1, 1))).data


@pytest.mark.sqlite_only(reason=SQLITE_APSW)
def test_export_refuses_a_damaged_store_and_leaves_no_file(tmp_path: Path) -> None:
    from kits.tamper import flip_frame_bits
    db = str(tmp_path / "a.db")
    with trajlog.open(db) as a:
        s = a.create_session()
        s.append_batch([("note/x", {"i": i}) for i in range(5)])
        flip_frame_bits(a, s._sid, 2, -9, 0xFF)
        for fmt in FORMATS:
            with pytest.raises(CorruptionError, match="seq=2"):
                a.export(s.id, tmp_path / f"out.{fmt}")
    assert not list(tmp_path.glob("*out.*"))


def test_bad_requests_are_typed(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a:
        s = a.create_session()
        with pytest.raises(InvalidArgumentError, match="say the format"):
            a.export(s.id, tmp_path / "out.txt")
        with pytest.raises(InvalidArgumentError, match="no such file"):
            a.import_path(tmp_path / "missing.jsonl")
        (tmp_path / "junk.bin").write_bytes(b"\x00junk")
        with pytest.raises(ImportFormatError, match="not a format trajlog can import"):
            a.import_path(tmp_path / "junk.bin")


@pytest.mark.skipif(LIGHT, reason="not kernel-specific: runs once, in the C-kernel run")
def test_import_streams_in_bounded_memory(tmp_path: Path) -> None:
    """Peak Python allocation while importing an export does not grow with
    its size: events are read, verified and written batch by batch."""
    peaks = {}
    with trajlog.open(str(tmp_path / "a.db"), "normal") as a:
        filler = "x" * 400
        for n in (6_000, 18_000):
            s = a.create_session()
            for start in range(0, n, 2000):
                s.append_batch([("note/x", {"i": i, "pad": filler}) for i in
                                range(start, start + 2000)])
            out = tmp_path / f"big-{n}.jsonl"
            a.export(s.id, out)
            with trajlog.open(str(tmp_path / f"b-{n}.db")) as b:
                tracemalloc.start()
                try:
                    b.import_path(out)
                    _, peak = tracemalloc.get_traced_memory()
                finally:
                    tracemalloc.stop()
                assert b.session(s.id).last_seq == n - 1
            peaks[n] = (peak, out.stat().st_size)
    (small, _), (big, big_size) = peaks[6_000], peaks[18_000]
    assert big < 1.3 * small, peaks      # 3x the events, about the same peak
    assert big < 8_000_000 < 1.2 * big_size, peaks   # a few MB, whatever the file


def test_a_fork_without_its_parent_is_refused_with_a_hint(tmp_path: Path) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a, trajlog.open(str(tmp_path / "b.db")) as b:
        root = _tree(a, extra=3)
        fork = next(h for h in a.sessions(include_subagents=True) if h.seed_length)
        a.export(fork.id, tmp_path / "fork.jsonl")
        with pytest.raises(ImportFormatError, match="import it first"):
            b.import_path(tmp_path / "fork.jsonl")
        assert b.sessions(include_subagents=True) == []
        a.export(root.id, tmp_path / "root.tlog")
        b.import_path(tmp_path / "root.tlog")
        assert b.import_path(tmp_path / "fork.jsonl").created == [fork.id]
        assert _frames(b, fork.id) == _frames(a, fork.id)

