"""The HTML viewer on a large session: Python build time, page size, and the
time headless Chromium takes to open it.

A session of N events (default 100,000; the workload of
benchmarks/workload.py: turns, steps, assistant messages with tool calls, tool
results of 200 B-64 KiB) is written with ``write_html``.  The page is then
opened ROUNDS (>= 5) times in headless Chromium (Debian's package), interleaved
with two baselines whose only script parses the embedded JSON: the viewer's own
page (the same bytes, the viewer's work left out) and a page of the whole
document as one plain JSON, every string inline (what the page would be
without its gzipped blobs).  Open time is navigation start -> the
``trajlog-ready`` mark: the viewer sets it after its first render, a baseline
after ``JSON.parse``.
Every figure is the median of the rounds with its range.  Target: a 100k-event
session opens in <= 2 s.

    python benchmarks/bench_viewer.py [--events N] [--rounds K] [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests" / "viewer"))

import browser  # tests/viewer/browser.py: Debian's chromium and chromedriver

import trajlog
from trajlog.viewer import write_html
from trajlog.viewer.document import build_document
from trajlog.viewer.page import embed_json
from workload import events as workload_events

PARSE_ONLY = (b'<script>const d = JSON.parse(document.getElementById("trajlog-data")'
              b'.textContent); document.body.dataset.ready = "1"; '
              b'performance.mark("trajlog-ready");</script></body></html>')


def parse_only(viewer_page: bytes) -> bytes:
    """The viewer page with its script replaced by one that only parses the
    embedded JSON: the same bytes to load, none of the viewer's work."""
    cut = viewer_page.rfind(b"<script>")
    assert cut > 0
    return viewer_page[:cut] + PARSE_ONLY


PLAIN = (b'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
         b'<script type="application/json" id="trajlog-data">')


READY = ("const m = performance.getEntriesByName('trajlog-ready')[0];"
         "return m ? m.startTime : null;")


def record(store: trajlog.Store, n: int) -> trajlog.Session:
    """A session of the first ``n`` workload events, one second apart."""
    s = store.create_session(cwd="/bench", agent_preset="bench",
                             metadata={"title": f"{n:,}-event workload"})
    items = workload_events(n)
    t0 = time.time_ns() // 1_000_000 - len(items) * 1000
    for lo in range(0, len(items), 5000):
        s.append_batch([(t, d, {"time": t0 + (lo + i) * 1000})
                        for i, (t, d) in enumerate(items[lo:lo + 5000])])
    return s


def open_ms(driver: Any, path: Path) -> float:
    """Milliseconds from navigation start to the ready mark."""
    driver.get("about:blank")
    browser.open_page(driver, path, timeout=300)
    value = driver.execute_script(READY)
    assert value is not None, "no trajlog-ready mark"
    return float(value)


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="10,000 events, 3 rounds")
    ap.add_argument("--json", default=None, help="where to write the results "
                    "(default: benchmarks/results-viewer.json; none with --quick)")
    args = ap.parse_args(argv)
    n, rounds = (10_000, 3) if args.quick else (args.events, max(5, args.rounds))
    if not browser.available():
        print("chromium/chromedriver missing: make install-test", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with trajlog.open(str(root / "bench.db")) as store:
            s = record(store, n)
            builds, docs = [], []
            for _ in range(3):
                t = time.perf_counter()
                report = write_html(store, s.id, root / "view.html")
                builds.append(time.perf_counter() - t)
                t = time.perf_counter()
                doc = build_document(store, s.id)
                docs.append(time.perf_counter() - t)
            # baseline 1: this page's bytes, parsed only; baseline 2: every
            # string inline in one JSON (no gzipped blobs), parsed only
            (root / "baseline.html").write_bytes(parse_only((root / "view.html").read_bytes()))
            (root / "plain.html").write_bytes(PLAIN + embed_json(doc) + b"</script>" +
                                              PARSE_ONLY)
            plain_bytes = (root / "plain.html").stat().st_size
        page, base, plain = root / "view.html", root / "baseline.html", root / "plain.html"
        driver = browser.make_driver()
        try:
            viewer_ms: list[float] = []
            baseline_ms: list[float] = []
            plain_ms: list[float] = []
            for r in range(rounds):
                order = [(page, viewer_ms), (base, baseline_ms), (plain, plain_ms)]
                for path, out in (order if r % 2 == 0 else order[::-1]):
                    out.append(open_ms(driver, path))
            driver.get("about:blank")
            browser.open_page(driver, page, "view=events", timeout=300)
            event_rows = driver.execute_script(
                "return document.querySelectorAll('#view-events .ev-row').length")
        finally:
            driver.quit()
    result = {
        "benchmark": "bench_viewer", "events": n, "rounds": rounds,
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
        "page_bytes": report.bytes,
        "build_s": spread(builds), "document_s": spread(docs),
        "open_ms": spread(viewer_ms), "baseline_open_ms": spread(baseline_ms),
        "plain_json_open_ms": spread(plain_ms), "plain_json_page_bytes": plain_bytes,
        "open_ms_all": viewer_ms, "baseline_open_ms_all": baseline_ms,
        "plain_json_open_ms_all": plain_ms,
        "dom_rows_events_view": event_rows,
        "target_open_ms": 2000, "meets_target": statistics.median(viewer_ms) <= 2000,
    }
    o, b, p = result["open_ms"], result["baseline_open_ms"], result["plain_json_open_ms"]
    print(f"{n:,} events: page {report.bytes / 1e6:.1f} MB, write_html "
          f"{statistics.median(builds):.2f} s [{min(builds):.2f}-{max(builds):.2f}]")
    print(f"open (navigation -> ready): viewer {o['median']:.0f} ms [{o['min']:.0f}-"
          f"{o['max']:.0f}]; baseline (the same page, JSON.parse only) {b['median']:.0f} ms "
          f"[{b['min']:.0f}-{b['max']:.0f}]; all data as one plain JSON ({plain_bytes / 1e6:.1f}"
          f" MB, JSON.parse only) {p['median']:.0f} ms [{p['min']:.0f}-{p['max']:.0f}]; "
          f"{event_rows} event rows in the DOM")
    out = args.json or (None if args.quick else
                        str(Path(__file__).parent / "results-viewer.json"))
    if out:
        Path(out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
