"""The viewer review's findings (notes/viewer-review.md), one small page each:
hostile hashes, scroll anchoring, the erased test, paged trajectories, huge
strings, odd data, time formats, content blocks, search coverage, previews
and headers."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("TRAJLOG_BROWSER", "1") == "0":   # before selenium is imported
    pytest.skip("TRAJLOG_BROWSER=0: browser tests off", allow_module_level=True)

import msgspec
from browser import go_hash, open_page, show, until, wait
from selenium.webdriver.common.by import By

import trajlog
from trajlog.viewer import write_html
from trajlog.viewer.page import embed_json

T0 = 1_700_000_000_123          # 2023-11-14 22:13:20.123 UTC


def make(tmp: Path, fill: Callable[[Any, Any], Any], **meta: Any) -> tuple[Path, Any]:
    """A store with one session filled by ``fill(store, session)``, and its page."""
    with trajlog.open(str(tmp / "s.db")) as store:
        s = store.create_session(cwd="/r", **meta)
        out = fill(store, s)
        write_html(store, s.id, tmp / "p.html")
    return tmp / "p.html", out


def patch(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit the document embedded in a page (shapes document.py may produce)."""
    page = path.read_text()
    found = re.search(r'(<script type="application/json" id="trajlog-data">)(.*?)(</script>)',
                      page, re.S)
    assert found
    doc = msgspec.json.decode(found.group(2))
    change(doc)
    path.write_text(page[:found.start(2)] + embed_json(doc).decode() + page[found.end(2):])


def load(d: Any, path: Path, fragment: str = "") -> None:
    open_page(d, path, fragment)


def css(d: Any, selector: str) -> list[Any]:
    return list(d.find_elements(By.CSS_SELECTOR, selector))


def text(d: Any, view: str) -> str:
    return str(d.execute_script(f"return document.getElementById('view-{view}').innerText"))


def search(d: Any, q: str) -> None:
    d.execute_script("const b = document.getElementById('search'); b.value = arguments[0];"
                     "b.dispatchEvent(new Event('input'));", q)
    wait(d, lambda x: x.execute_script("return document.body.dataset.searched") == q)


def lines(n: int, i: int) -> str:
    return "\n".join(f"message {i} line {j} " + "q" * 40 for j in range(n))


# ---- 2: a hash naming an Object.prototype member -----------------------------
def test_2_hash_keys_of_object_prototype_do_not_blank_the_page(driver, tmp_path):
    path, _ = make(tmp_path, lambda st, s: s.append("user/message", {"content": "hello"}))
    frags = ("view=constructor", "view=__proto__", "view=toString", "view=hasOwnProperty",
             "session=constructor&view=__proto__")
    for frag in frags:
        load(driver, path, frag)                 # opened with the hash
        assert "hello" in text(driver, "chat"), frag
        assert "active" in driver.find_element(By.ID, "view-chat").get_attribute("class")
    for frag in frags:
        go_hash(driver, frag)                    # followed in the open page
        assert "hello" in text(driver, "chat"), frag
        assert "active" in driver.find_element(By.ID, "view-chat").get_attribute("class")


# ---- 3: a block decoded after the user scrolled ------------------------------
# Holds every decoded block until the test calls window.trajlogTestRelease():
# "decoded after the user scrolled" by construction, not by a timer.
_HOLD = """(() => { const orig = Response.prototype.arrayBuffer;
  let release; const gate = new Promise((r) => { release = r; });
  window.trajlogTestRelease = () => release();
  Response.prototype.arrayBuffer = function () {
    return orig.call(this).then((b) => gate.then(() => b)); };
})();"""
_FIRST = """const host = document.getElementById('view-' + arguments[0]);
const y = host.scrollTop;
const vis = [...host.querySelectorAll('.vrow')].filter((r) => {
  const t = r.getBoundingClientRect().top - host.getBoundingClientRect().top;
  return t + r.offsetHeight > 0 && t < host.clientHeight; }).map((r) => +r.dataset.i);
return vis.length ? Math.min(...vis) : -1;"""


def test_3_a_late_decoded_block_keeps_the_first_row_in_view(driver, tmp_path):
    path, _ = make(tmp_path, lambda st, s: s.append_batch(
        [("user/message", {"content": lines(30, i)}) for i in range(200)]))
    hook = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _HOLD})
    try:
        url = path.resolve().as_uri()
        driver.get("about:blank")
        driver.get(url)
        wait(driver, lambda x: x.execute_script(
            "return location.href === arguments[0] && !!window.trajlogViewer", url))
        assert not driver.execute_script("return document.body.dataset.ready")
        driver.execute_script("const h = document.getElementById('view-chat');"
                              "for (let y = 0; y <= 4000; y += 400) { h.scrollTop = y;"
                              " window.trajlogViewer.paint(); }")
        before = driver.execute_script(_FIRST, "chat")
        assert before > 10
        driver.execute_script("window.trajlogTestRelease()")
        wait(driver, lambda x: x.execute_script("return document.body.dataset.ready"))
        driver.execute_script("window.trajlogViewer.paint()")
        assert f"message {before} line 0" in driver.execute_script(
            "return document.getElementById('view-chat').innerText")
        assert driver.execute_script(_FIRST, "chat") == before
    finally:
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument",
                               {"identifier": hook["identifier"]})


# ---- 4: scrolling up through rows not measured yet ----------------------------
_UP = """const host = document.getElementById('view-chat'), p = window.trajlogViewer;
for (let k = 0; k < 5; k++) { host.scrollTop = host.scrollHeight; p.paint(); }
const pos = (r) => r.getBoundingClientRect().top - host.getBoundingClientRect().top;
let moved = 0, steps = 0;
while (host.scrollTop > 0 && steps++ < 400) {
  const rows = [...host.querySelectorAll('.vrow')].filter((r) => pos(r) >= 0 &&
    pos(r) < host.clientHeight).sort((a, b) => pos(a) - pos(b));
  const r = rows[0], y = pos(r), before = host.scrollTop;
  host.scrollTop = before - 300; p.paint();      // the row should be 300 px lower
  const now = host.querySelector('.vrow[data-i="' + r.dataset.i + '"]');
  if (host.scrollTop > 0 && (!now || Math.abs(pos(now) - (y + 300)) > 1)) moved++;
}
return [moved, steps];"""


def test_4_scrolling_up_keeps_the_rows_in_place(driver, tmp_path):
    sizes = [1, 1, 3, 10, 29, 60]
    path, _ = make(tmp_path, lambda st, s: s.append_batch(
        [("user/message" if i % 2 else "assistant/message",
          {"content": lines(sizes[(i * 7) % 6], i)}) for i in range(300)]))
    load(driver, path)
    moved, steps = driver.execute_script(_UP)
    assert steps > 20 and moved == 0


# ---- 5: "erased" means {"erased": {"tombstone": ...}} -------------------------
def test_5_an_erased_key_without_a_tombstone_is_ordinary_data(driver, tmp_path):
    def fill(st: Any, s: Any) -> None:
        s.append("user/message", {"content": "still here", "erased": True})
        s.append("note", {"text": "plain note", "erased": {"why": "no tombstone"}})
        s.append("note", {"text": "gone"})
        st.erase(s.id, [2], reason="test", actor="human:dpo")
    path, _ = make(tmp_path, fill)
    load(driver, path, "view=events")
    rows = css(driver, "#view-events .ev-row")
    assert ["erased" in r.get_attribute("class") for r in rows] == [False, False, True]
    assert "plain note" in rows[1].text and "[erased: test]" in rows[2].text
    load(driver, path, "view=chat")
    assert "still here" in text(driver, "chat") and not css(driver, "#view-chat .tombstone")


# ---- 6: a turn of thousands of steps is drawn a page at a time ----------------
def test_6_a_long_turn_is_paged(driver, tmp_path):
    def fill(st: Any, s: Any) -> None:
        rows: list[Any] = [("turn/start", {}), ("user/message", {"content": "go"})]
        for i in range(3000):
            c = f"c{i}"
            rows += [("step/start", {}),
                     ("assistant/message", {"content": f"step {i}", "tool_calls": [
                         {"id": c, "name": "sh", "arguments": {"i": i}}]}),
                     ("tool/call", {"call_id": c, "name": "sh", "arguments": {"i": i}}),
                     ("tool/result", {"call_id": c, "output": f"out {i}", "is_error": False}),
                     ("step/end", {})]
        s.append_batch([*rows, ("turn/end", {"interrupted": False})])
    path, _ = make(tmp_path, fill)
    load(driver, path)
    # (speed is measured in benchmarks/, never asserted here: the bound is the DOM)
    show(driver, "trajectory")
    assert len(css(driver, "#view-trajectory .step-node")) == 100
    assert len(css(driver, "#view-trajectory .tl-step")) == 100
    assert "2,900 more step(s)" in driver.find_element(By.CSS_SELECTOR, ".tl-more").text
    assert driver.find_element(By.CSS_SELECTOR, ".all-steps").text == "show all 3,000"
    driver.find_element(By.CSS_SELECTOR, ".next-steps").click()
    assert until(driver, lambda x: len(css(x, "#view-trajectory .step-node")),
                 lambda n: n == 200) == 200
    assert len(css(driver, "#view-trajectory .tl-step")) == 200


# ---- 7: "show all" on a long unbroken string ----------------------------------
def test_7_a_huge_unbroken_string_opens_fast_in_slices(driver, tmp_path):
    path, _ = make(tmp_path, lambda st, s: s.append("user/message", {"content": "A" * 120_000}))
    load(driver, path)
    driver.find_element(By.CSS_SELECTOR, "#view-chat .show-all").click()
    pre = wait(driver, lambda x: x.find_element(By.CSS_SELECTOR, "#view-chat pre.text.huge"))
    assert "mono" in pre.value_of_css_property("font-family").lower()
    assert driver.execute_script("return arguments[0].textContent.length", pre) == 50_000
    driver.find_element(By.CSS_SELECTOR, "#view-chat .show-more").click()
    assert until(driver, lambda x: x.execute_script(
        "return document.querySelector('#view-chat pre.text').textContent.length"),
        lambda n: n == 100_000) == 100_000


# ---- 8 and 11: odd fields, content blocks -------------------------------------
def _odd(st: Any, s: Any) -> None:
    with s.turn():
        s.append("user/message", {"content": [{"type": "text", "text": "block text"}],
                                  "reasoning": ["x"]})
        with s.step():
            s.append("assistant/message", {"content": [
                {"type": "text", "text": "claude blocks"},
                {"type": "tool_use", "id": "tu1", "name": "lookup", "input": {}},
                {"type": "image", "source": {}}],
                "tool_calls": [{"id": "k1", "name": "sh", "arguments": "not json {"}]})
            s.append("tool/call", {"call_id": "k1", "name": "sh", "arguments": "not json {"})
            s.append("tool/result", {"call_id": "k1", "output": [
                {"type": "text", "text": "result block"}], "is_error": True})
    s.append("context/injection", {"policy": "p", "chars": None, "policy_version": {"v": 1},
                                   "selected": [0, 99, -1, "x", 1.5],
                                   "excluded": {"r": 2, "s": "many", "constructor": 1},
                                   "excluded_seqs": {"r": [[0, 1], 5], "s": "bad"}})


def test_8_a_context_build_with_odd_fields_still_shows(driver, tmp_path):
    path, _ = make(tmp_path, _odd)
    load(driver, path)
    show(driver, "context")
    (box,) = css(driver, "#view-context .ctx-injection")
    assert "policy p" in box.text
    assert "undefined" not in box.text and "NaN" not in box.text
    assert len(css(driver, ".ctx-selected li")) == 5
    excluded = [li.get_attribute("data-reason") for li in css(driver, ".ctx-excl")]
    assert excluded == ["r", "s", "constructor"]


def test_11_content_blocks_show_as_text(driver, tmp_path):
    path, _ = make(tmp_path, _odd)
    load(driver, path)
    chat = text(driver, "chat")
    assert "block text" in chat and "claude blocks" in chat and "[tool_use lookup]" in chat
    assert "[image]" in chat and "result block" in chat and '"type"' not in chat
    show(driver, "history")
    history = text(driver, "history")
    assert "block text" in history and "result block" in history and '"type"' not in history
    show(driver, "trajectory")
    assert "result block" in text(driver, "trajectory")


# ---- 10: times in UTC, bad times, durations rounded ---------------------------
def test_10_times_are_utc_and_durations_round(driver, tmp_path):
    def fill(st: Any, s: Any) -> None:
        t = T0
        s.append("turn/start", {}, time=t)
        s.append("step/start", {}, time=t)
        for i, d in enumerate((119_500, 59_999, 9_999, 5 * 3_600_000)):
            c = f"c{i}"
            s.append("assistant/message", {"content": "x", "tool_calls": [
                {"id": c, "name": "sh", "arguments": {}}]}, time=t)
            s.append("tool/call", {"call_id": c, "name": "sh", "arguments": {}}, time=t)
            t += d
            s.append("tool/result", {"call_id": c, "output": "ok"}, time=t)
        s.append("step/end", {}, time=t)
        s.append("turn/end", {"interrupted": False}, time=t)
        s.append("note", {"text": "far"}, time=t)
        s.append("note", {"text": "big"}, time=t)
        return s.last_seq

    path, last = make(tmp_path, fill)

    def odd_times(doc: dict[str, Any]) -> None:
        doc["sessions"][0]["ev"][last - 1][2] = 10**16
        doc["sessions"][0]["ev"][last][2] = "12345678901234567890"  # beyond 2**53
    patch(path, odd_times)
    driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})
    try:
        load(driver, path, "view=events")
        times = [e.text for e in css(driver, "#view-events .ev-row .time")]
        assert times[0] == "22:13:20.123"
        assert times[-2:] == [str(10**16), "12345678901234567890"]
        assert "UTC" in driver.find_element(By.ID, "session-meta").text
        load(driver, path, "view=trajectory")
        durs = [e.text for e in css(driver, ".tl-tool .tl-dur")]
        assert durs == ["2 min 0 s", "1 min 0 s", "10.0 s", "5 h 0 min"]
    finally:
        driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


# ---- 12: search covers what the views show ------------------------------------
def test_12_search_finds_models_envelopes_and_sessions(driver, tmp_path):
    def fill(st: Any, s: Any) -> Any:
        with s.turn(), s.step():
            s.append("request/header", {"model": "zebra-model"})
            s.append("assistant/message", {"content": "hi", "tool_calls": []})
        s.append("note", {"text": "n"}, workspace_revision="git:feedbee")
        note = s.last_seq
        sub = s.spawn_subagent("check", agent_preset="reviewer")
        return sub.id, str(note)
    path, (sub, note) = make(tmp_path, fill)
    load(driver, path, "view=trajectory")
    search(driver, "zebra")
    assert len(css(driver, "#view-trajectory .turn")) == 1
    show(driver, "events")
    search(driver, "feedbee")
    assert [r.get_attribute("data-seq") for r in css(driver, "#view-events .ev-row")] == [note]
    show(driver, "sessions")
    search(driver, "reviewer")
    assert driver.find_element(By.ID, "search-count").text == "1 of 2"
    assert [n.get_attribute("data-session") for n in
            css(driver, "#view-sessions .tree-node.match")] == [sub]


# ---- 13: previews, erased goals and builds, damaged and odd headers -----------
def test_13_previews_tombstones_and_headers(driver, tmp_path):
    def fill(st: Any, s: Any) -> None:
        s.append("note", {"text": "a" * 88 + "\U0001F600" + "b" * 10})
        s.append("goal/change", {"revision": "x", "goal": "bad"})
        s.append("context/injection", {"policy": "p", "policy_version": 1, "selected": []})
        st.erase(s.id, [1, 2], reason="gone", actor="human:dpo")
    path, _ = make(tmp_path, fill, metadata={"title": {"nested": 1}})
    lone = r"/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/"
    load(driver, path, "view=events")
    assert not driver.execute_script(
        f"return {lone}.test(document.querySelector('.ev-row .data').textContent)")
    show(driver, "goals")
    assert css(driver, "#view-goals .tombstone") and not css(driver, ".goal-skip-reason")
    show(driver, "context")
    ctx = driver.find_element(By.CSS_SELECTOR, ".ctx-injection").text
    assert "gone" in ctx and "undefined" not in ctx and "policy" not in ctx
    show(driver, "sessions")
    assert "nested" not in text(driver, "sessions")
    assert driver.find_element(By.ID, "session-title").text == "session"

    def damaged(doc: dict[str, Any]) -> None:
        doc["sessions"][0]["damage"] = "header checksum mismatch"
    patch(path, damaged)
    load(driver, path)
    meta = driver.find_element(By.ID, "session-meta").text
    assert "damaged header: header checksum mismatch" in meta and "events" not in meta
