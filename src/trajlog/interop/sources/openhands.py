"""OpenHands event streams: the V0 event list and the V1 (software-agent SDK) log.

**V0** (a JSON array of events, a JSONL stream of them, an evaluation
``output.jsonl`` -- a session per record, closed by ``openhands/eval_record``
-- or a folder of ``events/*.json``): a user ``message`` -> ``user/message``;
an agent ``message`` / ``think`` without a tool call -> ``assistant/message``;
an action with ``tool_call_metadata`` -> the ``assistant/message`` of its model
response (once per ``model_response.id``, requesting all its calls) + a
``tool/call`` (the host starting it); an observation naming a call
(``tool_call_id``, or a ``cause`` that is a tool action) -> ``tool/result``; a
``condensation`` -> ``compaction/apply`` when what it forgets is one range that
can be hidden; else ``openhands/<action>`` / ``openhands/observation.<name>``.

**V1** (``kind``-discriminated events, one a line, or a folder with
``base_state.json`` and ``events/``): ``MessageEvent`` -> a message; the
``ActionEvent``s of one ``llm_response_id`` -> one ``assistant/message`` + a
``tool/call`` each; ``ObservationEvent`` / ``AgentErrorEvent`` /
``UserRejectObservation`` -> ``tool/result``; ``Condensation`` as above; else
``openhands/<kind, snake case>``.  A result whose call is not in the log is
carried and noted; a reused call id is renamed ``<id>#2`` (noted).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
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
    json_document,
    jsonl_records,
    parsed_json,
    stable_id,
    uuid_or_stable,
    without,
)

NAME = "openhands"

_UNSAFE = re.compile(r"[^a-z0-9_.-]+")
_DIGITS = re.compile(r"[0-9]+")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_HISTORY = MESSAGES | ANSWERS_CALL
_V1_RESULTS = frozenset({"ObservationEvent", "AgentErrorEvent", "UserRejectObservation"})


def sniff(path: Path) -> bool:
    """A V0 event list, an evaluation output, a V1 event stream, or a folder
    holding ``events/``."""
    if path.is_dir():
        events = path / "events"
        return events.is_dir() and any(n.endswith(".json") for n in os.listdir(events))
    if path.suffix not in (".json", ".jsonl"):
        return False
    try:
        if path.suffix == ".json":
            start = bounded.head(path, 1 << 16).lstrip()
            return start[:1] == b"[" and b'"source"' in start and (
                b'"action"' in start or b'"observation"' in start)
        line = bounded.first_line(path)
    except OSError:
        return False
    value = bounded.INVALID if line is None else bounded.try_decode(line)
    if value is bounded.INVALID:  # (a first line longer than the read, or not JSON)
        head = line if line is not None else bounded.head(path)
        start = head[:8192]
        return (b'"instance_id"' in start and b'"history"' in head) or (
            b'"kind"' in start and b'"source"' in start and b'"timestamp"' in start
            and b'"payload"' not in start)
    return isinstance(value, dict) and (
        (_is_record(value) and "instance_id" in value)
        or (_is_v1(value) and {"id", "timestamp", "source"} <= value.keys())
        or ("source" in value and "id" in value and ("action" in value
                                                     or "observation" in value)))


def _is_record(value: dict[str, Any]) -> bool:   # an evaluation record
    return isinstance(value.get("history"), list)


def _is_v1(value: dict[str, Any]) -> bool:
    """A V1 event: a ``kind``, and no V0 action / observation name."""
    return isinstance(value.get("kind"), str) and not isinstance(value.get("action"), str) \
        and not isinstance(value.get("observation"), str)


Records = Iterable[tuple[int | None, int | None, Any]]


def read(path: Path, notes: Notes) -> Iterator[MappedSession]:
    """The sessions of ``path`` (module docstring)."""
    name, base = os.fspath(path), path.name
    if path.is_dir():
        yield _folder(path, notes)
        return
    bounded.regular(path)
    if path.suffix == ".json":
        doc = json_document(path)
        if isinstance(doc, list):
            yield _session(f"openhands:{path.stem}", base, name, notes,
                           ((None, None, e) for e in doc), {})
        elif isinstance(doc, dict) and _is_record(doc):
            yield _record(doc, base, name, notes, None, set())
        else:
            raise ImportFormatError(name, "not an OpenHands event list or evaluation record",
                                    line=1, offset=0)
    else:
        records = jsonl_records(path, notes)
        if (first := next(records, None)) is None:
            return
        if not (isinstance(first[2], dict) and _is_record(first[2])):
            yield _session(f"openhands:{path.stem}", base, name, notes,
                           _chain(first, records), {})
            return
        keys: set[str] = set()
        for line, offset, value in _chain(first, records):
            if not isinstance(value, dict) or not _is_record(value):
                raise ImportFormatError(name, "an evaluation output line must be a record "
                                        "with a history", line=line, offset=offset)
            yield _record(value, base, name, notes, line, keys)


def _chain(first: Any, rest: Iterable[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _name_key(name: str) -> list[tuple[int, int, str]]:
    """Event file names in order: their parts compared in turn, a number (ASCII
    digits only) by its value and before any word (``2.json`` < ``10.json`` <
    ``x.json``)."""
    return [(0, int(p), "") if _DIGITS.fullmatch(p) else (1, 0, p)
            for p in re.split(r"[-_.]", name)]


def _event_file(path: Path) -> tuple[int, int, dict[str, Any]]:
    """One event of a folder: its file must hold a JSON object."""
    event = json_document(path)
    if not isinstance(event, dict):
        raise ImportFormatError(os.fspath(path), "an OpenHands event must be a JSON object",
                                line=1, offset=0)
    return 1, 0, event


def _folder(path: Path, notes: Notes) -> MappedSession:
    events = path / "events"
    # every file is checked before any is read (links out of the folder refused)
    files = [bounded.inside(path, events / f)
             for f in sorted((f for f in os.listdir(events) if f.endswith(".json")),
                             key=_name_key)]
    base_state = path / "base_state.json"
    state = _dict(json_document(bounded.inside(path, base_state))) \
        if base_state.exists() or base_state.is_symlink() else {}
    source_id = state["id"] if isinstance(state.get("id"), str) else path.name
    return _session(f"openhands:{source_id}", path.name, os.fspath(path), notes,
                    (_event_file(f) for f in files),
                    {"base_state": {k: v for k, v in state.items()
                                    if isinstance(v, (str, int, float, bool))}},
                    source_id=source_id)


def _record(rec: dict[str, Any], base: str, name: str, notes: Notes, line: int | None,
            keys: set[str]) -> MappedSession:
    """One evaluation record: its history, then its own fields."""
    instance, meta = rec.get("instance_id"), _dict(rec.get("metadata"))
    run = meta.get("start_time")   # an attempt: the same instance is run again and again
    key = (f"openhands:{instance if isinstance(instance, str) and instance else base}"
           f"{f'@{run}' if isinstance(run, str) and run else ''}")
    key = f"{key}@{base}:{line}" if key in keys else key
    keys.add(key)
    info: dict[str, Any] = {"instance_id": instance, "line": line}
    info.update((k, meta[k]) for k in ("agent_class", "max_iterations", "dataset",
                                       "data_split", "start_time", "git_commit")
                if meta.get(k) is not None)
    if (model := _dict(meta.get("llm_config")).get("model")) is not None:
        info["model"] = model
    if rec.get("error") is not None:
        # the error text stays in the record's closing event (``tail``), not the header
        info["ended_with_error"] = True
        notes.warn(f"{base}{f' line {line}' if line else ''}: record {instance!r} ended with "
                   f"an error: {rec['error']}")
    session = _session(key, base, name, notes, ((line, None, e) for e in rec["history"]),
                       info, tail={k: v for k, v in rec.items() if k != "history"})
    session.agent_preset = agent if isinstance(agent := meta.get("agent_class"), str) else None
    session.created_ms = session.created_ms or epoch_ms(meta.get("start_time"))
    return session


def _session(key: str, base: str, name: str, notes: Notes, events: Records,
             info: dict[str, Any], *, tail: dict[str, Any] | None = None,
             source_id: str | None = None) -> MappedSession:
    it = iter(events)
    first = next(it, None)
    created = epoch_ms(first[2].get("timestamp")) if first is not None and isinstance(
        first[2], dict) else None
    stream = _chain(first, it) if first is not None else iter(())
    return MappedSession(
        key=key, events=_Mapper(key, base, name, notes).run(stream, tail),
        session_id=uuid_or_stable(source_id, key) if source_id else stable_id(key),
        created_ms=created, metadata={"import": {"format": NAME, "file": base, **info}})


def _type(prefix: str, name: Any) -> str:
    text = _UNSAFE.sub("_", name.lower()).strip("_.-") if isinstance(name, str) else ""
    if not text or not text[0].isalpha():
        text = "unknown" + ("_" + text if text else "")
    return f"openhands/{prefix}{text}"[:128]


def _snake(kind: str) -> str:
    kind = kind[:-5] if kind.endswith("Event") and kind != "Event" else kind
    return _CAMEL.sub("_", kind).lower()


def _key(value: Any) -> Any:
    """An event id usable as a key (a source may write any JSON there)."""
    plain = value is None or isinstance(value, (str, int, float))
    return value if plain else json.dumps(value, sort_keys=True)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(content: Any) -> Any:
    """V1 content parts as the text they hold (kept as parts unless all text)."""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                         for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return content


class _Mapper:
    """Maps the events of one session (V0 and V1 events alike)."""

    def __init__(self, key: str, base: str, name: str, notes: Notes) -> None:
        self.key, self.base, self.name, self.notes = key, base, name, notes
        self.calls = AliasedCalls()
        self.out: list[MappedEvent] = []
        self.count = 0
        self.responses: dict[str, dict[str, str]] = {}   # response id -> source id -> call
        self.action_calls: dict[Any, str] = {}           # V0 / V1 action id -> call id
        self.pending: list[tuple[int | None, dict[str, Any]]] = []   # V1 actions of a response
        # for compactions: record id -> (first, last) index; per index its
        # record id and type; the call ids an index requests / finishes
        self.spans: dict[Any, tuple[int, int]] = {}
        self.rec_at: list[Any] = []
        self.type_at: list[str] = []
        self.calls_at: dict[int, tuple[list[str], list[str]]] = {}
        self.ranges: list[tuple[int, int]] = []

    def where(self, line: int | None) -> str:
        return f"{self.base}{f' line {line}' if line else ''}"

    def emit(self, type_: str, data: dict[str, Any], rec: dict[str, Any], line: int | None,
             source: str, cause: int | None = None, requests: list[str] | None = None,
             finishes: str | None = None) -> int:
        index = len(self.type_at)
        self.out.append(MappedEvent(type_, data, epoch_ms(rec.get("timestamp")), source, cause,
                                    line))
        rid = _key(rec.get("id"))
        self.spans[rid] = (self.spans.get(rid, (index, index))[0], index)
        self.rec_at.append(rid)
        self.type_at.append(type_)
        if requests or finishes:
            self.calls_at[index] = (requests or [], [finishes] if finishes else [])
        return index

    def carry(self, type_: str, rec: dict[str, Any], line: int | None) -> None:
        self.emit(type_, {"openhands": rec}, rec, line, "system")

    def run(self, events: Records, tail: dict[str, Any] | None) -> Iterator[MappedEvent]:
        for line, offset, rec in events:
            if not isinstance(rec, dict):
                raise ImportFormatError(self.name, "an OpenHands event must be a JSON object",
                                        line=line, offset=offset, valid=self.count)
            self.count += 1
            if _is_v1(rec):
                self.v1(rec, line)
            else:
                self.flush_v1()
                self.v0(rec, line)
            out, self.out = self.out, []
            yield from out
        self.flush_v1()
        if tail is not None:
            self.emit("openhands/eval_record", {"openhands": tail}, {}, None, "system")
        if open_calls := self.calls.open():
            self.notes.warn(f"{self.base}: session {self.key} ends with {len(open_calls)} "
                            f"tool call(s) without a result: {', '.join(open_calls)}")
        yield from self.out

    def result(self, call_id: str, data: dict[str, Any], rec: dict[str, Any],
               line: int | None) -> None:
        """``tool/result`` (after its ``tool/call`` if none was emitted: a
        result proves the call started)."""
        name = self.calls.names.get(call_id, "tool")
        if call_id in self.calls.requested:
            self.calls.start(call_id, self.emit("tool/call", {"call_id": call_id,
                                                              "name": name}, rec, line, name))
        cause = self.calls.finish(call_id)
        self.emit("tool/result", data, rec, line, name, cause, finishes=call_id)

    def fresh(self, source_id: str, taken: set[str], line: int | None) -> str:
        call_id = self.calls.fresh(source_id, taken)
        if call_id != source_id:
            self.notes.warn(f"{self.where(line)}: tool call id {source_id!r} is used again in "
                            f"session {self.key}; imported as {call_id!r}")
        taken.update((source_id, call_id))
        return call_id

    # -- V0 --------------------------------------------------------------------------

    def v0(self, rec: dict[str, Any], line: int | None) -> None:
        source, action, args = rec.get("source"), rec.get("action"), _dict(rec.get("args"))
        tcm = rec.get("tool_call_metadata")
        if "action" not in rec:
            if "observation" in rec:
                self.v0_result(rec, line)
            else:
                self.carry("openhands/event", rec, line)
        elif isinstance(tcm, dict) and isinstance(tcm.get("tool_call_id"), str):
            self.v0_tool(rec, tcm, args, line)
        elif action == "message" and source in ("user", "agent"):
            content = args.get("content", rec.get("message", ""))
            data = {"content": content if isinstance(content, (str, list)) else str(content),
                    "openhands": without(rec, "args"), "args": without(args, "content")}
            self.emit("user/message" if source == "user" else "assistant/message", data,
                      rec, line, "user" if source == "user" else "model")
        elif action == "think" and source == "agent":
            self.emit("assistant/message", {"content": args.get("thought", ""),
                                            "openhands": rec}, rec, line, "model")
        elif action == "condensation":
            self.condense(rec, args, line)
        else:
            self.carry(_type("", action), rec, line)

    def v0_tool(self, rec: dict[str, Any], tcm: dict[str, Any], args: dict[str, Any],
                line: int | None) -> None:
        source_id, fname = tcm["tool_call_id"], tcm.get("function_name")
        name = fname if isinstance(fname, str) and fname else str(rec.get("action"))
        resp = _dict(tcm.get("model_response"))
        rid = resp.get("id") if isinstance(resp.get("id"), str) else None
        known = self.responses.get(rid) if rid else None
        if known is not None and source_id in known:
            call_id = known[source_id]
            if call_id not in self.calls.requested:
                self.notes.warn(f"{self.where(line)}: action {rec.get('id')!r} starts tool "
                                f"call {source_id!r} of response {rid!r} again; kept as "
                                f"{_type('', rec.get('action'))}")
                self.carry(_type("", rec.get("action")), rec, line)
                return
        else:
            call_id = self.v0_message(rec, resp, rid, source_id, name, args, line)
        meta = {**without(tcm, "model_response"), "model_response_id": rid}
        data = {"call_id": call_id, "name": name, "arguments": args, "openhands": {
            **without(rec, "args", "tool_call_metadata"), "tool_call_metadata": meta}}
        self.calls.start(call_id, self.emit("tool/call", data, rec, line, name))
        self.action_calls[_key(rec.get("id"))] = call_id

    def v0_message(self, rec: dict[str, Any], resp: dict[str, Any], rid: str | None,
                   source_id: str, name: str, args: dict[str, Any], line: int | None,
                   ) -> str:
        """Emit the assistant message of ``resp``; the id of ``source_id``'s call."""
        choices = resp.get("choices")
        message = _dict(_dict(choices[0]).get("message")) if isinstance(choices, list) \
            and choices else {}
        calls = [(c["id"], {"name": str(_dict(c.get("function")).get("name") or "tool"),
                            "arguments": parsed_json(_dict(c.get("function")).get("arguments"))})
                 for c in message.get("tool_calls") or []
                 if isinstance(c, dict) and isinstance(c.get("id"), str)]
        if rid is not None and rid in self.responses:   # a late call of a response
            calls = [(s, c) for s, c in calls if s == source_id]
        if source_id not in {s for s, _ in calls}:
            calls.append((source_id, {"name": name, "arguments": args}))
        taken: set[str] = set()
        requested: list[tuple[str, dict[str, Any]]] = []
        for s, c in calls:
            if s not in taken:
                call_id = self.fresh(s, taken, line)
                requested.append((s, {"id": call_id, **c, **(
                    {"source_id": s} if call_id != s else {})}))
        content = message.get("content")
        data: dict[str, Any] = {"content": args.get("thought") or None if content is None
                                else content, "tool_calls": [e for _, e in requested]}
        if message.get("reasoning_content"):
            data["reasoning"] = message["reasoning_content"]
        if isinstance(usage := resp.get("usage"), dict):
            data["usage"] = {"input_tokens": usage.get("prompt_tokens"),
                             "output_tokens": usage.get("completion_tokens")}
        if isinstance(resp.get("model"), str):
            data["model"] = resp["model"]
        data["openhands"] = {"model_response": resp}
        index = self.emit("assistant/message", data, rec, line, "model",
                          requests=[e["id"] for _, e in requested])
        mine = self.responses.setdefault(rid or f"action:{rec.get('id')}", {})
        for s, entry in requested:
            self.calls.ask(s, entry["id"], entry["name"], index)
            mine[s] = entry["id"]
        return mine[source_id]

    def v0_result(self, rec: dict[str, Any], line: int | None) -> None:
        obs, tcm = rec.get("observation"), rec.get("tool_call_metadata")
        claimed = tcm.get("tool_call_id") if isinstance(tcm, dict) else None
        call_id = self.calls.resolve(claimed)
        cause = _key(rec.get("cause"))
        if call_id is None and claimed is None and cause in self.action_calls:
            claimed = self.action_calls[cause]
            call_id = claimed if self.calls.is_open(claimed) else None
        if call_id is None:
            if claimed is not None:
                self.notes.warn(f"{self.where(line)}: observation {rec.get('id')!r} answers "
                                f"tool call {claimed!r}, which has no open call in session "
                                f"{self.key}; kept as openhands/observation.{obs}")
            self.carry(_type("observation.", obs), rec, line)
            return
        rest = without(rec, "content", "tool_call_metadata")
        if isinstance(tcm, dict):
            rest["tool_call_metadata"] = {**without(tcm, "model_response"), "model_response_id":
                                          _dict(tcm.get("model_response")).get("id")}
        self.result(call_id, {"call_id": call_id, "output": rec.get("content", rec.get(
            "message")), "is_error": obs == "error" or rec.get("success") is False,
            "openhands": rest}, rec, line)

    # -- V1 --------------------------------------------------------------------------

    def v1(self, rec: dict[str, Any], line: int | None) -> None:
        kind = rec.get("kind")
        if kind == "ActionEvent":
            if self.pending and self.pending[0][1].get("llm_response_id") != rec.get(
                    "llm_response_id"):
                self.flush_v1()
            self.pending.append((line, rec))
            return
        self.flush_v1()
        if kind == "MessageEvent":
            msg = _dict(rec.get("llm_message"))
            role, content = msg.get("role"), _text(msg.get("content"))
            if role not in ("user", "assistant") or not isinstance(content, (str, list)):
                self.carry("openhands/message", rec, line)
                return
            data: dict[str, Any] = {"content": content}
            if role == "assistant" and msg.get("reasoning_content"):
                data["reasoning"] = msg["reasoning_content"]
            data["openhands"] = {**without(rec, "llm_message"),
                                 "llm_message": without(msg, "content")}
            self.emit(f"{role}/message", data, rec, line, "user" if role == "user" else "model")
        elif kind in _V1_RESULTS:
            self.v1_result(rec, line, str(kind))
        elif kind == "Condensation":
            self.condense(rec, rec, line)
        else:
            self.carry(_type("", _snake(kind) if isinstance(kind, str) else kind), rec, line)

    def flush_v1(self) -> None:
        """Emit the pending actions of one model response: one message, a call each."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        taken: set[str] = set()
        calls: list[tuple[str, dict[str, Any]]] = []
        for line, rec in pending:
            s = rec.get("tool_call_id")
            s = s if isinstance(s, str) and s else f"openhands-{rec.get('id')}"
            call_id = self.fresh(s, taken, line)
            tc = _dict(rec.get("tool_call"))
            name = rec["tool_name"] if isinstance(rec.get("tool_name"), str) else \
                str(tc.get("name") or "tool")
            calls.append((s, {"id": call_id, "name": name,
                              "arguments": parsed_json(tc.get("arguments")),
                              **({"source_id": s} if call_id != s else {})}))
        records = [r for _, r in pending]
        text = "".join(t for r in records if isinstance(t := _text(r.get("thought")), str))
        data: dict[str, Any] = {"content": text or None, "tool_calls": [c for _, c in calls]}
        if reasoning := [str(r["reasoning_content"]) for r in records
                         if r.get("reasoning_content")]:
            data["reasoning"] = "\n\n".join(reasoning)
        data["openhands"] = {"llm_response_id": records[0].get("llm_response_id"), **{
            k: [r.get(k) for r in records] for k in ("thinking_blocks",
                                                     "responses_reasoning_item")}}
        index = self.emit("assistant/message", data, records[0], pending[0][0], "model",
                          requests=[c["id"] for _, c in calls])
        for s, c in calls:
            self.calls.ask(s, c["id"], c["name"], index)
        for (_s, c), (line, rec) in zip(calls, pending, strict=True):
            rest = without(rec, "action", "thought", "reasoning_content", "thinking_blocks",
                            "responses_reasoning_item")
            self.calls.start(c["id"], self.emit("tool/call", {
                "call_id": c["id"], "name": c["name"], "arguments": rec.get("action"),
                "openhands": rest}, rec, line, c["name"]))
            self.action_calls[_key(rec.get("id"))] = c["id"]

    def v1_result(self, rec: dict[str, Any], line: int | None, kind: str) -> None:
        claimed = rec.get("tool_call_id")
        call_id = self.calls.resolve(claimed)
        action = self.action_calls.get(_key(rec.get("action_id")))
        if call_id is None and self.calls.is_open(action):
            call_id = action
        if call_id is None:
            name = "observation" if kind == "ObservationEvent" else _snake(kind)
            if claimed is not None or rec.get("action_id") is not None:
                self.notes.warn(f"{self.where(line)}: {kind} {rec.get('id')!r} answers tool "
                                f"call {claimed!r} (action {rec.get('action_id')!r}), which "
                                f"is not in session {self.key}; kept as openhands/{name}")
            self.carry(_type("", name), rec, line)
            return
        data: dict[str, Any] = {"call_id": call_id}
        if kind == "ObservationEvent":
            obs = _dict(rec.get("observation"))
            data.update(output=_text(obs.get("content")), is_error=obs.get("is_error") is True,
                        openhands={**without(rec, "observation"),
                                   "observation": without(obs, "content")})
        else:
            field = "error" if kind == "AgentErrorEvent" else "rejection_reason"
            data.update(output=rec.get(field), is_error=True,
                        openhands=without(rec, field))
            if kind == "UserRejectObservation":
                data["rejected"] = True
        self.result(call_id, data, rec, line)

    # -- condensation ----------------------------------------------------------------

    def condense(self, rec: dict[str, Any], args: dict[str, Any], line: int | None) -> None:
        forgotten = args.get("forgotten_event_ids")
        ids: set[Any] = {_key(i) for i in forgotten} if isinstance(forgotten, list) else set()
        lo_id, hi_id = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
        if not ids and type(lo_id) is int and type(hi_id) is int and 0 <= hi_id - lo_id < 1 << 20:
            ids = set(range(lo_id, hi_id + 1))
        if (why := self.unhideable(ids)) is not None:
            self.notes.warn(f"{self.where(line)}: condensation {rec.get('id')!r} kept as "
                            f"openhands/condensation: {why}")
            self.carry("openhands/condensation", rec, line)
            return
        spans = [self.spans[i] for i in ids if i in self.spans]
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        self.ranges.append((lo, hi))
        summary = s if isinstance(s := args.get("summary"), str) else ""
        self.emit("compaction/apply", {"op": "surface-replace", "from_seq": lo, "to_seq": hi,
                                       "summary": summary, "openhands": rec}, rec, line,
                  "system")

    def unhideable(self, ids: set[Any]) -> str | None:
        """Why the events ``ids`` cannot be hidden as one range (None: they can)."""
        spans = [self.spans[i] for i in ids if i in self.spans]
        if not spans:
            return "none of its forgotten events is in this session"
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        requested, finished = set[str](), set[str]()
        for index in range(lo, hi + 1):
            if self.type_at[index] in _HISTORY and self.rec_at[index] not in ids:
                return f"the messages {lo}..{hi} it spans include events it keeps"
            req, fin = self.calls_at.get(index, ((), ()))
            requested.update(req)
            finished.update(fin)
        if requested != finished:
            return f"it would split tool calls from their results ({len(requested ^ finished)})"
        for a, b in self.ranges:
            if not (b < lo or a > hi) and not (lo <= a and b <= hi):
                return f"it partly overlaps the earlier compaction {a}..{b}"
        return None


__all__ = ["NAME", "read", "sniff"]
