"""Screenshots of each view of the HTML viewer, for the README.

Records the viewer tests' sample tree (tests/viewer/sample.py: turns, steps and
tool calls with a failing one, a huge output, a compaction, a context build,
goal changes, a fork, a subagent, an erased payload) in a temporary store,
writes its page and saves docs/screenshots/<view>.png from headless Chromium
(Debian's package).

    python docs/make_screenshots.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests" / "viewer"))

import browser  # noqa: E402  (tests/viewer/browser.py)
import sample  # noqa: E402

import trajlog  # noqa: E402
from trajlog.viewer import write_html  # noqa: E402

VIEWS = [("chat", "chat"), ("trajectory", "trajectory"), ("model-history", "history"),
         ("context", "context"), ("goals", "goals"), ("sessions", "sessions"),
         ("events", "events")]


def _settle(d: Any) -> None:
    time.sleep(0.3)
    d.execute_script("window.trajlogViewer.paint()")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "screenshots"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not browser.available():
        print("chromium/chromedriver missing: make install-test", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "view.html"
        with trajlog.open(str(Path(tmp) / "store.db")) as store:
            s = sample.build(store, hostile=False)
            write_html(store, s.root.id, page)
        d = browser.make_driver(1280, 1000)
        try:
            browser.open_page(d, page)
            for name, view in VIEWS:
                d.find_element("id", f"tab-{view}").click()
                _settle(d)
                if view == "history":   # show one compacted range opened
                    d.find_element("css selector", ".hist-summary button.expand").click()
                    _settle(d)
                d.save_screenshot(str(out / f"{name}.png"))
            d.find_element("id", "tab-events").click()
            d.find_element("id", "search").send_keys("checkToken")
            time.sleep(0.8)
            d.save_screenshot(str(out / "search.png"))
        finally:
            d.quit()
    for p in sorted(out.glob("*.png")):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
