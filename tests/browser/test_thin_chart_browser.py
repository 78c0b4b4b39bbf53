"""The pages' line charts in a real Chromium: drawn by Plotly's basic bundle served by the dashboard (not
Streamlit's full Plotly module), following their column's width, the bundle taken from the browser's cache on
a reopen; with the bundle off, the same charts drawn by ``st.plotly_chart`` (#35 item 3)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from monitor_cb.demo.samples import write_sample_runs
from monitor_cb.views.plotly_bundle import ENV_BUNDLE, FILE_NAME, TRACE_TYPES, VERSION
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
RUNS = ("run01-lr0.0003-bs32-seed0", "run02-lr0.001-bs64-seed1")

# What drew the chart in container ``key``, and what the page loaded.
JS_DRAWN = """([key]) => {
  const holder = document.querySelector('.st-key-' + key);
  const gd = holder && holder.querySelector('.js-plotly-plot');
  if (!gd || !gd._fullData || !gd._fullData.length) return null;
  const resources = performance.getEntriesByType('resource').map((r) => r.name.split('/').pop());
  const ours = gd.__monitorPlotly;
  return {
    runs: gd._fullData.map((t) => t.name),
    version: ours ? ours.version : null,
    types: ours ? Object.keys(ours.PlotSchema.get().traces) : null,
    streamlitPlotly: resources.some((n) => n.startsWith('PlotlyChart.')),
    bundle: resources.some((n) => n.startsWith('plotly-basic-')),
    width: gd.getBoundingClientRect().width,
    column: holder.getBoundingClientRect().width,
  };
}"""
JS_BUNDLE_ENTRY = """() => {
  const e = performance.getEntriesByType('resource').find((r) => r.name.includes('plotly-basic-'));
  return e ? {transfer: e.transferSize, body: e.decodedBodySize} : null;
}"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The dashboard twice on the same runs: as set up (the bundle served), and with ``$MONITOR_PLOTLY_BUNDLE=off``."""
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("thin-chart")
    write_sample_runs(tmp / "logs", n_runs=2, steps=200, seed=0)
    with contextlib.ExitStack() as stack:
        on = stack.enter_context(streamlit_server(tmp / "logs", tmp / "on.log"))
        with pytest.MonkeyPatch.context() as env:  # the server's environment, taken when it starts
            env.setenv(ENV_BUNDLE, "off")
            off = stack.enter_context(streamlit_server(tmp / "logs", tmp / "off.log"))
        yield on, off


def _drawn(page: Any, key: str, runs: int = 1) -> dict[str, Any]:
    """What drew chart ``key``, once it shows at least ``runs`` traces."""

    def ready() -> dict[str, Any] | None:
        drawn = page.evaluate(JS_DRAWN, [key])
        return drawn if drawn and len(drawn["runs"]) >= runs else None

    return poll(ready, 120, what=f"chart {key}")


def test_live_and_compare_draw_with_the_basic_bundle(servers: tuple[str, str]) -> None:
    on, _ = servers
    with chromium_page(1440, 900) as page:
        page.goto(f"{on}/?run={RUNS[0]}", wait_until="domcontentloaded")
        drawn = _drawn(page, "chart_loss_lr")
        assert drawn["version"] == VERSION and set(drawn["types"]) <= TRACE_TYPES, drawn
        assert drawn["bundle"] and not drawn["streamlitPlotly"], drawn
        assert drawn["width"] >= 0.95 * drawn["column"], drawn
        # the chart follows its column: a narrower window, a narrower chart
        page.set_viewport_size({"width": 1000, "height": 900})

        def narrowed() -> bool:
            now = page.evaluate(JS_DRAWN, ["chart_loss_lr"])
            return bool(now and now["width"] < 0.8 * drawn["width"] and now["width"] >= 0.95 * now["column"])

        poll(narrowed, 60, what="the chart to narrow with its column")
        page.goto(f"{on}/compare?runs={RUNS[0]}&runs={RUNS[1]}&metric=loss", wait_until="domcontentloaded")
        compared = _drawn(page, "chart_cmp_0", runs=2)
        assert compared["version"] == VERSION and not compared["streamlitPlotly"], compared
        assert all(any(run in name for name in compared["runs"]) for run in RUNS), compared


def test_a_reopen_takes_the_bundle_from_the_browsers_cache(servers: tuple[str, str]) -> None:
    on, _ = servers
    with chromium_page(1440, 900) as page:
        page.goto(f"{on}/?run={RUNS[0]}", wait_until="domcontentloaded")
        _drawn(page, "chart_loss_lr")
        first = page.evaluate(JS_BUNDLE_ENTRY)
        assert first and first["transfer"] > 0, first
        page.goto(f"{on}/?run={RUNS[1]}", wait_until="domcontentloaded")
        _drawn(page, "chart_loss_lr")
        again = page.evaluate(JS_BUNDLE_ENTRY)
        assert again == {"transfer": 0, "body": first["body"]}, (first, again)  # not asked for again
        response = page.request.get(f"{on}/_monitor/{FILE_NAME}", headers={"accept-encoding": "gzip"})
        assert response.ok and "immutable" in response.headers["cache-control"]


def test_without_the_bundle_the_charts_use_streamlits_plotly(servers: tuple[str, str]) -> None:
    _, off = servers
    with chromium_page(1440, 900) as page:
        page.goto(f"{off}/?run={RUNS[0]}", wait_until="domcontentloaded")
        drawn = _drawn(page, "chart_loss_lr")
        assert drawn["version"] is None and drawn["streamlitPlotly"] and not drawn["bundle"], drawn
        answer = page.request.get(f"{off}/_monitor/{FILE_NAME}")  # Streamlit's page (its fallback), no bundle
        assert "javascript" not in answer.headers.get("content-type", ""), answer.headers
