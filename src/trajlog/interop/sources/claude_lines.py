"""Claude Code lines to trajlog events: one session's records, in file order
(see :mod:`.claude_code` for the files, the sessions and their lineage).

:class:`_Mapper` turns the records of one ``sessionId`` into events: user
text, tool results (a ``tool/call`` and its ``tool/result``), the content-block
lines of one assistant response merged into one ``assistant/message``,
compaction, and every other record carried as ``claude-code/<type>``.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import ImportFormatError
from .. import bounded
from ..mapping import CallBook, MappedEvent, MappedSession, epoch_ms
from ..mapping import uuid_or_stable as _stable

NAME = "claude-code"
_INTERRUPT = "[Request interrupted by user"
_TASK_TOOLS = frozenset({"Task", "Agent"})
#: line fields describing the session, left out of an event when they equal
#: the session's first line's (``metadata["import"]["line_defaults"]``)
_DEFAULT_KEYS = ("sessionId", "cwd", "version", "gitBranch", "userType", "entrypoint",
                 "isSidechain", "slug")
_NOPE: Any = object()
_types: dict[str, str] = {}
_fromiso = datetime.datetime.fromisoformat

Item = tuple[int, int, dict[str, Any]]   # (line, offset, record)


def _type_name(kind: str) -> str:
    """``claude-code/<kind>`` as a valid event type (cached: no regex per line)."""
    name = _types.get(kind)
    if name is None:
        segment = re.sub(r"[^a-z0-9_.-]+", "_", kind.lower()).strip("_.-")[:100] or "record"
        name = "claude-code/" + segment
        if len(_types) < 4096:
            _types[kind] = name
    return name


def _ms(value: Any) -> int | None:
    """:func:`epoch_ms` of a timestamp, the common ``...Z`` form straight
    through ``datetime.fromisoformat`` (a third of the cost)."""
    if type(value) is str and value[-1:] == "Z":
        try:
            ms = round(_fromiso(value).timestamp() * 1000)
        except ValueError:  # not ISO 8601, or a Python without "Z" in fromisoformat
            return epoch_ms(value)
        return ms if ms >= 0 else None
    return epoch_ms(value)


class _Mapper:
    """The events of one session, made from its records in file order."""

    def __init__(self, run: Any, key: str, sid: str, rec: dict[str, Any]) -> None:
        self.run, self.imp, self.key, self.sid, self.file = run, run.imp, key, sid, run.name
        self.head = {k: rec.get(k) for k in ("cwd", "gitBranch", "version", "timestamp",
                                             "parentUuid", "agentId")}
        msg = rec.get("message")
        self.prompt = _text_of(msg.get("content")) if isinstance(msg, dict) else ""
        self.defaults = [(k, rec[k]) for k in _DEFAULT_KEYS if k in rec]
        self.side_of: _Mapper | None = None
        self.fork_parent: str | None = None
        self.fork_kind = "fork"
        self.own_id = False     # the session's id is its sessionId
        self.depth = 0
        self.out: list[MappedEvent] = []
        self.n = 0              # events made so far: the next one's index
        self.book = CallBook()
        self.calls: dict[str, tuple[str, int | None]] = {}  # id -> (tool name, time)
        self.noid: dict[str, list[str]] = {}    # assistant uuid -> ids made for its calls
        self.links: dict[str, str] = {}         # agentId -> spawning tool_use id
        self.tasks: dict[str, Any] = {}         # Task/Agent tool_use id -> its input
        self.prompts: dict[str, str] = {}       # Task prompt -> tool_use id
        self.response: list[Item] | None = None  # the lines of the open API response
        self.response_id: Any = None
        self.held: list[Item] = []              # records held behind it
        self.boundary: tuple[int, bool] | None = None  # (index, its range closes its calls)

    # -- the session ----------------------------------------------------------

    def take(self) -> list[MappedEvent]:
        out, self.out = self.out, []
        return out

    def session(self, events: Iterator[MappedEvent], agent_file: bool) -> MappedSession:
        """The header of this session (``events``: its events)."""
        imp, head = self.imp, self.head
        meta: dict[str, Any] = {"format": NAME, "file": os.path.basename(self.file),
                                "session_id": self.sid}
        for key, name in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "version"),
                          ("timestamp", "first_timestamp")):
            if head[key] is not None:
                meta[name] = head[key]
        meta["line_defaults"] = dict(self.defaults)
        top: dict[str, Any] = {"import": meta}
        parent: str | None = None
        origin = preset = None
        main = self.side_of
        if agent_file:
            main = imp.yielded.get(f"claude-code:{self.sid}")
            where = Path(self.file)
            meta["subagent_layout"] = ("subagents-folder" if where.parent.name == "subagents"
                                       else "sibling-file")
            meta["agent_id"] = head["agentId"] or where.stem.removeprefix("agent-")
            info = _meta_json(where.with_suffix(".meta.json"))
            if info is not None:
                meta["agent_meta"] = _header_safe(info, self.file, imp.notes)
                preset = _str(info.get("agentType"))
            if main is None:
                meta["orphan_subagent"] = True
                imp.notes.warn(f"{self.file}: a subagent of session {self.sid}, which is "
                               "empty or not in this import: imported as a top-level session")
        elif main is not None:
            meta["subagent_layout"] = "inline-sidechain"
            if _str(head["agentId"]):
                meta["agent_id"] = head["agentId"]
        if main is not None:
            parent, origin, self.depth = main.key, "subagent", main.depth + 1
            aid = meta.get("agent_id")
            call = main.links.get(aid) if isinstance(aid, str) else None
            if call is None and self.side_of is not None:
                call = main.prompts.get(self.prompt)
            if call is not None:
                meta["tool_use_id"] = top["parent_call_id"] = call
                task = main.tasks.get(call)
                if isinstance(task, dict):   # (its description stays in the call's
                    # event, where redaction and erasure reach it: the header names the call)
                    preset = preset or _str(task.get("subagent_type"))
        elif self.fork_parent is not None:  # a trajlog fork: a parent and no origin
            parent = self.fork_parent
            meta.update(lineage="fork", fork_point_uuid=head["parentUuid"],
                        fork_kind=self.fork_kind)
            up = imp.yielded.get(parent)
            self.depth = up.depth if up is not None else 0
        elif isinstance(head["parentUuid"], str):
            meta["continues_uuid"] = head["parentUuid"]   # a node in no file read here
        imp.yielded[self.key] = self
        cwd = head["cwd"]
        return MappedSession(
            key=self.key, events=events, cwd=cwd if isinstance(cwd, str) and cwd else ".",
            session_id=_stable(self.sid, self.key) if self.own_id else None,
            created_ms=_ms(head["timestamp"]), agent_preset=preset, metadata=top,
            parent=parent, origin=origin, delegation_depth=self.depth)

    # -- records --------------------------------------------------------------

    def _emit(self, type_: str, data: dict[str, Any], time: int | None, source: str,
              line: int, cause: int | None = None) -> int:
        self.out.append(MappedEvent(type_, data, time, source, cause, line))
        self.n += 1
        return self.n - 1

    def _own(self, rec: dict[str, Any]) -> dict[str, Any]:
        """``rec`` without its ``type`` and the fields equal to the session's."""
        rec.pop("type", None)
        for k, v in self.defaults:
            if k in rec and rec[k] == v:
                del rec[k]
        return rec

    def _bad(self, line: int, offset: int, reason: str) -> ImportFormatError:
        return ImportFormatError(self.file, reason, line=line, offset=offset,
                                 valid=self.run.count - 1)

    def feed(self, line: int, offset: int, rec: dict[str, Any]) -> None:
        """Map one record, or hold it while an API response is still open."""
        t = rec.get("type")
        if self.response is not None:
            if t == "assistant":
                msg = rec.get("message")
                mid = msg.get("id") if type(msg) is dict else None
                if mid is not None and mid == self.response_id:
                    self.response.append((line, offset, rec))
                    return
            elif "uuid" not in rec or t == "attachment" or t == "progress" or (
                    t == "user" and _only_results(rec)):
                self.held.append((line, offset, rec))
                return
            self.flush()
        self._map(line, offset, rec, t)

    def flush(self) -> None:
        """Emit the open API response, then the records held behind it."""
        response, self.response = self.response, None
        if response:
            self._assistant(response)
        held, self.held = self.held, []
        for line, offset, rec in held:
            self._map(line, offset, rec, rec.get("type"))

    def _map(self, line: int, offset: int, rec: dict[str, Any], t: Any) -> None:
        if t == "user":
            self._user(line, offset, rec)
        elif t == "assistant":
            msg = rec.get("message")
            if type(msg) is not dict:
                raise self._bad(line, offset, "an assistant line without a message object")
            self.response = [(line, offset, rec)]
            self.response_id = msg.get("id")
        elif t == "system" and rec.get("subtype") == "compact_boundary":
            at = self._emit("claude-code/compact_boundary", self._own(rec),
                            _ms(rec.get("timestamp")), "system", line)
            self.boundary = (at, not self.book.requested and not self.book.started)
        else:
            kind = (f"system.{rec.get('subtype')}" if t == "system" else
                    t if isinstance(t, str) else "untyped")
            self._emit(_type_name(kind), self._own(rec), _ms(rec.get("timestamp")), "system",
                       line)

    def _assistant(self, response: list[Item]) -> None:
        texts: list[dict[str, Any]] = []
        thinking: list[str] = []
        signatures: list[Any] = []
        uses: list[tuple[dict[str, Any], str]] = []
        other: list[Any] = []
        lines: list[dict[str, Any]] = []
        api_error = False
        for line, offset, rec in response:
            msg = rec.pop("message")
            blocks = msg.pop("content", None)
            if type(blocks) is not list:
                if blocks is not None and type(blocks) is not str:
                    raise self._bad(line, offset, "assistant message content is not a list")
                blocks = [{"type": "text", "text": blocks}] if blocks else []
            kinds = []
            for i, b in enumerate(blocks):
                if type(b) is not dict:
                    raise self._bad(line, offset, "an assistant content block is not an object")
                bt = b.get("type")
                kinds.append(bt)
                if bt == "text":
                    texts.append(b)
                elif bt == "thinking":
                    thinking.append(str(b.get("thinking", "")))
                    if "signature" in b:
                        signatures.append(b["signature"])
                elif bt == "tool_use":
                    uses.append((b, f"{rec.get('uuid')}#{i}"))
                else:
                    other.append(b)
            api_error = api_error or rec.get("isApiErrorMessage") is True
            rec = self._own(rec)
            rec["message"], rec["blocks"] = msg, kinds
            lines.append(rec)
        line = response[0][0]
        first, last = lines[0], lines[-1]["message"]
        time = _ms(first.get("timestamp"))
        index = self.n
        calls, reused = [], []
        for b, made in uses:
            call_id, name = b.get("id"), b.get("name")
            del b["type"]
            b["arguments"] = b.pop("input", None)
            if not isinstance(name, str):
                name = b["name"] = ""
            if not isinstance(call_id, str):
                call_id = b["id"] = made
                b["id_made_by_import"] = True
                self.noid.setdefault(made.rsplit("#", 1)[0], []).append(made)
            if not self.book.request(call_id, index):
                reused.append(b)
                continue
            calls.append(b)
            self.calls[call_id] = (name, time)
            if name in _TASK_TOOLS:
                self.tasks[call_id] = b["arguments"]
                prompt = _text_of(b["arguments"])
                if prompt:
                    self.prompts.setdefault(prompt, call_id)
        data: dict[str, Any] = {"content": None if not texts else texts[0]["text"] if len(
            texts) == 1 and len(texts[0]) == 2 and "text" in texts[0] else texts}
        for name, value in (("tool_calls", calls), ("thinking_signatures", signatures),
                            ("other_blocks", other), ("api_error", api_error)):
            if value:
                data[name] = value
        if thinking:
            data["reasoning"] = "\n\n".join(thinking)
        for key, name in (("id", "message_id"), ("model", "model")):
            if first["message"].get(key) is not None:
                data[name] = first["message"][key]
        if last.get("stop_reason") is not None:
            data["stop_reason"] = last["stop_reason"]
        if "usage" in last:   # the response's usage so far: on its last line
            data["usage"] = last.pop("usage")
        if len(lines) > 1:
            first["uuids"] = [r.get("uuid") for r in lines]
            first["lines"] = lines[1:]
        data["claude"] = first
        self._emit("assistant/message", data, time, "model", line)
        for b in reused:
            self.imp.notes.warn(f"{self.file}:{line}: tool_use id {b['id']!r} was already "
                                "used in this session; carried as claude-code/tool_use")
            self._emit("claude-code/tool_use", {"call": b, "uuid": first.get("uuid")}, time,
                       "model", line, index)

    def _user(self, line: int, offset: int, rec: dict[str, Any]) -> None:
        msg = rec.pop("message", None)
        if type(msg) is not dict:
            raise self._bad(line, offset, "a user line without a message object")
        content = msg.pop("content", None)
        result_use = rec.pop("toolUseResult", _NOPE)
        rec = self._own(rec)
        if len(msg) > 1 or msg.get("role", "user") != "user":
            rec["message"] = msg
        time = _ms(rec.get("timestamp"))
        if rec.get("isCompactSummary") is True:
            self._summary(line, content, rec, time)
            return
        if type(content) is list:
            others: list[Any] | None = None
            for b in content:
                if type(b) is not dict:
                    raise self._bad(line, offset, "a user content block is not an object")
                if b.get("type") == "tool_result":
                    others = [] if others is None else others
                    self._result(line, b, rec, result_use, time)
                    result_use = _NOPE
                elif others is not None:
                    others.append(b)
            if others is None:
                others = content
            elif not others:
                return
            content = others
        elif type(content) is not str:
            if content is not None:
                raise self._bad(line, offset, "user message content is neither text nor a list")
            content = ""
        data: dict[str, Any] = {"content": content}
        meta = rec.get("isMeta") is True
        if meta:
            data["meta"] = True
        if _text_of(content).startswith(_INTERRUPT):
            data["interrupted"] = True
        data["claude"] = rec
        self._emit("user/message", data, time, "system" if meta else "user", line)

    def _result(self, line: int, b: dict[str, Any], rec: dict[str, Any], result_use: Any,
                time: int | None) -> None:
        call_id = b.pop("tool_use_id", None)
        if not isinstance(call_id, str):
            call_id = self._unnamed(rec)
        b.pop("type", None)
        data: dict[str, Any] = {"call_id": call_id, "output": b.pop("content", None),
                                "is_error": b.pop("is_error", False) is True}
        if b:
            data["block"] = b   # the block's other fields
        if result_use is not _NOPE:
            data["tool_use_result"] = result_use
            if type(result_use) is dict and isinstance(result_use.get("agentId"), str) \
                    and isinstance(call_id, str):
                self.links[result_use["agentId"]] = call_id
        data["claude"] = rec
        if isinstance(call_id, str):
            asked = self.book.requested.get(call_id)
            if asked is not None and self.book.start(call_id, self.n):
                name, called = self.calls.get(call_id, ("", None))
                at = self._emit("tool/call", {"call_id": call_id, "name": name}, called,
                                name or "tool", line, asked)
                self.book.finish(call_id)
                data["name"] = name
                self._emit("tool/result", data, time, name or "tool", line, at)
                return
        why = ("it names no tool_use" if call_id is None else
               "its call was already answered" if call_id in self.book.finished else
               "no tool_use of this session requested it")
        data["reason"] = why
        self.imp.notes.warn(f"{self.file}:{line}: a tool_result for {call_id!r} is carried as "
                            f"claude-code/tool_result: {why}")
        self._emit("claude-code/tool_result", data, time, "system", line)

    def _unnamed(self, rec: dict[str, Any]) -> str | None:
        """The call an id-less tool_result answers: the line's
        ``sourceToolUseID``, else a call of its ``sourceToolAssistantUUID``."""
        named = rec.get("sourceToolUseID")
        if isinstance(named, str) and self.book.used(named):
            return named
        made = self.noid.get(str(rec.get("sourceToolAssistantUUID")), [])
        return next((c for c in made if c in self.book.requested), made[0] if made else None)

    def _summary(self, line: int, content: Any, rec: dict[str, Any], time: int | None) -> None:
        if self.boundary is not None:
            to, closed = self.boundary[0] - 1, self.boundary[1]
        else:   # no boundary (older versions): everything before the summary
            to, closed = self.n - 1, not self.book.requested and not self.book.started
        self.boundary = None
        if to >= 0 and closed:
            data: dict[str, Any] = {"op": "surface-replace", "from_seq": 0, "to_seq": to,
                                    "summary": _text_of(content, join=True)}
            if not isinstance(content, str):
                data["content"] = content
            data["claude"] = rec
            self._emit("compaction/apply", data, time, "system", line)
            return
        why = ("nothing precedes it" if to < 0 else "tool calls before the boundary have "
               "no result before it: " + ", ".join(self.book.open()))
        self.imp.notes.warn(f"{self.file}:{line}: a compact summary is carried as "
                            f"claude-code/compact_summary, not applied: {why}")
        self._emit("claude-code/compact_summary", {"content": content, "reason": why,
                                                   "claude": rec}, time, "system", line)


def _only_results(rec: dict[str, Any]) -> bool:
    msg = rec.get("message")
    content = msg.get("content") if type(msg) is dict else None
    return type(content) is list and bool(content) and all(
        type(b) is dict and b.get("type") == "tool_result" for b in content)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _text_of(value: Any, join: bool = False) -> str:
    """The text of a content value (a string, or text blocks: the first, or
    all joined), or of a tool input's ``prompt``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return _text_of(value.get("prompt"), join)
    if isinstance(value, list):
        parts = [b["text"] for b in value if isinstance(b, dict) and b.get("type") == "text"
                 and isinstance(b.get("text"), str)]
        return ("\n\n".join(parts) if join else parts[0]) if parts else ""
    return ""




# What of a subagent's ``.meta.json`` its header keeps: identifiers and paths.
# Its ``description`` is the spawning Task call's text, held by that call's
# event (the header names the call); a header never holds payload text.
_META_KEPT = ("agentType", "worktreePath")


def _header_safe(info: dict[str, Any], file: str, notes: Any) -> dict[str, Any]:
    kept = {k: v for k, v in info.items() if k in _META_KEPT
            or isinstance(v, bool | int | float) or v is None}
    left = sorted(k for k in info if k not in kept and k != "description")
    if left:
        notes.warn(f"{file}: .meta.json fields not kept in the header (text): {left}")
    return kept


def _meta_json(path: Path) -> dict[str, Any] | None:
    """A subagent's ``.meta.json`` (checked by the folder walk), read within
    the bounds of :mod:`..bounded`; None if there is none or it does not
    decode."""
    if not path.exists():
        return None
    info = bounded.try_decode(bounded.read_document(path, os.fspath(path)))
    return info if isinstance(info, dict) else None


__all__ = ["NAME", "Item", "_Mapper", "_ms"]
