"""Provider requests made from a context build and from a model history,
checked against the providers' own packages, offline: the request is validated
by pydantic over the packages' TypedDict param types (every item consumed, and
the validated value must equal the request: an unknown key is dropped by the
validation, so it shows as a difference), then passed to the real ``openai``
and ``anthropic`` clients, whose httpx transport keeps the serialised request
instead of sending it."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from typing import Any

import httpx
import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")
httpx2 = pytest.importorskip("httpx2")

from anthropic.types import MessageParam, TextBlockParam  # noqa: E402
from openai.types.chat import ChatCompletionMessageParam  # noqa: E402
from openai.types.responses import ResponseInputParam  # noqa: E402

from trajlog import errors, projections  # noqa: E402
from trajlog.projections.context import ContextPolicy, build_context  # noqa: E402
from trajlog.providers import to_anthropic, to_openai_chat, to_openai_responses  # noqa: E402

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJ"
       "RU5ErkJggg==")


def _consumed(value: Any) -> Any:
    """A validated value with pydantic's lazy ``Iterable`` validators run."""
    if isinstance(value, dict):
        return {k: _consumed(v) for k, v in value.items()}
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    if isinstance(value, Iterable):
        return [_consumed(v) for v in value]
    return value


_ADAPTERS: dict[Any, Any] = {}


def conforms(shape: Any, value: Any) -> None:
    """``value`` is of the package's ``shape``, with no key it does not know."""
    # the adapter must outlive the lazy iterators it hands out (pydantic-core
    # panics on an iterator whose adapter was collected)
    adapter = _ADAPTERS.setdefault(shape, pydantic.TypeAdapter(shape))
    validated = _consumed(adapter.validate_python(value))
    assert validated == value


CHAT = list[ChatCompletionMessageParam]
ANTHROPIC_MESSAGES = list[MessageParam]
ANTHROPIC_SYSTEM = list[TextBlockParam]


def check_chat(req: dict[str, Any]) -> None:
    conforms(CHAT, req["messages"])


def check_responses(req: dict[str, Any]) -> None:
    conforms(ResponseInputParam, req["input"])
    assert isinstance(req.get("instructions", ""), str)


def check_anthropic(req: dict[str, Any]) -> None:
    conforms(ANTHROPIC_MESSAGES, req["messages"])
    conforms(ANTHROPIC_SYSTEM, req.get("system", []))
    roles = [m["role"] for m in req["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles   # roles alternate


def paired_openai_chat(messages: list[dict[str, Any]]) -> None:
    """Every call answered by tool messages right after it, every tool
    message answering a call just made (the API's rule)."""
    open_ids: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_ids, m
            open_ids.remove(m["tool_call_id"])
            continue
        assert not open_ids, f"calls {open_ids} not answered before {m}"
        open_ids = [c["id"] for c in m.get("tool_calls", [])]
    assert not open_ids


def paired_anthropic(messages: list[dict[str, Any]]) -> None:
    asked: set[str] = set()
    for m in messages:
        results = {b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"}
        assert results == asked, (asked, m)   # answered in the very next message
        blocks = [b["type"] for b in m["content"]]
        assert blocks[:len(results)] == ["tool_result"] * len(results)   # results first
        asked = {b["id"] for b in m["content"] if b["type"] == "tool_use"}
    assert not asked


def paired_responses(items: list[dict[str, Any]]) -> None:
    called: set[str] = set()
    for it in items:
        if it.get("type") == "function_call":
            called.add(it["call_id"])
        elif it.get("type") == "function_call_output":
            assert it["call_id"] in called
            called.remove(it["call_id"])
    assert not called


def session_with_tools(store):
    """README's first turn with an image, a call left open by a crash and
    closed by load(), a cancelled call, and a tool error."""
    s = store.create_session(cwd="/repo")
    with s.turn():
        s.append("user/message", {"content": [
            {"type": "text", "text": "fix the login bug; the screen:"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]})
        s.append("assistant/message", {"content": "reading it", "tool_calls": [
            {"id": "c1", "name": "read", "arguments": {"path": "login.ts"}}]})
        s.append("tool/call", {"call_id": "c1", "name": "read",
                               "arguments": {"path": "login.ts"}})
        s.append("tool/result", {"call_id": "c1", "output": "if (!ok) allow()"})
        s.append("assistant/message", {"content": "the check is inverted"})
    s.append("task/contract", {"text": "Keep the API stable."}, source="human:alice")
    s.append("user/message", {"content": "run the tests and lint"})
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "c2", "name": "bash", "arguments": '{"cmd": "pytest"}'},
        {"id": "c3", "name": "lint", "arguments": {}},
        {"id": "c4", "name": "bash", "arguments": {"cmd": "false"}}]})
    s.append("tool/call", {"call_id": "c2", "name": "bash", "arguments": {"cmd": "pytest"}})
    s.append("tool/cancel", {"call_id": "c3", "reason": "not needed"})
    s.append("tool/call", {"call_id": "c4", "name": "bash", "arguments": {"cmd": "false"}})
    s.append("tool/result", {"call_id": "c4", "output": "exit 1", "is_error": True})
    return store.load(s.id)   # closes c2 with TOOL_OUTCOME_UNKNOWN


CONVERTERS = {"chat": (to_openai_chat, check_chat),
              "responses": (to_openai_responses, check_responses),
              "anthropic": (to_anthropic, check_anthropic)}


@pytest.mark.parametrize("api", sorted(CONVERTERS))
@pytest.mark.parametrize("view", ["build", "history"])
def test_requests_are_of_the_providers_own_types(store, api, view):
    s = session_with_tools(store)
    source = build_context(s, record=False) if view == "build" else (
        projections.model_history(s))
    convert, check = CONVERTERS[api]
    req = convert(source, system="You are a coding agent.", model="m")
    check(req)
    assert req["model"] == "m"
    {"chat": lambda: paired_openai_chat(req["messages"]),
     "responses": lambda: paired_responses(req["input"]),
     "anthropic": lambda: paired_anthropic(req["messages"])}[api]()
    text = json.dumps(req)
    # every call of the log is answered (c2 by recovery's closer, c3 by the cancel)
    for call in ("c1", "c2", "c3", "c4"):
        assert text.count(f'"{call}"') == 2, call
    assert PNG in text and "exit 1" in text and "You are a coding agent." in text
    if view == "build":   # the governance block and the summary reach the model
        assert "Keep the API stable." in text and "TO CONFIRM" in text


def test_the_shapes_in_detail(store):
    s = session_with_tools(store)
    build = build_context(s, record=False)
    chat = to_openai_chat(build, system_role="developer")["messages"]
    assert [m["role"] for m in chat[:2]] == ["developer", "developer"]
    assert chat[1]["content"].endswith("task/contract: Keep the API stable.")
    call = next(m for m in chat if m.get("tool_calls"))["tool_calls"][0]
    assert call == {"id": "c1", "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"login.ts"}'}}
    assert chat[2]["content"][2] == {"type": "image_url",
                                     "image_url": {"url": f"data:image/png;base64,{PNG}"}}

    resp = to_openai_responses(build)
    assert resp["instructions"].startswith("Context built by policy coding-default")
    governance = next(it for it in build.selected if it.role == "context")
    assert resp["input"][0] == {"role": "developer", "content": governance.text}
    assert {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}",
            "detail": "auto"} in resp["input"][1]["content"]

    ant = to_anthropic(projections.model_history(s))
    assert "system" not in ant
    assert ant["messages"][0]["content"][1] == {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": PNG}}
    uses = [b for m in ant["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert uses[1]["input"] == {"cmd": "pytest"}   # JSON text arguments decoded
    results = {b["tool_use_id"]: b for m in ant["messages"] for b in m["content"]
               if b["type"] == "tool_result"}
    assert results["c4"]["is_error"] is True and results["c3"]["is_error"] is True
    assert "is_error" not in results["c1"]


def test_calls_and_results_the_view_cannot_pair(store):
    """A call with no result is dropped (a provider refuses it unanswered); a
    result whose call the build left out is user text that keeps its
    reference; an assistant turn left empty is dropped."""
    s = store.create_session(cwd="/repo")
    s.append("user/message", {"content": "run the tests"})
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "c1", "name": "bash", "arguments": {}}]})
    s.append("tool/call", {"call_id": "c1", "name": "bash", "arguments": {}})
    s.append("tool/result", {"call_id": "c1", "output": "42 passed"})
    s.append("user/message", {"content": "and deploy"})
    s.append("assistant/message", {"content": "", "tool_calls": [
        {"id": "c2", "name": "deploy", "arguments": {}}]})   # still running
    build = build_context(s, ContextPolicy(recent_messages=2), record=False)
    for convert, check in CONVERTERS.values():
        req = convert(build)
        check(req)
        text = json.dumps(req)
        assert "c2" not in text and '"c1"' not in text
        assert "[TOOL-3] c1: 42 passed" in text
    assert to_openai_chat(build)["messages"][1:] == [
        {"role": "user", "content": "[TOOL-3] c1: 42 passed"},
        {"role": "user", "content": "[USER-4] and deploy"}]
    # history: the open call and its empty assistant turn are left out
    history = to_anthropic(projections.model_history(s))["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[2]["content"][0]["type"] == "tool_result"
    assert history[2]["content"][1] == {"type": "text", "text": "and deploy"}


def test_a_wrong_shape_fails_the_check(store):
    """The checks reject what a provider would: the build's own messages (role
    ``context``, extra keys, no call ids), and a request with a planted
    mistake."""
    s = session_with_tools(store)
    build = build_context(s, record=False)
    with pytest.raises(pydantic.ValidationError):
        check_chat({"messages": build.messages})
    extra_keys = [{k: v for k, v in m.items()} for m in build.messages if m["role"] == "user"]
    with pytest.raises(AssertionError):
        check_chat({"messages": extra_keys})   # "ref" and "seq" are no chat fields
    req = to_openai_chat(build)
    tool = next(m for m in req["messages"] if m["role"] == "tool")
    del tool["tool_call_id"]
    with pytest.raises(pydantic.ValidationError):
        check_chat(req)
    req = to_openai_responses(build)
    req["input"][1]["content"][2].pop("detail")
    with pytest.raises(pydantic.ValidationError):
        check_responses(req)
    req = to_anthropic(build)
    req["messages"].insert(1, dict(req["messages"][0]))
    with pytest.raises(AssertionError):
        check_anthropic(req)   # two user messages in a row
    use = next(b for m in req["messages"] for b in m["content"] if b["type"] == "tool_use")
    use["input"] = '{"path": "login.ts"}'
    with pytest.raises(pydantic.ValidationError):
        check_anthropic(req)


class Captured:
    """An httpx (or httpx2) transport handler that keeps each request and
    answers it locally."""

    def __init__(self, answer: dict[str, Any], http: Any = httpx) -> None:
        self.answer, self.http = answer, http
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        return self.http.Response(200, json=self.answer)


def test_the_real_clients_send_the_requests(store):
    s = session_with_tools(store)
    build = build_context(s, record=False)

    chat = Captured({"id": "r1", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "ok"}}]})
    responses = Captured({"id": "r2", "object": "response", "created_at": 0, "model": "m",
                          "status": "completed", "output": [], "parallel_tool_calls": True,
                          "tool_choice": "auto", "tools": []})
    client = openai.OpenAI(api_key="offline", max_retries=0, http_client=httpx.Client(
        transport=httpx.MockTransport(chat)))
    req = to_openai_chat(build, model="gpt-test")
    answer = client.chat.completions.create(**req)
    assert answer.choices[0].message.content == "ok"
    assert chat.requests[0].url.path.endswith("/chat/completions")
    assert json.loads(chat.requests[0].content) == req

    client = openai.OpenAI(api_key="offline", max_retries=0, http_client=httpx.Client(
        transport=httpx.MockTransport(responses)))
    req = to_openai_responses(build, model="gpt-test")
    client.responses.create(**req)
    assert responses.requests[0].url.path.endswith("/responses")
    assert json.loads(responses.requests[0].content) == req

    messages = Captured({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                         "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                         "stop_sequence": None,
                         "usage": {"input_tokens": 1, "output_tokens": 1}}, httpx2)
    # this SDK runs on httpx2, httpx's successor
    client = anthropic.Anthropic(api_key="offline", max_retries=0, http_client=httpx2.Client(
        transport=httpx2.MockTransport(messages)))
    req = to_anthropic(build, model="claude-test", max_tokens=64)
    answer = client.messages.create(**req)
    assert answer.content[0].text == "ok"
    assert messages.requests[0].url.path.endswith("/v1/messages")
    assert json.loads(messages.requests[0].content) == req


def test_bad_input_is_a_typed_error(store):
    s = session_with_tools(store)
    for convert in (to_openai_chat, to_openai_responses, to_anthropic):
        with pytest.raises(errors.ArgumentTypeError, match="context build or a model history"):
            convert(s)   # a session, not a view
        with pytest.raises(errors.ArgumentTypeError, match="system"):
            convert(projections.model_history(s), system=["not", "text"])
    with pytest.raises(errors.InvalidArgumentError, match="system_role"):
        to_openai_chat(projections.model_history(s), system_role="user")


@pytest.mark.parametrize("api", sorted(CONVERTERS))
def test_an_erased_message_is_not_sent_as_an_empty_one(store, api):
    """Erasure and retention are routine: an erased message (its content
    gone) is left out of the request, never sent as an empty message (which
    the providers refuse), and what is left still pairs and alternates."""
    s = store.create_session()
    with s.turn():
        s.append("user/message", {"content": "the secret"})
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "c1", "name": "run", "arguments": {"x": 1}}]})
        s.append("tool/call", {"call_id": "c1", "name": "run", "arguments": {"x": 1}})
        s.append("tool/result", {"call_id": "c1", "output": "42 passed"})
        s.append("assistant/message", {"content": "done"})
    with s.turn():
        s.append("user/message", {"content": "next"})
    store.erase(s.id, [1, 8], reason="asked")   # the two user messages
    convert, check = CONVERTERS[api]
    req = convert(projections.model_history(store.session(s.id)), model="m")
    check(req)
    items = req["input"] if api == "responses" else req["messages"]
    for m in items:
        if "content" in m and not m.get("tool_calls"):   # (a call needs no text)
            assert m["content"] not in ([], "", None), m
    assert "the secret" not in json.dumps(req) and "next" not in json.dumps(req)
    assert '"c1"' in json.dumps(req)
