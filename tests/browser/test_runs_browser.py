"""The runs page and Compare's colours in a real headless Chromium, at 1280 and 1440 px.

``streamlit run dashboard.py -- --logdir ROOT`` on a free port against a 12-run sweep (6 learning
rates x 2 seeds, written with the real writer):

* Compare with all 12 runs: the colours read from the drawn plot (plotly's ``_fullData`` of the
  rendered chart and the stroke of each legend line in the SVG) are 12 different colours, every pair
  at least 10 CIEDE2000 apart; the "Log y" and "Shared y" labels are not cut;
* side by side: every panel has the same width (the last row padded);
* the runs page: clicking two rows' checkboxes in the table and the "Open 2 selected in Compare"
  link opens the compare page with exactly those runs (``/compare?runs=a&runs=b``) in their colours.

Screenshots go to ``tests/browser/screenshots/`` (git-ignored). Waits are polls with deadlines.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from monitor_cb.testing.colordiff import ciede2000, hex_to_lab
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server
from tests.compare.runs_helpers import write_sweep_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
WIDTHS = (1280, 1440)
MIN_DELTA_E = 10.0


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    tmp = tmp_path_factory.mktemp("runs-browser")
    root = tmp / "logs"
    names = []
    for i, (lr, seed) in enumerate(itertools.product((1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2), (0, 1))):
        name = f"sweep{i:02d}-lr{lr:g}-seed{seed}"
        write_sweep_run(root, name, lr=lr, seed=seed, steps=200, t0=1_700_000_000.0 + i * 300)
        names.append(name)
    with streamlit_server(root, tmp / "streamlit.log") as url:
        yield url, names


JS_TRACE_COLORS = """
(key) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  if (!gd || !gd._fullData) return null;
  const out = {};
  for (const t of gd._fullData) {
    if (t.showlegend !== false && t.line && t.legendgroup) out[t.legendgroup] = t.line.color;
  }
  const svg = Array.from(gd.querySelectorAll('.legend .traces .js-line')).map((p) => p.style.stroke);
  return {traces: out, legend: svg};
}
"""

JS_CUT = """
(labels) => labels.map((text) => {
  const node = Array.from(document.querySelectorAll('[data-testid="stWidgetLabel"] p, label p'))
    .find((p) => p.textContent.trim() === text);  // a cut label ends in "…" by CSS: the text stays whole
  if (!node) return [text, null];
  return [text, node.scrollWidth <= node.clientWidth + 1 && node.getBoundingClientRect().width > 0];
})
"""


JS_CUT_ANY = """
(texts) => texts.map((text) => {
  const node = Array.from(document.querySelectorAll('p, span'))
    .find((p) => p.textContent.trim() === text && p.children.length === 0);
  if (!node) return [text, null];
  return [text, node.scrollWidth <= node.clientWidth + 1 && node.getBoundingClientRect().width > 0];
})
"""


def rgb_to_hex(text: str) -> str:
    """``rgb(31, 119, 180)`` (what the browser reports for an SVG stroke) as ``#1f77b4``."""
    parts = [int(float(p)) for p in text[text.index("(") + 1 : text.index(")")].split(",")[:3]]
    return "#" + "".join(f"{p:02x}" for p in parts)


@pytest.mark.parametrize("width", WIDTHS)
def test_twelve_runs_get_twelve_distinct_colours_and_labels_are_whole(
    server: tuple[str, list[str]], width: int
) -> None:
    url, names = server
    SHOTS.mkdir(exist_ok=True)
    query = "&".join(f"runs={n}" for n in names) + "&metric=loss"
    with chromium_page(width=width, height=1000) as page:
        page.goto(f"{url}/compare?{query}", wait_until="domcontentloaded")
        found = poll(
            lambda: (c := page.evaluate(JS_TRACE_COLORS, "chart_cmp_0")) and len(c["traces"]) == 12 and c,
            timeout=60,
            what="12 runs drawn",
        )
        page.screenshot(path=str(SHOTS / f"compare-12-runs-{width}.png"), full_page=False)
        traces = found["traces"]
        assert set(traces) == set(names)
        legend = [rgb_to_hex(s) for s in found["legend"] if s]
        assert sorted(legend) == sorted(c.lower() for c in traces.values()), "the SVG legend draws those colours"
        labs = {n: hex_to_lab(c) for n, c in traces.items()}
        worst = min((ciede2000(labs[a], labs[b]), a, b) for a, b in itertools.combinations(names, 2))
        assert worst[0] >= MIN_DELTA_E, f"{worst[1]} and {worst[2]} are only {worst[0]:.1f} apart"
        labels = ["Log y", "Log x", "Shared y", "Shared x", "Group by", "Smoothing", "Weight"]
        # The controls may still be redrawn by a rerun that follows the first chart: wait for all of them.
        cut = poll(
            lambda: (d := dict(page.evaluate(JS_CUT, labels))) and None not in d.values() and d,
            timeout=60,
            what="the compare controls drawn",
        )
        assert cut == dict.fromkeys(labels, True), cut


JS_SIDE_WIDTHS = """
() => Array.from(document.querySelectorAll('[class*="st-key-chart_cmp_side_"] .js-plotly-plot'))
  .map((gd) => Math.round(gd.getBoundingClientRect().width))
"""


@pytest.mark.parametrize("width", WIDTHS)
def test_side_by_side_panels_are_all_the_same_size(server: tuple[str, list[str]], width: int) -> None:
    url, names = server
    query = "&".join(f"runs={n}" for n in names[:4]) + "&metric=loss&metric=eval_loss&mode=side"
    with chromium_page(width=width, height=1000) as page:
        page.goto(f"{url}/compare?{query}", wait_until="domcontentloaded")
        widths = poll(
            lambda: (w := page.evaluate(JS_SIDE_WIDTHS)) and len(w) == 8 and all(w) and w,
            timeout=60,
            what="8 side panels",
        )
        page.screenshot(path=str(SHOTS / f"compare-side-4-runs-{width}.png"), full_page=True)
        assert max(widths) - min(widths) <= 2, widths


def _table_box(page: Any) -> dict[str, float] | None:
    frame = page.locator(".st-key-runs_table [data-testid='stDataFrameResizable']")
    return frame.first.bounding_box() if frame.count() else None


@pytest.mark.parametrize("width", WIDTHS)
def test_select_rows_and_open_them_in_compare(server: tuple[str, list[str]], width: int) -> None:
    url, names = server
    with chromium_page(width=width, height=1100) as page:
        page.goto(f"{url}/runs", wait_until="domcontentloaded")
        box = poll(lambda: _table_box(page), timeout=60, what="the runs table")
        link = page.locator(".st-key-runs_open_compare a")
        poll(lambda: link.count() and "Select rows" in link.inner_text(), timeout=20, what="the compare link, off")
        page.screenshot(path=str(SHOTS / f"runs-table-{width}.png"), full_page=True)
        # glide-data-grid draws on a canvas: rows are 35 px under a 35 px header; the first column
        # is the row marker (a checkbox on hover), clicked like a person would
        for row in (1, 3):
            page.mouse.click(box["x"] + 18, box["y"] + 35 + 35 * row + 17)
        poll(lambda: "Open 2 selected in Compare" in link.inner_text(), timeout=20, what="two rows selected")
        cut = dict(page.evaluate(JS_CUT_ANY, ["Open 2 selected in Compare", "Descending"]))
        assert cut == {"Open 2 selected in Compare": True, "Descending": True}, cut
        page.screenshot(path=str(SHOTS / f"runs-selected-{width}.png"), full_page=True)
        link.click()
        # (Playwright's page.url can miss a history.replaceState; the page's own location cannot)
        href = poll(lambda: (h := page.evaluate("location.href")) and "/compare" in h and h, 30, what="Compare")
        picked = parse_qs(urlparse(href).query).get("runs", [])
        assert len(picked) == 2 and set(picked) <= set(names), href
        colours = poll(
            lambda: (c := page.evaluate(JS_TRACE_COLORS, "chart_cmp_0")) and len(c["traces"]) == 2 and c,
            timeout=60,
            what="the two runs drawn on Compare",
        )
        assert set(colours["traces"]) == set(picked)
        page.screenshot(path=str(SHOTS / f"runs-opened-in-compare-{width}.png"), full_page=False)
