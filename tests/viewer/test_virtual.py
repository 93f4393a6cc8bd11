"""A 20,000-event session: the events list and the chat keep a bounded
number of rows in the DOM, and scrolling to the end shows the last event."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("TRAJLOG_BROWSER", "1") == "0":   # before selenium is imported
    pytest.skip("TRAJLOG_BROWSER=0: browser tests off", allow_module_level=True)

from browser import open_page
from selenium.webdriver.support.ui import WebDriverWait

import trajlog
from trajlog.viewer import write_html

N_TURNS = 2000      # 10 events a turn


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """(page, last seq, chat items) of a session of 20,000 events."""
    root = tmp_path_factory.mktemp("virtual")
    with trajlog.open(str(root / "big.db")) as store:
        s = store.create_session(cwd="/big")
        items: list[Any] = []
        for i in range(N_TURNS):
            call = f"c{i}"
            items += [("turn/start", {}),
                      ("user/message", {"content": f"question {i}"}),
                      ("step/start", {}),
                      ("assistant/message", {"content": f"answer {i}", "tool_calls": [
                          {"id": call, "name": "grep", "arguments": {"q": i}}]}),
                      ("tool/call", {"call_id": call, "name": "grep", "arguments": {"q": i}}),
                      ("tool/result", {"call_id": call, "output": f"hit {i}\n" * (i % 50),
                                       "is_error": i % 7 == 0}),
                      ("step/end", {}),
                      ("assistant/message", {"content": f"done {i}", "tool_calls": []}),
                      ("note", {"text": "x" * (i % 300)}),
                      ("turn/end", {"interrupted": False})]
        for lo in range(0, len(items), 5000):
            s.append_batch(items[lo:lo + 5000])
        write_html(store, s.id, root / "big.html")
        return root / "big.html", s.last_seq, N_TURNS * 4


_END = """
const host = document.getElementById('view-' + arguments[0]);
host.scrollTop = host.scrollHeight;
window.trajlogViewer.paint();
host.scrollTop = host.scrollHeight;
window.trajlogViewer.paint();
return [...host.querySelectorAll(arguments[1])].map((r) => +r.dataset.seq);
"""


def test_events_list_is_virtualised_and_reaches_the_last_seq(driver, big):
    page, last, _ = big
    open_page(driver, page, "view=events")
    rows = driver.execute_script("return document.querySelectorAll('#view-events .ev-row')"
                                 ".length")
    assert 10 <= rows <= 200
    assert driver.execute_script("return document.getElementById('search-count')"
                                 ".textContent") == f"{last + 1:,} items"
    WebDriverWait(driver, 10).until(lambda d: last in d.execute_script(
        _END, "events", ".ev-row"))
    seqs = driver.execute_script(_END, "events", ".ev-row")
    assert max(seqs) == last and min(seqs) > last - 200 and len(seqs) <= 200


def test_chat_is_virtualised_and_reaches_the_last_bubble(driver, big):
    page, last, chat_items = big
    open_page(driver, page, "view=chat")
    assert driver.execute_script(
        "return document.querySelectorAll('#view-chat .chat-item').length") <= 100
    # the last chat item is the closing assistant message of the last turn
    want = last - 2
    WebDriverWait(driver, 10).until(lambda d: want in d.execute_script(
        _END, "chat", ".bubble, .tool-card"))
    assert driver.execute_script(
        "return document.querySelectorAll('#view-chat .chat-item').length") <= 100
    assert len(driver.execute_script("return window.trajlogViewer.doc.sessions[0].chat")) == (
        chat_items)
