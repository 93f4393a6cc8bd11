"""The viewer page in headless Chromium: the DOM of each view, the links
between the sessions of the tree, tombstones, search, collapsed outputs, a
screenshot of each view, and not one network request."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("TRAJLOG_BROWSER", "1") == "0":   # before selenium is imported
    pytest.skip("TRAJLOG_BROWSER=0: browser tests off", allow_module_level=True)

import sample
from browser import css, open_page, requested_urls, show
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


@pytest.fixture(scope="module")
def opened(driver: Any, page: Path) -> Any:
    requested_urls(driver)            # drop whatever the browser logged before
    open_page(driver, page)
    return driver




_SWEEP = """
const host = document.getElementById('view-' + arguments[0]), out = new Map();
for (let y = 0; ; y += Math.max(50, host.clientHeight / 2)) {
  host.scrollTop = y;
  window.trajlogViewer.paint();
  for (const r of host.querySelectorAll('.vrow')) {
    const item = r.querySelector(arguments[1]);
    if (item) out.set(+r.dataset.i, {cls: item.className, status: item.dataset.status || null,
                                      text: item.innerText});
  }
  if (host.scrollTop + host.clientHeight >= host.scrollHeight - 1) break;
}
host.scrollTop = 0;
window.trajlogViewer.paint();
return [...out.keys()].sort((a, b) => a - b).map((k) => out.get(k));
"""


def sweep(d: Any, view: str, selector: str) -> list[dict[str, Any]]:
    """Every row of a virtualised view (scrolled through, top to bottom)."""
    rows: list[dict[str, Any]] = d.execute_script(_SWEEP, view, selector)
    return rows


def search(d: Any, text: str) -> None:
    box = d.find_element(By.ID, "search")
    box.clear()
    if text:
        box.send_keys(text)
    else:
        d.execute_script("const b = document.getElementById('search'); b.value = '';"
                         "b.dispatchEvent(new Event('input'));")
    WebDriverWait(d, 20).until(
        lambda x: x.execute_script("return document.body.dataset.searched") == text)


def shot(d: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    assert d.save_screenshot(str(path)) and path.stat().st_size > 5000


def test_chat_bubbles_tool_cards_tombstone_and_the_script_payload(opened, tmp_path):
    d = opened
    show(d, "chat")
    items = sweep(d, "chat", ".bubble, .tool-card")
    bubbles = [x for x in items if "bubble" in x["cls"]]
    assert [x["cls"].split()[1] for x in bubbles] == [
        "role-user", "role-assistant", "role-assistant", "role-assistant", "role-assistant"]
    cards = {x["text"].split()[0]: x["status"] for x in items if "tool-card" in x["cls"]}
    assert cards == {"read_file": "done", "grep": "done", "run_tests": "error", "task": "done"}
    (grep,) = [x for x in items if x["text"].startswith("grep")]
    assert "customer data in a tool output" in grep["text"] and "human:dpo" in grep["text"]
    # the </script><img ...> message is text in its bubble, not an element
    assert any(x["text"].endswith(sample.XSS) for x in bubbles)
    assert d.execute_script("return document.images.length") == 0
    assert sample.SECRET not in d.page_source
    assert len(items) == 9
    shot(d, tmp_path, "chat")


def test_a_large_output_is_collapsed_until_show_all(opened):
    d = opened
    show(d, "chat")
    card = css(d, "#view-chat .tool-card")[0]
    pre = card.find_elements(By.CSS_SELECTOR, ".collapsed pre")[-1]
    assert "399  export" not in pre.text and pre.text.count("\n") <= 13
    card.find_element(By.CSS_SELECTOR, "button.show-all").click()
    WebDriverWait(d, 10).until(lambda x: "399  export" in x.find_element(
        By.CSS_SELECTOR, "#view-chat .tool-card").text)
    assert css(d, "#view-chat .tool-card")[0].find_element(By.CSS_SELECTOR,
                                                           "button.show-all").text == "collapse"


def test_trajectory_tree_timeline_errors_and_durations(opened, tmp_path):
    d = opened
    show(d, "trajectory")
    turns = css(d, "#view-trajectory .turn")
    assert len(turns) == 2 and "has-error" in turns[0].get_attribute("class")
    tools = css(d, ".turn[data-turn='0'] .tl-tool")
    assert [t.get_attribute("data-status") for t in tools] == ["done", "done", "error"]
    assert "error" in tools[2].get_attribute("class")
    assert tools[2].find_element(By.CLASS_NAME, "tl-dur").text == "4.00 s"
    bar = tools[2].find_element(By.CLASS_NAME, "tl-bar")
    assert float(bar.value_of_css_property("width").removesuffix("px")) > 100
    assert len(css(d, ".turn[data-turn='0'] .step-node")) == 3
    assert "error" in css(d, ".turn[data-turn='0'] .tool-node")[2].get_attribute("class")
    shot(d, tmp_path, "trajectory")


def test_model_history_folds_the_compacted_range_and_expands_it(opened, recorded, tmp_path):
    d = opened
    _, s = recorded
    show(d, "history")
    (summary,) = css(d, "#view-history .hist-summary")
    lo, hi = s.compacted
    assert "folded" in summary.get_attribute("class")
    assert (summary.get_attribute("data-from"), summary.get_attribute("data-to")) == (
        str(lo), str(hi))
    assert not css(d, "#view-history .hist-raw")
    assert not [m for m in css(d, "#view-history .hist-msg")
                if lo <= int(m.get_attribute("data-seq")) <= hi]
    summary.find_element(By.CSS_SELECTOR, "button.expand").click()
    WebDriverWait(d, 10).until(lambda x: css(x, "#view-history .hist-summary.expanded"))
    raw = css(d, "#view-history .hist-raw")
    assert [int(r.get_attribute("data-seq")) for r in raw] == list(range(lo, hi + 1))
    assert css(d, "#view-history .hist-raw .tombstone")      # the erased one, inside
    shot(d, tmp_path, "model-history")


def test_context_injection_with_selection_and_exclusion_reasons(opened, tmp_path):
    d = opened
    show(d, "context")
    (inj,) = css(d, "#view-context .ctx-injection")
    assert "policy coding-default v4" in inj.text
    reasons = {li.get_attribute("data-reason") for li in css(d, ".ctx-excl")}
    assert "source.untrusted" in reasons
    selected = [li.text for li in css(d, ".ctx-selected li")]
    assert any("human/decision" in x for x in selected)
    assert not any("Ignore previous instructions" in x for x in selected)
    # each reason lists the events it kept out (the build's excluded_seqs)
    (untrusted,) = [li for li in css(d, ".ctx-excl")
                    if li.get_attribute("data-reason") == "source.untrusted"]
    kept_out = untrusted.find_elements(By.CSS_SELECTOR, ".ctx-excluded-events li")
    assert len(kept_out) == 1 and "Ignore previous instructions" in kept_out[0].text
    shot(d, tmp_path, "context")


def test_goal_history_with_the_malformed_change(opened, recorded, tmp_path):
    d = opened
    _, s = recorded
    show(d, "goals")
    revs = css(d, "#view-goals .goal-rev")
    assert [int(r.get_attribute("data-seq")) for r in revs] == list(s.goal_seqs)
    assert "skipped" in revs[1].get_attribute("class")
    assert "not newer than 1" in revs[1].find_element(By.CLASS_NAME, "goal-skip-reason").text
    assert "current" in revs[2].get_attribute("class")
    shot(d, tmp_path, "goals")


def test_the_raw_events_list_its_type_filter_and_tombstone(opened, recorded, tmp_path):
    d = opened
    _, s = recorded
    show(d, "events")
    rows = css(d, "#view-events .ev-row")
    assert [int(r.get_attribute("data-seq")) for r in rows] == list(range(s.root.last_seq + 1))
    erased = d.find_element(By.CSS_SELECTOR, f".ev-row[data-seq='{s.erased_seq}']")
    assert "erased" in erased.get_attribute("class") and "customer data" in erased.text
    shot(d, tmp_path, "events")
    d.execute_script("const f = document.getElementById('type-filter'); f.value = "
                     "'tool/result'; f.dispatchEvent(new Event('change'));")
    results = [e.seq for e in s.root.events() if e.type == "tool/result"]
    WebDriverWait(d, 10).until(lambda x: len(css(x, "#view-events .ev-row")) == len(results))
    assert [int(r.get_attribute("data-seq")) for r in css(d, "#view-events .ev-row")] == results
    d.execute_script("const f = document.getElementById('type-filter'); f.value = '';"
                     "f.dispatchEvent(new Event('change'));")


def test_search_narrows_the_rows_and_marks_the_matches(opened, tmp_path):
    d = opened
    show(d, "events")
    total = len(css(d, "#view-events .ev-row"))
    search(d, "checkToken")
    rows = css(d, "#view-events .ev-row")
    assert 0 < len(rows) < total
    # the grep call (its arguments), the file read, the compaction summary
    assert {r.get_attribute("data-seq") for r in rows} == {"5", "7", "8", "22"}
    assert css(d, "#view-events mark.hl")
    shot(d, tmp_path, "search")
    show(d, "chat")
    matched = sweep(d, "chat", ".chat-item > *")
    assert [x["text"].split()[0] for x in matched] == ["Assistant", "read_file", "grep"]
    search(d, "")
    assert len(sweep(d, "chat", ".chat-item > *")) == 9


def test_the_tree_links_navigate_between_sessions(opened, recorded, tmp_path):
    d = opened
    _, s = recorded
    show(d, "sessions")
    nodes = css(d, "#view-sessions .tree-node")
    assert [n.get_attribute("data-session") for n in nodes] == [s.root.id, s.fork.id, s.sub.id]
    shot(d, tmp_path, "sessions")
    d.find_element(By.CSS_SELECTOR, f".tree-node[data-session='{s.sub.id}'] a.tree-link").click()
    WebDriverWait(d, 10).until(lambda x: x.find_element(By.ID, "session-id").text == s.sub.id)
    assert f"#session={s.sub.id}" in d.current_url
    assert "current" in d.find_element(
        By.CSS_SELECTOR, f".tree-node[data-session='{s.sub.id}']").get_attribute("class")
    show(d, "chat")       # every view applies to the selected session
    texts = [x["text"] for x in sweep(d, "chat", ".bubble")]
    assert len(texts) == 2 and "Review the fix" in texts[0] and "Looks right" in texts[1]
    # the parent link in the header goes back
    d.find_element(By.CSS_SELECTOR, "#session-parent a.parent-link").click()
    WebDriverWait(d, 10).until(lambda x: x.find_element(By.ID, "session-id").text == s.root.id)
    # the fork shows its inherited prefix (from the root's rows) and its own event
    d.get(d.current_url.split("#")[0] + f"#session={s.fork.id}&view=events")
    WebDriverWait(d, 10).until(lambda x: x.find_element(By.ID, "session-id").text == s.fork.id)
    rows = css(d, "#view-events .ev-row")
    assert len(rows) == s.fork.last_seq + 1
    assert "inherited" in rows[0].get_attribute("class")
    assert "inherited" not in rows[-1].get_attribute("class")


def test_the_page_made_no_network_request(opened, page):
    d = opened
    own = page.resolve().as_uri()
    urls = requested_urls(d)
    assert urls, "the performance log recorded nothing: the check would prove nothing"
    assert all(u.split("#")[0] == own or u.startswith("data:") for u in urls), urls
    assert d.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
