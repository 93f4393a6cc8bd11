"""The browser helpers wait for the page's DOM, never for time: a page is
ready when *its* ready mark is set (an earlier page's mark does not count),
and a tab is shown once the viewer routed the hash the click set."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("TRAJLOG_BROWSER", "1") == "0":   # before selenium is imported
    pytest.skip("TRAJLOG_BROWSER=0: browser tests off", allow_module_level=True)

import browser
from browser import css, open_page, show, wait

import trajlog
from trajlog.viewer import write_html


def page(where: Path, text: str) -> Path:
    with trajlog.open(str(where / "s.db")) as store:
        s = store.create_session(cwd="/w")
        s.append("user/message", {"content": text})
        s.append("note", {"text": "n"})
        write_html(store, s.id, where / "p.html")
    return where / "p.html"


def chat(d: Any) -> str:
    return str(d.execute_script("return document.getElementById('view-chat').innerText"))


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    return page(tmp_path / "a", "page one"), page(tmp_path / "b", "page two")


def test_the_ready_mark_is_the_named_pages_own(driver, two):
    a, b = two
    open_page(driver, a)
    show(driver, "events")                        # the chat of page a is now empty
    ready = browser._READY
    assert driver.execute_script(ready, a.resolve().as_uri()) == "1"
    # a bare dataset.ready check passes here although page b is not open
    assert driver.execute_script("return document.body.dataset.ready") == "1"
    assert driver.execute_script(ready, b.resolve().as_uri()) is None


def test_a_navigation_that_returned_early_is_waited_for(driver, two):
    """``location.href = ...`` returns before the next page exists (as a
    ``get`` may on a loaded machine): the wait is for the new page's mark."""
    a, b = two
    open_page(driver, a)
    show(driver, "events")
    url = b.resolve().as_uri()
    driver.execute_script("location.href = arguments[0];", url)
    assert wait(driver, lambda d: d.execute_script(browser._READY, url)) == "1"
    assert "page two" in chat(driver)


def test_show_returns_once_the_hash_it_set_is_routed(driver, two):
    a, _ = two
    open_page(driver, a, "view=chat")             # a hash without the session: the click
    show(driver, "chat")                          # sets another, routed later
    assert driver.execute_script("return location.hash").startswith("#session=")
    assert driver.execute_script(
        "return document.body.dataset.routed === location.hash")
    assert "page one" in chat(driver)
    show(driver, "chat")                          # the same hash: no hashchange to wait for
    assert css(driver, "#view-chat .bubble")
