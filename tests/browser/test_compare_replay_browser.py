"""The compare and replay pages in a real headless Chromium, with screenshots.

``streamlit run tests/app/compare_app.py -- --logdir ROOT`` on a free port against sample runs:
the overlay draws one chart per metric, a legend click hides a run in every chart, side by side
shows the chosen metrics per run on linked x, the replay plays (the slider moves on its own) and an upload is replayed.
Screenshots go to ``tests/browser/screenshots/`` (git-ignored). Waits are polls with deadlines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.demo.samples import write_sample_runs
from monitor_cb.train.writer import MetricsWriter
from tests.browser.harness import (
    REPO,
    browser_missing,
    chromium_page,
    drag_zoom,
    legend_click_taken,
    poll,
    streamlit_server,
    wait_listening,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
ENTRY = REPO / "tests" / "app" / "compare_app.py"
RUNS = ("run01-lr0.0003-bs32-seed0", "run02-lr0.001-bs64-seed1", "run03-lr0.0001-bs32-seed2")


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


class LiveRun:
    """A run still training: it keeps writing while the compare page is open."""

    def __init__(self, root: Path) -> None:
        self.writer = MetricsWriter(root / "live", rank=0, world_size=1, fsync_interval=0)
        self.step = 0

    def write(self, n: int) -> int:
        for _ in range(n):
            self.step += 1
            self.writer.log(
                step=self.step, loss=3.0 * math.exp(-self.step / 200) + 0.2, lr=1e-3, samples=self.step * 32
            )
        assert self.writer.flush(5.0)
        return self.step


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, LiveRun]]:
    tmp = tmp_path_factory.mktemp("compare-browser")
    root = tmp / "logs"
    write_sample_runs(root, n_runs=3, steps=600, seed=0)
    live = LiveRun(root)
    live.write(100)
    with streamlit_server(root, tmp / "streamlit.log", script=ENTRY) as url:
        yield url, tmp, live
    live.writer.close()


JS_GROUPS = """
(key) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  if (!gd || !gd._fullData) return null;
  const out = {};
  for (const t of gd._fullData) { if (t.legendgroup) out[t.legendgroup] = t.visible; }
  return out;
}
"""


def groups(page: Any, key: str) -> dict[str, Any] | None:
    """Run id -> plotly visibility of its traces in the chart with container key ``key``."""
    return page.evaluate(JS_GROUPS, key)


def n_charts(page: Any) -> int:
    return page.locator(".js-plotly-plot").count()


def test_compare_overlay_legend_and_side_by_side(server: tuple[str, Path, LiveRun]) -> None:
    url, _, _ = server
    SHOTS.mkdir(exist_ok=True)
    # compare is the test entry's default page, so it is served at "/"
    query = "&".join(f"runs={r}" for r in RUNS) + "&metric=loss&metric=eval_loss&align=step&smooth=0.6"
    with chromium_page() as page:
        page.goto(f"{url}/?{query}", wait_until="domcontentloaded")
        poll(lambda: (groups(page, "chart_cmp_1") or {}).keys() >= set(RUNS), timeout=45, what="two overlay charts")
        poll(lambda: page.get_by_text("Config diff").count() > 0, timeout=20, what="the config diff")
        page.screenshot(path=str(SHOTS / "compare-overlay.png"), full_page=True)

        # a legend click in the first chart hides that run in every chart
        entry = page.locator(".st-key-chart_cmp_0 .legend .traces").first
        toggle = entry.locator(".legendtoggle").first
        wait_listening(page, "chart_cmp_0")
        poll(lambda: legend_click_taken(page, toggle), 20, what="a legend click taken by Plotly")
        hidden = poll(
            lambda: [g for g, v in (groups(page, "chart_cmp_1") or {}).items() if v == "legendonly"],
            timeout=15,
            what="the run hidden in the second chart too",
        )
        assert len(hidden) == 1
        page.screenshot(path=str(SHOTS / "compare-legend-hidden.png"), full_page=True)

        page.goto(f"{url}/?{query.replace('align=step', 'align=relative')}&mode=side", wait_until="domcontentloaded")
        # per run one panel per chosen metric (loss, eval_loss)
        poll(lambda: n_charts(page) >= 2 * len(RUNS), timeout=45, what="side-by-side panels")
        assert "mode=side" in page.url and "align=relative" in page.url, "the URL keeps the view"
        page.screenshot(path=str(SHOTS / "compare-side-by-side.png"), full_page=True)
        before = poll(lambda: _linked_ranges(page), timeout=20, what="every panel on the runs' whole x range")

        # a drag in one run's panel zooms every run's panels to the same x range (linked)
        drag_zoom(page, "chart_cmp_side_0_0", 0.3, 0.7)
        ranges = poll(
            lambda: (r := _linked_ranges(page)) and r != before and r,
            timeout=20,
            what="one zoomed range on every panel",
        )
        assert len(ranges) == 2 * len(RUNS)
        page.screenshot(path=str(SHOTS / "compare-side-by-side-zoomed.png"), full_page=True)


JS_SIDE_RANGES = """
() => Array.from(document.querySelectorAll('[class*="st-key-chart_cmp_side_"] .js-plotly-plot'))
  .map((gd) => gd._fullLayout && gd._fullLayout.xaxis.autorange === false ? gd._fullLayout.xaxis.range.join("|") : null)
"""


def _linked_ranges(page: Any) -> list[str] | None:
    """The x range of every side-by-side panel when all are fixed to the same one, else None."""
    ranges = page.evaluate(JS_SIDE_RANGES)
    return ranges if ranges and None not in ranges and len(set(ranges)) == 1 else None


def _slider_step(page: Any) -> int | None:
    node = page.locator(".st-key-rp_cursor input[type=range]")
    if node.count() == 0:
        return None
    value = node.first.input_value()
    return int(float(value)) if value else None


def test_replay_plays_jumps_and_takes_an_upload(server: tuple[str, Path, LiveRun]) -> None:
    url, tmp, _ = server
    SHOTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{url}/replay?run={RUNS[1]}", wait_until="domcontentloaded")
        last = poll(lambda: _slider_step(page), timeout=45, what="the step slider")
        poll(lambda: n_charts(page) >= 2, timeout=20, what="replay charts")
        page.screenshot(path=str(SHOTS / "replay-end.png"), full_page=True)

        page.get_by_role("button", name="Play").click()
        first = poll(lambda: (s := _slider_step(page)) is not None and s < last and s, timeout=20, what="replay start")
        later = poll(lambda: (s := _slider_step(page)) is not None and s > first and s, timeout=20, what="play ticks")
        assert later > first
        page.screenshot(path=str(SHOTS / "replay-playing.png"), full_page=True)
        page.get_by_role("button", name="Pause").click()
        poll(lambda: page.get_by_role("button", name="Play").count() > 0, timeout=15, what="paused")

        # jump to the first NaN: a window at full resolution
        page.locator(".st-key-rp_jump").click()
        page.get_by_role("option").filter(has_text="nan: loss became NaN").first.click()
        poll(lambda: page.get_by_text("Back to replay").count() > 0, timeout=20, what="the jump window")
        poll(lambda: n_charts(page) >= 2, timeout=20, what="window charts")
        page.screenshot(path=str(SHOTS / "replay-jump-nan.png"), full_page=True)

        # an upload in the origin article's plain json.dumps format (bare NaN)
        lines = [
            json.dumps({"step": s, "loss": (math.nan if s > 260 else 2 * math.exp(-s / 90) + 0.2), "ts": 1.7e9 + s})
            for s in range(1, 301)
        ]
        upload = tmp / "article.jsonl"
        upload.write_text("\n".join(lines) + "\n")
        page.goto(f"{url}/replay", wait_until="domcontentloaded")
        page.get_by_text("Upload a JSONL file").click()
        page.locator(".st-key-rp_upload input[type=file]").set_input_files(str(upload))
        poll(lambda: n_charts(page) >= 1 and _slider_step(page) == 300, timeout=30, what="the uploaded run")
        page.screenshot(path=str(SHOTS / "replay-upload.png"), full_page=True)
        assert not list((tmp / "logs").glob("**/article*")), "the upload is never written under the log root"


JS_MAX_X = """
([key, group]) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  if (!gd || !gd._fullData) return null;
  let best = null;
  for (const t of gd._fullData) {
    if (t.legendgroup !== group || !t.x) continue;
    for (let i = 0; i < t.x.length; i++) { const v = Number(t.x[i]); if (best === null || v > best) best = v; }
  }
  return best;
}
"""


def test_compare_keeps_a_training_run_updating(server: tuple[str, Path, LiveRun]) -> None:
    url, _, live = server
    SHOTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{url}/?runs=live&runs={RUNS[0]}&metric=loss", wait_until="domcontentloaded")
        page.get_by_text("1 s", exact=True).click()  # the live page's refresh control
        poll(lambda: (page.evaluate(JS_MAX_X, ["chart_cmp_0", "live"]) or 0) >= live.step, timeout=45, what="live run")
        for _ in range(2):
            last = live.write(25)
            poll(
                lambda last=last: (page.evaluate(JS_MAX_X, ["chart_cmp_0", "live"]) or 0) >= last,
                timeout=10,
                what=f"step {last} of the training run on the compare chart",
            )
        page.screenshot(path=str(SHOTS / "compare-live.png"), full_page=True)
