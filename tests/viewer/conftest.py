"""Fixtures for the viewer tests: the sample store and page, and one headless
Chromium per test module (Debian's package; never a downloaded build).

``TRAJLOG_BROWSER=0`` skips every browser test (the light CI runs); without
chromium and chromedriver they are skipped with a hint, or fail when
``CI=true``, so that CI cannot pass without running them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import browser
import sample

import trajlog
from trajlog.viewer import write_html


def need_browser() -> None:
    """Skip (or, in CI, fail) when the browser tests cannot run."""
    if os.environ.get("TRAJLOG_BROWSER", "1") == "0":
        pytest.skip("TRAJLOG_BROWSER=0: browser tests off")
    if not browser.available():
        message = (f"{browser.CHROMIUM} or {browser.CHROMEDRIVER} is missing: "
                   "run `make install-test` (apt-get install chromium chromium-driver)")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    """One headless Chromium for the whole module."""
    need_browser()
    d = browser.make_driver()
    try:
        yield d
    finally:
        d.quit()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, sample.Sample]]:
    """The sample tree in a store of its own, open for the module."""
    path = tmp_path_factory.mktemp("viewer") / "store.db"
    with trajlog.open(str(path)) as store:
        yield store, sample.build(store)


@pytest.fixture(scope="module")
def page(recorded: tuple[Any, sample.Sample], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample tree's page, written by write_html."""
    store, s = recorded
    out = tmp_path_factory.mktemp("page") / "view.html"
    write_html(store, s.root.id, out)
    return out
