"""Golden tests of the aider importer on tests/realdata/aider/chat-history.md
(the aider author's own history: 1,133 sessions, MANIFEST.md).  The expected
numbers are counted from the raw file here with plain line rules (regexes over
the lines), never by calling the parser; the parser must agree with them and
account for every non-blank line of the file."""

from __future__ import annotations

import itertools
import re
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import trajlog
from trajlog.interop.mapping import MappedEvent, Notes, epoch_ms
from trajlog.interop.sources import aider
from trajlog.projections import chat, model_history, trajectory

HISTORY = Path(__file__).resolve().parents[1] / "realdata" / "aider" / "chat-history.md"
HEADER = "# aider chat started at "


@pytest.fixture(scope="module")
def lines() -> list[str]:
    text = HISTORY.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return text.split("\n")[:-1]


@pytest.fixture(scope="module")
def parsed() -> tuple[list[tuple[Any, list[MappedEvent]]], Notes, float]:
    notes = Notes()
    t0 = time.perf_counter()
    sessions = [(s, list(s.events)) for s in aider.read(HISTORY, notes)]
    return sessions, notes, time.perf_counter() - t0


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = trajlog.open(str(tmp_path_factory.mktemp("aider") / "t.db"))
    t0 = time.perf_counter()
    report = store.import_path(HISTORY, format="aider")
    elapsed = time.perf_counter() - t0
    yield store, report, elapsed
    store.close()


def user_runs(lines: list[str]) -> list[int]:
    """Indexes of the first line of each user input, by the plain rule: a run
    of ``####`` lines whose first line ends in the two-space line break, or
    that follows two blank lines."""
    starts = []
    for i, line in enumerate(lines):
        if (re.match(r"####( |$)", line) and not (i and lines[i - 1].startswith("####"))
                and (line.endswith("  ") or (i >= 2 and lines[i - 1] == lines[i - 2] == ""))):
            starts.append(i)
    return starts


def count(lines: list[str], pattern: str) -> int:
    rx = re.compile(pattern)
    return sum(1 for line in lines if rx.match(line))


def of_type(sessions: list[tuple[Any, list[MappedEvent]]], type_: str) -> list[MappedEvent]:
    return [e for _, evs in sessions for e in evs if e.type == type_]


# ---------------------------------------------------------------------------

def test_sniff(tmp_path: Path) -> None:
    assert aider.sniff(HISTORY)
    named = tmp_path / ".aider.chat.history.md"
    named.write_text("")
    assert aider.sniff(named)
    other = HISTORY.parents[1]
    assert not aider.sniff(other / "inspect-ai" / "2025-05-12T20-28-13-04-00_popularity.json")
    assert not aider.sniff(other / "MANIFEST.md")
    assert not aider.sniff(HISTORY.parent)


def test_sessions_one_per_header(parsed: Any, lines: list[str]) -> None:
    sessions, notes, _ = parsed
    headers = [i + 1 for i, line in enumerate(lines) if line.startswith(HEADER)]
    assert len(headers) == 1133
    # the file starts in the middle of a session: its lines come first, as a
    # session of their own, and the warning says so
    assert sessions[0][0].metadata["import"]["preamble"] is True
    # it happened before the first header: it carries that header's time
    first = lines[headers[0] - 1][len(HEADER):]
    assert sessions[0][0].metadata["import"]["before"] == first == "2024-08-05 19:33:02"
    assert sessions[0][0].created_ms == epoch_ms(first.replace(" ", "T"))
    assert any("before the first session header" in w for w in notes.warnings)
    headed = sessions[1:]
    assert [s.metadata["import"]["line"] for s, _ in headed] == headers
    keys = [s.key for s, _ in sessions]
    assert len(set(keys)) == len(keys) == 1134
    assert len({s.id for s, _ in sessions}) == 1134
    for (s, _), line in zip(headed, headers, strict=True):
        stamp = lines[line - 1][len(HEADER):]
        assert s.key.startswith(f"aider:{stamp.replace(' ', 'T')}/")
        assert s.created_ms == epoch_ms(stamp.replace(" ", "T"))
        assert s.agent_preset == "aider"
    # a second of the same timestamp gets the next ordinal
    stamps = Counter(lines[n - 1] for n in headers)
    assert sum(1 for s, _ in headed if not s.key.endswith("/1")) == sum(
        n - 1 for n in stamps.values())


def test_counts_match_the_raw_file(parsed: Any, lines: list[str]) -> None:
    sessions, _, _ = parsed
    types = Counter(e.type for _, evs in sessions for e in evs)
    runs = user_runs(lines)
    assert len(runs) == 1769     # 1,776 "#### " runs, 7 of them inside replies
    assert types["user/message"] == len(runs)
    users = of_type(sessions, "user/message")
    assert [e.line for e in users] == [i + 1 for i in runs]
    slash = [i for i in runs if lines[i].startswith("#### /")]
    assert len(slash) == 861
    assert [e.line for e in users if "command" in e.data] == [i + 1 for i in slash]
    assert [e.data["command"] for e in users if "command" in e.data] == [
        lines[i][5:].split(" ")[0].rstrip() for i in slash]
    assert sum(1 for e in users if e.data.get("blank")) == count(lines, r"#### <blank>  $")
    assert types["aider/tokens"] == count(lines, r"> Tokens: ") == 839
    assert types["aider/commit"] == count(lines, r"> Commit [0-9a-f]{7,40} ") == 667
    assert types["aider/applied_edit"] == count(lines, r"> Applied edit to ") == 413
    assert types["aider/interrupt"] == count(lines, r"> \^C again to exit  $") == 449
    assert types["aider/keyboard_interrupt"] == count(
        lines, r"> \^C KeyboardInterrupt  $") == 315
    edits = [x for e in of_type(sessions, "assistant/message") for x in e.data.get("edits", ())]
    assert len(edits) == count(lines, r"<<<<<<< SEARCH") == 707
    assert count(lines, r">>>>>>> REPLACE") == 667
    # two replies edit aider's own edit-block code: their search text holds
    # marker lines, so one REPLACE line each closes no block (read by hand)
    assert sum(x["complete"] for x in edits) == 667 - 2
    odd = [e.line for e in of_type(sessions, "assistant/message")
           if sum(x.startswith(">>>>>>> REPLACE") for x in e.data["content"].split("\n"))
           != sum(x["complete"] for x in e.data.get("edits", ()))]
    assert odd == [91768, 94702]
    for x in edits:
        assert lines[x["line"] - 1].startswith("<<<<<<< SEARCH")
    # token lines parsed
    tokens = of_type(sessions, "aider/tokens")
    assert all("sent" in e.data and "received" in e.data for e in tokens)
    first = next(e for e in tokens if e.line == 209)   # the file's first token line
    assert (first.data["sent"], first.data["received"]) == ("5,244", "604")
    assert (first.data["cost_message"], first.data["cost_session"]) == (0.02, 0.02)


def test_every_line_is_accounted_for(parsed: Any, lines: list[str]) -> None:
    """Zero unexplained drops: each non-blank line is in exactly one event
    (its data's line .. end_line), is a session header, or is noted as
    skipped with a reason."""
    sessions, notes, _ = parsed
    owner: dict[int, str] = {}
    for _, evs in sessions:
        for e in evs:
            if "line" in e.data:
                for n in range(e.data["line"], e.data["end_line"] + 1):
                    assert n not in owner, (n, e.type, owner[n])
                    owner[n] = e.type
    for i, line in enumerate(lines, 1):
        if line.startswith(HEADER):
            owner[i] = "header"
    skipped = Counter(u.kind for u in notes.unmapped)
    offsets = list(itertools.accumulate((len(x.encode()) + 1 for x in lines), initial=0))
    for u in notes.unmapped:
        assert u.file == str(HISTORY) and u.line not in owner
        owner[u.line] = u.kind
        assert u.offset == offsets[u.line - 1]
    assert [i for i, line in enumerate(lines, 1) if line and i not in owner] == []
    # what was skipped: the editor mode line, and quoted lines with no text
    assert set(skipped) == {"mode-line", "empty-output"}
    assert skipped["mode-line"] == 1 and owner[1] == "mode-line"
    empty = [i for i, kind in owner.items() if kind == "empty-output"]
    assert all(re.fullmatch(r">( {2,3})?", lines[i - 1]) for i in empty)
    # every empty quoted line that starts a print is skipped (the others are
    # inside a reply or a multi-line print)
    starts = {e.data["line"] for _, evs in sessions for e in evs if e.type.startswith("aider/")}
    assert not {i for i in empty if i in starts}
    assert all(e.data["text"] for e in of_type(sessions, "aider/output"))
    assert notes.torn == []


def test_text_is_kept(parsed: Any, lines: list[str]) -> None:
    sessions, _, _ = parsed
    for e in of_type(sessions, "user/message"):
        raw = lines[e.data["line"] - 1:e.data["end_line"]]
        want = "\n".join(re.sub(r"^#### ?", "", x.removesuffix("  ")) for x in raw)
        assert e.data["content"] == ("" if e.data.get("blank") else want)
    for e in of_type(sessions, "assistant/message"):
        raw = lines[e.data["line"] - 1:e.data["end_line"]]
        assert e.data["content"] == "\n".join(raw)
        assert raw[0] and raw[-1]
    for _, evs in sessions:
        for e in evs:
            if e.type.startswith("aider/") and e.data["line"] == e.data["end_line"]:
                raw = lines[e.data["line"] - 1]
                assert e.data["text"] == re.sub(r"^> ?", "", raw.removesuffix("  "))
    # the "#### " lines that are not user input are Markdown inside replies
    inside = [i + 1 for i, line in enumerate(lines) if line.startswith("#### ")
              and not line.endswith("  ")]
    replies = {n for e in of_type(sessions, "assistant/message")
               for n in range(e.data["line"], e.data["end_line"] + 1)}
    users = {e.line for e in of_type(sessions, "user/message")}
    assert len(inside) == 8 and len([n for n in inside if n in replies]) == 7
    assert [n for n in inside if n not in replies] == [n for n in inside if n in users]


def test_startup_and_metadata(parsed: Any) -> None:
    sessions, _, _ = parsed
    by_line = {s.metadata["import"].get("line"): (s, evs) for s, evs in sessions}
    s, evs = by_line[94]   # lines 94-101, read by hand
    meta = s.metadata["import"]
    assert meta["started_at"] == "2024-08-05 19:33:02" and meta["index"] == 1
    assert meta["aider"] == {
        "command": "/Users/gauthier/Projects/aider/.venv/bin/aider --lint --commit",
        "version": "v0.47.2-dev", "model": "claude-3-5-sonnet-20240620",
        "edit_format": "diff", "weak_model": "claude-3-haiku-20240307",
        "git_repo": ".git with 300 files", "repo_map": "using 1024 tokens"}
    assert [e.type for e in evs] == ["aider/startup"] * 5 + ["aider/commit"]
    assert [e.line for e in evs] == list(range(96, 102))
    assert evs[1].data["version"] == "v0.47.2-dev"
    assert (evs[5].data["sha"], evs[5].data["message"]) == (
        "d0ffbf1", "fix: Reorder imports in repomap.py")
    s, _ = by_line[99881]
    assert s.metadata["import"]["aider"]["weak_model"] == "claude-3-haiku-20240307"
    assert s.metadata["import"]["aider"]["edit_format"] == "diff"


def test_turns_and_interruptions(parsed: Any, lines: list[str]) -> None:
    """A turn per user input, closed by the next input or header (the last
    one of the file stays open); interrupted when a ^C was logged in it --
    counted here with a plain scan."""
    sessions, _, _ = parsed
    runs = set(user_runs(lines))
    interrupted, in_turn, flags = False, False, []
    for i, line in enumerate(lines):
        if line.startswith(HEADER) or i in runs:
            if in_turn:
                flags.append(interrupted)
            in_turn, interrupted = i in runs, False
        elif in_turn and re.match(r"> \^C (again to exit|KeyboardInterrupt)  $", line):
            interrupted = True
    assert in_turn   # the file ends inside a turn
    ends = of_type(sessions, "turn/end")
    assert [e.data["interrupted"] for e in ends] == flags
    assert len(ends) == len(runs) - 1 and sum(flags) > 100
    for n, (_, evs) in enumerate(sessions):   # steps only inside turns
        depth = step = 0
        for e in evs:
            if e.type == "turn/start":
                assert depth == 0
                depth = 1
            elif e.type == "turn/end":
                assert depth == 1
                depth = step = 0
            elif e.type == "step/start":
                assert depth == 1 and step == 0
                step = 1
            elif e.type == "step/end":
                assert step == 1
                step = 0
        assert depth == (1 if n == len(sessions) - 1 else 0)


def test_import_into_a_store(stored: Any, parsed: Any) -> None:
    store, report, elapsed = stored
    sessions, notes, parse_time = parsed
    assert parse_time < 5, parse_time
    assert elapsed < 40, elapsed   # 3-9 s here (one transaction per session)
    assert len(report.sessions) == 1134
    assert {s.status for s in report.sessions} == {"created"}
    assert report.events == sum(len(evs) for _, evs in sessions)
    assert len(report.unmapped) == len(notes.unmapped) and report.torn == []
    by_key = {s.key: s.session_id for s in report.sessions}
    # the "Use the Spinner" session (lines 103-216, read by hand)
    (session, _), = [(s, e) for s, e in sessions if s.metadata["import"].get("line") == 103]
    stored_session = store.session(by_key[session.key])
    assert [e.type for e in stored_session.events()] == ["aider/startup"] * 7 + [
        "turn/start", "user/message", "step/start", "assistant/message",
        "aider/tokens", "aider/applied_edit", "aider/commit", "aider/output", "turn/end",
        "turn/start", "user/message", "turn/end", "turn/start", "user/message", "turn/end"]
    history = model_history(stored_session)
    assert [h.role for h in history] == ["user", "assistant", "user", "user"]
    assert history[0].content == "Use the Spinner instead of the inlined custom spinner"
    assert history[1].content.startswith("Certainly! I'll modify the `run_install` function")
    assert "<<<<<<< SEARCH" in history[1].content
    assert [h.content for h in history[2:]] == ["/diff", "/ex"]
    turns = trajectory(stored_session)
    assert [len(t.steps) for t in turns] == [1, 0, 0]
    assert [t.interrupted for t in turns] == [False, False, False]
    assert len([n for n in chat(stored_session) if n.kind == "message"]) == 4
    assert {e.time for e in stored_session.events()} == {session.created_ms}


def test_bounded_memory() -> None:
    """Sessions and their events are parsed as they are consumed: reading the
    first quarter of the file's sessions never holds the whole 4 MB file."""
    tracemalloc.start()
    try:
        total = 0
        for s in itertools.islice(aider.read(HISTORY, Notes()), 280):
            for _ in s.events:
                total += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > 4000
    assert peak < 1_000_000, peak


def test_sessions_left_unread_are_parsed_past(parsed: Any) -> None:
    notes = Notes()
    keys = [s.key for s in aider.read(HISTORY, notes)]   # no events consumed
    assert keys == [s.key for s, _ in parsed[0]]
    assert notes.unmapped == parsed[1].unmapped


# ---------------------------------------------------------------------------
# A cut file (aider killed mid-write), and a file that grew

def _tail(lines: list[str], sessions: int) -> bytes:
    starts = [i for i, line in enumerate(lines) if line.startswith(HEADER)]
    return ("\n".join(lines[starts[-sessions]:]) + "\n").encode()


def test_cut_inside_the_last_two_lines(tmp_path: Path, lines: list[str]) -> None:
    data = _tail(lines, 3)
    last_two = data.rstrip(b"\n").rsplit(b"\n", 2)
    start = len(data) - len(last_two[-1]) - len(last_two[-2]) - 2
    target = tmp_path / ".aider.chat.history.md"
    for cut in range(start, len(data) + 1):
        piece = data[:cut]
        target.write_bytes(piece)
        notes = Notes()
        sessions = [(s, list(s.events)) for s in aider.read(target, notes)]
        assert len(sessions) == 3
        whole = piece[:piece.rfind(b"\n") + 1].decode().split("\n")[:-1]
        if piece.endswith(b"\n"):
            assert notes.torn == []
        else:
            (torn,) = notes.torn
            assert torn.offset == len(piece) - torn.size == piece.rfind(b"\n") + 1
            assert torn.line == len(whole) + 1
        # the last reply holds exactly the complete lines
        last = [e for e in sessions[-1][1] if e.type == "assistant/message"][-1]
        assert last.data["content"] == "\n".join(whole[last.data["line"] - 1:]).rstrip("\n")
        # and the session's last turn is still open
        assert sessions[-1][1][-1].type == "assistant/message"


def test_a_grown_file_appends_only_the_new_events(tmp_path: Path, lines: list[str]) -> None:
    """A history imported while aider is still writing it (cut after a
    complete print): importing it again once it grew keeps every event
    stored and appends the rest; the turn left open is closed then."""
    data = _tail(lines, 5)
    text = data.decode()
    cut = text.index("> Applied edit to ", text.index(HEADER, 1))
    cut = text.index("\n", cut) + 1
    target = tmp_path / ".aider.chat.history.md"
    target.write_bytes(text[:cut].encode())
    store = trajlog.open(str(tmp_path / "t.db"))
    try:
        first = store.import_path(target)   # found by sniffing its name
        assert first.format == "aider" and first.torn == []
        grown = len(first.sessions)
        target.write_bytes(data)
        second = store.import_path(target, format="aider")
        statuses = [s.status for s in second.sessions]
        assert statuses[:grown - 1] == ["unchanged"] * (grown - 1)
        assert statuses[grown - 1] == "extended" and second.sessions[grown - 1].kept > 0
        assert statuses[grown:] == ["created"] * (5 - grown)
        whole = trajlog.open(str(tmp_path / "whole.db"))
        try:
            once = whole.import_path(target, format="aider")
            for a, b in zip(once.sessions, second.sessions, strict=True):
                assert [(e.type, e.data) for e in whole.session(a.session_id).events()] == [
                    (e.type, e.data) for e in store.session(b.session_id).events()]
        finally:
            whole.close()
        assert store.import_path(target, format="aider").events == 0
    finally:
        store.close()


# ---------------------------------------------------------------------------
# The framing rules, on a small history written here ("|" marks the two
# trailing spaces aider writes as a Markdown line break)

SMALL = """\
-*- mode: fundamental -*-
> left over from a session whose header is gone|

# aider chat started at 2024-01-02 03:04:05

> aider --model gpt-4o|
> Aider v0.50.0|
> Model: gpt-4o with diff edit format|

#### first line of a prompt|
#### second line|

Here is the change:

> a quote in the reply stays in the reply
#### and so does a heading

src/app.py
```python
<<<<<<< SEARCH
old
=======
new
>>>>>>> REPLACE
```

> Tokens: 1.2k sent, 50 received.
Cost: $0.01 message, $0.02 session.|
> Applied edit to src/app.py|
> Commit abc1234 feat: change|
> Running pytest:|
> first line of some output
code line with trailing spaces|
more output|
>|

#### /run make|
> ^C again to exit|

#### <blank>|

# aider chat started at 2024-01-02 03:04:05

> ^C KeyboardInterrupt|

""".replace("|\n", "  \n")


def test_small_history(tmp_path: Path) -> None:
    target = tmp_path / "history.md"
    target.write_bytes(SMALL.encode() + b"a reply with a bad byte \xff in it\n")
    assert aider.sniff(target)
    notes = Notes()
    sessions = [(s, list(s.events)) for s in aider.read(target, notes)]
    assert [s.key for s, _ in sessions][1:] == [
        "aider:2024-01-02T03:04:05/1", "aider:2024-01-02T03:04:05/2"]
    assert sessions[0][0].key.startswith("aider:preamble-")
    assert [e.type for e in sessions[0][1]] == ["aider/output"]
    assert [(u.line, u.kind) for u in notes.unmapped] == [(1, "mode-line"), (35, "empty-output")]
    evs = sessions[1][1]
    assert [e.type for e in evs] == ["aider/startup"] * 3 + [
        "turn/start", "user/message", "step/start", "assistant/message",
        "aider/tokens", "aider/applied_edit", "aider/commit", "aider/output", "aider/output",
        "turn/end",
        "turn/start", "user/message", "aider/interrupt", "turn/end",
        "turn/start", "user/message", "turn/end"]
    assert evs[4].data["content"] == "first line of a prompt\nsecond line"
    reply = evs[6].data["content"]
    assert reply.startswith("Here is the change:") and reply.endswith("```")
    assert "> a quote in the reply" in reply and "#### and so does a heading" in reply
    assert evs[6].data["edits"] == [{"file": "src/app.py", "search": "old", "replace": "new",
                                     "complete": True, "line": 20}]
    tokens = evs[7].data
    assert tokens["cost_session"] == 0.02 and tokens["sent"] == "1.2k"
    assert tokens["text"] == "Tokens: 1.2k sent, 50 received.\nCost: $0.01 message, $0.02 session."
    assert evs[9].data == {"text": "Commit abc1234 feat: change", "line": 30, "end_line": 30,
                           "sha": "abc1234", "message": "feat: change"}
    assert evs[10].data["text"] == "Running pytest:"
    # a print's further lines are as printed; a two-space line inside it (a
    # line of text follows with no blank line) did not end it
    assert evs[11].data == {"text": "first line of some output\ncode line with trailing "
                            "spaces  \nmore output", "line": 32, "end_line": 34}
    assert evs[12].data == {"interrupted": False}
    assert (evs[14].data["command"], evs[14].data["args"]) == ("/run", "make")
    assert evs[16].data == {"interrupted": True}
    assert evs[18].data == {"content": "", "line": 40, "end_line": 40, "blank": True,
                            "meta": True}
    assert sessions[1][0].metadata["import"]["aider"] == {
        "command": "aider --model gpt-4o", "version": "v0.50.0", "model": "gpt-4o",
        "edit_format": "diff"}
    last = sessions[2][1]
    assert [e.type for e in last] == ["aider/keyboard_interrupt", "assistant/message"]
    assert last[-1].data["content"] == "a reply with a bad byte \ufffd in it"
    assert len(notes.warnings) == 2 and any("not UTF-8" in w for w in notes.warnings)
