"""A batch's items prepared inline (``WriteEngine.prepare_items``'s common
case) give the rows, and raise the errors, that :meth:`WriteEngine.prepare`
gives for each item alone: the same payload bytes, events and flags, the
same refusal for the first item refused."""

from __future__ import annotations

import enum
import math
import uuid
from collections import OrderedDict
from typing import Any

import pytest

import trajlog
from trajlog import errors
from trajlog.api.writer import WriteEngine
from trajlog.redaction import RedactionPolicy


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


def _one_by_one(writer: WriteEngine, items: list[Any]) -> list[Any]:
    rows = []
    for t, d, *env in items:
        time = env[0]["time"] if env else None
        rows.append(writer.prepare(t, d, time, {}))
    return rows


GOOD: list[Any] = [
    ("user/message", {"content": "hi"}, {"time": 5}),
    ("user/message", {"content": "again"}, {"time": 6}),          # a type seen before
    ("assistant/message", {"content": "x", "tool_calls": [
        {"id": "c1", "name": "grep", "arguments": {"q": [1, 2.5, None, True]}}]}, {"time": 7}),
    ("tool/call", {"call_id": "c1", "name": "grep", "arguments": {}}, {"time": 8}),
    ("tool/result", {"call_id": "c1", "output": "ok"}, {"time": 9}),
    ("custom/thing", OrderedDict([("b", 1), ("a", Color.RED)]), {"time": 10}),   # copied plain
    ("custom/thing", None, {"time": 11}),                          # None: {}
    (Name("custom/thing"), {"k": "v"}, {"time": 12}),              # a str subclass
    ["custom/list", {"k": [1, {"n": -(2**63)}]}, {"time": 13}],    # a list item
]


def test_the_inline_rows_are_the_rows_of_prepare(store):
    writer = store._e.writer
    s = store.create_session(cwd="/p")
    expected = _one_by_one(writer, GOOD)   # (every type seen: the batch prepares inline)
    got = writer.prepare_items(s.header, GOOD)
    assert [(r.event, r.payload, r.check, r.pause) for r in got] == [
        (r.event, r.payload, r.check, r.pause) for r in expected]
    assert type(got[5].event.data) is dict and got[5].event.data == {"b": 1, "a": 1}
    assert type(got[7].event.type) is str


@pytest.mark.parametrize("bad", [
    ("custom/thing", {"v": math.nan}, {"time": 1}),
    ("custom/thing", {"v": [{1, 2}]}, {"time": 1}),
    ("custom/thing", {"v": uuid.uuid4()}, {"time": 1}),
    ("custom/thing", {"v": b"bytes"}, {"time": 1}),
    ("custom/thing", {1: "int key"}, {"time": 1}),
    ("custom/thing", {"v": 2**64}, {"time": 1}),
    ("user/message", {"content": 5}, {"time": 1}),
    ("user/message", {"content": "x"}, {"time": True}),
    ("user/message", {"content": "x"}, {"time": -1}),
    ("tool/call", {"name": "no id"}, {"time": 1}),
    ("user/message", {"content": "x"}, {"time": 1, "nope": 1}),
    ("user/message",),
    "not an item",
])
def test_the_first_refusal_is_the_refusal_of_prepare(store, bad):
    writer = store._e.writer
    s = store.create_session(cwd="/p")
    # (the good items first: the bad one's type is one the batch has seen)
    items = [("user/message", {"content": "fine"}, {"time": 1}),
             ("tool/call", {"call_id": "c0", "name": "n"}, {"time": 1}),
             ("custom/thing", {"v": 1}, {"time": 1}), bad]
    with pytest.raises((errors.TrajlogError, TypeError)) as inline:
        writer.prepare_items(s.header, items)
    with pytest.raises((errors.TrajlogError, TypeError)) as alone:
        for item in items:
            writer.prepare_items(s.header, [item])
    assert type(inline.value) is type(alone.value)
    assert str(inline.value) == str(alone.value)


class _Fickle:
    """A value whose ``__class__`` fails once: an error of its own, not a
    JSON rule's (``isinstance`` asks for ``__class__``)."""

    def __init__(self) -> None:
        self.asked = 0

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        self.asked += 1
        if self.asked == 1:
            raise LookupError("the value's own error")
        return _Fickle


def test_an_error_of_the_value_itself_is_raised_as_prepare_raises_it(store):
    writer = store._e.writer
    s = store.create_session(cwd="/p")
    writer.prepare("custom/thing", {"v": 1}, 1, {})   # (a type seen: the batch walks inline)
    alone, inline = _Fickle(), _Fickle()
    with pytest.raises(LookupError, match="own error"):
        writer.prepare("custom/thing", {"v": alone}, 1, {})
    with pytest.raises(LookupError, match="own error"):   # not swallowed, not asked again
        writer.prepare_items(s.header, [("custom/thing", {"v": 1}, {"time": 1}),
                                        ("custom/thing", {"v": inline}, {"time": 1})])
    assert inline.asked == alone.asked == 1


ENVELOPED: list[Any] = [
    ("user/message", {"content": "hi"}, {"time": 5}),
    ("user/message", {"content": "k"}, {"time": 6, "idempotency_key": "k1", "source": "user"}),
    ["custom/list", {"k": [1, {"n": 2}]}],
]


def test_item_by_item_a_batch_gives_the_rows_of_prepare(tmp_path):
    # (a redactor runs: the batch's items go one by one through the same dispatch)
    with trajlog.open(str(tmp_path / "r.db"), redaction=RedactionPolicy()) as store:
        writer = store._e.writer
        s = store.create_session(cwd="/p")
        got = writer.prepare_items(s.header, ENVELOPED)
        expected = [writer.prepare("user/message", {"content": "hi"}, 5, {}),
                    writer.prepare("user/message", {"content": "k"}, 6,
                                   {"idempotency_key": "k1", "source": "user"}),
                    writer.prepare("custom/list", {"k": [1, {"n": 2}]}, got[2].event.time, {})]
        assert [(r.event, r.payload, r.check, r.pause) for r in got] == [
            (r.event, r.payload, r.check, r.pause) for r in expected]
        with pytest.raises(TypeError, match="must be a mapping"):
            writer.prepare_items(s.header, [("user/message", {"content": "x"}, [("time", 1)])])
        with pytest.raises(errors.IdempotencyConflictError):
            writer.prepare_items(s.header, [ENVELOPED[1], ENVELOPED[1]])
