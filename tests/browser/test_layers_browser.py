"""The Layers page in a real headless Chromium at 1280 and 1440 px.

``streamlit run dashboard.py -- --logdir ROOT`` on a free port against a run whose 24-parameter
``grad_norm/<param>`` family has one parameter blowing up before the global gradient norm (written
with the real writer at explicit times). The page is opened from the navigation's "Layers" entry
with ``?run=``: the heatmap draws 24 rows, the finding's mark sits on the culprit's row, the top
movers list starts with it, the selected parameter's curve is drawn under the loss and grad norm,
and nothing overflows the page sideways. Screenshots go to ``tests/browser/screenshots/`` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor_cb.testing.synthetic_families import FamilyRun, family_run
from tests.app.family_runs import write_family_run
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"

JS_HEAT = """
() => {
  const gd = document.querySelector('.st-key-ly_heatmap .js-plotly-plot');
  if (!gd || !gd._fullData) return null;
  const heat = gd._fullData.find((t) => t.type === 'heatmap');
  const mark = gd._fullData.find((t) => t.type === 'scatter');
  const cells = gd.querySelectorAll('.hm image, .heatmaplayer image').length;
  return {rows: heat ? heat.y.length : 0, mark: mark ? Array.from(mark.y) : [], drawn: cells};
}
"""
JS_CURVE = """
() => {
  const gd = document.querySelector('.st-key-ly_curve .js-plotly-plot');
  return gd && gd._fullData ? gd._fullData.filter((t) => t.mode === 'lines').length : 0;
}
"""


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FamilyRun]]:
    tmp = tmp_path_factory.mktemp("layers-browser")
    run = family_run(1, blowup=True, n_points=2_000, params=24)
    write_family_run(tmp / "logs", "blown", run, close="failed")
    with streamlit_server(tmp / "logs", tmp / "streamlit.log") as url:
        yield url, run


@pytest.mark.parametrize("width", [1280, 1440])
def test_layers_page_draws_the_family(server, width):
    url, run = server
    SHOTS.mkdir(exist_ok=True)
    with chromium_page(width=width, height=1400) as page:
        page.goto(f"{url}/layers?run=blown")
        heat = poll(lambda: page.evaluate(JS_HEAT), 60, what="the heatmap")
        assert heat["rows"] == 24
        assert heat["mark"] == [run.culprit]
        assert poll(lambda: page.evaluate(JS_CURVE) == 3, 30, what="the parameter's curve under loss and grad norm")
        movers = page.locator(".stDataFrame, [data-testid='stDataFrame']").first
        movers.wait_for()
        assert page.get_by_role("link", name="Layers").count() >= 1  # in the navigation
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1
        page.screenshot(path=str(SHOTS / f"layers-{width}.png"), full_page=True)


def test_the_live_findings_link_opens_the_row(server):
    url, run = server
    with chromium_page(width=1280, height=1400) as page:
        page.goto(f"{url}/?run=blown")
        # the live page redraws its findings at every refresh: read the link's target, then follow it
        link = page.locator("a", has_text="Open this parameter on the Layers page").first
        link.wait_for(state="attached")
        href = link.get_attribute("href")
        assert href and href.startswith("layers?") and f"param={run.culprit}" in href  # relative to the app's base
        page.goto(f"{url}/{href}")
        poll(lambda: "/layers" in page.url and "param=" in page.url, 30, what="the Layers page's URL")
        heat = poll(lambda: page.evaluate(JS_HEAT), 60, what="the heatmap")
        assert heat["mark"] == [run.culprit]
        assert poll(lambda: page.evaluate(JS_CURVE) == 3, 30, what="the parameter's curve")
        js_titles = """() => {
          const gd = document.querySelector('.st-key-ly_curve .js-plotly-plot');
          return gd && gd._fullLayout ? gd._fullLayout.annotations.map((a) => a.text) : null;
        }"""
        titles = poll(lambda: page.evaluate(js_titles), 30, what="the curve's panel titles")
        assert titles[-1] == f"grad_norm: {run.culprit}"  # the row the finding names is the one drawn
