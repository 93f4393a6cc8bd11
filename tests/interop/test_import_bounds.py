"""Imports of hostile files stay bounded: zip members and decompression
bombs, lines that decode to millions of objects, one-line files, FIFOs and
devices, deep nesting, odd folder names and links out of a folder.

Each hostile import runs in a child process whose address space is limited
(``RLIMIT_AS``) to what it had after start-up plus
:data:`trajlog.interop.bounded.MEMORY_BOUND`: it must end in an
:class:`ImportFormatError` that names the file, the line and the byte offset,
with nothing written to the store.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard

import trajlog
from trajlog.interop import bounded
from trajlog.interop.export import ZIP_MARK

REAL = Path(__file__).resolve().parents[1] / "realdata"
SID = "6a1c7c1e-0000-4000-8000-00000000c1de"

CHILD = r"""
import json, os, resource, sys
import trajlog
from trajlog.errors import ImportFormatError
path, fmt, db, extra = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
out = {}
with trajlog.open(db) as store:
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, hard))
    try:
        report = store.import_path(path, format=fmt)
        out.update(ok=report.events, warnings=report.warnings)
    except ImportFormatError as exc:
        out.update(error="ImportFormatError", file=exc.file, line=exc.line,
                   offset=exc.offset, reason=exc.reason)
    except BaseException as exc:
        out.update(error=type(exc).__name__, reason=str(exc)[:300])
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    out["sessions"] = len(store.sessions(include_subagents=True))
print(json.dumps(out))
"""


def _child(tmp_path: Path, path: Path, fmt: str = "auto", timeout: float = 120) -> dict[str, Any]:
    """Import ``path`` in a child limited to start-up + MEMORY_BOUND."""
    db = tmp_path / "child.db"
    for p in tmp_path.glob("child.db*"):
        p.unlink()
    done = subprocess.run([sys.executable, "-c", CHILD, os.fspath(path), fmt, os.fspath(db),
                           str(bounded.MEMORY_BOUND)], capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _refused(out: dict[str, Any], file: str | Path, *, line: int | None = None,
             offset: int | None = None, reason: str = "", sessions: int = 0) -> None:
    assert out.get("error") == "ImportFormatError", out
    assert out["file"] == os.fspath(file), out
    assert out["line"] == line, out
    assert out["offset"] == offset, out
    assert reason in out["reason"], out
    assert out["sessions"] == sessions, out     # nothing of the refused session written


# -- building hostile files ---------------------------------------------------------


def _deflate_zeros(size: int) -> bytes:
    """Raw deflate of ``size`` zero bytes, built from one repeated block."""
    step = 1 << 24
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(step)) + c.flush(zlib.Z_FULL_FLUSH)
    assert size % step == 0
    return block * (size // step) + zlib.compressobj(9, zlib.DEFLATED, -15).flush()


def _zip(path: Path, members: list[tuple[str, bytes, int, int]], comment: bytes = b"",
         seal: bool = False) -> None:
    """A zip of deflated ``(name, compressed bytes, declared size, CRC)``
    members (a bomb's CRC is not computed: it must be refused before its end)."""
    body, central = b"", b""
    for name, data, size, crc in members:
        raw = name.encode()
        local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), size,
                            len(raw), 0) + raw
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc,
                               len(data), size, len(raw), 0, 0, 0, 0, 0, len(body)) + raw
        body += local + data
    comment = ZIP_MARK + bytes(64) if seal else comment
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members),
                      len(central), len(body), len(comment))
    blob = body + central + end + comment
    if seal:
        blob = blob[:-64] + hashlib.sha256(blob[:-64]).hexdigest().encode()
    path.write_bytes(blob)


def _member(text: bytes) -> tuple[bytes, int, int]:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(text) + c.flush(), len(text), zlib.crc32(text)


def _sparse(path: Path, size: int, start: bytes = b"") -> Path:
    """A file of ``size`` bytes without a newline (sparse: no disk used)."""
    with open(path, "wb") as f:
        f.write(start)
        f.truncate(size)
    return path


def _claude_line(extra: dict[str, Any] | None = None, uuid: str = "u1") -> dict[str, Any]:
    rec = {"type": "user", "uuid": uuid, "parentUuid": None, "sessionId": SID,
           "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w",
           "message": {"role": "user", "content": "hi"}}
    rec.update(extra or {})
    return rec


def _jsonl(path: Path, *records: Any, raw: bytes = b"") -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + raw)
    return path


def _many(n: int) -> bytes:
    """A JSON list of ``n`` empty lists: 3 bytes each, ~64 decoded."""
    return b"[" + b"[]," * (n - 1) + b"[]]"


def _deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


# -- item 7: zip members -------------------------------------------------------------


def test_a_trajlog_zip_whose_manifest_is_a_bomb(tmp_path: Path) -> None:
    data, size = _deflate_zeros(2 << 30), 2 << 30
    bomb = tmp_path / "tree.zip"
    _zip(bomb, [("manifest.json", data, size, 0)], seal=True)
    for fmt in ("auto", "trajlog"):
        out = _child(tmp_path, bomb, fmt)
        _refused(out, f"{bomb}!manifest.json", offset=0, reason="zip member")


def test_a_trajlog_zip_whose_manifest_lies_about_its_size(tmp_path: Path) -> None:
    # declared small, inflating to 2 GiB: what is read stops at the bound
    data = _deflate_zeros(2 << 30)
    bomb = tmp_path / "tree.zip"
    _zip(bomb, [("manifest.json", data, 1000, 0)], seal=True)
    out = _child(tmp_path, bomb, "trajlog")
    assert out.get("error") == "ImportFormatError", out
    assert out["file"] == f"{bomb}!manifest.json" and out["sessions"] == 0, out


def test_a_trajlog_zip_manifest_too_deep_or_too_many(tmp_path: Path) -> None:
    for text in (_deep(100_000), _many(bounded.VALUE_LIMIT + 10)):
        bomb = tmp_path / "tree.zip"
        _zip(bomb, [("manifest.json", *_member(text))], seal=True)
        out = _child(tmp_path, bomb, "trajlog")
        _refused(out, f"{bomb}!manifest.json", line=1, offset=0)


@pytest.mark.parametrize("member", ["header.json", "samples/1_epoch_1.json"])
def test_an_inspect_eval_member_bomb(tmp_path: Path, member: str) -> None:
    header = json.dumps({"version": 2, "status": "success", "eval": {"run_id": "r",
                                                                      "task": "t"}}).encode()
    members = [("_journal/start.json", *_member(header))]
    bomb = (_deflate_zeros(2 << 30), 2 << 30, 0)
    if member == "header.json":
        members.append((member, *bomb))
    else:
        members += [(member, *bomb), ("header.json", *_member(header))]
    path = tmp_path / "log.eval"
    _zip(path, members)
    out = _child(tmp_path, path)
    assert out.get("error") == "ImportFormatError", out
    assert out["file"] == f"{path}!{member}" and out["offset"] is not None, out
    assert out["sessions"] == 0, out


def test_an_inspect_eval_cut_is_located_without_reading_it_whole(tmp_path: Path) -> None:
    # no central directory: the scan for where it breaks reads headers, not the file
    path = _sparse(tmp_path / "log.eval", 3 << 30,
                   struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0, 10, 10, 1, 0)
                   + b"a" + b"0123456789")
    out = _child(tmp_path, path)
    _refused(out, path, offset=41, reason="not a complete zip")


# -- item 8: what a line decodes to ------------------------------------------------


def _export(tmp_path: Path) -> list[bytes]:
    with trajlog.open(os.fspath(tmp_path / "src.db")) as st:
        s = st.create_session(cwd="/w")
        s.append("note/x", {"i": 1})
        st.export(s.id, tmp_path / "s.jsonl")
    return (tmp_path / "s.jsonl").read_bytes().splitlines(keepends=True)


def _zst(path: Path, parts: list[bytes]) -> Path:
    with open(path, "wb") as f, zstandard.ZstdCompressor().stream_writer(f) as z:
        for p in parts:
            z.write(p)
    return path


def test_a_small_jsonl_zst_of_empty_lists_is_refused_in_bounded_memory(
        tmp_path: Path) -> None:
    head = _export(tmp_path)[0]
    bomb = b'{"seq":0,"type":"note/x","time":0,"data":{"a":' + _many(20_000_000) + b"}}\n"
    path = _zst(tmp_path / "bomb.jsonl.zst", [head, bomb, bomb])
    assert path.stat().st_size < 100_000
    out = _child(tmp_path, path, "trajlog")
    _refused(out, path, line=2, offset=len(head), reason="JSON values")


def test_many_lines_each_under_the_bound_are_not_held_together(tmp_path: Path) -> None:
    # each line is allowed; a batch of them must not be kept all at once
    head = _export(tmp_path)[0]
    line = (b'{"seq":0,"type":"note/x","time":0,"data":{"a":' + _many(bounded.VALUE_LIMIT // 3)
            + b'},"check":"0000000000000000","chain":"0000000000000000"}\n')
    path = _zst(tmp_path / "many.jsonl.zst", [head] + [line] * 40)
    out = _child(tmp_path, path, "trajlog")
    _refused(out, path, line=2, offset=len(head), reason="payload check")


def test_a_header_line_that_is_a_bomb(tmp_path: Path) -> None:
    path = _zst(tmp_path / "h.jsonl.zst", [_many(20_000_000) + b"\n"])
    out = _child(tmp_path, path, "trajlog")
    _refused(out, path, line=1, offset=0, reason="JSON values")


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "openhands"])
def test_a_jsonl_line_of_empty_lists(tmp_path: Path, fmt: str) -> None:
    first = {"claude-code": _claude_line(),
             "codex": {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
                       "payload": {"id": SID, "cwd": "/w"}},
             "openhands": {"id": 1, "source": "user", "action": "message",
                           "args": {"content": "hi"}}}[fmt]
    name = "rollout-x.jsonl" if fmt == "codex" else "s.jsonl"
    lead = json.dumps(first).encode() + b"\n"
    path = tmp_path / name
    path.write_bytes(lead + b'{"x":' + _many(20_000_000) + b"}\n")
    out = _child(tmp_path, path, fmt)
    _refused(out, path, line=2, offset=len(lead), reason="JSON values")


def test_commas_inside_strings_do_not_count_as_values(tmp_path: Path) -> None:
    text = "a,b:[c]{d}" * 1_200_000          # 12 MB, 4.8 million ,:[{ in a string
    path = _jsonl(tmp_path / "s.jsonl", _claude_line({"message": {"role": "user",
                                                                  "content": text}}))
    out = _child(tmp_path, path, "claude-code")
    assert out.get("ok") == 1 and out["sessions"] == 1, out


# -- item 9: sniffing and whole reads ------------------------------------------------


def test_a_huge_one_line_jsonl_is_sniffed_in_bounded_memory(tmp_path: Path) -> None:
    path = _sparse(tmp_path / "one.jsonl", 1536 << 20, b'{"type":"user","uuid":"u","x":"')
    out = _child(tmp_path, path)
    assert out.get("error") == "ImportFormatError" and out["sessions"] == 0, out
    assert out["file"] == os.fspath(path), out
    for fmt in ("claude-code", "codex", "openhands", "trajlog"):
        out = _child(tmp_path, path, fmt)
        _refused(out, path, line=1, offset=0, reason="longer than")


def test_a_huge_one_line_aider_history(tmp_path: Path) -> None:
    lead = b"# aider chat started at 2026-01-01 00:00:00\n\n"
    path = _sparse(tmp_path / ".aider.chat.history.md", 1536 << 20, lead + b"#### hi")
    out = _child(tmp_path, path)
    _refused(out, path, line=3, offset=len(lead), reason="longer than")


@pytest.mark.parametrize("name", ["s.jsonl", "rollout-x.jsonl", "log.eval", "x.tlog",
                                  "t.zip", "e.json", "r.traj", ".aider.chat.history.md",
                                  "s.jsonl.zst"])
def test_a_fifo_is_refused_without_waiting(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    os.mkfifo(path)
    out = _child(tmp_path, path, timeout=60)
    _refused(out, path, offset=0, reason="not a regular file")


def test_a_device_behind_a_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.symlink_to("/dev/zero")
    for fmt in ("auto", "claude-code"):
        _refused(_child(tmp_path, path, fmt, timeout=60), path, offset=0,
                 reason="not a regular file")


def test_a_whole_document_over_the_bound(tmp_path: Path) -> None:
    for name, fmt in (("r.traj", "swe-agent"), ("e.json", "inspect-ai"),
                      ("o.json", "openhands")):
        path = _sparse(tmp_path / name, bounded.DOCUMENT_LIMIT + 10, b'{"history": [')
        _refused(_child(tmp_path, path, fmt), path, offset=bounded.DOCUMENT_LIMIT,
                 reason="larger than")


def test_a_subagent_meta_json_is_not_read_whole(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    sub = folder / SID / "subagents"
    sub.mkdir(parents=True)
    _jsonl(folder / f"{SID}.jsonl", _claude_line())
    _jsonl(sub / "agent-a1.jsonl", _claude_line({"isSidechain": True, "agentId": "a1"},
                                                uuid="u2"))
    meta = _sparse(sub / "agent-a1.meta.json", 1536 << 20, b'{"agentType":"')
    # the session before it stays (each session is all or nothing)
    _refused(_child(tmp_path, folder, "claude-code"), meta, offset=bounded.DOCUMENT_LIMIT,
             reason="larger than", sessions=1)


# -- item 10: nesting ----------------------------------------------------------------


def _bytes_first(raw: bytes) -> Any:
    """The reference rule: the bytes checked (bounded._check), then decoded."""
    try:
        bounded._check(raw)
        return bounded._DECODER.decode(raw)
    except Exception as exc:   # (what decode turns into its refusal)
        return type(exc).__name__


_STRING_BRACKETS = b'"' + b"[{" * 400 + b'"'


@pytest.mark.parametrize("raw", [
    b'{"x":' + _deep(127) + b',"y":[[1]]}',                       # 128 deep: kept
    b'{"x":' + _deep(128) + b"}",                                 # 129: refused
    b'{"s":' + _STRING_BRACKETS + b',"x":' + _deep(127) + b"}",   # brackets in a string
    b'{"s":' + _STRING_BRACKETS + b',"x":' + _deep(128) + b"}",
    b'[{"a":[' + b"[1]," * 300 + b'[2]]}, "\\\"[[["]',           # escapes, many siblings
    _deep(900), _deep(5_000), _deep(60_000),                      # the decoder's own limit
    b"[" * 300 + b"1" + b"]" * 299,                               # not JSON, too deep
    b'{"x":[' + b"[]," * 200 + b"}",                              # not JSON
])
def test_depth_on_the_decoded_value_is_the_bytes_rule(raw: bytes) -> None:
    """A line of more than DEPTH_LIMIT (and at most _WALKED) opening brackets
    is decoded and its containers walked: the value or the refusal is the one
    the scan of its bytes gives (the walk's limit planted one off fails)."""
    assert len(raw.translate(None, bounded._NOT_OPENS)) > bounded.DEPTH_LIMIT
    want = _bytes_first(raw)
    try:
        got = bounded.decode(raw, "f.jsonl", line=3, offset=7)
    except trajlog.errors.ImportFormatError as exc:
        assert (exc.line, exc.offset) == (3, 7)
        assert isinstance(want, str), (exc.reason, want)
        assert ("nested deeper" in exc.reason) == (want == "_Over"), (exc.reason, want)
        return
    assert got == want
    assert bounded.try_decode(raw) == want



def test_deep_nesting_in_a_claude_line(tmp_path: Path) -> None:
    lead = json.dumps(_claude_line()).encode() + b"\n"
    path = tmp_path / "s.jsonl"
    path.write_bytes(lead + b'{"type":"user","x":' + _deep(200_000) + b"}\n")
    for fmt in ("auto", "claude-code"):
        _refused(_child(tmp_path, path, fmt), path, line=2, offset=len(lead),
                 reason="nested deeper")


@pytest.mark.parametrize("fmt", ["codex", "openhands", "trajlog"])
def test_deep_nesting_in_a_first_line(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / ("rollout-x.jsonl" if fmt == "codex" else "s.jsonl")
    path.write_bytes(b'{"type":"session_meta","payload":' + _deep(200_000) + b"}\n")
    _refused(_child(tmp_path, path, fmt), path, line=1, offset=0, reason="nested deeper")


@pytest.mark.parametrize("name,fmt", [("r.traj", "swe-agent"), ("e.json", "inspect-ai"),
                                      ("o.json", "openhands")])
def test_deep_nesting_in_a_document(tmp_path: Path, name: str, fmt: str) -> None:
    path = tmp_path / name
    path.write_bytes(b'{"history":' + _deep(200_000) + b"}")
    _refused(_child(tmp_path, path, fmt), path, line=1, offset=0, reason="nested deeper")


def test_deep_tool_arguments_stay_text(tmp_path: Path) -> None:
    args = _deep(100_000).decode()
    doc = {"history": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "go", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": args}}]},
        {"role": "tool", "content": "ok", "tool_call_ids": ["c1"]}],
        "trajectory": [], "info": {}, "replay_config": args}
    path = tmp_path / "r.traj"
    path.write_text(json.dumps(doc))
    out = _child(tmp_path, path, "swe-agent")
    assert out.get("ok") and out["sessions"] == 1, out


def test_parsed_json_keeps_what_is_over_a_bound() -> None:
    from trajlog.interop.mapping import parsed_json
    deep = "{" + '"a":{' * 5000 + "}" * 5001
    assert parsed_json(deep) == deep
    assert parsed_json('{"a": [1, 2]}') == {"a": [1, 2]}


# -- item 11: folders ----------------------------------------------------------------


def _openhands_event(i: int) -> dict[str, Any]:
    return {"id": i, "source": "user", "action": "message", "args": {"content": f"m{i}"},
            "timestamp": "2026-01-01T00:00:00"}


def test_openhands_event_files_with_odd_names_import_in_order(tmp_path: Path) -> None:
    folder = tmp_path / "conv"
    (folder / "events").mkdir(parents=True)
    for i, name in enumerate(["10.json", "2.json", "1.json", "x.json", "\u00b2.json",
                              "1-a.json"]):
        (folder / "events" / name).write_text(json.dumps(_openhands_event(i)))
    with trajlog.open(os.fspath(tmp_path / "a.db")) as st:
        report = st.import_path(folder)
        assert report.events == 6
        contents = [e.data["content"] for e in st.session(report.sessions[0].session_id)
                    .events()]
    # name parts compared in turn, numbers (ASCII digits) numerically and first
    assert contents == ["m5", "m2", "m1", "m0", "m3", "m4"]


def _outside(tmp_path: Path, text: bytes) -> Path:
    secret = tmp_path / "elsewhere" / "secret.json"
    secret.parent.mkdir(exist_ok=True)
    secret.write_bytes(text)
    return secret


def test_folder_imports_refuse_links_out_of_the_folder(tmp_path: Path) -> None:
    claude = tmp_path / "proj"
    claude.mkdir()
    _jsonl(claude / f"{SID}.jsonl", _claude_line())
    link = claude / "b.jsonl"
    link.symlink_to(_jsonl(tmp_path / "other.jsonl", _claude_line(
        {"sessionId": "6a1c7c1e-0000-4000-8000-0000000000ff"}, uuid="z")))
    _refused(_child(tmp_path, claude, "claude-code"), link, offset=0, reason="link out")

    hands = tmp_path / "conv"
    (hands / "events").mkdir(parents=True)
    (hands / "events" / "1.json").write_text(json.dumps(_openhands_event(1)))
    link = hands / "events" / "2.json"
    link.symlink_to(_outside(tmp_path, json.dumps(_openhands_event(2)).encode()))
    _refused(_child(tmp_path, hands, "openhands"), link, offset=0, reason="link out")
    link.unlink()
    state = hands / "base_state.json"
    state.symlink_to(_outside(tmp_path, b'{"id": "x"}'))
    _refused(_child(tmp_path, hands, "openhands"), state, offset=0, reason="link out")

    codex = tmp_path / "sessions"
    codex.mkdir()
    link = codex / "rollout-1.jsonl"
    link.symlink_to(_jsonl(tmp_path / "r.jsonl", {
        "timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
        "payload": {"id": SID, "cwd": "/w"}}))
    _refused(_child(tmp_path, codex, "codex"), link, offset=0, reason="link out")

    swe = tmp_path / "run"
    swe.mkdir()
    traj = REAL / "swe-agent" / "swe-agent__test-repo-i1.traj"
    link = swe / "a.traj"
    link.symlink_to(traj)
    _refused(_child(tmp_path, swe, "swe-agent"), link, offset=0, reason="link out")


def test_a_linked_subagent_folder_out_of_the_project(tmp_path: Path) -> None:
    claude = tmp_path / "proj"
    claude.mkdir()
    _jsonl(claude / f"{SID}.jsonl", _claude_line())
    away = tmp_path / "away" / "subagents"
    away.mkdir(parents=True)
    _jsonl(away / "agent-a1.jsonl", _claude_line({"isSidechain": True, "agentId": "a1"},
                                                 uuid="u2"))
    (claude / SID).symlink_to(tmp_path / "away")
    out = _child(tmp_path, claude, "claude-code")
    _refused(out, claude / SID / "subagents" / "agent-a1.jsonl", offset=0, reason="link out")


def test_a_fifo_in_a_folder_is_refused(tmp_path: Path) -> None:
    claude = tmp_path / "proj"
    claude.mkdir()
    _jsonl(claude / f"{SID}.jsonl", _claude_line())
    os.mkfifo(claude / "z.jsonl")
    _refused(_child(tmp_path, claude, "claude-code", timeout=60), claude / "z.jsonl",
             offset=0, reason="not a regular file")


def test_an_ordinary_import_fits_the_bound(tmp_path: Path) -> None:
    out = _child(tmp_path, REAL / "claude-code" / "claude-code-log" / "projects",
                 "claude-code")
    assert out.get("ok", 0) > 100 and out["sessions"] > 1, out


# -- siblings: zip directories, .tlog CHUNKs, the counting rule ----------------------


def test_a_zip_directory_too_large_to_read(tmp_path: Path) -> None:
    path = tmp_path / "log.eval"
    size = (3 << 30) + 22
    with open(path, "wb") as f:
        f.write(b"PK\x03\x04")
        f.truncate(size)
        f.seek(size - 22)
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, 2 << 30, 1 << 20, 0))
    out = _child(tmp_path, path, "inspect-ai")
    _refused(out, path, offset=1 << 20, reason="zip directory")


def test_the_counting_rule() -> None:
    from trajlog.errors import ImportFormatError

    assert bounded.try_decode(b'{"a": "[[[[,,,,::::"}') == {"a": "[[[[,,,,::::"}
    assert bounded.try_decode(_deep(bounded.DEPTH_LIMIT)) == bounded.try_decode(
        _deep(bounded.DEPTH_LIMIT))
    assert bounded.try_decode(_deep(bounded.DEPTH_LIMIT + 1)) is bounded.INVALID
    mixed = b'{"a":' * 70 + b"[" * 60 + b"1" + b"]" * 60 + b"}" * 70
    assert bounded.over(mixed) is not None      # braces and brackets nest together
    # a string's escaped quote does not end it
    quoted = b'["' + b'\\"[' * 300 + b'"]'
    assert bounded.try_decode(quoted) == ['"[' * 300]
    # many short strings are many values; escaped quotes are not strings
    assert bounded.over(b"[" + b'"",' * bounded.VALUE_LIMIT + b'""]') is not None
    assert bounded.over(b'["' + b'\\"' * (bounded.VALUE_LIMIT * 2) + b'"]') is None
    with pytest.raises(ImportFormatError) as err:
        bounded.decode(_many(bounded.VALUE_LIMIT + 1), "f", line=7, offset=70)
    assert (err.value.file, err.value.line, err.value.offset) == ("f", 7, 70)


def test_an_openhands_event_file_that_is_not_an_object_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "conv"
    (folder / "events").mkdir(parents=True)
    (folder / "events" / "1.json").write_text(json.dumps(_openhands_event(1)))
    (folder / "events" / "2.json").write_text("[1, 2]")
    _refused(_child(tmp_path, folder, "openhands"), folder / "events" / "2.json", line=1,
             offset=0, reason="JSON object")
