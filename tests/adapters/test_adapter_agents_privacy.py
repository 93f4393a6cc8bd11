"""The OpenAI Agents SDK adapter under a redaction policy and under erasure:
a function call's ``arguments`` (JSON in a string) stay JSON when a secret in
them is masked, and an erased call or output leaves a history the SDK's own
input preparation takes, every output after its call."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.models.chatcmpl_converter import Converter
from agents.run_internal.session_persistence import prepare_input_with_session
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

import trajlog
from trajlog import projections
from trajlog.adapters.openai_agents import TrajlogSession
from trajlog.redaction import RedactionPolicy

AWS = "AKIA" + "Q4ZJ7W2XK9LM3NPR"
PASSWORD = "Zq8xWv3Lk9"
ITEM = TypeAdapter(ResponseInputItemParam)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def items(arguments: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "log in"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": arguments,
         "id": "fc_1", "status": "completed"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "message", "role": "assistant", "id": "m1", "status": "completed",
         "content": [{"type": "output_text", "text": "Done.", "annotations": []}]},
    ]


def test_function_call_arguments_stay_json_when_masked(tmp_path: Path) -> None:
    arguments = json.dumps({"cmd": f'login password={PASSWORD}"x', "env": {"KEY": AWS}})
    with trajlog.open(str(tmp_path / "a.db"), redaction=RedactionPolicy()) as store:
        s = TrajlogSession("conv", store)
        run(s.add_items(items(arguments)))
        got = run(s.get_items())
        call = next(i for i in got if i.get("type") == "function_call")
        stored = json.loads(call["arguments"])
        assert stored == {"cmd": 'login password=[REDACTED:credential]"x',
                          "env": {"KEY": "[REDACTED:aws_access_key]"}}
        assert PASSWORD not in json.dumps(got) and AWS not in json.dumps(got)
        s.close()


def _well_formed(got: list[Any], chat: bool = True) -> None:
    """Every output follows its call; the SDK's item types take every item;
    the Chat Completions conversion pairs every tool message (``chat``: the
    items are of types it converts)."""
    seen: set[str] = set()
    for item in got:
        ITEM.validate_python(item)
        if str(item.get("type")).endswith("_output"):
            assert item["call_id"] in seen, got
        elif isinstance(item.get("call_id"), str):
            seen.add(item["call_id"])
    if not chat:
        return
    messages = Converter.items_to_messages(got)
    asked = {c["id"] for m in messages if m["role"] == "assistant"
             for c in m.get("tool_calls") or []}
    assert all(m["tool_call_id"] in asked for m in messages if m["role"] == "tool")


def _erase(tmp_path: Path, erased_type: str) -> tuple[list[Any], Any, TrajlogSession]:
    store = trajlog.open(str(tmp_path / "e.db"))
    s = TrajlogSession("conv", store)
    run(s.add_items(items(json.dumps({"cmd": f"login {PASSWORD}"}))))
    log = s.trajlog_session()
    assert log is not None
    target = next(ev.seq for ev in log.events() if ev.type == erased_type)
    store.erase(log.id, [target], reason="asked")
    return run(s.get_items()), store, s


def test_erasing_the_call_keeps_a_placeholder_call(tmp_path: Path) -> None:
    got, store, s = _erase(tmp_path, "assistant/message")
    try:
        assert [i.get("type") for i in got] == [None, "function_call", "function_call_output",
                                                "message"]
        assert got[1] == {"type": "function_call", "call_id": "c1", "name": "shell",
                          "arguments": "{}"}
        assert PASSWORD not in json.dumps(got)
        _well_formed(got)
        prepared, _ = run(prepare_input_with_session("next", s, None))
        assert isinstance(prepared, list)
        _well_formed(prepared)
        assert [i.get("type") for i in prepared][1:3] == ["function_call",
                                                          "function_call_output"]
        log = s.trajlog_session()
        assert log is not None
        history = projections.model_history(log)
        asked = {c["id"] for m in history if m.role == "assistant" for c in m.tool_calls or []}
        assert all(m.tool_call_id in asked for m in history if m.role == "tool")
    finally:
        s.close()
        store.close()


def test_erasing_the_output_keeps_a_placeholder_output(tmp_path: Path) -> None:
    got, store, s = _erase(tmp_path, "tool/result")
    try:
        assert got[2] == {"type": "function_call_output", "call_id": "c1",
                          "output": "[erased]"}
        _well_formed(got)
        prepared, _ = run(prepare_input_with_session("next", s, None))
        assert isinstance(prepared, list)
        # the SDK keeps the call: it has its output
        assert [i.get("type") for i in prepared][1:3] == ["function_call",
                                                          "function_call_output"]
        _well_formed(prepared)
    finally:
        s.close()
        store.close()


def test_erasing_a_call_of_another_type_drops_its_output(tmp_path: Path) -> None:
    # a custom tool's call and output are items trajlog has no type for: an
    # erasure keeps nothing of them, so the output would answer no call
    with trajlog.open(str(tmp_path / "c.db")) as store:
        s = TrajlogSession("conv", store)
        run(s.add_items([
            {"role": "user", "content": "go"},
            {"type": "custom_tool_call", "call_id": "k1", "name": "patch", "input": PASSWORD},
            {"type": "custom_tool_call_output", "call_id": "k1", "output": "applied"},
            {"type": "custom_tool_call", "call_id": "k2", "name": "patch", "input": "b"},
            {"type": "custom_tool_call_output", "call_id": "k2", "output": "applied"},
        ]))
        log = s.trajlog_session()
        assert log is not None
        first = next(ev.seq for ev in log.events() if ev.type == "agents/item")
        store.erase(log.id, [first], reason="asked")
        got = run(s.get_items())
        assert [i.get("call_id") for i in got] == [None, "k2", "k2"]
        _well_formed(got, chat=False)
        prepared, _ = run(prepare_input_with_session("next", s, None))
        assert isinstance(prepared, list) and [i.get("call_id") for i in prepared][:3] == [
            None, "k2", "k2"]
        _well_formed(prepared, chat=False)
        s.close()
