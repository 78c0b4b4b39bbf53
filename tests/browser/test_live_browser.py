"""The live page in a real headless Chromium: new points appear within 3 s and a zoom survives refreshes.

Streamlit 1.67 returns a Plotly chart to autorange whenever new data arrives, even with a constant
``uirevision``; this test proves the page's answer (a relayout listener plus the zoom kept as a step
range and re-applied) holds the zoom and the legend state while the run keeps writing.
Screenshots go to ``tests/browser/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.writer import MetricsWriter
from tests.browser.harness import browser_missing, chart_state, chromium_page, drag_zoom, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
CHART = "chart_loss_lr"


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


class LiveRun:
    """A run that keeps writing, as a training would."""

    def __init__(self, root: Path, name: str = "live") -> None:
        self.writer = MetricsWriter(
            root / name, rank=0, world_size=1, fsync_interval=0, extra_meta={"total_steps": 5000}
        )
        self.step = 0

    def write(self, n: int) -> int:
        for _ in range(n):
            self.step += 1
            s = self.step
            self.writer.log(
                step=s,
                epoch=1,
                loss=2.5 * math.exp(-s / 150) + 0.2 + 0.05 * math.sin(s),
                lr=1e-3 * min(1.0, s / 50),
                throughput=900.0 + (s % 11),
                grad_norm=1.0 + (s % 17) / 8,
            )
        assert self.writer.flush(5.0)
        return self.step


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, LiveRun, Path]]:
    root = tmp_path / "logs"
    run = LiveRun(root)
    run.write(300)
    with streamlit_server(root, tmp_path / "streamlit.log") as url:
        yield url, run, tmp_path
    run.writer.close()


def test_new_points_show_and_zoom_survives_refreshes(live: tuple[str, LiveRun, Path]) -> None:
    url, run, _tmp = live
    SHOTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{url}/?run=live", wait_until="domcontentloaded")
        page.get_by_text("1 s", exact=True).click()  # refresh every second
        state = poll(lambda: _shown(page, min_step=300), timeout=30, what="the loss chart with 300 steps")
        assert state["autorange"] is True

        # 1. a record written now is on the chart within 3 s
        last = run.write(10)
        t0 = time.monotonic()
        poll(lambda: _shown(page, min_step=last), timeout=3.0, what=f"step {last} on the chart")
        latency = time.monotonic() - t0
        page.screenshot(path=str(SHOTS / "1-live.png"), full_page=True)

        # 2. zoom by dragging over the chart's right part: the view narrows and the step inputs follow
        drag_zoom(page, CHART, 0.6, 0.85)
        poll(lambda: _zoomed(page), timeout=10, what="the zoomed range")
        # the server took the zoom: the step inputs hold it and the redrawn chart shows exactly it
        zoomed = poll(lambda: _server_zoom(page), timeout=10, what="the zoom applied by the server")

        # 3. hide lr through its legend entry
        entry = page.locator(f".st-key-{CHART} .legend .traces").filter(has_text=re.compile(r"^lr$"))
        entry.locator(".legendtoggle").first.click(force=True)
        poll(lambda: (chart_state(page, CHART, "lr") or {}).get("visible") == "legendonly", timeout=5, what="lr hidden")

        # 4. new points arrive through two refreshes: the zoom and the legend state hold
        for _ in range(2):
            last = run.write(10)
            poll(lambda last=last: _shown(page, min_step=last), timeout=5, what=f"step {last} after zoom")
        held = chart_state(page, CHART, "loss")
        assert held["range"] == pytest.approx(zoomed["range"], abs=2.0), (zoomed, held)
        assert held["autorange"] is not True
        assert chart_state(page, CHART, "lr")["visible"] == "legendonly"
        page.screenshot(path=str(SHOTS / "2-zoom-held.png"), full_page=True)

        # 5. the zoomed range is drawn at full resolution: every step in it is a point
        lo, hi = held["range"]
        n_in_range = page.evaluate(
            """([key, lo, hi]) => {
                const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
                const t = gd._fullData.find((d) => d.name === 'loss (raw)');
                let n = 0; for (const v of t.x) { if (v >= lo && v <= hi) n++; } return n; }""",
            [CHART, lo, hi],
        )
        assert n_in_range >= math.floor(hi) - math.ceil(lo)

        # 6. a double-click returns to the whole run, following new points again
        last = run.write(10)
        for attempt in range(3):  # a double-click landing just as the chart is redrawn can be lost
            box = page.locator(f".st-key-{CHART} .js-plotly-plot .nsewdrag").first.bounding_box()
            page.mouse.dblclick(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            try:
                poll(lambda: _inputs(page) == (None, None) and _follows(page, last), timeout=4, what="reset")
                break
            except TimeoutError:
                if attempt == 2:
                    raise
        page.screenshot(path=str(SHOTS / "3-reset.png"), full_page=True)

        # 7. on a wall-clock x axis (plotly sends dates) a zoom holds the same way
        page.locator(".st-key-x_axis").click()
        page.get_by_role("option", name="wall time").click()
        poll(lambda: _axis_type(page) == "date", timeout=10, what="a date x axis")
        drag_zoom(page, CHART, 0.3, 0.7)
        poll(lambda: _inputs(page)[0] is not None, timeout=10, what="the date zoom taken by the server")
        last = run.write(10)
        poll(lambda: _step_tile(page) == f"{last:,}", timeout=5, what=f"step {last} in the KPI row")
        dated = _raw_range(page)
        assert dated["auto"] is False
        for _ in range(2):
            last = run.write(10)
            poll(lambda last=last: _step_tile(page) == f"{last:,}", timeout=5, what=f"step {last} in the KPI row")
        assert _raw_range(page)["range"] == dated["range"]
        page.screenshot(path=str(SHOTS / "4-walltime-zoom.png"), full_page=True)
    print(f"record -> visible latency: {latency:.2f}s; zoom held at {held['range']}; date zoom {dated['range']}")


def _shown(page: Any, min_step: int) -> dict[str, Any] | None:
    state = chart_state(page, CHART, "loss")
    return state if state and state["maxX"] is not None and state["maxX"] >= min_step else None


def _zoomed(page: Any) -> dict[str, Any] | None:
    state = chart_state(page, CHART, "loss")
    if not state or state["autorange"] is True:
        return None
    lo, hi = state["range"]
    return state if hi - lo < 0.6 * state["maxX"] else None


def _follows(page: Any, last: int) -> bool:
    state = chart_state(page, CHART, "loss")
    return bool(state and state["maxX"] >= last and state["range"][1] >= last - 1)


_JS_RAW = """() => { const gd = document.querySelector('.st-key-chart_loss_lr .js-plotly-plot');
  if (!gd || !gd._fullLayout) return null; const xa = gd._fullLayout.xaxis;
  const t = gd._fullData.find((d) => d.name === 'loss (raw)');
  return {range: xa.range, auto: xa.autorange, type: xa.type, n: t ? t.x.length : 0}; }"""


def _raw_range(page: Any) -> dict[str, Any] | None:
    return page.evaluate(_JS_RAW)


def _axis_type(page: Any) -> str | None:
    state = _raw_range(page)
    return state["type"] if state else None


def _inputs(page: Any) -> tuple[float | None, float | None]:
    values = [page.locator(f".st-key-{key} input").input_value() for key in ("zoom_lo", "zoom_hi")]
    return tuple(float(v) if v not in ("", None) else None for v in values)  # type: ignore[return-value]


def _server_zoom(page: Any) -> dict[str, Any] | None:
    lo, hi = _inputs(page)
    state = chart_state(page, CHART, "loss")
    if lo is None or hi is None or not state or state["autorange"] is True:
        return None
    return state if state["range"] == pytest.approx([lo, hi]) else None


def _step_tile(page: Any) -> str:
    return page.get_by_test_id("stMetricValue").first.inner_text().strip()
