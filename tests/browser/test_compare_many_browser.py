"""Compare with 60 real runs in a real headless Chromium (issue 26, item 12): the legend sits beside the
chart and scrolls, 20 runs are drawn, and pointing at a curve dims every other run.
Skips cleanly without the real_runs corpus (``../shared/real_runs``). Screenshots go to
``tests/browser/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.app.real_root import REAL_RUNS
from tests.browser.harness import REPO, browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
ENTRY = REPO / "tests" / "app" / "compare_app.py"
CHART = "chart_cmp_0"

JS_OPACITY = """
(key) => Array.from(document.querySelectorAll('.st-key-' + key + ' .scatterlayer .trace')).map((el) => {
  const t = el.__data__ && el.__data__[0] && el.__data__[0].trace;
  return [t ? t.legendgroup : null, el.style.opacity];
})
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    if not (REAL_RUNS / "labels.json").is_file():
        pytest.skip(f"the real_runs corpus is not at {REAL_RUNS}")
    tmp = tmp_path_factory.mktemp("compare-many")
    root = tmp / "logs"
    names = sorted(p.parent.name for p in REAL_RUNS.glob("*/metrics.jsonl"))[:60]
    for name in names:
        shutil.copytree(REAL_RUNS / name, root / name)
    with streamlit_server(root, tmp / "streamlit.log", script=ENTRY) as url:
        yield url, names


def test_sixty_runs_legend_beside_and_highlight_on_hover(server: tuple[str, list[str]]) -> None:
    url, names = server
    SHOTS.mkdir(exist_ok=True)
    query = urlencode({"runs": names, "metric": "loss", "align": "relative"}, doseq=True)
    with chromium_page(1440, 900) as page:
        page.goto(f"{url}/?{query}", wait_until="domcontentloaded")
        chart = f".st-key-{CHART} .js-plotly-plot"
        poll(lambda: page.locator(f"{chart} .scatterlayer .trace").count() >= 20, 120, what="the overlay")
        page.locator(f".st-key-{CHART}").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "compare-60-1440.png"))
        plot = page.locator(f"{chart} .nsewdrag").first.bounding_box()
        legend = page.locator(f"{chart} .legend").first.bounding_box()
        assert legend["x"] >= plot["x"] + plot["width"] - 1, "the legend is beside the plot, not over it"
        assert plot["width"] > 500, "the plot keeps most of the width"
        assert page.locator(f"{chart} .legend .scrollbar").count() == 1, "a legend longer than the chart scrolls"
        # point at a drawn curve: hover where one run's first point is
        target = page.evaluate(
            """(key) => { const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
            const i = gd._fullData.findIndex((t) => t.visible === true && t.x && t.x.length > 3 && t.mode === 'lines'
              && t.showlegend !== false);
            const t = gd._fullData[i], xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const k = Math.floor(t.x.length / 2);
            const r = gd.getBoundingClientRect();
            return {group: t.legendgroup, x: r.left + xa._offset + xa.l2p(xa.d2l(t.x[k])),
                    y: r.top + ya._offset + ya.l2p(ya.d2l(t.y[k]))}; }""",
            CHART,
        )
        page.mouse.move(target["x"], target["y"])

        def dimmed() -> list[list[str]] | None:
            state = page.evaluate(JS_OPACITY, CHART)
            return state if any(o == "0.12" for _, o in state) else None

        state = poll(dimmed, 10, what="the other runs dimmed")
        page.screenshot(path=str(SHOTS / "compare-60-hover-1440.png"))
        lit = {g for g, o in state if o == ""}
        assert len(lit) == 1, f"one run stays lit, got {lit}"
        page.mouse.move(5, 5)
        poll(lambda: all(o == "" for _, o in page.evaluate(JS_OPACITY, CHART)), 10, what="all lit again")
