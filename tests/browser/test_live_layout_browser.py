"""The live page's layout in a real headless Chromium at 1280, 1440 and 1920 px (issue 26, items 7 and 8):
the first chart starts within the first screen even with a NaN finding, every chart pill is in sight,
the eight tiles make even rows, and a page opened on an old finding pops no toast.
Screenshots go to ``tests/browser/screenshots/`` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.train.writer import MetricsWriter
from tests.app.conftest import write_run
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
HEIGHT = 900


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("live-layout")
    root = tmp / "logs"
    write_run(root, "diverged", steps=400, nan_from=218, close="failed", total_steps=2000)
    huge = MetricsWriter(root / "huge", rank=0, world_size=1, fsync_interval=0)
    for s in range(1, 301):  # a loss of 1e12 over 6M steps: long tick labels on both axes
        huge.log_at(1.7e9 + s, step=s * 20_000, loss=1e12 * (3 - s / 150), lr=1e-3, throughput=1e9)
    huge.close("finished")
    with streamlit_server(root, tmp / "streamlit.log") as url:
        yield url


def boxes(page: Any, selector: str) -> list[dict[str, float]]:
    return [b for b in (el.bounding_box() for el in page.locator(selector).all()) if b]


def chart_top(page: Any) -> float:
    box = page.locator(".st-key-chart_loss_lr").bounding_box()
    return box["y"] if box else float("inf")


def seven(found: Any) -> list[dict[str, float]] | None:
    """The seven chart pills (every chart the page offers), or None while they are not all drawn."""
    found = list(found)
    return found if len(found) == 7 else None


def eight(found: list[dict[str, float]]) -> list[dict[str, float]] | None:
    """The eight KPI tiles, or None while they are not all drawn."""
    return found if len(found) == 8 else None


@pytest.mark.parametrize("width", [1280, 1440, 1920])
def test_charts_first_pills_whole_tiles_even_no_old_toast(server: str, width: int) -> None:
    SHOTS.mkdir(exist_ok=True)
    with chromium_page(width, HEIGHT) as page:
        page.goto(f"{server}/?run=diverged", wait_until="domcontentloaded")
        poll(lambda: page.locator(".st-key-chart_loss_lr .js-plotly-plot").count() > 0, 60, what="the loss chart")
        poll(lambda: page.get_by_text("details below the charts").count() > 0, 60, what="the findings line")
        # once settled: while a rerun draws, an element above the chart can hold its old place for a moment
        poll(
            lambda: chart_top(page) < 0.7 * HEIGHT,
            20,
            what="the first chart within the top 70% of the screen",
        )
        chart = page.locator(".st-key-chart_loss_lr").bounding_box()
        # measured once drawn: a rerun (the page's refresh) can briefly leave a widget without a box
        pills = poll(
            lambda: seven(b for b in boxes(page, ".st-key-panels button") if b["height"] > 20),
            30,
            what="the 7 chart pills",
        )
        main = page.locator('[data-testid="stMainBlockContainer"]').bounding_box()
        assert all(b["x"] + b["width"] <= main["x"] + main["width"] + 1 and b["width"] > 40 for b in pills)
        tiles = poll(lambda: eight(boxes(page, '.st-key-kpi_tiles [data-testid="stMetric"]')), 30, what="the tiles")
        page.screenshot(path=str(SHOTS / f"live-layout-{width}.png"))
        tops: dict[int, int] = {}
        for b in tiles:
            tops[round(b["y"])] = tops.get(round(b["y"]), 0) + 1
        assert sorted(tops.values()) in ([4, 4], [8]), f"tile rows {tops}"
        assert page.locator('[data-testid="stToast"]').count() == 0, "the finding was there when the page opened"
        findings = page.get_by_text("nan · step 218 — loss became NaN at step 218").last.bounding_box()
        assert findings["y"] > chart["y"], "the findings' list is below the charts"


def test_download_the_data_behind_a_chart_in_the_zoom(server: str, tmp_path: Path) -> None:
    """The link's zoom (steps 100-250) is what the CSV holds: the loss chart's columns, NaN as NaN."""
    import csv

    with chromium_page(1440, HEIGHT) as page:
        page.goto(f"{server}/?run=diverged&from=100&to=250", wait_until="domcontentloaded")
        poll(lambda: page.locator(".st-key-chart_loss_lr .js-plotly-plot").count() > 0, 60, what="the loss chart")
        page.get_by_role("button", name="Download chart data").click()
        poll(lambda: page.get_by_text("steps 100–250").count() > 0, 30, what="the popover")
        page.screenshot(path=str(SHOTS / "live-download-1440.png"))
        with page.expect_download() as info:
            page.get_by_role("button", name="CSV").click()
        path = tmp_path / "loss.csv"
        info.value.save_as(path)
        assert info.value.suggested_filename == "diverged-loss_lr.csv"
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == ["step", "t", "loss", "lr"]
    assert [int(r["step"]) for r in rows] == list(range(100, 251))
    assert {r["loss"] for r in rows if int(r["step"]) >= 218} == {"NaN"}, "a logged NaN reads NaN"
    assert all(r["loss"] not in ("", "NaN") for r in rows if int(r["step"]) < 218)


JS_MARKS = """
() => {
  const gd = document.querySelector('.st-key-chart_loss_lr .js-plotly-plot');
  const xa = gd._fullLayout.xaxis;
  const at218 = xa._offset + xa.l2p(Math.log10(218));
  const lines = Array.from(gd.querySelectorAll('.shapelayer path')).map(
    (p) => Number(p.getAttribute('d').split(',')[0].slice(1)));
  const labels = Array.from(gd.querySelectorAll('.annotation')).map((a) => {
    const r = a.getBoundingClientRect(), g = gd.getBoundingClientRect();
    return [r.left - g.left, r.left + r.width / 2 - g.left, r.right - g.left];  // anchored left, centre or right
  });
  return { type: xa.type, at218: at218, lines: lines, labels: labels, range: xa.range };
}
"""


def test_log_x_draws_the_nan_line_and_its_label_at_step_218(server: str) -> None:
    with chromium_page(1440, HEIGHT) as page:
        page.goto(f"{server}/?run=diverged&logx=1&charts=loss_lr", wait_until="domcontentloaded")
        poll(lambda: page.locator(".st-key-chart_loss_lr .shapelayer path").count() > 0, 60, what="the marks")
        page.screenshot(path=str(SHOTS / "live-logx-1440.png"))
        marks = page.evaluate(JS_MARKS)
    assert marks["type"] == "log" and marks["range"][1] < 3.0, "the axis ends near step 400 (10**2.6), not 10**218"
    assert marks["lines"] and all(abs(x - marks["at218"]) < 3 for x in marks["lines"]), marks
    near = [min(abs(x - marks["at218"]) for x in edges) for edges in marks["labels"]]
    assert near and max(near) < 12, marks


JS_GAPS = """
(key) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  const fig = gd.getBoundingClientRect();
  const box = (el) => el.getBoundingClientRect();
  const ytitle = box(gd.querySelector('.g-ytitle')), xtitle = box(gd.querySelector('.g-xtitle'));
  const yticks = Array.from(gd.querySelectorAll('.yaxislayer-above .ytick text')).map(box);
  const xticks = Array.from(gd.querySelectorAll('.xaxislayer-above .xtick text')).map(box);
  // only the tick labels beside the title (sharing its rows) can collide with it
  const beside = yticks.filter((b) => b.bottom > ytitle.top && b.top < ytitle.bottom);
  const below = xticks.filter((b) => b.right > xtitle.left && b.left < xtitle.right);
  return {
    y_gap: Math.min(...beside.map((b) => b.left)) - ytitle.right,
    y_inside: ytitle.left - fig.left,
    x_gap: xtitle.top - Math.max(...below.map((b) => b.bottom)),
    beside: beside.length,
  };
}
"""


def test_axis_titles_clear_long_tick_labels(server: str) -> None:
    """Ticks of 2.5x10^12 and 6,000,000: each title sits clear of its tick labels, inside the figure."""
    with chromium_page(1280, HEIGHT) as page:
        page.goto(f"{server}/?run=huge", wait_until="domcontentloaded")
        poll(lambda: page.locator(".st-key-chart_loss_lr .ytick").count() > 0, 60, what="the loss chart")
        page.locator(".st-key-chart_loss_lr").screenshot(path=str(SHOTS / "live-1e12-1280.png"))
        gaps = page.evaluate(JS_GAPS, "chart_loss_lr")
    assert gaps["beside"] and gaps["y_gap"] >= 1 and gaps["y_inside"] >= 4 and gaps["x_gap"] >= 2, gaps
