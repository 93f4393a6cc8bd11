"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Every line is ``{timestamp, type, payload}``.  ``response_item`` lines are the
model-facing history: a user / developer ``message`` -> ``user/message``
(harness-injected context -- ``<environment_context>``, ``AGENTS.md``,
``<user_instructions>``, developer text -- flagged ``"meta": true``); the
assistant side of one model response (``reasoning``, an assistant ``message``,
``function_call`` / ``custom_tool_call`` / ``local_shell_call`` /
``tool_search_call`` / ``web_search_call`` / ``image_generation_call``) -> one
``assistant/message`` requesting the calls; a ``*_output`` -> ``tool/call`` +
``tool/result``, paired by ``call_id``.  A hosted call (web search, image
generation) is its own outcome: once completed it is started and answered
right after its message.  ``event_msg`` lines mostly mirror the history: each
is carried as ``codex/<event type>``, except ``task_started`` /
``task_complete`` / ``turn_aborted`` -> ``turn/start`` / ``turn/end`` where
they nest.  ``compacted`` -> ``compaction/apply`` over everything before it
when no call is open, else carried.  Any other line -> ``codex/<line type>``.

Each ``session_meta`` line starts a thread (a session): ``forked_from_id`` ->
a child of that thread with no origin (as the store's forks), at its depth;
``source.subagent`` with a parent thread -> a subagent one level deeper; when
that thread was read before.  A reused call id is renamed ``<id>#2``.  Legacy
rollouts (a bare header line, then bare items) are read too; a rollout that
ends mid-turn is imported as it is (noted).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ImportFormatError
from ...event_types import ANSWERS_CALL, MESSAGES
from .. import bounded
from ..mapping import (
    AliasedCalls,
    MappedEvent,
    MappedSession,
    Notes,
    epoch_ms,
    jsonl_records,
    parsed_json,
    stable_id,
    uuid_or_stable,
    without,
)

NAME = "codex"

#: the conversation's items (messages, a call's answer): the last one says whether a
#: thread ends mid-turn
_HISTORY = MESSAGES | ANSWERS_CALL
_LINE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg",
                         "compacted", "world_state", "inter_agent_communication_metadata"})
_ITEM_TYPES = frozenset({"message", "reasoning", "function_call", "function_call_output",
                         "custom_tool_call", "custom_tool_call_output", "local_shell_call"})
_HOSTED = frozenset({"web_search_call", "image_generation_call"})  # item = call + outcome
_CALL_NAMES = {"local_shell_call": "local_shell", "tool_search_call": "tool_search",
               "web_search_call": "web_search", "image_generation_call": "image_generation"}
_INJECTED = (("<environment_context>", "environment_context"),
             ("<user_instructions>", "user_instructions"),
             ("# AGENTS.md instructions", "agents_md"), ("<INSTRUCTIONS>", "agents_md"),
             ("<permissions instructions>", "permissions"),
             ("<collaboration_mode>", "collaboration_mode"), ("<turn_aborted>", "turn_aborted"))
_META_KEYS = ("id", "session_id", "timestamp", "cwd", "originator", "cli_version", "source",
              "thread_source", "model_provider", "git", "forked_from_id", "parent_thread_id",
              "agent_nickname", "agent_role", "agent_path", "history_mode")
_UNSAFE = re.compile(r"[^a-z0-9_.-]+")
_ROLLOUT_ID = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                         r"[0-9a-fA-F]{12})\.jsonl$")


def sniff(path: Path) -> bool:
    """A rollout file (its first line is a Codex line), or a folder holding
    ``rollout-*.jsonl`` files (at most 4 levels down)."""
    if path.is_dir():
        return next(_rollouts(path, depth=4), None) is not None
    if path.suffix != ".jsonl":
        return False
    try:
        head = bounded.first_line(path)
    except OSError:
        return False
    value = bounded.INVALID if head is None else bounded.try_decode(head)
    if value is bounded.INVALID:  # a first line longer than the read: its opening bytes decide
        start = (head or bounded.head(path, 4096))[:4096]
        return b'"payload"' in start and any(
            b'"type":"' + t.encode() + b'"' in start for t in _LINE_TYPES)
    if not isinstance(value, dict):
        return False
    if "payload" in value and value.get("type") in _LINE_TYPES:
        return True
    # the legacy layout: a header {id, timestamp, instructions}, or bare items
    return path.name.startswith("rollout-") and (
        {"id", "timestamp"} <= value.keys() or value.get("type") in _ITEM_TYPES)


def read(path: Path, notes: Notes) -> Iterator[MappedSession]:
    """The threads of a rollout file (or of every rollout under a folder, in
    name order), parents before the sessions that name them."""
    known = _Known()
    if path.is_dir():
        # every file is checked before any is read (links out of the folder refused)
        files = [bounded.inside(path, f) for f in _rollouts(path)]
    else:
        bounded.regular(path)
        files = [path]
    for file in files:
        yield from _read_file(file, notes, known)


def _rollouts(folder: Path, depth: int | None = None) -> Iterator[Path]:
    top = len(folder.parts)
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        if depth is not None and len(Path(root).parts) - top >= depth:
            dirs.clear()
        yield from (Path(root, n) for n in sorted(names)
                    if n.startswith("rollout-") and n.endswith(".jsonl"))


@dataclass
class _Known:
    """The threads read so far (source id -> session key, depth), and the
    keys and session ids given: each must be unique in one import."""
    threads: dict[str, tuple[str, int]] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Rec:
    """One line, normalised: its kind (the line type), payload and time."""
    line: int
    offset: int
    kind: str
    payload: Any
    time: int | None
    extra: dict[str, Any]


class _Lines:
    """The file's lines as :class:`_Rec`, with one line of look-ahead."""

    def __init__(self, path: Path, notes: Notes) -> None:
        self.name = os.fspath(path)
        self._it = jsonl_records(path, notes)
        self._peeked: _Rec | None = None
        self.count = 0
        self._times: dict[str, int | None] = {}

    def peek(self) -> _Rec | None:
        if self._peeked is None:
            got = next(self._it, None)
            self._peeked = None if got is None else self._normalise(*got)
        return self._peeked

    def take(self) -> _Rec | None:
        rec, self._peeked = self.peek(), None
        return rec

    def bad(self, reason: str, line: int, offset: int) -> ImportFormatError:
        return ImportFormatError(self.name, reason, line=line, offset=offset,
                                 valid=self.count - 1)

    def _time(self, stamp: Any) -> int | None:
        if not isinstance(stamp, str):
            return epoch_ms(stamp)
        if stamp not in self._times:
            if len(self._times) > 256:
                self._times.clear()
            self._times[stamp] = epoch_ms(stamp)
        return self._times[stamp]

    def _normalise(self, line: int, offset: int, value: Any) -> _Rec:
        self.count += 1
        if not isinstance(value, dict):
            raise self.bad("a rollout line must be a JSON object", line, offset)
        time = self._time(value.get("timestamp"))
        if "payload" in value and "type" in value:
            kind, payload = value["type"], value["payload"]
            if not isinstance(kind, str):
                raise self.bad("a rollout line's type must be a string", line, offset)
            if kind in _LINE_TYPES and kind != "inter_agent_communication_metadata" and \
                    not isinstance(payload, dict):
                raise self.bad(f"the payload of a {kind} line must be a JSON object", line,
                               offset)
            extra = {k: v for k, v in value.items() if k not in (
                "timestamp", "type", "payload")} if len(value) > 3 else {}
            return _Rec(line, offset, kind, payload, time, extra)
        # legacy rollouts: a header line, bare response items, state lines
        kind = ("session_meta" if self.count == 1 and "type" not in value and "id" in value
                else "state" if "record_type" in value
                else "response_item" if isinstance(value.get("type"), str) else "record")
        return _Rec(line, offset, kind, value, time, {"legacy": True})


@functools.lru_cache(maxsize=1024)
def _type_name(name: Any, default: str) -> str:
    """``codex/<name>`` made a valid event type."""
    text = _UNSAFE.sub("_", name.lower()).strip("_.-") if isinstance(name, str) else ""
    if not text or not text[0].isalpha():
        text = default + ("." + text if text else "")
    return f"codex/{text}"[:128]


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content if isinstance(content, str) else ""


def _injected(content: Any) -> str | None:
    """Which harness context a user message is, None for a typed prompt."""
    text = _text_of(content).lstrip()
    return next((kind for prefix, kind in _INJECTED if text.startswith(prefix)), None)


def _is_error(payload: dict[str, Any]) -> bool:
    if payload.get("success") is False or payload.get("status") in ("failed", "incomplete"):
        return True
    output = parsed_json(payload.get("output"))
    if not isinstance(output, dict):
        return False
    meta = output.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    return output.get("success") is False or (
        isinstance(code, int) and not isinstance(code, bool) and code != 0)


@dataclass
class _Group:
    """The assistant side of one model response, until something else comes."""
    line: int
    time: int | None
    lines: list[int] = field(default_factory=list)
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    message: dict[str, Any] | None = None
    #: (call id, the source's id, the requested call, the source item)
    calls: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = field(
        default_factory=list)


class _Thread:
    """Maps the lines of one thread to events."""

    def __init__(self, lines: _Lines, notes: Notes, key: str, header: _Rec | None) -> None:
        self.lines, self.notes, self.key, self.header = lines, notes, key, header
        self.where = os.path.basename(lines.name)
        self.calls = AliasedCalls()
        self.n = 0
        self.out: list[MappedEvent] = []
        self.group: _Group | None = None
        self.turn: tuple[Any, int] | None = None   # (turn id, line) of the open turn
        self.done, self.last = False, ""

    def emit(self, type_: str, data: dict[str, Any], rec: _Rec | _Group, source: str,
             cause: int | None = None) -> int:
        self.out.append(MappedEvent(type_, data, rec.time, source, cause, rec.line))
        if type_ in _HISTORY:
            self.last = type_
        self.n += 1
        return self.n - 1

    def carry(self, rec: _Rec, name: Any, default: str) -> None:
        data: dict[str, Any] = {"codex": rec.payload if isinstance(rec.payload, dict)
                                else {"payload": rec.payload}}
        if rec.extra:
            data["codex_line"] = rec.extra
        self.emit(_type_name(name if isinstance(name, str) else None, default), data, rec,
                  "system")

    def events(self) -> Iterator[MappedEvent]:
        if self.header is not None:
            self.carry(self.header, "session_meta", "session_meta")
        while (rec := self.lines.peek()) is not None and rec.kind != "session_meta":
            self.lines.take()
            self._line(rec)
            out, self.out = self.out, []
            yield from out
        self._flush()
        if self.turn is not None or self.last == "tool/result":
            why = (f"the turn opened at line {self.turn[1]} has no end" if self.turn else
                   "its last item is a tool result the model never answered")
            self.notes.warn(f"{self.where}: thread {self.key} ends mid-turn ({why}); imported "
                            "as it is")
        if open_calls := self.calls.open():
            self.notes.warn(f"{self.where}: thread {self.key} ends with {len(open_calls)} "
                            f"tool call(s) without a result: {', '.join(open_calls)}")
        yield from self.out
        self.out, self.done = [], True

    def _line(self, rec: _Rec) -> None:
        if rec.kind == "response_item":
            self._item(rec, rec.payload)
        elif rec.kind == "event_msg":
            self._event(rec, rec.payload)
        elif rec.kind == "compacted":
            self._flush()
            self._compacted(rec, rec.payload)
        else:
            if rec.kind == "turn_context":
                self._flush()
            self.carry(rec, rec.kind, "line")

    # -- response items ------------------------------------------------------------

    def _item(self, rec: _Rec, item: dict[str, Any]) -> None:
        itype = item.get("type")
        if itype == "reasoning" or (itype == "message" and item.get("role") == "assistant"):
            if self.group is not None and (self.group.message or self.group.calls):
                self._flush()   # a new response begins
            group = self._grouped(rec)
            if itype == "reasoning":
                group.reasoning.append(item)
            else:
                group.message = item
        elif itype == "message":
            self._flush()
            self._user(rec, item, item.get("role"))
        elif isinstance(itype, str) and (itype.endswith("_call") or itype in _HOSTED) \
                and "output" not in item:
            self._call(rec, item, itype)
        elif isinstance(itype, str) and itype.endswith("_output"):
            self._flush()
            self._output(rec, item, itype)
        else:
            self._flush()
            self.carry(rec, "inter_agent_message" if itype == "agent_message" else itype,
                       "response_item")

    def _grouped(self, rec: _Rec) -> _Group:
        if self.group is None:
            self.group = _Group(rec.line, rec.time)
        self.group.lines.append(rec.line)
        if self.group.time is None:
            self.group.time = rec.time
        return self.group

    def _user(self, rec: _Rec, item: dict[str, Any], role: Any) -> None:
        content = item.get("content")
        if not isinstance(content, (str, list)):
            raise self.lines.bad("a message's content must be a list or a string", rec.line,
                                 rec.offset)
        if role not in ("user", "developer", "system"):
            self.carry(rec, "message", "response_item")
            return
        data: dict[str, Any] = {"content": content}
        injected = _injected(content) if role == "user" else str(role)
        if injected is not None:
            data["meta"], data["meta_kind"] = True, injected
        if role != "user":
            data["role"] = role
        data["codex"] = without(item, "content", "role")
        self.emit("user/message", data, rec, "system" if injected else "user")

    def _call(self, rec: _Rec, item: dict[str, Any], itype: str) -> None:
        group = self._grouped(rec)
        source_id = next((v for v in (item.get("call_id"), item.get("id"))
                          if isinstance(v, str) and v), f"codex-{rec.line}")
        call_id = self.calls.fresh(source_id, {c[0] for c in group.calls})
        if call_id != source_id:
            self.notes.warn(f"{self.where} line {rec.line}: tool call id {source_id!r} is "
                            f"used again in thread {self.key}; imported as {call_id!r}")
        name = item.get("name") if isinstance(item.get("name"), str) and item.get("name") \
            else _CALL_NAMES.get(itype, itype[:-5] if itype.endswith("_call") else itype)
        arguments = (item.get("input") if itype == "custom_tool_call" else
                     parsed_json(item.get("arguments")) if itype == "function_call" else
                     {"revised_prompt": item.get("revised_prompt")}
                     if itype == "image_generation_call" else
                     next((item[k] for k in ("arguments", "action", "input") if k in item),
                          None))
        call: dict[str, Any] = {"id": call_id, "name": name, "arguments": arguments}
        if itype != "function_call":
            call["type"] = itype
        if call_id != source_id:
            call["source_id"] = source_id
        group.calls.append((call_id, source_id, call, item))

    def _flush(self) -> None:
        """Emit the pending assistant message (and its hosted calls' outcomes)."""
        group, self.group = self.group, None
        if group is None:
            return
        if group.message is None and not group.calls:
            for item in group.reasoning:
                self.emit("codex/reasoning", {"codex": item}, group, "model")
            return
        data: dict[str, Any] = {
            "content": group.message.get("content") if group.message else None,
            "tool_calls": [c[2] for c in group.calls]}
        if summary := [t for r in group.reasoning if (t := _text_of(r.get("summary")))]:
            data["reasoning"] = "\n\n".join(summary)
        raw: dict[str, Any] = {"lines": group.lines}
        if group.message is not None:
            raw["message"] = without(group.message, "content", "role")
        if group.reasoning:
            raw["reasoning"] = group.reasoning
        if group.calls:
            raw["calls"] = [without(c[3], "arguments", "input", "result") for c in group.calls]
        data["codex"] = raw
        index = self.emit("assistant/message", data, group, "model")
        for call_id, source_id, call, _item in group.calls:
            self.calls.ask(source_id, call_id, call["name"], index)
        for call_id, _source_id, call, item in group.calls:
            if call.get("type") in _HOSTED and item.get("status") in ("completed", "failed"):
                name = call["name"]
                started = self.emit("tool/call", {"call_id": call_id, "name": name,
                                                  "hosted": True}, group, name)
                self.calls.start(call_id, started)
                self.calls.finish(call_id)
                output = item.get("result") if "result" in item else item.get("status")
                self.emit("tool/result", {"call_id": call_id, "output": output,
                                          "is_error": item.get("status") == "failed",
                                          "hosted": True}, group, name, started)

    def _output(self, rec: _Rec, item: dict[str, Any], itype: str) -> None:
        source_id = item.get("call_id")
        call_id = self.calls.resolve(source_id)
        if call_id is None:
            self.notes.warn(f"{self.where} line {rec.line}: {itype} for call "
                            f"{source_id!r}, which no open call of thread {self.key} has; "
                            f"kept as codex/{itype}")
            self.carry(rec, itype, "response_item")
            return
        name = self.calls.names.get(call_id, "tool")
        if call_id in self.calls.requested:
            self.calls.start(call_id, self.emit("tool/call", {"call_id": call_id,
                                                              "name": name}, rec, name))
        cause = self.calls.finish(call_id)
        output = item["output"] if "output" in item else without(
            item, "type", "call_id", "id", "internal_chat_message_metadata_passthrough",
            "metadata")
        self.emit("tool/result", {"call_id": call_id, "output": output,
                                  "is_error": _is_error(item),
                                  "codex": without(item, "output", "call_id")}, rec, name, cause)

    # -- events, turns, compaction ---------------------------------------------------

    def _event(self, rec: _Rec, payload: dict[str, Any]) -> None:
        etype, turn_id = payload.get("type"), payload.get("turn_id")
        if etype in ("task_started", "task_complete", "turn_aborted"):
            self._flush()
            if etype == "task_started" and self.turn is None:
                self.turn = (turn_id, rec.line)
                self.emit("turn/start", {"turn_id": turn_id, "codex": payload}, rec, "system")
                return
            if etype != "task_started" and self.turn is not None and (
                    turn_id is None or self.turn[0] is None or turn_id == self.turn[0]):
                self.turn = None
                data: dict[str, Any] = {"interrupted": etype == "turn_aborted",
                                        "turn_id": turn_id}
                if etype == "turn_aborted":
                    data["reason"] = payload.get("reason")
                data["codex"] = payload
                self.emit("turn/end", data, rec, "system")
                return
        self.carry(rec, etype, "event_msg")

    def _compacted(self, rec: _Rec, payload: dict[str, Any]) -> None:
        history, message = payload.get("replacement_history"), payload.get("message")
        open_calls = self.calls.open()
        why = ("it holds no replacement history"
               if not isinstance(history, list) and not (isinstance(message, str) and message)
               else "nothing comes before it in this thread" if self.n == 0
               else f"tool call(s) {', '.join(open_calls)} are open across it" if open_calls
               else None)
        if why is not None:
            self.notes.warn(f"{self.where} line {rec.line}: compaction kept as "
                            f"codex/compacted: {why}")
            self.carry(rec, "compacted", "line")
            return
        summary = message if isinstance(message, str) and message else "\n\n".join(
            t for t in (_text_of(i.get("content")) for i in history or []
                        if isinstance(i, dict)) if t)
        self.emit("compaction/apply", {"op": "surface-replace", "from_seq": 0,
                                       "to_seq": self.n - 1, "summary": summary,
                                       "replacement_history": history,
                                       "codex": without(payload, "replacement_history")},
                  rec, "system")


def _read_file(path: Path, notes: Notes, known: _Known) -> Iterator[MappedSession]:
    lines = _Lines(path, notes)
    while (rec := lines.peek()) is not None:
        header = lines.take() if rec.kind == "session_meta" else None
        session = _session(os.path.basename(lines.name), header, known, notes)
        thread = _Thread(lines, notes, session.key, header)
        session.events = thread.events()
        yield session
        if not thread.done:   # the consumer moved on: skip what is left of this thread
            for _ in session.events:
                pass


def _session(base: str, header: _Rec | None, known: _Known, notes: Notes) -> MappedSession:
    meta: dict[str, Any] = header.payload if header is not None else {}
    source_id = next((v for v in (meta.get("id"), meta.get("session_id"))
                      if isinstance(v, str) and v), None)
    if source_id is None:
        found = _ROLLOUT_ID.search(base)
        source_id = found.group(1) if found else Path(base).stem
    key = f"codex:{source_id}"
    if key in known.keys:
        key = f"{key}@{base}:{header.line if header is not None else 1}"
        notes.warn(f"{base}: thread id {source_id!r} appears again"
                   f"{f' at line {header.line}' if header else ''}; imported as {key}")
    session_id = uuid_or_stable(source_id, key)
    if session_id in known.ids:
        session_id = stable_id(key)
    known.keys.add(key)
    known.ids.add(session_id)
    info: dict[str, Any] = {"format": NAME, "file": base}
    if header is not None:
        info["line"] = header.line
    info.update((k, meta[k]) for k in _META_KEYS if meta.get(k) is not None)
    parent, origin, depth = _lineage(meta, key, known, notes, base)
    if parent is not None:
        info["lineage"] = origin or "fork"
    known.threads[source_id] = (key, depth)
    cwd, nickname = meta.get("cwd"), meta.get("agent_nickname")
    return MappedSession(
        key=key, events=iter(()), cwd=cwd if isinstance(cwd, str) and cwd else ".",
        session_id=session_id,
        created_ms=epoch_ms(meta.get("timestamp")) or (header.time if header else None),
        agent_preset=nickname if isinstance(nickname, str) and nickname else None,
        metadata={"import": info}, parent=parent, origin=origin, delegation_depth=depth)


def _lineage(meta: dict[str, Any], key: str, known: _Known, notes: Notes,
             base: str) -> tuple[str | None, str | None, int]:
    """``(parent key, origin, depth)`` of a thread whose parent was read."""
    source = meta.get("source")
    sub = source.get("subagent") if isinstance(source, dict) else None
    spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
    wanted = [(spawn.get("parent_thread_id"), "subagent")] if isinstance(spawn, dict) else []
    if sub is not None:
        wanted.append((meta.get("parent_thread_id"), "subagent"))
    wanted.append((meta.get("forked_from_id"), "fork"))
    for parent_id, origin in wanted:
        if not isinstance(parent_id, str) or not parent_id:
            continue
        if (found := known.threads.get(parent_id)) is None:
            notes.warn(f"{base}: thread {key} names {origin} parent {parent_id!r}, which is "
                       "not read before it; imported without a parent")
            continue
        if origin == "fork":   # the store's forks have no origin (here no inherited prefix)
            return found[0], None, found[1]
        return found[0], origin, found[1] + 1
    return None, None, 0


__all__ = ["NAME", "read", "sniff"]
