"""Inspect AI eval logs: ``.json`` (one ``EvalLog`` document) and ``.eval``
(a zip: ``_journal/start.json`` first, one ``samples/<id>_epoch_<n>.json`` per
finished sample, ``header.json`` last).

One session per sample, keyed ``inspect-ai:<run_id>/<sample id>/<epoch>``
(``task_id`` when the log has no ``run_id``).  Its metadata holds the run's
header (the ``eval`` block, plan, results, stats, status, error) and the
sample's scores, usage, error and limit.

Events, in the order of the sample's ``events`` list, with the sample's
``messages`` placed where they were produced:

* every Inspect event is carried as ``inspect-ai/<event type>`` (``model``,
  ``tool``, ``sandbox``, ``store``, ``state``, ``span_begin`` / ``span_end``,
  ``sample_init``, ``score``, ...), the whole record, with its
  ``attachment://`` references replaced by the sample's attachments and a
  model event's ``input_refs`` (ranges ``[start, end)`` into the sample's
  ``message_pool``) resolved into ``input`` -- so each event reads on its own;
* a model event is followed by the ``assistant/message`` it produced (its
  output message, matched by id), a tool event by the ``tool/call`` and
  ``tool/result`` of the ``ChatMessageTool`` answering it (matched by
  ``tool_call_id``); messages no event claims (the sample's input, messages
  a solver inserted) come in their own order before the next claimed one;
* a system message is carried as ``inspect-ai/system_message`` (trajlog has no
  system role in the model history; the text is kept whole);
* a tool message answering no requested call, or a reused call id, is carried
  as ``inspect-ai/tool_message`` (with a warning);
* the sample is one turn (``turn/start`` .. ``turn/end``; interrupted when the
  sample has an ``error`` or hit a ``limit``); ``inspect-ai/sample_end``
  holds every sample field not mapped above (scores, model_usage, output,
  store, error, limit, ...) and the run's status (``cancelled``!), error and
  reductions; the header holds none of them (no payload text in a header).

An ``.eval`` without ``header.json`` (a run that crashed or is still running)
imports its finished samples from the journal, with a warning.  A truncated
zip (no central directory) raises :class:`ImportFormatError` with the offset
of its first entry that is not whole (or where the central directory should
begin) and the number of whole entries before it; a damaged member, with the
member's name and offset.  Members that hold no sample (``summaries.json``,
``_journal/summaries/*``: copies of the samples' own scores) are noted as
skipped; ``reductions.json`` goes into each ``sample_end`` (``eval_reductions``).
"""

from __future__ import annotations

import os
import re
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import ImportFormatError
from .. import bounded
from ..mapping import (
    CallBook,
    MappedEvent,
    MappedSession,
    Notes,
    epoch_ms,
    json_document,
    uuid_or_stable,
)

NAME = "inspect-ai"

_ZIP_MAGIC = b"PK\x03\x04"
_SAMPLE = re.compile(r"^samples/(.+)_epoch_(\d+)\.json$")
_TYPE_OK = re.compile(r"[a-z0-9_.-]+")
_ATTACHMENT = "attachment://"
#: sample fields mapped to events (everything else goes to sample_end)
_MAPPED_FIELDS = frozenset({"messages", "events", "attachments", "message_pool"})
_EVENT_SOURCES = {"model": "model", "input": "user", "approval": "user"}


def sniff(path: Path) -> bool:
    """An Inspect ``.eval`` zip or ``.json`` EvalLog, from the name and the
    first bytes."""
    if path.is_dir():
        return False
    try:
        head = bounded.head(path, 4096)
    except OSError:
        return False
    if head[:4] == _ZIP_MAGIC:
        return path.suffix.lower() == ".eval" or head[30:49] == b"_journal/start.json"
    if path.suffix.lower() != ".json" or not head.lstrip().startswith(b"{"):
        return False
    return (re.search(rb'"eval"\s*:\s*\{', head) is not None and b'"status"' in head
            and b'"version"' in head)


def read(path: Path, notes: Notes) -> Iterator[MappedSession]:
    """One session per sample of the log at ``path`` (see the module docstring)."""
    zipped = bounded.head(path, 4) == _ZIP_MAGIC
    if zipped:
        yield from _read_eval(path, notes)
    else:
        yield from _read_json(path, notes)


# ---------------------------------------------------------------------------
# The two containers

def _read_json(path: Path, notes: Notes) -> Iterator[MappedSession]:
    name = os.fspath(path)
    doc = json_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("eval"), dict):
        raise ImportFormatError(name, "not an Inspect eval log (no 'eval' object)")
    samples = doc.get("samples")
    if samples is None:
        notes.warn(f"{name}: the log holds no samples (status {doc.get('status')!r})")
        samples = []
    if not isinstance(samples, list):
        raise ImportFormatError(name, "'samples' is not a list")
    header = {k: v for k, v in doc.items() if k != "samples"}
    header["_from"] = "log"
    for i, sample in enumerate(samples):
        yield _session(sample, header, path, f"samples[{i}]", notes)


def _read_eval(path: Path, notes: Notes) -> Iterator[MappedSession]:
    name = os.fspath(path)
    try:
        zf = bounded.open_zip(path)
    except (zipfile.BadZipFile, OSError) as exc:
        offset, valid = _zip_damage(path)
        raise ImportFormatError(name, f"not a complete zip archive ({exc}): the data "
                                f"ends or breaks at byte {offset}", offset=offset,
                                valid=valid) from None
    with zf:
        infos = zf.infolist()
        members = {i.filename: i for i in infos}
        if "header.json" in members:
            header = _member_json(zf, members["header.json"], path)
            header["_from"] = "header.json"
        elif "_journal/start.json" in members:
            header = _member_json(zf, members["_journal/start.json"], path)
            header["_from"] = "_journal/start.json"
            notes.warn(f"{name}: no header.json (the run crashed or is still running): "
                       "importing its finished samples from the journal")
        else:
            raise ImportFormatError(name, "an .eval zip with neither header.json nor "
                                    "_journal/start.json")
        if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
            raise ImportFormatError(f"{name}!{header.get('_from')}", "no 'eval' object")
        if "reductions.json" in members:
            header["reductions"] = _member_json(zf, members["reductions.json"], path)
        samples = []
        for info in infos:
            if _SAMPLE.match(info.filename):
                samples.append(info)
            elif info.filename not in ("header.json", "_journal/start.json",
                                       "reductions.json") and not info.is_dir():
                what = ("per-sample summaries, derived from the samples themselves"
                        if info.filename == "summaries.json"
                        or info.filename.startswith("_journal/summaries/")
                        else "a member this importer does not know")
                notes.skip(f"{name}!{info.filename}", None, info.header_offset,
                           info.filename.rsplit("/", 1)[-1], what)
        for info in samples:
            sample = _member_json(zf, info, path)
            yield _session(sample, header, path, info.filename, notes)


def _member_json(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> Any:
    where = f"{os.fspath(path)}!{info.filename}"
    return json_document(where, bounded.read_member(zf, info, where))


def _zip_damage(path: Path) -> tuple[int, int]:
    """Where a zip without a readable central directory breaks: the offset of
    the first local entry that is not whole (or of the end of its data), and
    how many entries before it are whole."""
    offset, whole = 0, 0
    with bounded.open_regular(path) as f:   # (each local header read, not the file)
        total = os.fstat(f.fileno()).st_size
        while True:
            f.seek(offset)
            head = f.read(30)
            if len(head) < 30 or head[:4] != _ZIP_MAGIC:
                break
            flags, size, nlen, xlen = (struct.unpack_from("<H", head, 6)[0],
                                       struct.unpack_from("<I", head, 18)[0],
                                       *struct.unpack_from("<HH", head, 26))
            end = offset + 30 + nlen + xlen + size
            if flags & 0x08 or end > total:  # sizes in a trailing descriptor, or cut
                break
            offset, whole = end, whole + 1
    return offset, whole


# ---------------------------------------------------------------------------
# One sample

def _session(sample: Any, header: dict[str, Any], path: Path, where: str,
             notes: Notes) -> MappedSession:
    name = os.fspath(path)
    if not isinstance(sample, dict):
        raise ImportFormatError(name, f"{where}: a sample is not an object")
    for field in ("messages", "events"):
        if not isinstance(sample.get(field, []), list):
            raise ImportFormatError(name, f"{where}: '{field}' is not a list")
    ev: dict[str, Any] = header["eval"]
    run = ev.get("run_id") or ev.get("task_id")
    if not run:
        run = "unknown"
        notes.warn(f"{name}: the eval has neither run_id nor task_id")
    sample_id, epoch = sample.get("id"), sample.get("epoch", 1)
    key = f"{NAME}:{run}/{sample_id}/{epoch}"
    events = sample.get("events") or []
    first = next((e.get("timestamp") for e in events if isinstance(e, dict)
                  and e.get("timestamp")), None)
    created = epoch_ms(first) or epoch_ms(ev.get("created"))
    status = header.get("status")
    solvers: list[str] = [s["solver"] for s in (header.get("plan") or {}).get("steps") or []
                          if isinstance(s, dict) and isinstance(s.get("solver"), str)]
    agent = ev.get("solver") if isinstance(ev.get("solver"), str) else (
        ",".join(solvers) or None)
    meta = {
        "format": NAME, "file": path.name, "member": where if header["_from"] != "log"
        else None, "header": header["_from"], "version": header.get("version"),
        "status": status, "task": ev.get("task"), "task_id": ev.get("task_id"),
        "run_id": ev.get("run_id"), "eval_id": ev.get("eval_id"),
        "created": ev.get("created"), "model": ev.get("model"),
        "sample_id": sample_id, "epoch": epoch, "sample_uuid": sample.get("uuid"),
        # the sample's scores, usage, error and limit, the run's error and the
        # reductions hold model output and tracebacks: they stay in the
        # sample_end event, where redaction and erasure reach them, never here
        "eval": ev, "plan": header.get("plan"), "results": header.get("results"),
        "stats": header.get("stats"), "invalidated": header.get("invalidated"),
    }
    return MappedSession(
        key=key, events=_events(sample, header, name, where, notes),
        session_id=uuid_or_stable(sample.get("uuid"), key), created_ms=created,
        agent_preset=agent, metadata={"import": {k: v for k, v in meta.items()
                                                 if v is not None}})


class _Resolver:
    """Replaces ``attachment://<hash>`` strings by the sample's attachments and
    a model event's ``input_refs`` by the ``message_pool`` messages they name;
    remembers what was used (the rest is kept in ``sample_end``)."""

    def __init__(self, sample: dict[str, Any]) -> None:
        att = sample.get("attachments")
        pool = sample.get("message_pool")
        self.attachments: dict[str, Any] = att if isinstance(att, dict) else {}
        self.pool: list[Any] = pool if isinstance(pool, list) else []
        self.used: set[str] = set()
        self.pool_used: set[int] = set()
        self.missing: set[str] = set()
        self.bad_refs: list[Any] = []

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            if v.startswith(_ATTACHMENT):
                h = v[len(_ATTACHMENT):]
                if h in self.attachments:
                    self.used.add(h)
                    return self.attachments[h]
                self.missing.add(h)
            return v
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v

    def event(self, e: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self.value(e)
        refs = e.get("input_refs")
        if e.get("event") == "model" and isinstance(refs, list):
            resolved: list[Any] = []
            for r in refs:
                if (isinstance(r, list) and len(r) == 2 and all(
                        isinstance(x, int) and not isinstance(x, bool) for x in r)
                        and 0 <= r[0] <= r[1] <= len(self.pool)):
                    resolved.extend(self.value(self.pool[r[0]:r[1]]))
                    self.pool_used.update(range(r[0], r[1]))
                else:
                    self.bad_refs.append(r)
            if out.get("input"):
                out["input_inline"] = out["input"]
            out["input"] = resolved
            out["input_resolved_from_pool"] = True
        return out


def _events(sample: dict[str, Any], header: dict[str, Any], name: str, where: str,
            notes: Notes) -> Iterator[MappedEvent]:
    """The sample's events and messages, interleaved (see the module docstring)."""
    res = _Resolver(sample)
    messages: list[Any] = sample.get("messages") or []
    by_id: dict[str, int] = {}
    by_call: dict[str, int] = {}
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise ImportFormatError(name, f"{where}: messages[{i}] is not an object")
        if isinstance(msg.get("id"), str):
            by_id.setdefault(msg["id"], i)
        if msg.get("role") == "tool" and isinstance(msg.get("tool_call_id"), str):
            by_call.setdefault(msg["tool_call_id"], i)
    m = _Messages(messages, res, notes, f"{name} {where}")
    yield m.counted(MappedEvent("turn/start", {}, None, "system"))
    for j, e in enumerate(sample.get("events") or []):
        if not isinstance(e, dict):
            raise ImportFormatError(name, f"{where}: events[{j}] is not an object")
        kind = e.get("event")
        etype = _event_type(kind, notes, f"{name} {where} events[{j}]")
        data = res.event(e)
        time = epoch_ms(e.get("timestamp"))
        target: int | None = None
        if kind == "model":
            choices = (e.get("output") or {}).get("choices") if isinstance(
                e.get("output"), dict) else None
            out = choices[0].get("message") if isinstance(choices, list) and choices and \
                isinstance(choices[0], dict) else None
            if isinstance(out, dict) and isinstance(out.get("id"), str):
                target = by_id.get(out["id"])
        elif kind == "tool" and isinstance(e.get("id"), str):
            target = by_call.get(e["id"])
        if target is not None and target < m.cursor:
            target = None  # already placed (a message two events claim)
        if target is not None:
            yield from m.upto(target)
        yield m.counted(MappedEvent(etype, data, time, _event_source(kind, e)))
        if target is not None:
            yield from m.one(target, e)
    yield from m.upto(len(messages))
    if res.missing:
        notes.warn(f"{name} {where}: {len(res.missing)} attachment reference(s) with no "
                   "attachment, kept as written")
    if res.bad_refs:
        notes.warn(f"{name} {where}: input_refs outside the message pool, kept: "
                   f"{res.bad_refs[:3]}")
    end = {k: v for k, v in sample.items() if k not in _MAPPED_FIELDS}
    end["eval_status"] = header.get("status")
    if header.get("error") is not None:
        end["eval_error"] = header.get("error")
    if header.get("reductions") is not None:
        end["eval_reductions"] = header.get("reductions")
    unused = {k: v for k, v in res.attachments.items() if k not in res.used}
    if unused:
        end["unreferenced_attachments"] = unused
    pool_left = {str(i): p for i, p in enumerate(res.pool) if i not in res.pool_used}
    if pool_left:
        end["unreferenced_message_pool"] = pool_left
    yield MappedEvent(f"{NAME}/sample_end", end, None, "system")
    interrupted = bool(sample.get("error") or sample.get("limit"))
    yield MappedEvent("turn/end", {"interrupted": interrupted}, None, "system")


def _event_type(kind: Any, notes: Notes, where: str) -> str:
    if isinstance(kind, str) and _TYPE_OK.fullmatch(kind):
        return f"{NAME}/{kind}"
    clean = re.sub(r"[^a-z0-9_.-]+", "_", str(kind).lower()).strip("_") or "event"
    notes.warn(f"{where}: event type {kind!r} carried as {NAME}/{clean}")
    return f"{NAME}/{clean}"


def _event_source(kind: Any, e: dict[str, Any]) -> str:
    if kind == "tool" and isinstance(e.get("function"), str):
        return str(e["function"])
    return _EVENT_SOURCES.get(kind, "system") if isinstance(kind, str) else "system"


class _Messages:
    """The sample's messages, mapped in order; ``cursor`` is the next one not
    yet emitted, ``count`` the number of events emitted so far (the index of
    the next one, for causes and the call book)."""

    def __init__(self, messages: list[dict[str, Any]], res: _Resolver, notes: Notes,
                 where: str) -> None:
        self.messages, self.res, self.notes, self.where = messages, res, notes, where
        self.cursor = 0
        self.count = 0
        self.book = CallBook()
        self.calls: dict[str, dict[str, Any]] = {}   # requested id -> its tool call

    def counted(self, ev: MappedEvent) -> MappedEvent:
        self.count += 1
        return ev

    def upto(self, stop: int) -> Iterator[MappedEvent]:
        while self.cursor < stop:
            yield from self.one(self.cursor, None)

    def one(self, i: int, event: dict[str, Any] | None) -> Iterator[MappedEvent]:
        self.cursor = i + 1
        for ev in self._map(self.res.value(self.messages[i]), i, event):
            yield self.counted(ev)

    def _map(self, m: dict[str, Any], i: int, event: dict[str, Any] | None,
             ) -> Iterator[MappedEvent]:
        role = m.get("role")
        content = m.get("content")
        rest = {k: v for k, v in m.items() if k not in ("role", "content", "tool_calls")}
        where = f"{self.where} messages[{i}]"
        begun = epoch_ms(event.get("timestamp")) if event else None
        done = (epoch_ms(event.get("completed")) or begun) if event else None
        if role == "system":
            yield MappedEvent(f"{NAME}/system_message", {"content": content, "inspect": rest},
                              done, "system")
        elif role == "user":
            if not isinstance(content, (str, list)):
                raise ImportFormatError(where, "a user message whose content is neither "
                                        "text nor a list of parts")
            yield MappedEvent("user/message", {"content": content, "inspect": rest},
                              done, "user")
        elif role == "assistant":
            yield self._assistant(m, content, rest, i, event, begun, done, where)
        elif role == "tool":
            yield from self._tool(m, content, rest, i, event, begun, done, where)
        else:
            self.notes.warn(f"{where}: a message with role {role!r}, carried as "
                            f"{NAME}/message")
            yield MappedEvent(f"{NAME}/message", dict(m), done, "system")

    def _assistant(self, m: dict[str, Any], content: Any, rest: dict[str, Any], i: int,
                   event: dict[str, Any] | None, begun: int | None, done: int | None,
                   where: str) -> MappedEvent:
        if content is not None and not isinstance(content, (str, list)):
            raise ImportFormatError(where, "an assistant message whose content is neither "
                                    "text nor a list of parts")
        raw = m.get("tool_calls") or []
        if not isinstance(raw, list):
            raise ImportFormatError(where, "'tool_calls' is not a list")
        calls, refused = [], []
        for c in raw:
            cid = c.get("id") if isinstance(c, dict) else None
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(cid, str) or not isinstance(fn, str):
                raise ImportFormatError(where, "a tool call without a string id and function")
            if not self.book.request(cid, self.count):
                refused.append(c)
                self.notes.warn(f"{where}: tool call id {cid!r} was already used in this "
                                "sample; kept in refused_tool_calls, its result is carried "
                                f"as {NAME}/tool_message")
                continue
            call = {"id": cid, "name": fn, "arguments": c.get("arguments"),
                    **{k: v for k, v in c.items() if k not in ("id", "function", "arguments")}}
            self.calls[cid] = call
            calls.append(call)
        data: dict[str, Any] = {"content": content, "tool_calls": calls, "inspect": rest}
        if isinstance(m.get("model"), str):
            data["model"] = m["model"]
        parts: list[Any] = content if isinstance(content, list) else []
        reasoning = [p.get("reasoning") for p in parts
                     if isinstance(p, dict) and p.get("type") == "reasoning"]
        if reasoning:
            data["reasoning"] = reasoning
        if refused:
            data["refused_tool_calls"] = refused
        if event is not None:
            out = event.get("output")
            if isinstance(out, dict) and isinstance(out.get("usage"), dict):
                data["usage"] = out["usage"]
            if begun is not None and done is not None and done >= begun:
                data["latency_ms"] = done - begun
            if isinstance(event.get("model"), str):
                data.setdefault("model", event["model"])
        return MappedEvent("assistant/message", data, done, "model")

    def _tool(self, m: dict[str, Any], content: Any, rest: dict[str, Any], i: int,
              event: dict[str, Any] | None, begun: int | None, done: int | None,
              where: str) -> Iterator[MappedEvent]:
        cid = m.get("tool_call_id")
        name = m.get("function") if isinstance(m.get("function"), str) else None
        if not isinstance(cid, str) or not self.book.start(cid, self.count):
            self.notes.warn(f"{where}: a tool message for call {cid!r}, which no assistant "
                            f"message requested (or that was answered before); carried as "
                            f"{NAME}/tool_message")
            yield MappedEvent(f"{NAME}/tool_message", dict(m), done, name or "system")
            return
        call = self.calls.get(cid, {})
        name = name or call.get("name") or "tool"
        yield MappedEvent("tool/call", {"call_id": cid, "name": name,
                                        "arguments": call.get("arguments")}, begun, name)
        cause = self.book.finish(cid)
        error = m.get("error")
        yield MappedEvent("tool/result", {"call_id": cid, "output": content,
                                          "is_error": error is not None, "name": name,
                                          "inspect": rest}, done, name, cause)


__all__ = ["NAME", "read", "sniff"]
