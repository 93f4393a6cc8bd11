"""What a read hands out belongs to nobody else: changing it cannot change the
next read.

Two ways hold that, by kind of value:

* an :class:`~trajlog.events.Event` (append, get, tail, events, approvals, a
  retried append) is a frozen struct whose ``data`` is decoded afresh for each
  event handed out -- a copy the caller owns (mutable, and changing it changes
  nothing in the store or in any other read);
* a projection's view (``model_history``, ``chat``, ``trajectory``, ...) is a
  fresh list of frozen structs whose JSON values come from the engine's cached
  state: they are read-only (``TypeError`` on any change) -- equal to, and
  serialised like, plain dicts and lists; ``copy.deepcopy`` gives a mutable
  plain copy.

Each view is scrambled -- every container reachable in it mutated, where it
lets itself be -- then read again, from the in-memory state and after a
reopen (the saved state): the second read equals the first one's snapshot.
"""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

import trajlog
from trajlog import projections
from trajlog.api.checkpoints import checkpoint, resume
from trajlog.projections.context import build_context

T0 = 1_800_000_000_000


def _plain(value: Any) -> Any:
    """A deep, plain snapshot of a returned value (structs and dataclasses too)."""
    return msgspec.to_builtins(value, builtin_types=(bytes,), order="deterministic",
                               enc_hook=lambda v: repr(v))


def _scramble(value: Any, seen: set[int] | None = None) -> int:
    """Mutate every list and dict reachable in ``value`` that allows it (the
    children first); returns how many mutations were allowed."""
    seen = set() if seen is None else seen
    if id(value) in seen or value is None or isinstance(value, (str, int, float, bytes)):
        return 0
    seen.add(id(value))
    allowed = 0
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            allowed += _scramble(getattr(value, name), seen)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            allowed += _scramble(getattr(value, name), seen)
    elif isinstance(value, dict):
        for v in list(value.values()):
            allowed += _scramble(v, seen)
        for attempt in (lambda: value.__setitem__("scrambled", 1),
                        lambda: [value.__setitem__(k, "scrambled") for k in list(value)],
                        lambda: value.update(more=1), value.clear):
            try:
                attempt()
                allowed += 1
            except TypeError:
                pass
    elif isinstance(value, list):
        for v in list(value):
            allowed += _scramble(v, seen)
        for attempt in (lambda: value.append("scrambled"),
                        lambda: value.__setitem__(slice(None), ["scrambled"]),
                        lambda: value.extend([1]), lambda: value.insert(0, 1),
                        value.reverse, value.clear):
            try:
                attempt()
                allowed += 1
            except TypeError:
                pass
    elif isinstance(value, tuple):
        for v in value:
            allowed += _scramble(v, seen)
    return allowed


def _record(s: trajlog.Session) -> None:
    """A session whose views carry nested JSON values of every kind."""
    s.append("request/header", {"model": "m", "system_prompt": [{"type": "text", "text": "sys"}],
                                "tools": [{"name": "read", "schema": {"type": "object"}}],
                                "parameters": {"temperature": 0, "stop": ["\n"]}})
    s.append("goal/change", {"revision": 1, "goal": {"text": "fix", "steps": ["a", "b"]}},
             source="user")
    s.append("approval/grant", {"tool": "read", "expires_at": T0 * 2, "scope": {"p": [1]}},
             source="human:alice")
    with s.run(model="m", params={"temperature": 0, "stop": ["x"]},
               artifacts={"repo": "git:1"}):
        with s.turn():
            s.append("user/message", {"content": [{"type": "text", "text": "hi"}]})
            with s.step():
                s.append("assistant/message", {
                    "content": [{"type": "text", "text": "reading"}],
                    "reasoning": {"summary": ["look"]},
                    "tool_calls": [{"id": "c1", "name": "read",
                                    "arguments": {"path": "a.py", "lines": [1, 2],
                                                  "opts": {"deep": {"x": 1}}}}],
                    "usage": {"input_tokens": 10, "output_tokens": 2}})
                s.append("tool/call", {"call_id": "c1", "name": "read",
                                       "arguments": {"path": "a.py", "lines": [1, 2]}})
                s.append("tool/result", {"call_id": "c1", "output": {"lines": ["x", "y"]}})
            s.switch_model(old="m", new="m2", reason="cost", context_version={"v": [3]})
            s.append("request/header", {"model": "m2"}, idempotency_key="req-1")
            s.append("request/header", {"model": "m2"}, idempotency_key="req-1")
        build_context(s)
    s.append("compaction/apply", {"op": "surface-replace", "from_seq": 5, "to_seq": 5,
                                  "summary": {"text": "folded", "refs": [3, 4]}})
    s.append("goal/change", {"revision": 2, "goal": {"text": "fix 2", "steps": ["c"]}},
             source="user")
    s.append("context/injection", {"policy": "p", "selected": []}, source="system")
    checkpoint(s, "context-ready", now=T0, plugin_versions={"lint": "1"})
    resume(s, now=T0, plugin_versions={"lint": "1"})


VIEWS: dict[str, Callable[[trajlog.Session], Any]] = {
    "model_history": projections.model_history,
    "chat": projections.chat,
    "trajectory": projections.trajectory,
    "goal": projections.goal,
    "request_config": projections.request_config,
    "status": projections.status,
    "runs": projections.runs,
    "run_tree": projections.run_tree,
    "stages": projections.stages,
    "build_context": lambda s: build_context(s, record=False),
}


@pytest.fixture
def recorded(tmp_path):
    path = str(tmp_path / "values.db")
    with trajlog.open(path) as store:
        s = store.create_session(cwd="/r", metadata={"title": "t", "tags": ["a"]})
        _record(s)
        sid = s.id
    return path, sid


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_view_changed_by_its_caller_reads_back_unchanged(recorded, name):
    path, sid = recorded
    view = VIEWS[name]
    with trajlog.open(path) as store:
        s = store.session(sid)
        first = view(s)
        snapshot = _plain(first)
        _scramble(first)
        assert _plain(view(s)) == snapshot            # from the in-memory state
        projections.checkpoint(s)
    with trajlog.open(path) as store:                 # from the saved state
        s = store.session(sid)
        again = view(s)
        assert _plain(again) == snapshot
        _scramble(again)
        assert _plain(view(s)) == snapshot


@pytest.mark.parametrize("name", ["model_history", "chat", "trajectory"])
def test_the_history_views_json_values_are_read_only_and_still_plain_json(recorded, name):
    """The cached values are handed out read-only: a change is a TypeError at
    the caller's line, never a silent edit of the next caller's view."""
    path, sid = recorded
    with trajlog.open(path) as store:
        s = store.session(sid)
        view = VIEWS[name](s)        # a fresh list (the caller's) of frozen structs
        if name == "model_history":
            msg = next(m for m in view if m.tool_calls)
            arguments = msg.tool_calls[0]["arguments"]
        elif name == "chat":
            arguments = next(n for n in view if n.kind == "tool").arguments
        else:
            arguments = view[0].steps[0].tools[0].arguments
        with pytest.raises(TypeError):
            arguments["path"] = "elsewhere"
        with pytest.raises(TypeError):
            arguments["lines"].append(3)
        assert arguments == {"path": "a.py", "lines": [1, 2],
                             "opts": {"deep": {"x": 1}}} or arguments == {
            "path": "a.py", "lines": [1, 2]}
        assert isinstance(arguments, dict) and isinstance(arguments["lines"], list)
        assert json.loads(json.dumps(arguments)) == arguments
        assert msgspec.json.decode(msgspec.json.encode(arguments)) == arguments
        mine = copy.deepcopy(arguments)
        mine["path"] = "mine"                       # a copy is the caller's to change
        assert type(mine) is dict and arguments["path"] == "a.py"
        assert type(copy.copy(arguments["lines"])) is list
        assert pickle.loads(pickle.dumps(arguments)) == arguments


def test_model_history_tool_call_arguments_are_not_shared_between_calls(recorded):
    path, sid = recorded
    with trajlog.open(path) as store:
        s = store.session(sid)
        first = next(m for m in projections.model_history(s) if m.tool_calls)
        with pytest.raises(TypeError):
            first.tool_calls[0]["arguments"]["path"] = "HACKED"
        with pytest.raises(TypeError):
            first.tool_calls.append({"id": "x"})
        second = next(m for m in projections.model_history(s) if m.tool_calls)
        assert second.tool_calls[0]["arguments"]["path"] == "a.py"


def test_a_view_value_appended_back_is_stored_as_plain_json(recorded):
    path, sid = recorded
    with trajlog.open(path) as store:
        s = store.session(sid)
        msg = next(m for m in projections.model_history(s) if m.tool_calls)
        ev = s.append("note", {"calls": msg.tool_calls})
        assert type(s.get(ev.seq).data["calls"][0]) is dict


EVENT_READS: dict[str, Callable[[trajlog.Session], list[Any]]] = {
    "get": lambda s: [s.get(5)],
    "tail": lambda s: list(s.tail(4)),
    "events": lambda s: list(s.events()),
    "events_lazy": lambda s: list(s.events(lazy=True)),
    "approvals": lambda s: list(s.approvals()),
}


@pytest.mark.parametrize("name", sorted(EVENT_READS))
def test_an_event_s_data_is_the_caller_s_own_copy(recorded, name):
    """An Event is frozen; its ``data`` is decoded afresh for each event
    handed out, so changing it changes no other read."""
    path, sid = recorded
    with trajlog.open(path) as store:
        s = store.session(sid)
        first = EVENT_READS[name](s)
        snapshot = _plain([e.data for e in first])
        for e in first:
            _scramble(e.data)
            with pytest.raises(AttributeError):
                e.data = {}
        assert _plain([e.data for e in EVENT_READS[name](s)]) == snapshot


def test_an_appended_or_retried_event_is_the_caller_s_own_copy(tmp_path):
    with trajlog.open(str(tmp_path / "a.db")) as store:
        s = store.create_session(cwd="/r")
        data = {"model": "m", "tools": [{"name": "read"}]}
        ev = s.append("request/header", data, idempotency_key="k")
        assert ev.data == data and ev.data is not data
        data["tools"].append({"name": "after"})         # the caller's dict, changed after
        ev.data["tools"].append({"name": "changed"})    # the returned copy, changed
        retried = s.append("request/header", {"model": "m", "tools": [{"name": "read"}]},
                           idempotency_key="k")
        assert retried.data == {"model": "m", "tools": [{"name": "read"}]}
        assert s.get(ev.seq).data == retried.data
        batch = s.append_batch([("note", {"x": [1]})])
        batch[0].data["x"].append(2)
        assert s.get(batch[0].seq).data == {"x": [1]}


def test_a_header_s_metadata_is_read_only_all_the_way_down(recorded):
    path, sid = recorded
    with trajlog.open(path) as store:
        for header in (store.session(sid).header,
                       next(h for h in store.sessions() if h.id == sid)):
            with pytest.raises(TypeError):
                header.metadata["title"] = "x"     # type: ignore[index]
            with pytest.raises(TypeError):
                header.metadata["tags"].append("x")
            assert header.metadata == {"title": "t", "tags": ["a"]}
        created = store.create_session(cwd="/r", metadata={"tags": ["b"]})
        with pytest.raises(TypeError):
            created.header.metadata["tags"].append("x")
