"""Every real file in tests/realdata imports by format detection alone, with
no unexplained drop (every record that gave no event is listed with a
reason), and survives the round trip ``import -> export (.jsonl.zst and
.tlog) -> import`` with identical frames.  The per-format golden tests
(test_<format>.py) check what the events say."""

from __future__ import annotations

from pathlib import Path

import pytest

import trajlog

REAL = Path(__file__).parent.parent / "realdata"
PROJECTS = REAL / "claude-code" / "claude-code-log" / "projects"


def targets() -> list[tuple[Path, str]]:
    """(path to import, the format it must be detected as): each Claude Code
    project folder (its sessions with their subagent files) and every other
    file."""
    out = [(p, "claude-code") for p in sorted(PROJECTS.iterdir())]
    out += [(p, "claude-code") for p in sorted((REAL / "claude-code" / "synthetic-shapes")
                                                .iterdir())]
    for folder, fmt in (("codex", "codex"), ("openhands", "openhands"),
                        ("swe-agent", "swe-agent"), ("inspect-ai", "inspect-ai"),
                        ("aider", "aider")):
        out += [(p, fmt) for p in sorted((REAL / folder).rglob("*")) if p.is_file()]
    return out


TARGETS = targets()


def test_every_real_file_is_covered() -> None:
    covered: set[Path] = set()
    for path, _ in TARGETS:
        covered |= set(path.rglob("*")) if path.is_dir() else {path}
    files = {p for p in REAL.rglob("*") if p.is_file() and p.name != "MANIFEST.md"}
    assert files - covered == set()
    assert len(files) == 24


def _frames(store: trajlog.Store, sid: str) -> bytes:
    return b"".join(run.frames for run in store.session(sid).frames())


@pytest.mark.parametrize(("path", "fmt"), TARGETS, ids=[p.name for p, _ in TARGETS])
def test_real_file_imports_and_round_trips(tmp_path: Path, path: Path, fmt: str) -> None:
    with trajlog.open(str(tmp_path / "a.db")) as a:
        report = a.import_path(path)
        assert report.format == fmt
        assert not report.torn and not report.conflicts
        for u in report.unmapped:    # nothing dropped without saying why
            assert u.kind and u.reason and u.file, u
        ids = [s.session_id for s in report.sessions]
        empty = path.is_file() and path.stat().st_size == 0
        assert ids or path.is_dir() or empty
        for sid in ids:
            assert a.session(sid).verify().ok
        again = a.import_path(path)
        assert again.events == 0 and len(again.skipped) == len(ids)
        # the round trip: every session (aider: every 25th of its 1,134)
        sample = ids if fmt != "aider" else ids[::25] + ids[-1:]
        headers = {h.id: h for h in a.sessions(include_subagents=True)}
        order = sorted(sample, key=lambda sid: headers[sid].delegation_depth)
        for ext in ("jsonl.zst", "tlog"):
            with trajlog.open(str(tmp_path / f"b-{ext}.db")) as b:
                for sid in order:
                    out = tmp_path / f"{sid}.{ext}"
                    a.export(sid, out)
                    back = b.import_path(out)
                    assert back.created == [sid] and not back.warnings
                    assert _frames(b, sid) == _frames(a, sid)
                    assert b.session(sid).header == headers[sid]
