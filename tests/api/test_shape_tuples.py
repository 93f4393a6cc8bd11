"""A tuple in a known type's shaped fields is a JSON array, as everywhere else.

The encoder stores a tuple as a JSON array (it reads back as a list) and a tuple
subclass is copied to a list before the shape check; a plain tuple in
``content`` or ``tool_calls`` was refused by the shape check alone.
"""

from __future__ import annotations

from typing import Any

import pytest

import trajlog


@pytest.fixture
def session() -> Any:
    with trajlog.open(":memory:") as store:
        yield store.create_session()


@pytest.mark.parametrize(("type_", "data", "stored"), [
    ("assistant/message", {"content": ()}, {"content": []}),
    ("assistant/message", {"content": ({"type": "text", "text": "hi"},)},
     {"content": [{"type": "text", "text": "hi"}]}),
    ("user/message", {"content": ("a", "b")}, {"content": ["a", "b"]}),
    ("assistant/message", {"content": "x", "tool_calls": ({"id": "c1", "name": "read"},)},
     {"content": "x", "tool_calls": [{"id": "c1", "name": "read"}]}),
])
def test_a_tuple_is_taken_as_a_list(session: Any, type_: str, data: dict[str, Any],
                                    stored: dict[str, Any]) -> None:
    ev = session.append(type_, data)
    assert ev.data == stored
    assert [e.data for e in session.events()] == [stored]


@pytest.mark.parametrize(("type_", "data"), [
    ("assistant/message", {"content": 3}),
    ("user/message", {"content": {"a": 1}}),
    ("assistant/message", {"tool_calls": {"id": "c1", "name": "read"}}),
    ("assistant/message", {"tool_calls": (("c1", "read"),)}),
])
def test_what_is_not_a_list_is_still_refused(session: Any, type_: str,
                                             data: dict[str, Any]) -> None:
    with pytest.raises(trajlog.errors.ValidationError):
        session.append(type_, data)
    assert session.last_seq == -1
