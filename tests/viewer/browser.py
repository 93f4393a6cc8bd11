"""Headless Chromium from Debian's packages, driven by selenium (never a
downloaded browser or driver: both paths are given, so Selenium Manager does
not run)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def available() -> bool:
    """Whether the packaged browser and driver are installed."""
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


def make_driver(width: int = 1280, height: int = 860) -> Any:
    """A headless Chromium that records its network log."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--hide-scrollbars",
                "--disable-background-networking", "--no-first-run",
                "--disable-component-update", "--disable-sync"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    return driver


def requested_urls(driver: Any) -> list[str]:
    """Every URL the page asked for since the log was last read
    (``Network.requestWillBeSent`` in the performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


# Every wait below is for a DOM condition, never a pause: the bound only
# limits how long a failing test waits (a loaded machine may be slow).
WAIT_S = 60.0

# The page's own mark that it started (render done, first blocks decoded) --
# of *this* document: an earlier page's mark would satisfy a bare check of
# ``dataset.ready`` if ``get`` returned before the navigation started.
_READY = ("return location.href.split('#')[0] === arguments[0] && document.body"
          " && document.body.dataset.ready || null")
# Records the hash each hashchange was routed for (a listener added after the
# viewer's own runs after it: once it ran, the view of that hash is drawn).
_ROUTED = """if (!window.trajlogTestRouted) { window.trajlogTestRouted = true;
  window.addEventListener('hashchange', () => { document.body.dataset.routed = location.hash; }); }
return location.hash;"""
# The hash is routed: unchanged since ``arguments[0]`` (no hashchange is coming),
# or the last hashchange was for it.
_ROUTED_NOW = ("const h = location.hash;"
               " return h === arguments[0] || document.body.dataset.routed === h;")


def wait(d: Any, condition: Any, timeout: float = WAIT_S) -> Any:
    """``condition(d)`` once it is truthy (stale or missing elements are retried)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(d, timeout, poll_frequency=0.05, ignored_exceptions=(
        NoSuchElementException, StaleElementReferenceException)).until(condition)


def until(d: Any, read: Any, ok: Any = bool, timeout: float = WAIT_S) -> Any:
    """``read(d)`` once ``ok`` holds of it -- or, at the bound, the last value
    read, so that the caller's assertion shows what the page had."""
    from selenium.common.exceptions import TimeoutException

    last: list[Any] = [None]

    def check(x: Any) -> bool:
        last[0] = read(x)
        return bool(ok(last[0]))

    with contextlib.suppress(TimeoutException):
        wait(d, check, timeout)
    return last[0]


def open_page(driver: Any, path: Path, fragment: str = "", timeout: float = WAIT_S) -> None:
    """Load ``path`` as a new document and wait for its ready mark.

    It goes through about:blank first: a page already showing ``path``
    would otherwise only follow the new fragment (no reload, no new ready
    mark), and an old page's mark must never pass for the new one's."""
    url = path.resolve().as_uri()
    driver.get("about:blank")
    driver.get(url + (f"#{fragment}" if fragment else ""))
    state = wait(driver, lambda d: d.execute_script(_READY, url), timeout)
    assert state == "1", f"the viewer did not start: ready={state!r}"
    driver.execute_script(_ROUTED)


def show(d: Any, view: str, timeout: float = WAIT_S) -> None:
    """Click the tab of ``view`` and wait until the viewer has routed the hash
    it set and drawn ``view`` (until then the old view's elements may still
    be there, or be replaced under the test)."""
    from selenium.webdriver.common.by import By

    before = d.execute_script(_ROUTED)
    d.find_element(By.ID, f"tab-{view}").click()
    wait(d, lambda x: x.execute_script(_ROUTED_NOW, before) and "active" in x.find_element(
        By.ID, f"view-{view}").get_attribute("class"), timeout)


def css(d: Any, selector: str) -> list[Any]:
    """The elements ``selector`` matches."""
    from selenium.webdriver.common.by import By

    return list(d.find_elements(By.CSS_SELECTOR, selector))


def go_hash(d: Any, fragment: str, timeout: float = WAIT_S) -> None:
    """Follow ``#fragment`` in the page already open (a hashchange, no reload)
    and wait until the viewer has routed it."""
    before = d.execute_script(_ROUTED)
    d.execute_script("location.hash = arguments[0];", fragment)
    wait(d, lambda x: x.execute_script(_ROUTED_NOW, before), timeout)
