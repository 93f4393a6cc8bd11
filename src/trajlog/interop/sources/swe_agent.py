"""SWE-agent trajectories (``<instance>.traj``: one JSON object).

``history`` is the list of messages the model saw; it gives the messages:

* ``system`` -> ``swe-agent/system`` (the system prompt, carried);
* ``user`` -> ``user/message`` (a demonstration -- ``is_demo`` or
  ``message_type: "demonstration"`` -- flagged ``"meta": true,
  "demonstration": true``);
* ``assistant`` -> ``assistant/message``.  In 1.x its ``tool_calls`` are
  requested as they are; in 0.x (no ``tool_calls``) the ``action`` parsed out
  of its text becomes one call with a synthetic id ``swe-<step>``;
* the answer to a call -- a ``tool`` message (1.x, by ``tool_call_ids``) or the
  ``user`` message right after a 0.x action -> ``tool/call`` + ``tool/result``.
  A last call that the history does not answer is answered by its trajectory
  step's ``observation`` (the tool ran; the run ended before the model saw it).

``trajectory`` is the step list: when its steps line up with the history's
actions they become ``step/start`` / ``step/end`` around each action and its
answer (inside one ``turn/start`` .. ``turn/end`` for the run, interrupted unless
``info.exit_status`` is ``submitted``), the step's own fields (state,
execution time, raw observation...) in ``step/start``; otherwise each step is
carried as ``swe-agent/step``.  ``environment`` and ``replay_config`` open the
log (``swe-agent/config``); ``info`` closes it (``swe-agent/info``).  A
reused tool call id is renamed ``<id>#2`` (noted).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import ImportFormatError
from .. import bounded
from ..mapping import CallBook, MappedEvent, MappedSession, Notes, json_document, stable_id

NAME = "swe-agent"


def sniff(path: Path) -> bool:
    """A ``.traj`` file holding a JSON object with a trajectory or a history,
    or a run folder of them (``*.traj``, or ``<instance>/<instance>.traj``)."""
    if path.is_dir():
        return any((p.suffix == ".traj" and p.is_file()) or (p / f"{p.name}.traj").is_file()
                   for p in path.iterdir())
    if path.suffix != ".traj":
        return False
    try:
        head = bounded.head(path, 1 << 16)
    except OSError:
        return False
    start = head.lstrip()
    return start[:1] == b"{" and (b'"trajectory"' in head or b'"history"' in head
                                  or b'"environment"' in head)


def _trajs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.traj") if p.is_file() or p.is_symlink())


def read(path: Path, notes: Notes) -> Iterator[MappedSession]:
    """One session per ``.traj`` file (every one under a folder, in name order)."""
    if path.is_dir():
        # every file is checked before any is read (links out of the folder refused)
        files = [bounded.inside(path, f) for f in _trajs(path)]
    else:
        bounded.regular(path)
        files = [path]
    for file in files:
        yield _session(file, notes)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _parsed(value: Any) -> Any:
    """JSON held in a string, decoded within the bounds of :mod:`..bounded`
    (else the string as it is)."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        parsed = bounded.try_decode(value)
        return value if parsed is bounded.INVALID else parsed
    return value


def _session(path: Path, notes: Notes) -> MappedSession:
    name = os.fspath(path)
    doc = json_document(path)
    if not isinstance(doc, dict):
        raise ImportFormatError(name, "a .traj file must hold a JSON object", line=1, offset=0)
    history = doc.get("history", [])
    steps = doc.get("trajectory", [])
    if not isinstance(history, list) or not isinstance(steps, list):
        raise ImportFormatError(name, "history and trajectory must be lists", line=1, offset=0)
    for where, items in (("history", history), ("trajectory", steps)):
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise ImportFormatError(name, f"{where}[{i}] is not a JSON object", line=None,
                                        offset=None, valid=i)
    info = _dict(doc.get("info"))
    replay = _parsed(doc.get("replay_config"))
    agent = next((m["agent"] for m in history if isinstance(m.get("agent"), str)), None)
    state = _parsed(steps[0].get("state")) if steps else None
    cwd = _dict(state).get("working_dir")
    meta: dict[str, Any] = {"format": NAME, "file": path.name, "instance": path.stem}
    if isinstance(doc.get("environment"), str):
        meta["environment"] = doc["environment"]
    if isinstance(info.get("exit_status"), str):
        meta["exit_status"] = info["exit_status"]
    model = _dict(_dict(_dict(replay).get("agent")).get("model")).get("name")
    if isinstance(model, str):
        meta["model"] = model
    if isinstance(info.get("swe_agent_version"), str):
        meta["swe_agent_version"] = info["swe_agent_version"]
    key = f"swe-agent:{path.stem}"
    mapper = _Mapper(path.name, key, notes, doc, history, steps, info, replay)
    return MappedSession(key=key, events=mapper.run(), cwd=cwd if isinstance(cwd, str) and cwd
                         else ".", session_id=stable_id(key), agent_preset=agent,
                         metadata={"import": meta})


def _demo(msg: dict[str, Any]) -> bool:
    return bool(msg.get("is_demo")) or msg.get("message_type") == "demonstration"


class _Mapper:
    """Maps one trajectory to events."""

    def __init__(self, base: str, key: str, notes: Notes, doc: dict[str, Any],
                 history: list[dict[str, Any]], steps: list[dict[str, Any]],
                 info: dict[str, Any], replay: Any) -> None:
        self.base, self.key, self.notes = base, key, notes
        self.doc, self.history, self.steps, self.info, self.replay = (
            doc, history, steps, info, replay)
        self.book = CallBook()
        self.names: dict[str, str] = {}
        self.by_source: dict[str, list[str]] = {}
        self.out: list[MappedEvent] = []
        self.n = 0

    def emit(self, type_: str, data: dict[str, Any], source: str,
             cause: int | None = None) -> int:
        self.out.append(MappedEvent(type_, data, None, source, cause))
        self.n += 1
        return self.n - 1

    def run(self) -> Iterator[MappedEvent]:
        actions = [i for i, m in enumerate(self.history)
                   if m.get("role") == "assistant" and not _demo(m)]
        aligned = len(actions) == len(self.steps) and all(
            _same_action(self.history[i], s) for i, s in zip(actions, self.steps, strict=True))
        if self.steps and not aligned:
            self.notes.warn(f"{self.base}: its {len(self.steps)} trajectory steps do not line "
                            f"up with the {len(actions)} actions of its history; steps kept "
                            "as swe-agent/step")
        config = {k: v for k, v in self.doc.items()
                  if k not in ("history", "trajectory", "info")}
        if isinstance(self.replay, dict):
            config["replay_config"] = self.replay
        self.emit("swe-agent/config", {"swe-agent": config}, "system")
        marked = aligned and bool(self.steps)
        if marked:
            self.emit("turn/start", {}, "system")
        yield from self._drain()
        step_of = {h: s for s, h in enumerate(actions)} if aligned else {}
        i = 0
        while i < len(self.history):
            i = self._message(i, step_of, marked)
            yield from self._drain()
        if not aligned:
            for s, step in enumerate(self.steps):
                self.emit("swe-agent/step", {"index": s, "swe-agent": step}, "system")
        if marked:
            status = self.info.get("exit_status")
            self.emit("turn/end", {"interrupted": status != "submitted",
                                   "exit_status": status}, "system")
        if self.info or "info" in self.doc:
            self.emit("swe-agent/info", {"swe-agent": self.info}, "system")
        open_calls = self.book.open()
        if open_calls:
            self.notes.warn(f"{self.base}: {len(open_calls)} tool call(s) without a result: "
                            f"{', '.join(open_calls)}")
        yield from self._drain()

    def _drain(self) -> Iterator[MappedEvent]:
        out, self.out = self.out, []
        yield from out

    def _message(self, i: int, step_of: dict[int, int], marked: bool) -> int:
        """Map history[i] (and the answers to its calls); the next index."""
        msg = self.history[i]
        role = msg.get("role")
        rest = {k: v for k, v in msg.items() if k not in ("role", "content", "tool_calls")}
        content = msg.get("content")
        if not isinstance(content, (str, list)):
            content = "" if content is None else json.dumps(content)
        if role == "system":
            self.emit("swe-agent/system", {"content": content, "swe-agent": rest}, "system")
            return i + 1
        if role == "assistant" and not _demo(msg):
            return self._action(i, msg, content, rest, step_of.get(i), marked)
        if role in ("user", "tool") or _demo(msg):
            data: dict[str, Any] = {"content": content}
            if _demo(msg):
                data["meta"] = True
                data["demonstration"] = True
                if role != "user":
                    data["role"] = role
                if msg.get("tool_calls") is not None:
                    rest["tool_calls"] = msg["tool_calls"]
            elif role == "tool":
                self.notes.warn(f"{self.base}: history[{i}] is a tool message answering "
                                f"{msg.get('tool_call_ids')!r}, which no open call has; kept "
                                "as swe-agent/message")
                self.emit("swe-agent/message", {"content": content, "role": role,
                                                "swe-agent": rest}, "system")
                return i + 1
            data["swe-agent"] = rest
            if role == "assistant":
                self.emit("assistant/message", data, "model")
            else:
                self.emit("user/message", data, "system" if _demo(msg) else "user")
            return i + 1
        self.emit("swe-agent/message", {"content": content, "role": role, "swe-agent": rest},
                  "system")
        return i + 1

    def _action(self, i: int, msg: dict[str, Any], content: Any, rest: dict[str, Any],
                step: int | None, marked: bool) -> int:
        calls: list[dict[str, Any]] = []
        sources: list[str] = []
        taken: set[str] = set()
        for c in msg.get("tool_calls") or []:
            fn = _dict(c.get("function")) if isinstance(c, dict) else {}
            source_id = c.get("id") if isinstance(c, dict) else None
            if not isinstance(source_id, str) or not source_id:
                source_id = f"swe-{i}-{len(calls)}"
            calls.append({"name": str(fn.get("name") or "tool"),
                          "arguments": _parsed(fn.get("arguments"))})
            sources.append(source_id)
        action = msg.get("action")
        synthetic = not calls and isinstance(action, str) and action.strip() != ""
        if synthetic:
            text = str(action).strip()
            calls.append({"name": text.split()[0], "arguments": {"action": action}})
            sources.append(f"swe-{step if step is not None else i}")
        for c, source_id in zip(calls, sources, strict=True):
            call_id, n = source_id, 1
            while self.book.used(call_id) or call_id in taken:
                n += 1
                call_id = f"{source_id}#{n}"
            if call_id != source_id:
                self.notes.warn(f"{self.base}: history[{i}] uses tool call id {source_id!r} "
                                f"again; imported as {call_id!r}")
                c["source_id"] = source_id
            taken.add(call_id)
            c["id"] = call_id
        if marked and step is not None:
            # what the history does not already say
            same = {"action": msg.get("action"), "thought": msg.get("thought"),
                    "response": content}
            fields = {k: v for k, v in self.steps[step].items()
                      if k not in same or v != same[k]}
            self.emit("step/start", {"index": step, "swe-agent": fields}, "system")
        data: dict[str, Any] = {"content": content,
                                "tool_calls": [{k: c[k] for k in ("id", "name", "arguments",
                                                                  "source_id") if k in c}
                                               for c in calls]}
        if synthetic:
            data["synthetic_ids"] = True
        data["swe-agent"] = rest
        index = self.emit("assistant/message", data, "model")
        for c, source_id in zip(calls, sources, strict=True):
            self.book.request(c["id"], index)
            self.names[c["id"]] = c["name"]
            self.by_source.setdefault(source_id, []).append(c["id"])
        j = i + 1
        # the answers: tool messages naming the calls (1.x), or the next user message (0.x)
        while j < len(self.history) and self.book.requested:
            nxt = self.history[j]
            if nxt.get("role") == "tool" and not _demo(nxt):
                ids = nxt.get("tool_call_ids")
                wanted = [x for x in ids if isinstance(x, str)] if isinstance(ids, list) else []
                found = [f for f in (self._resolve(x) for x in wanted) if f is not None]
                if not wanted or len(found) != len(wanted):
                    break
                for n_, call_id in enumerate(found):
                    self._answer(call_id, nxt, shared=len(found) > 1, first=n_ == 0)
                j += 1
            elif synthetic and nxt.get("role") == "user" and not _demo(nxt):
                self._answer(calls[0]["id"], nxt, shared=False, first=True)
                j += 1
                break
            else:
                break
        if len(calls) == 1 and calls[0]["id"] in self.book.requested and step is not None:
            observation = self.steps[step].get("observation")
            if observation is not None:
                self._answer(calls[0]["id"], {"content": observation}, shared=False, first=True,
                             from_trajectory=True)
        if marked and step is not None:
            self.emit("step/end", {"index": step}, "system")
        return j

    def _resolve(self, source_id: str) -> str | None:
        for call_id in self.by_source.get(source_id, ()):
            if call_id in self.book.requested:
                return call_id
        return None

    def _answer(self, call_id: str, msg: dict[str, Any], *, shared: bool, first: bool,
                from_trajectory: bool = False) -> None:
        name = self.names.get(call_id, "tool")
        started = self.emit("tool/call", {"call_id": call_id, "name": name}, name)
        self.book.start(call_id, started)
        cause = self.book.finish(call_id)
        content = msg.get("content")
        data: dict[str, Any] = {"call_id": call_id, "output": content, "is_error": False}
        if shared:
            data["shared_output"] = True
        if from_trajectory:
            data["from_trajectory"] = True
        elif first:
            data["swe-agent"] = {k: v for k, v in msg.items() if k not in ("content",)}
        self.emit("tool/result", data, name, cause)


def _same_action(msg: dict[str, Any], step: dict[str, Any]) -> bool:
    a, b = msg.get("action"), step.get("action")
    if isinstance(a, str) and isinstance(b, str):
        return a.strip() == b.strip()
    return a == b


__all__ = ["NAME", "read", "sniff"]
