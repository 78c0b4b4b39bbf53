"""All metrics and outliers in a real headless Chromium at 1280 and 1440 px (issue 31, items 3 and 4).

A run of 2,000 metrics opens with its first group drawn and the others collapsed, a group opens on a
click, a filter narrows the groups; a run whose first loss is 1e12 shows its later spikes on the Live page
and on All metrics (the y axis fits the bulk; the 1e12 is a triangle at the top edge).
Screenshots go to ``tests/browser/screenshots/`` (git-ignored): look at them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.train.writer import MetricsWriter
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
HEIGHT = 900
T0 = 1_700_000_000.0
N_METRICS = 2000
SPIKES = {150: 9.0, 300: 12.0}  # a loss near 2 spiking to 9 and 12


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


def wide_name(i: int) -> str:
    """2,000 names in the forms frameworks write: ``layers.N.…`` (one group, ``layers``: 1,000 names),
    ``groupN/…`` (19 groups of 50), ``stat_…`` (one group of 50)."""
    group = i % 40
    if group < 20:
        return f"layers.{group}.weight_norm_{i}"
    if group < 39:
        return f"group{group}/metric_{i}"
    return f"stat_{i}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("all-metrics")
    root = tmp / "logs"
    wide = MetricsWriter(root / "wide", rank=0, world_size=1, fsync_interval=0)
    names = [wide_name(i) for i in range(N_METRICS)]
    for step in range(50):
        record = {name: math.sin(step / 7 + i) + i / 100 for i, name in enumerate(names)}
        wide.log_at(T0 + 0.5 * step, step=step, loss=3.0 * math.exp(-step / 20) + 0.5, lr=1e-3, **record)
    wide.close("finished")
    big = MetricsWriter(root / "huge-first", rank=0, world_size=1, fsync_interval=0)
    for step in range(400):
        loss = 2.0 + 0.1 * math.sin(step * 1.7)
        loss = 1e12 if step == 0 else SPIKES.get(step, loss)
        big.log_at(T0 + 0.5 * step, step=step, loss=loss, lr=1e-3, grad_norm=1.0)
    big.close("finished")
    with streamlit_server(root, tmp / "streamlit.log") as url:
        yield url


JS_Y = """
(selector) => {
  const gd = document.querySelector(selector);
  if (!gd || !gd._fullLayout) return null;
  const ya = gd._fullLayout.yaxis;
  const marks = gd._fullData.filter((t) => (t.name || '').endsWith('beyond the axis'));
  return { range: ya.range.map(Number), type: ya.type, marks: marks.map((t) => Array.from(t.customdata || [])) };
}
"""


def y_state(page: Any, selector: str) -> dict[str, Any] | None:
    return page.evaluate(JS_Y, selector)


def charts_drawn(page: Any) -> int:
    return page.locator("[data-testid='stExpanderDetails'] .js-plotly-plot").count()


@pytest.mark.parametrize("width", [1280, 1440])
def test_two_thousand_metrics_open_grouped_and_draw_what_is_open(server: str, width: int) -> None:
    SHOTS.mkdir(exist_ok=True)
    with chromium_page(width, HEIGHT) as page:
        page.goto(f"{server}/metrics?run=wide", wait_until="domcontentloaded")
        poll(lambda: page.get_by_text("2,002 metrics in 22 groups").count() > 0, 90, what="the metrics count")
        poll(lambda: charts_drawn(page) == 2, 60, what="the first group's two charts (loss, lr)")
        expanders = page.locator("[data-testid='stExpander']")
        assert expanders.count() == 22  # (no prefix), group20..group38, layers, stat
        page.screenshot(path=str(SHOTS / f"all_metrics_{width}.png"))
        # open a group: one page of its 50 charts is drawn, with a page picker
        page.get_by_text("group20 (50)").click()
        poll(lambda: charts_drawn(page) == 2 + 12, 60, what="a page of the opened group")
        assert page.get_by_text("Charts 1–12 of 50").count() == 1
        page.screenshot(path=str(SHOTS / f"all_metrics_open_{width}.png"))
        # the filter narrows the groups (kept in the URL)
        box = page.get_by_label("Filter metrics (regex)", exact=True).and_(page.locator("input"))
        box.fill("^layers\\.3\\.")
        box.press("Enter")
        poll(lambda: expanders.count() == 1, 60, what="one group left")
        poll(lambda: "filter=" in page.url, 10, what="the filter in the URL")


@pytest.mark.parametrize("width", [1280, 1440])
def test_a_first_loss_of_1e12_leaves_the_spikes_in_sight(server: str, width: int) -> None:
    SHOTS.mkdir(exist_ok=True)
    with chromium_page(width, HEIGHT) as page:
        page.goto(f"{server}/?run=huge-first", wait_until="domcontentloaded")
        selector = ".st-key-chart_loss_lr .js-plotly-plot"
        state = poll(lambda: y_state(page, selector), 90, what="the live loss chart")
        _, hi = state["range"]
        assert hi >= max(SPIKES.values()) and hi < 100, state
        assert state["marks"] and state["marks"][0] == [pytest.approx(1e12)]
        page.screenshot(path=str(SHOTS / f"outliers_live_{width}.png"))
        page.goto(f"{server}/metrics?run=huge-first", wait_until="domcontentloaded")
        poll(lambda: charts_drawn(page) == 3, 90, what="loss, lr, grad_norm")
        loss = poll(lambda: _loss_state(page), 30, what="the loss chart's axis")
        assert max(SPIKES.values()) <= loss["range"][1] < 100, loss
        page.screenshot(path=str(SHOTS / f"outliers_all_metrics_{width}.png"))
        # one switch turns it off: the axis then spans the 1e12 (kept in the URL)
        switch = page.locator("[data-testid='stCheckbox']").filter(has_text="Show outliers")
        # On and taken by the server (the URL says so); a switch the first run's redraw turned back is clicked again
        poll(lambda: _switched_on(switch) and "outliers=1" in page.url, 60, what="the switch on and ?outliers=1")
        poll(lambda: (_loss_state(page) or {"range": [0, 0]})["range"][1] > 1e11, 60, what="the full range")


JS_LOSS = """
() => {
  for (const gd of document.querySelectorAll("[data-testid='stExpanderDetails'] .js-plotly-plot")) {
    if (!gd._fullData) continue;
    if (gd._fullData.some((t) => t.name === 'loss' || t.name === 'loss (raw)')) {
      const ya = gd._fullLayout.yaxis;
      return { range: ya.range.map(Number) };
    }
  }
  return null;
}
"""


def _switched_on(switch: Any) -> bool:
    """Click the switch unless it is on (a click while the page's first run still draws can be lost)."""
    if switch.locator("input").is_checked():
        return True
    switch.locator("label").click()
    switch.page.wait_for_timeout(500)  # the poll's interval: give the rerun time to answer before clicking again
    return bool(switch.locator("input").is_checked())


def _loss_state(page: Any) -> dict[str, Any] | None:
    return page.evaluate(JS_LOSS)
