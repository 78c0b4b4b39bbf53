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

from monitor_cb.train.writer import MetricsWriter
from tests.browser.harness import (
    browser_missing,
    chart_state,
    chromium_page,
    drag_zoom,
    legend_click_taken,
    plot_box,
    poll,
    streamlit_server,
    wait_listening,
)

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
        toggle = entry.locator(".legendtoggle").first
        poll(
            lambda: legend_click_taken(page, toggle, lambda: _lr_visible(page) == "legendonly"),
            20,
            what="a legend click taken by Plotly",
        )
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
            box = plot_box(page, CHART)
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
    """The zoom once the server took it: the step inputs hold the whole steps around the dragged range,
    and the chart shows the dragged range itself (not snapped to those steps)."""
    lo, hi = _inputs(page)
    state = chart_state(page, CHART, "loss")
    if lo is None or hi is None or not state or state["autorange"] is True:
        return None
    x0, x1 = state["range"]
    return state if lo <= x0 < lo + 1 and hi - 1 < x1 <= hi else None


def _step_tile(page: Any) -> str:
    return page.get_by_test_id("stMetricValue").first.inner_text().strip()


# ----------------------------------------------------------------------------- values and zoom, one server
@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, LiveRun]]:
    """One server for the value-tile and zoom tests: runs with odd values, and a run that keeps writing."""
    tmp = tmp_path_factory.mktemp("live-values")
    root = tmp / "logs"
    odd = MetricsWriter(root / "odd", rank=0, world_size=1, fsync_interval=0, extra_meta={"total_steps": 2_000_000})
    ended = MetricsWriter(root / "odd-nan", rank=0, world_size=1, fsync_interval=0)
    for i in range(50):
        step = 999_951 + i
        odd.log(step=step, epoch=12345, loss=0.00325, lr=4.11e-4, throughput=123456.789, grad_norm=1234567.0)
        ended.log(step=step, loss=math.nan if i > 40 else 0.00325, lr=4.11e-4, throughput=123456.789, grad_norm=2.5)
    odd.close("finished")
    ended.close("failed", "loss became NaN")
    run = LiveRun(root, "zoom")
    run.write(200)
    with streamlit_server(root, tmp / "streamlit.log") as url:
        yield url, run
    run.writer.close()


# every element of a tile (label, value, delta) must show its whole text: nothing cut off with "…"
_JS_TILES = """() => Array.from(document.querySelectorAll('[data-testid=stMetric]')).map((tile) => {
  const text = (id) => {
    const n = tile.querySelector('[data-testid=' + id + ']');
    return n ? n.innerText.trim() : '';
  };
  const clipped = [tile, ...tile.querySelectorAll('*')].filter((n) => n.scrollWidth > n.clientWidth + 1)
    .map((n) => n.innerText.trim()).filter((t) => t);
  return { label: text('stMetricLabel'), value: text('stMetricValue'), clipped: clipped };
})"""


@pytest.mark.parametrize("width", [1280, 1440])
def test_value_tiles_show_whole_values(shared: tuple[str, LiveRun], width: int) -> None:
    """A loss of 0.00325, an lr of 4.11e-4 and step 1,000,000 are read whole, not "3.25…", "4.11…", "1,00…"."""
    url, _ = shared
    SHOTS.mkdir(exist_ok=True)
    expected = {
        "live": ("?run=odd", {"Step of 2,000,000": "1,000,000", "Epoch": "12,345", "Loss": "3.25e-3",
                              "LR": "4.11e-4", "Throughput": "123,457", "Grad norm": "1.235e6"}),
        "replay": ("replay?run=odd-nan", {"Step": "1,000,000", "Loss": "NaN", "LR": "4.11e-4",
                                          "Grad norm": "2.5", "Throughput": "123,457"}),
    }  # fmt: skip
    with chromium_page(width=width, height=1000) as page:
        for name, (link, values) in expected.items():
            page.goto(f"{url}/{link}", wait_until="domcontentloaded")
            tiles = poll(  # every tile drawn, labels included (they render a moment after the values)
                lambda values=values: (t := page.evaluate(_JS_TILES)) and set(values) <= {x["label"] for x in t} and t,
                timeout=45,
                what=f"the {name} page's tiles",
            )
            page.screenshot(path=str(SHOTS / f"tiles-{name}-{width}.png"))
            assert not [t for t in tiles if t["clipped"]], [t for t in tiles if t["clipped"]]
            shown = {t["label"]: t["value"] for t in tiles}
            for label, value in values.items():
                assert shown.get(label) == value, (label, shown)


_RELAYOUT = """([key, lo, hi]) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  return window.Plotly.relayout(gd, {'xaxis.range': [lo, hi]}).then(() => true);
}"""


def test_a_zoom_holds_every_time_while_records_arrive(shared: tuple[str, LiveRun]) -> None:
    """At the default refresh, set the x range to 50-120 as a drag does, append records: 20 tries, 20 holds.

    The zoom once came back to the whole run in about 4 of 10 tries: the browser's report of the
    zoom was lost when a refresh of the charts ran as it arrived.
    """
    url, run = shared
    held = 0
    with chromium_page(width=1440, height=1000) as page:
        page.goto(f"{url}/?run=zoom", wait_until="domcontentloaded")
        poll(lambda: _shown(page, min_step=run.step), timeout=45, what="the loss chart")
        wait_listening(page, CHART)
        for attempt in range(20):
            page.evaluate(_RELAYOUT, [CHART, 50, 120])
            last = run.write(40)
            state = poll(
                lambda last=last: _step_tile(page) == f"{last:,}" and _inputs(page) == (50, 120) and _loss(page),
                timeout=60,  # a refresh under load (two busy loops, two test workers) took over 15 s
                what=f"try {attempt}: step {last} drawn with the zoom kept",
            )
            assert state["range"] == pytest.approx([50, 120], abs=1), (attempt, state)
            assert state["autorange"] is not True, attempt
            held += 1
            page.get_by_role("button", name="Reset zoom").click()
            poll(lambda: _inputs(page) == (None, None) and _loss(page)["autorange"] is True, 60, what="reset")
        page.screenshot(path=str(SHOTS / "zoom-20-tries.png"))
    assert held == 20


def _loss(page: Any) -> dict[str, Any]:
    return chart_state(page, CHART, "loss") or {}


def _lr_visible(page: Any) -> Any:
    return (chart_state(page, CHART, "lr") or {}).get("visible")


_DROP_REPORTS = "() => { const r = window.__monitorChartEvents; r.held = r.send; r.send = null; }"
_RESTORE_REPORTS = "() => { const r = window.__monitorChartEvents; r.send = r.held; }"
_FORGET_CHOICE = "([key]) => { delete window.__monitorChartEvents.legend[key]; }"
# A figure built before the server had the click, drawn as Streamlit draws a new one (Plotly.react).
_STALE_REDRAW = """([key, name]) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  const data = gd.data.map((t) => Object.assign({}, t, t.name === name ? { visible: true } : {}));
  return window.Plotly.react(gd, data, gd.layout).then(() => true);
}"""


def _set_refresh(page: Any, label: str) -> None:
    page.get_by_test_id("stSidebar").get_by_text(label, exact=True).click()
    radio = page.get_by_test_id("stSidebar").get_by_role("radio", name=label)
    poll(lambda: radio.is_checked(), 60, what=f"refresh {label}")


def test_a_legend_click_whose_report_was_lost_is_put_back_and_reported_again(shared: tuple[str, LiveRun]) -> None:
    """A click the server never heard of (its report lost, or a redraw built before it arrived) must not be
    undone by the next redraw: the page puts the user's choice back on the chart and reports it again.

    Seen once in a suite of many: lr shown by a click, then hidden again by the next refresh for good. Here,
    with refreshes off so that nothing else redraws: the report of a click hiding lr is dropped, then a
    redraw with lr shown (what the server draws, not knowing) comes; lr must be hidden again, and the
    server must have it: a later server redraw, with the page's own memory of the click gone, hides lr."""
    url, run = shared
    entry = f".st-key-{CHART} .legend .traces"
    with chromium_page(width=1440, height=1000) as page:
        page.goto(f"{url}/?run=zoom", wait_until="domcontentloaded")
        poll(lambda: _shown(page, min_step=run.step), timeout=45, what="the loss chart")
        _set_refresh(page, "off")
        poll(lambda: _lr_visible(page) is True, 60, what="lr shown")
        wait_listening(page, CHART)
        page.evaluate(_DROP_REPORTS)
        toggle = page.locator(entry).filter(has_text=re.compile(r"^lr$")).locator(".legendtoggle").first
        poll(
            lambda: legend_click_taken(page, toggle, lambda: _lr_visible(page) == "legendonly"),
            20,
            what="the click taken by Plotly",
        )
        poll(lambda: _lr_visible(page) == "legendonly", 10, what="lr hidden by the click")
        page.evaluate(_RESTORE_REPORTS)
        # Plotly.react sets the stale figure's data at once (lr shown); only the page's put-back hides lr again
        page.evaluate(_STALE_REDRAW, [CHART, "lr"])
        poll(lambda: _lr_visible(page) == "legendonly", 30, what="lr hidden again")
        # the server heard the put-back: its next figure hides lr with no help from the page. The redraw the
        # put-back's report causes may land after a stale one: the stale redraw is made until it holds.
        page.evaluate(_FORGET_CHOICE, [CHART])

        def stale_shown() -> bool:
            if _lr_visible(page) is not True:
                page.evaluate(_STALE_REDRAW, [CHART, "lr"])
            return _lr_visible(page) is True

        poll(stale_shown, 60, interval=0.5, what="lr shown by a stale redraw")
        last = run.write(10)
        _set_refresh(page, "1 s")
        poll(
            lambda: _step_tile(page) == f"{last:,}" and _lr_visible(page) == "legendonly",
            60,
            what=f"step {last} drawn by the server with lr hidden",
        )


def test_a_legend_click_holds_every_time_while_records_arrive(shared: tuple[str, LiveRun]) -> None:
    """Plotly applies a legend click a moment after it (waiting for a double click); a refresh that
    replaced the chart in that moment lost the click. 8 clicks at the default refresh, 8 kept."""
    url, run = shared
    entry = f".st-key-{CHART} .legend .traces"
    with chromium_page(width=1440, height=1000) as page:
        page.goto(f"{url}/?run=zoom", wait_until="domcontentloaded")
        poll(lambda: _shown(page, min_step=run.step), timeout=45, what="the loss chart")
        wait_listening(page, CHART)  # a click before the listener loads is Plotly's alone: see wait_listening
        for attempt in range(8):
            want = "legendonly" if attempt % 2 == 0 else True
            toggle = page.locator(entry).filter(has_text=re.compile(r"^lr$")).locator(".legendtoggle").first
            # A click that Plotly never took (the legend was being redrawn under the pointer: no
            # plotly_legendclick) is made again, as a person would; a click it took must hold.
            poll(
                lambda t=toggle, w=want: legend_click_taken(page, t, lambda: _lr_visible(page) == w),
                20,
                what=f"click {attempt} taken by Plotly",
            )
            last = run.write(10)
            seen: list[tuple[str, Any]] = []  # what the page showed, for the failure's message

            def held(last: int = last, want: Any = want, seen: list[tuple[str, Any]] = seen) -> bool:
                now = (_step_tile(page), _lr_visible(page))
                if not seen or seen[-1] != now:
                    seen.append(now)
                return now == (f"{last:,}", want)

            try:
                poll(held, timeout=60)  # a refresh under load (two busy loops, two test workers) took over 15 s
            except TimeoutError:
                shown = "hidden" if want != True else "shown"  # noqa: E712
                pytest.fail(f"click {attempt}: lr not {shown} at step {last}; (step tile, lr visible) seen: {seen}")
