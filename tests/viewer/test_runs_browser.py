"""The Runs view in headless Chromium: a run envelope (model, state,
integrity, cost) and the checkpoints and recovery checks, as cards and as
markers on the timeline, also above the Trajectory view.  Each test names
the rule whose removal makes it fail."""

from __future__ import annotations

import os
from typing import Any

import pytest

if os.environ.get("TRAJLOG_BROWSER", "1") == "0":   # before selenium is imported
    pytest.skip("TRAJLOG_BROWSER=0: browser tests off", allow_module_level=True)

import runs_sample
from browser import css, open_page, requested_urls, show
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import trajlog
from trajlog.viewer import write_html


@pytest.fixture(scope="module")
def opened(driver: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    where = tmp_path_factory.mktemp("runs-view")
    with trajlog.open(str(where / "store.db")) as store:
        sample = runs_sample.build(store)
        write_html(store, sample.root.id, where / "view.html")
    requested_urls(driver)
    open_page(driver, where / "view.html")
    return driver, sample




def test_the_run_card_shows_model_state_integrity_and_cost(opened):
    """Rule: the Runs view draws each envelope (drop runCard or a field: fails)."""
    d, s = opened
    show(d, "runs")
    (card,) = css(d, f'#view-runs .run-card[data-run="{s.lead}"]')
    text = card.text
    assert "gpt-x" in text and "completed" in text and "integrity ok" in text
    assert card.get_attribute("data-integrity") == "ok"
    cost = {r.get_attribute("data-surface"): r.text for r in card.find_elements(
        By.CSS_SELECTOR, "tr[data-surface]")}
    assert list(cost) == ["inference", "retrieval", "tools", "persistence"]
    assert "0.0042, 1 req, 900 in, 40 out" in cost["inference"]
    assert "root run" in text


def test_checkpoints_and_recovery_checks_are_shown(opened):
    """Rules: a checkpoint card says valid or invalidated and why; a recovery
    card lists each check with its verdict and the outcome."""
    d, s = opened
    show(d, "runs")
    (approved,) = css(d, f'#view-runs .cp-item[data-seq="{s.approved}"]')
    assert approved.get_attribute("data-valid") == "0"
    assert "invalidated at seq" in approved.text and "workspace-changed" in approved.text
    assert f"{runs_sample.REV_A} \u2192 {runs_sample.REV_B}" in approved.text
    (patch,) = css(d, f'#view-runs .cp-item[data-seq="{s.patch}"]')
    assert patch.get_attribute("data-valid") == "1" and "valid" in patch.text
    (paused,) = css(d, f'#view-runs .rec-item[data-seq="{s.paused_check}"]')
    assert paused.get_attribute("data-outcome") == "paused"
    assert "awaiting restart-or-fork" in paused.text
    checks = {li.get_attribute("data-check"): li.get_attribute("class")
              for li in paused.find_elements(By.CSS_SELECTOR, ".rec-check")}
    assert len(checks) == 6 and "fail" in checks["workspace-revision"]
    assert all("ok" in checks[n] for n in checks if n != "workspace-revision")
    (resumed,) = css(d, f'#view-runs .rec-item[data-seq="{s.resumed_check}"]')
    assert resumed.get_attribute("data-outcome") == "resumed"


def test_markers_on_the_timeline_in_runs_and_trajectory(opened):
    """Rule: the run band and a marker per checkpoint and recovery attempt are
    on the timeline of the Runs view and above the Trajectory view (remove
    runStrip from either: fails)."""
    d, s = opened
    for view in ("runs", "trajectory"):
        show(d, view)
        assert css(d, f'#view-{view} .runs-timeline .run-row[data-run="{s.lead}"] .tl-bar')
        marks = css(d, f"#view-{view} .runs-timeline .tl-mark")
        seqs = {m.get_attribute("data-seq") for m in marks}
        assert {str(s.approved), str(s.patch), str(s.paused_check)} <= seqs
        invalid = css(d, f'#view-{view} .tl-mark.mark-cp.mark-invalidated'
                      f'[data-seq="{s.approved}"]')
        assert len(invalid) == 1 and "invalidated" in invalid[0].get_attribute("title")
        assert css(d, f'#view-{view} .tl-mark.mark-rec.mark-paused')


def test_search_filters_the_runs_view_and_nothing_is_requested(opened):
    """Rule: the search box filters the Runs view like the others; the page
    asks the network for nothing."""
    d, s = opened
    show(d, "runs")
    box = d.find_element(By.ID, "search")
    box.clear()
    box.send_keys("workspace-changed")
    WebDriverWait(d, 20).until(
        lambda x: x.execute_script("return document.body.dataset.searched") ==
        "workspace-changed")
    assert not css(d, "#view-runs .run-card")
    assert [c.get_attribute("data-seq") for c in css(d, "#view-runs .cp-item")] == [
        str(s.approved)]
    d.execute_script("const b = document.getElementById('search'); b.value = '';"
                     "b.dispatchEvent(new Event('input'));")
    WebDriverWait(d, 20).until(
        lambda x: x.execute_script("return document.body.dataset.searched") == "")
    errors = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, errors
    assert [u for u in requested_urls(d) if not u.startswith(("file:", "data:"))] == []
