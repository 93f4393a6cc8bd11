"""Headless Chromium from Debian's packages, driven by selenium (never a
downloaded browser or driver: both paths are given, so Selenium Manager does
not run)."""

from __future__ import annotations

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


def open_page(driver: Any, path: Path, fragment: str = "", timeout: float = 60) -> None:
    """Load ``path`` and wait for the viewer's ready mark."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.resolve().as_uri() + (f"#{fragment}" if fragment else ""))
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.body && document.body.dataset.ready"))


def show(d: Any, view: str) -> None:
    """Click the tab of ``view`` and wait until its section is the active one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    d.find_element(By.ID, f"tab-{view}").click()
    WebDriverWait(d, 10).until(lambda x: "active" in x.find_element(
        By.ID, f"view-{view}").get_attribute("class"))


def css(d: Any, selector: str) -> list[Any]:
    """The elements ``selector`` matches."""
    from selenium.webdriver.common.by import By

    return list(d.find_elements(By.CSS_SELECTOR, selector))
