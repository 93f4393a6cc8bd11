"""aider's chat history, ``.aider.chat.history.md``: one append-only Markdown
file per repository holding every session ever run there, read line by line.

aider writes the file in chunks, and the parser follows how each is framed:

* ``# aider chat started at YYYY-MM-DD HH:MM:SS`` opens a session (its key is
  ``aider:<timestamp>/<n>``, n counting sessions of the same second);
* a user input is a blank line then one ``#### <line>  `` per input line
  (two trailing spaces: a Markdown line break) -> ``user/message``; ``#### /cmd``
  is a slash command (``data["command"]``), ``#### <blank>`` an empty input,
  aider's own lint prompt (``# Fix any errors below``) is flagged ``meta``;
* an assistant reply is a blank line, the Markdown text, a blank line ->
  ``assistant/message``; its SEARCH/REPLACE edit blocks stay in the text and
  are also listed in ``data["edits"]``.  Inside a reply, ``#### heading`` and
  ``> quote`` lines are text: a user input or a tool note begins only after a
  blank line and ends its lines with two spaces;
* tool output and notes are ``> `` quoted: one chunk per print, its first
  line prefixed, any further lines as printed, the last ending in two spaces.
  ``> Tokens: ...`` -> ``aider/tokens``, ``> Applied edit to <f>`` ->
  ``aider/applied_edit``, ``> Commit <sha> <msg>`` -> ``aider/commit``,
  ``> ^C again to exit`` -> ``aider/interrupt``, ``> ^C KeyboardInterrupt``
  (aider exits) -> ``aider/keyboard_interrupt``, the prints right after a
  session header (command, version, models, repo) -> ``aider/startup`` (also
  parsed into the session's metadata), any other print -> ``aider/output``.
  A quoted line with no text carries nothing and is skipped (noted).

Every event's data has ``line`` / ``end_line``: where it is in the file.  Each
user input opens a turn, closed by the next input or the next session header
(``interrupted`` when a ^C was logged in it), and each reply a step inside it.
Each event depends only on the lines before it and its own chunk, so a file
imported while aider is still appending to it imports again as the same events
plus the new ones (a turn open at the end of the file stays open).  The file
holds no per-message times: events carry the session's start time (a local
time without a zone, read as UTC).  Lines before the first header (a history
whose start was cut off) are imported as one session of their own, with a
warning; a last line with no newline is a torn tail (noted, not imported).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import bounded
from ..mapping import MappedEvent, MappedSession, Notes, Torn, epoch_ms

NAME = "aider"

_HEADER = "# aider chat started at "
_MODE_LINE = re.compile(r"-\*-.*-\*-\s*")
_COMMIT = re.compile(r"Commit ([0-9a-f]{7,40})\b ?(.*)", re.S)
_NUMBER = r"([0-9][0-9,.]*k?)"
_TOKENS = {key: re.compile(rf"{_NUMBER} {what}") for key, what in (
    ("sent", "sent"), ("received", "received"), ("cache_write", "cache write"),
    ("cache_hit", "cache hit"))}
_COST = re.compile(r"Cost: \$([0-9.]+) (?:message|request), \$([0-9.]+) session")
_FENCE = ("```", "<source")


class _Chunk:
    """One chunk as aider wrote it: ``kind`` H (header), U (user input), A
    (assistant reply), Q (one quoted print), M (an editor mode line); its
    lines as written, where it starts, and ``gap``: the blank lines before it."""

    __slots__ = ("end", "gap", "kind", "line", "lines", "offset")

    def __init__(self, kind: str, line: int, offset: int, text: str, gap: int) -> None:
        self.kind, self.line, self.offset, self.gap = kind, line, offset, gap
        self.lines = [text]
        self.end = line

    def add(self, text: str, line: int) -> None:
        self.lines.append(text)
        self.end = line

    def trim(self) -> None:
        """Drop trailing blank lines (the separator after a reply or print)."""
        while len(self.lines) > 1 and self.lines[-1] == "":
            self.lines.pop()
            self.end -= 1


def sniff(path: Path) -> bool:
    """An aider chat history: its usual name, or Markdown with a session header
    in its first 64 KiB."""
    if path.is_dir():
        return False
    if path.name != ".aider.chat.history.md" and path.suffix.lower() != ".md":
        return False
    try:
        head = bounded.head(path, 65536)
    except OSError:
        return False
    if path.name == ".aider.chat.history.md":
        return True
    return head.startswith(_HEADER.encode()) or b"\n" + _HEADER.encode() in head


def _lines(path: Path, notes: Notes) -> Iterator[tuple[int, int, str]]:
    """``(line number, byte offset, text without its newline)``; a last line
    with no newline is a torn tail."""
    name = os.fspath(path)
    bad = 0
    with bounded.open_regular(path, name) as f:
        for number, start, raw in bounded.lines(f, name):
            if not raw.endswith(b"\n"):
                notes.torn.append(Torn(name, number, start, len(raw)))
                break
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                bad += 1
                text = raw.decode("utf-8", "replace")
            yield number, start, text.rstrip("\r\n")
    if bad:
        notes.warn(f"{name}: {bad} line(s) that are not UTF-8, read with U+FFFD for the "
                   "bad bytes")


def _is_quote(text: str) -> bool:
    return text.startswith("> ") or text == ">"


def _is_user(text: str) -> bool:
    return text.startswith("#### ") or text == "####"


def _ends_print(text: str) -> bool:
    """The last line of a print: text, then exactly the two-space line break."""
    return len(text) >= 3 and text.endswith("  ") and not text[-3].isspace()


def _chunks(lines: Iterator[tuple[int, int, str]]) -> Iterator[_Chunk]:
    """The file's chunks, in order (see the module docstring for the rules)."""
    cur: _Chunk | None = None
    # mode: None (between chunks), "A" reply, "U" user input, "Q" a print whose
    # last line is still to come, "Qt" a print that looks finished, "T" a
    # quoted line after a blank line in a reply: a print if a line ending in
    # the two-space break comes before the next blank line (``maybe``), else
    # a quote in the reply
    mode: str | None = None
    maybe: _Chunk | None = None
    blanks = 0
    first = True
    for number, offset, text in lines:
        if first:
            first = False
            if _MODE_LINE.fullmatch(text):
                yield _Chunk("M", number, offset, text, 0)
                continue
        if mode == "T":
            assert cur is not None and maybe is not None
            if text and not text.startswith(_HEADER):
                maybe.add(text, number)
                if _ends_print(text):
                    cur.trim()
                    yield cur
                    cur, maybe, mode = maybe, None, "Qt"
                continue
            cur.lines.extend(maybe.lines)
            cur.end = maybe.end
            maybe, mode = None, "A"
        if mode == "Q":
            # a print's lines, whatever they look like, up to its last line; a
            # header, or a user input after a blank line, ends it regardless
            if not (text.startswith(_HEADER) or (
                    _is_user(text) and text.endswith("  ") and cur is not None
                    and cur.lines[-1] == "")):
                assert cur is not None
                cur.add(text, number)
                if _ends_print(text):
                    mode = "Qt"
                continue
            assert cur is not None
            before = len(cur.lines)
            cur.trim()
            blanks = before - len(cur.lines)
            yield cur
            cur, mode = None, None
        if text == "":
            blanks += 1
            if mode == "A":
                assert cur is not None
                cur.add(text, number)
            elif mode is not None:
                assert cur is not None
                yield cur
                cur, mode = None, None
            continue
        gap, blanks = blanks, 0
        if text.startswith(_HEADER):
            if cur is not None:
                cur.trim()
                yield cur
            cur, mode = None, None
            yield _Chunk("H", number, offset, text, gap)
            continue
        if _is_quote(text) and (mode != "A" or gap):
            if mode == "A" and not text.endswith("  "):
                maybe, mode = _Chunk("Q", number, offset, text, gap), "T"
                continue
            if cur is not None:
                cur.trim()
                yield cur
            cur = _Chunk("Q", number, offset, text, gap)
            mode = "Qt" if text.endswith("  ") else "Q"
            continue
        if _is_user(text) and (mode == "U" or (gap and (text.endswith("  ") or gap >= 2))
                               or (mode is None and text.endswith("  "))):
            if mode == "U":
                assert cur is not None
                cur.add(text, number)
                continue
            if cur is not None:
                cur.trim()
                yield cur
            cur, mode = _Chunk("U", number, offset, text, gap), "U"
            continue
        if mode == "Qt" and not gap:
            # text right after a print is more of it (aider starts every other
            # chunk after a blank line): the earlier two-space line was not its end
            assert cur is not None
            cur.add(text, number)
            mode = "Qt" if _ends_print(text) else "Q"
            continue
        if mode == "A":
            assert cur is not None
            cur.add(text, number)
            continue
        if cur is not None:
            cur.trim()
            yield cur
        cur, mode = _Chunk("A", number, offset, text, gap), "A"
    if maybe is not None:   # the file ended before the quote turned out a print
        assert cur is not None
        cur.lines.extend(maybe.lines)
        cur.end = maybe.end
    if cur is not None:
        cur.trim()
        yield cur


class _Peek:
    """An iterator of chunks with look-ahead and push-back."""

    def __init__(self, it: Iterator[_Chunk]) -> None:
        self.it = it
        self.ahead: list[_Chunk] = []   # pushed back, the next one last

    def peek(self) -> _Chunk | None:
        if not self.ahead:
            c = next(self.it, None)
            if c is None:
                return None
            self.ahead.append(c)
        return self.ahead[-1]

    def take(self) -> _Chunk | None:
        c = self.peek()
        if c is not None:
            self.ahead.pop()
        return c

    def unread(self, chunks: list[_Chunk]) -> None:
        self.ahead.extend(reversed(chunks))


def read(path: Path, notes: Notes) -> Iterator[MappedSession]:
    """One session per ``# aider chat started at`` header, streamed: each
    session's events are parsed as they are consumed (a session not consumed
    is parsed and dropped when the next one is asked for)."""
    name = os.fspath(path)
    chunks = _Peek(_chunks(_lines(path, notes)))
    head = chunks.peek()
    if head is not None and head.kind == "M":
        chunks.take()
        notes.skip(name, head.line, head.offset, "mode-line",
                   "an editor's file-variables line (-*- ... -*-), not part of any session")
    seen: dict[str, int] = {}
    index = 0
    current: Iterator[MappedEvent] | None = None
    while True:
        if current is not None:
            for _ in current:  # the consumer left events unread: parse past them
                pass
        c = chunks.peek()
        if c is None:
            return
        meta: dict[str, Any] = {"format": NAME, "file": path.name,
                                "event_times": "the session's start (the file has no "
                                "per-message times)"}
        if c.kind == "H":
            chunks.take()
            index += 1
            stamp = c.lines[0][len(_HEADER):].strip()
            seen[stamp] = seen.get(stamp, 0) + 1
            key = f"{NAME}:{stamp.replace(' ', 'T')}/{seen[stamp]}"
            created = epoch_ms(stamp.replace(" ", "T"))
            if created is None:
                notes.warn(f"{name} line {c.line}: session header time {stamp!r} does "
                           "not parse")
            startup = _startup(chunks)
            meta.update({"started_at": stamp, "index": index, "line": c.line,
                         "offset": c.offset, "aider": _startup_fields(startup)})
        else:
            startup = []
            digest = hashlib.sha256("\n".join(c.lines).encode()).hexdigest()[:16]
            key = f"{NAME}:preamble-{digest}"
            before = _first_header(path)
            created = epoch_ms(before.replace(" ", "T")) if before else None
            meta.update({"preamble": True, "line": c.line, "offset": c.offset,
                         "before": before})
            notes.warn(f"{name}: lines {c.line}.. come before the first session header "
                       "(the start of that session is not in the file); imported as "
                       f"session {key}")
        current = _events(chunks, startup, name, notes)
        yield MappedSession(key=key, events=current, created_ms=created,
                            agent_preset=NAME, metadata={"import": meta})


def _first_header(path: Path) -> str | None:
    """The time of the file's first session header (a separate scan: the lines
    before it are a session whose own header is gone, and happened before)."""
    marker = _HEADER.encode()
    with bounded.open_regular(path) as f:
        for _, _, raw in bounded.lines(f, os.fspath(path)):
            if raw.startswith(marker) and raw.endswith(b"\n"):
                return raw[len(marker):].decode("utf-8", "replace").strip()
    return None


def _startup(chunks: _Peek) -> list[_Chunk]:
    """The one-line prints right after a header (command, version, models,
    repository), up to the first blank line or anything else: looked at for
    the session's metadata and left in place for its events."""
    out: list[_Chunk] = []
    while True:
        c = chunks.peek()
        if (c is None or c.kind != "Q" or len(c.lines) != 1 or (out and c.gap)
                or _quote_kind(_print_text(c)) != "output"):
            break
        out.append(c)
        chunks.take()
    chunks.unread(out)
    return out


def _startup_fields(startup: list[_Chunk]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for c in startup:
        fields.update(_startup_field(_print_text(c), "command" in fields))
    return fields


def _startup_field(text: str, have_command: bool) -> dict[str, Any]:
    """What one startup line says (version, model, edit format, ...)."""
    fields: dict[str, Any] = {}
    if text.startswith("Aider v"):
        fields["version"] = text[len("Aider "):]
    elif text.startswith(("Models: ", "Model: ", "Main model: ")):
        rest = text.split(": ", 1)[1]
        fields["model"] = rest.split(" with ", 1)[0]
        found = re.search(r" with (\S+) edit format", rest)
        if found:
            fields["edit_format"] = found.group(1)
        found = re.search(r"weak model (\S+)", rest)
        if found:
            fields["weak_model"] = found.group(1)
    elif text.startswith(("Weak model: ", "Editor model: ", "Git repo: ", "Repo-map: ")):
        label, value = text.split(": ", 1)
        fields[label.lower().replace(" ", "_").replace("-", "_")] = value
    elif not have_command and re.match(r"\S*aider(\s|$)", text):
        fields["command"] = text
    return fields


def _print_text(c: _Chunk) -> str:
    """What aider printed: the quote marker off the first line, the line break
    off the last (the lines between are as printed)."""
    lines = list(c.lines)
    if lines[-1].endswith("  "):
        lines[-1] = lines[-1][:-2]
    lines[0] = lines[0][2:] if lines[0].startswith("> ") else lines[0][1:]
    return "\n".join(lines)


def _quote_kind(text: str) -> str:
    if text.startswith("Tokens: "):
        return "tokens"
    if text.startswith("Applied edit to "):
        return "applied_edit"
    if text == "^C again to exit":
        return "interrupt"
    if text == "^C KeyboardInterrupt":
        return "keyboard_interrupt"
    if _COMMIT.match(text):
        return "commit"
    return "output"


def _quote_event(kind: str, text: str, c: _Chunk) -> MappedEvent:
    data: dict[str, Any] = {"text": text, "line": c.line, "end_line": c.end}
    if kind == "tokens":
        for key, pattern in _TOKENS.items():
            found = pattern.search(text)
            if found:
                data[key] = found.group(1)
        cost = _COST.search(text)
        if cost:
            data["cost_message"], data["cost_session"] = float(cost[1]), float(cost[2])
    elif kind == "applied_edit":
        data["file"] = text[len("Applied edit to "):]
    elif kind == "commit":
        found = _COMMIT.match(text)
        assert found is not None
        data["sha"], data["message"] = found.group(1), found.group(2)
    return MappedEvent(f"{NAME}/{kind}", data, None, "system", line=c.line)


def _edits(lines: list[str]) -> list[dict[str, Any]]:
    """The SEARCH/REPLACE blocks of a reply: the file named before the block
    (or its fence), the search and replace texts, and whether it is whole."""
    edits: list[dict[str, Any]] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("<<<<<<< SEARCH"):
            i += 1
            continue
        j = i - 1
        if j >= 0 and lines[j].startswith(_FENCE):
            j -= 1
        named = lines[j].strip() if j >= 0 else ""
        file = named if named and " " not in named and not named.startswith(
            (*_FENCE, "=======", ">>>>>>>")) else None
        search: list[str] = []
        replace: list[str] | None = None
        k = i + 1
        while k < len(lines) and not lines[k].startswith((">>>>>>> REPLACE",
                                                          "<<<<<<< SEARCH")):
            if lines[k].startswith("=======") and replace is None:
                replace = []
            elif replace is None:
                search.append(lines[k])
            else:
                replace.append(lines[k])
            k += 1
        whole = k < len(lines) and lines[k].startswith(">>>>>>> REPLACE")
        edits.append({"file": file, "search": "\n".join(search),
                      "replace": None if replace is None else "\n".join(replace),
                      "complete": whole and replace is not None, "line": i})
        i = k + 1 if whole else k
    return edits


def _user_event(c: _Chunk) -> MappedEvent:
    lines = [x[:-2] if x.endswith("  ") else x for x in c.lines]
    lines = [x[5:] if x.startswith("#### ") else x[4:] for x in lines]
    content = "\n".join(lines)
    data: dict[str, Any] = {"content": content, "line": c.line, "end_line": c.end}
    if content == "<blank>":
        data.update(content="", blank=True, meta=True)
    elif content.startswith("/"):
        command, _, args = content.partition(" ")
        data["command"] = command.split("\n", 1)[0]
        data["args"] = args if "\n" not in command else content[len(data["command"]):]
    elif content.startswith("# Fix any errors below, if possible."):
        data.update(meta=True, generated="lint")
    return MappedEvent("user/message", data, None, "user", line=c.line)


def _events(chunks: _Peek, startup: list[_Chunk], name: str, notes: Notes,
            ) -> Iterator[MappedEvent]:
    """One session's events, up to the next header.  Each event depends only
    on the lines before it and its own chunk, so importing the file again
    after aider appended to it yields the same events and then the new ones:
    a turn (and step) still open at the end of the file stays open; the next
    input or header closes it."""
    turn = step = interrupted = False
    have_command = False
    ahead = len(startup)
    while True:
        c = chunks.peek()
        if c is None:
            return
        if c.kind == "H":
            break
        chunks.take()
        if c.kind == "Q":
            text = _print_text(c)
            kind = _quote_kind(text)
            in_startup = ahead > 0
            ahead = max(0, ahead - 1)
            if not text and kind == "output":
                notes.skip(name, c.line, c.offset, "empty-output",
                           "a quoted line with no text (aider printed an empty line)")
                continue
            if kind in ("interrupt", "keyboard_interrupt") and turn:
                interrupted = True
            ev = _quote_event(kind, text, c)
            if in_startup:
                fields = _startup_field(text, have_command)
                have_command = have_command or "command" in fields
                ev = MappedEvent(f"{NAME}/startup", {**ev.data, **fields}, None, "system",
                                 line=c.line)
            yield ev
            continue
        ahead = 0
        if c.kind == "U":
            if turn:
                yield MappedEvent("turn/end", {"interrupted": interrupted}, None, "system")
            turn, step, interrupted = True, False, False
            yield MappedEvent("turn/start", {}, None, "user")
            yield _user_event(c)
        elif c.kind == "A":
            if turn:
                if step:
                    yield MappedEvent("step/end", {}, None, "system")
                step = True
                yield MappedEvent("step/start", {}, None, "model")
            data = {"content": "\n".join(c.lines), "line": c.line, "end_line": c.end}
            edits = _edits(c.lines)
            if edits:
                for e in edits:
                    e["line"] += c.line
                data["edits"] = edits
            yield MappedEvent("assistant/message", data, None, "model", line=c.line)
        else:  # an M chunk can only be first; anything else is a parser bug
            raise AssertionError(f"unexpected chunk {c.kind} at line {c.line}")
    if turn:   # the next session began: this one is over
        yield MappedEvent("turn/end", {"interrupted": interrupted}, None, "system")


__all__ = ["NAME", "read", "sniff"]
