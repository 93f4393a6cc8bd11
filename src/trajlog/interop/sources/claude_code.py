"""Importing Claude Code session logs (``~/.claude/projects/<project>/*.jsonl``).

A session file has no header and no seq: each line is a record, most of them
nodes of a ``uuid`` / ``parentUuid`` DAG.

* ``user`` lines: text -> ``user/message`` (``isMeta`` -> ``meta``, ``[Request
  interrupted by user...]`` -> ``interrupted``); each ``tool_result`` block ->
  ``tool/call`` + ``tool/result`` (``toolUseResult`` kept); an
  ``isCompactSummary`` line -> ``compaction/apply`` hiding everything before its
  ``compact_boundary``, if that range closes every call it opens (else
  ``claude-code/compact_summary``, with a warning).
* ``assistant`` lines hold one content block each: the lines of one
  ``message.id`` are merged into one ``assistant/message`` (text -> content,
  thinking -> reasoning, tool_use -> tool_calls); tool results and attachments
  written between two blocks of a response follow the message.
* anything else -> ``claude-code/<type>`` (``system`` -> ``system.<subtype>``,
  the boundary -> ``claude-code/compact_boundary``) holding the record.

A line's own fields (``uuid``, ``parentUuid``, ``requestId``...) stay in
``data["claude"]`` (a merged message: the first line's, ``uuids`` and the other
``lines``), but for those equal to ``metadata["import"]["line_defaults"]``.
Each decoded record is reused as event data in place (no copies).  A file
read while a response is still being written (cut between two of its lines)
gives a shorter message than the grown file will: importing the grown file
into the same store then conflicts at that message.

Lineage: the lines of each ``sessionId`` are one session; one whose first line
hangs under another session's node is a fork of it (``fork_point_uuid``,
``fork_kind`` ``resume`` when that node was the other's last).  ``isSidechain``
lines of a session file, ``agent-<id>.jsonl`` beside it and
``<sessionId>/subagents/agent-<id>.jsonl`` (+ ``.meta.json``) are its
``subagent`` sessions, linked to the call that spawned them (the result whose
``toolUseResult.agentId`` names them; old inline ones: the ``Task`` call whose
prompt they start with).  A subagent file whose session is empty or not read is
imported on its own, with a warning.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import ImportFormatError
from .. import bounded
from ..mapping import MappedEvent, MappedSession, Notes, jsonl_records
from .claude_lines import NAME, Item, _Mapper, _ms

_AGENT_FILE = re.compile(r"agent-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\.jsonl")
#: what a first line longer than the sniffer reads must open with
_OPENING = 1 << 16


def _head(path: Path, timed: bool = False, sniffing: bool = False) -> dict[str, Any] | None:
    """The first JSON object of a JSONL file (``timed``: the first with a
    timestamp), looking at its first 64 lines only -- each read within the
    bounds of :mod:`..bounded`, and ``sniffing``, within its first
    ``SNIFF_LIMIT`` bytes; None if there is none.  A first line longer than
    that is judged by its opening bytes (``{"type": ...}`` for a Claude
    line, else None).  A FIFO or a device raises :class:`ImportFormatError`."""
    budget = bounded.SNIFF_LIMIT if sniffing else bounded.LINE_LIMIT
    try:
        with bounded.open_regular(path) as f:
            for n in range(64):
                raw = f.readline(budget + 1)
                if len(raw) > budget or (len(raw) == budget and not raw.endswith(b"\n")):
                    start = raw[:_OPENING]
                    return {"type": "?", "sessionId": "?"} if n == 0 and sniffing and (
                        b'"type"' in start and (b'"parentUuid"' in start
                                                or b'"sessionId"' in start)) else None
                if not raw:
                    return None
                if sniffing:
                    budget -= len(raw)
                if raw.strip():
                    rec = bounded.try_decode(raw)
                    if not isinstance(rec, dict):
                        return None
                    if not timed or rec.get("timestamp"):
                        return rec
    except OSError:
        return None
    return None


def _is_claude(rec: dict[str, Any] | None) -> bool:
    if rec is None:
        return False
    if "type" in rec and ("uuid" in rec or "sessionId" in rec or "parentUuid" in rec):
        return True
    return ("summary" in rec and "leafUuid" in rec) or (
        rec.get("type") == "file-history-snapshot" and "snapshot" in rec)


def sniff(path: Path) -> bool:
    """A ``.jsonl`` file whose first record has Claude Code's keys, or a folder
    (a project, or the folder of projects) holding such a file."""
    if path.is_dir():
        files = sorted(path.glob("*.jsonl")) or sorted(path.glob("*/*.jsonl"))
        return any(_is_claude(_head(f, sniffing=True)) for f in _inside(path, files)[:8])
    if not path.name.endswith(".jsonl"):
        return False
    bounded.regular(path)
    return _is_claude(_head(path, sniffing=True))


def _inside(root: Path, files: list[Path]) -> list[Path]:
    """``files`` that are regular and inside ``root`` (what a sniffer may look at)."""
    out = []
    for f in files:
        with contextlib.suppress(ImportFormatError):
            out.append(bounded.inside(root, f))
    return out


def read(path: Path, notes: Notes) -> Iterator[MappedSession]:
    """The sessions of a project folder (or of a folder of project folders),
    of one session file with its subagent files, or of one subagent file;
    parents before their children."""
    run = _Import(notes)
    if path.is_dir():
        projects = [path] if any(path.glob("*.jsonl")) else sorted(
            p for p in path.iterdir() if p.is_dir() and any(p.glob("*.jsonl")))
        # every file is checked before anything is read: a link out of the
        # folder, a FIFO or a device is refused before any session is written
        plan = []
        for folder in projects:
            files = sorted(folder.glob("*.jsonl"))
            mains = [f for f in files if not _AGENT_FILE.fullmatch(f.name)]
            plan.append((_checked(path, mains), _checked(path, _agent_files(folder))))
        for mains, agents in plan:
            yield from run.files(mains, agents, every=True)
    elif _AGENT_FILE.fullmatch(path.name):
        bounded.regular(path)
        yield from run.agents(_checked(path.parent, [path], own=path), None)
    else:
        bounded.regular(path)
        yield from run.files([path], _checked(path.parent, _agent_files(path.parent)))


def _checked(root: Path, files: list[Path], own: Path | None = None) -> list[Path]:
    """``files`` (and their ``.meta.json``) if each is a regular file inside
    ``root`` (:func:`..bounded.inside`); ``own`` is the file named by the
    caller, read wherever its link leads."""
    for f in files:
        if f != own:
            bounded.inside(root, f)
        meta = f.with_suffix(".meta.json")
        if meta.exists() or meta.is_symlink():
            bounded.inside(root, meta)
    return files


def _agent_files(folder: Path) -> list[Path]:
    """The subagent files of a project folder: ``agent-<id>.jsonl`` beside the
    sessions (2.0) and ``<sessionId>/subagents/agent-<id>.jsonl`` (2.1)."""
    return [f for f in sorted(folder.glob("agent-*.jsonl")) +
            sorted(folder.glob("*/subagents/agent-*.jsonl")) if _AGENT_FILE.fullmatch(f.name)]


class _Import:
    """What one :func:`read` has seen across its files: the sessions yielded
    and which holds each uuid, so that forks and subagents find parents."""

    def __init__(self, notes: Notes) -> None:
        self.notes = notes
        self.owner: dict[str, str] = {}         # uuid -> key of the session holding it
        self.last_uuid: dict[str, str] = {}     # key -> its latest uuid
        self.yielded: dict[str, _Mapper] = {}   # key -> its mapper
        self.sids: set[str] = set()             # sessionIds of the session files read

    def files(self, mains: list[Path], agents: list[Path], *,
              every: bool = False) -> Iterator[MappedSession]:
        """The sessions of ``mains`` (oldest first: a resumed session before
        its continuation), then those of the subagent files among ``agents``
        that belong to them (``every``: all of ``agents``)."""
        def when(f: Path) -> tuple[float, str]:
            rec = _head(f, timed=True)
            ms = _ms(rec.get("timestamp")) if rec else None
            return (ms if ms is not None else float("inf"), f.name)

        # (one file needs no order: its first lines are not read twice)
        for main in sorted(mains, key=when) if len(mains) > 1 else mains:
            yield from _FileRun(self, main, agent=False).sessions()
        yield from self.agents(agents, None if every else self.sids)

    def agents(self, files: list[Path], only: set[str] | None) -> Iterator[MappedSession]:
        """The sessions of subagent files (of the sessionIds ``only`` names)."""
        for f in files:
            if only is not None:
                rec = _head(f) if f.parent.name != "subagents" else None
                sid = f.parent.parent.name if rec is None else rec.get("sessionId")
                if sid not in only:
                    continue  # another session's subagent
            yield from _FileRun(self, f, agent=True).sessions()


class _FileRun:
    """One file, its records routed to the sessions they belong to.  Its first
    session is streamed (events made while the consumer reads them); the
    others (forks, inline subagents) are complete when it is."""

    def __init__(self, imp: _Import, path: Path, *, agent: bool) -> None:
        self.imp, self.path, self.agent = imp, path, agent
        self.name = os.fspath(path)
        self.records = jsonl_records(path, imp.notes)
        self.mappers: list[_Mapper] = []
        self.by_sid: dict[str, _Mapper] = {}
        self.side: dict[str, _Mapper] = {}     # sidechain uuid / "agent:<id>" -> mapper
        self.current: _Mapper | None = None
        self.count = 0                         # records so far
        self.done = False

    def sessions(self) -> Iterator[MappedSession]:
        prefix: list[Item] = []
        first: dict[str, Any] | None = None
        for item in self.records:
            prefix.append(self._check(item))
            if "uuid" in item[2]:
                first = item[2]
                break
        if not prefix:
            self.imp.notes.skip(self.name, None, 0, "empty-file", "the file holds no records")
            return
        if first is None:  # no DAG line at all: one session of carried records
            first = next((r for _, _, r in prefix if r.get("sessionId")), prefix[0][2])
        up = first.get("parentUuid")
        main = self._new(first, None if self.agent or not isinstance(up, str)
                         else self.imp.owner.get(up))
        for item in prefix:
            self._route(*item)
        yield main.session(self._stream(main), self.agent)
        if not self.done:  # the consumer left events unread: they wait in main.out
            for item in self.records:
                self._route(*self._check(item))
            self._finish()
        for m in self.mappers[1:]:
            yield m.session(iter(m.take()), self.agent)

    def _check(self, item: tuple[int, int, Any]) -> Item:
        if type(item[2]) is not dict:
            raise ImportFormatError(self.name, "a Claude Code line must be a JSON object",
                                    line=item[0], offset=item[1], valid=self.count)
        return item

    def _stream(self, main: _Mapper) -> Iterator[MappedEvent]:
        route = self._route
        if main.out:
            yield from main.take()
        for line, offset, rec in self.records:
            if type(rec) is not dict:
                self._check((line, offset, rec))
            route(line, offset, rec)
            if main.out:   # (a record makes events, or none while a response is open)
                out, main.out = main.out, []
                yield from out
        self._finish()
        yield from main.take()

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            for m in self.mappers:
                m.flush()

    def _new(self, rec: dict[str, Any], fork: str | None,
             side_of: _Mapper | None = None) -> _Mapper:
        sid = rec.get("sessionId")
        sid = sid if isinstance(sid, str) and sid else self.path.stem
        aid = rec.get("agentId")
        if self.agent:
            key = f"claude-code:{sid}/agent-{aid or self.path.stem.removeprefix('agent-')}"
        elif side_of is not None:
            key = (f"claude-code:{sid}/agent-{aid}" if isinstance(aid, str) and aid
                   else f"claude-code:{sid}/sidechain-{rec.get('uuid')}")
        else:
            key = f"claude-code:{sid}"
        if key in self.imp.yielded or any(m.key == key for m in self.mappers):
            self.imp.notes.warn(f"{self.name}: session {key} was already read from another "
                                "file; this copy is imported as a session of its own")
            key = f"{key}@{self.path.name}"
        m = _Mapper(self, key, sid, rec)
        m.side_of, m.fork_parent = side_of, fork
        m.own_id = side_of is None and not self.agent and key == f"claude-code:{sid}"
        if fork is not None:
            m.fork_kind = "resume" if self.imp.last_uuid.get(fork) == m.head["parentUuid"] \
                else "fork"
        if side_of is None and not self.agent:
            self.by_sid.setdefault(sid, m)
            self.imp.sids.add(sid)
        self.mappers.append(m)
        return m

    def _route(self, line: int, offset: int, rec: dict[str, Any]) -> None:
        self.count += 1
        uuid = rec.get("uuid")
        sid = rec.get("sessionId")
        if self.agent:
            target = self.mappers[0]
        elif uuid is not None:
            found = self.by_sid.get(sid) if isinstance(sid, str) else self.current
            if found is None:
                up = rec.get("parentUuid")
                found = self._new(rec, self.imp.owner.get(up) if isinstance(up, str) else None)
            if rec.get("isSidechain") is True:
                target = self._side(rec, found)
            else:
                target = self.current = found
        else:
            target = (self.by_sid.get(sid) if isinstance(sid, str) else None) or \
                self.current or self.mappers[0]
        if isinstance(uuid, str):
            self.imp.owner[uuid] = target.key
            self.imp.last_uuid[target.key] = uuid
        target.feed(line, offset, rec)

    def _side(self, rec: dict[str, Any], main: _Mapper) -> _Mapper:
        """The inline subagent session a sidechain line belongs to: its
        ``agentId``'s, its parent node's, or a new one from this root."""
        aid = rec.get("agentId")
        up = rec.get("parentUuid")
        found = (self.side.get("agent:" + aid) if isinstance(aid, str) and aid else
                 self.side.get(up) if isinstance(up, str) else None)
        if found is None:
            found = self._new(rec, None, side_of=main)
            if isinstance(aid, str) and aid:
                self.side["agent:" + aid] = found
        if isinstance(rec.get("uuid"), str):
            self.side[rec["uuid"]] = found
        return found


__all__ = ["NAME", "read", "sniff"]
