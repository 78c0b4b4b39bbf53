"""The labels on the Live page's charts for real runs that went NaN, in a real headless Chromium at 1280
and 1440 px (issue 36, item 1): the finding's upright "nan" label no longer covers the start of "first
non-finite loss @ step 9", the eval chart's two first-non-finite labels (loss, eval_loss) no longer run
into each other, and no label is cut at the chart's edge. Screenshots go to ``tests/browser/screenshots/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.real_root import real_runs_root
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
RUNS = ("ratos_nan", "pinn_em_nan")  # NaN from step 9 (loss and every eval), NaN at step 218 near the end

# Each chart's annotation texts (their boxes on screen) and the chart's drawing area.
JS_LABELS = """
() => [...document.querySelectorAll('.js-plotly-plot')].map((gd) => {
  const area = gd.querySelector('.draglayer .xy .nsewdrag') || gd.querySelector('.bglayer rect');
  const a = area.getBoundingClientRect();
  const svg = gd.querySelector('svg.main-svg').getBoundingClientRect();
  const labels = [...gd.querySelectorAll('.annotation')].map((el) => {
    const r = el.getBoundingClientRect();
    return {text: el.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom};
  }).filter((l) => l.text && l.right > l.left);
  return {area: {left: a.left, right: a.right}, svg: {left: svg.left, right: svg.right}, labels: labels};
})
"""


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("chart-labels")
    root = real_runs_root(tmp / "logs", RUNS)
    with streamlit_server(root, tmp / "streamlit.log") as url:
        yield url


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return min(a["right"], b["right"]) - max(a["left"], b["left"]) > 1 and (
        min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 1
    )


@pytest.mark.parametrize("width", [1280, 1440])
@pytest.mark.parametrize("run", RUNS)
def test_no_label_covers_another_or_is_cut(server: str, run: str, width: int) -> None:
    with chromium_page(width=width, height=2000) as page:
        page.goto(f"{server}/?run={run}", wait_until="domcontentloaded")

        def labelled() -> list[dict[str, Any]] | None:
            """The charts once every label the test judges is drawn: the page draws its charts one by one, and
            ratos_nan's eval chart came after the loss chart's labels (a suite run judged the page too early)."""
            charts = page.evaluate(JS_LABELS)
            texts = " ".join(label["text"] for chart in charts for label in chart["labels"])
            drawn = "first non-finite loss" in texts and "nan" in texts.split()
            if run == "ratos_nan":
                drawn = drawn and any(_eval_chart(chart) for chart in charts)
            return charts if drawn else None

        charts = poll(labelled, 120, 0.5, "the charts and their labels")
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / f"chart_labels_{run}_{width}.png"), full_page=True)
        for chart in charts:
            labels = chart["labels"]
            for i, a in enumerate(labels):
                assert chart["svg"]["left"] - 1 <= a["left"] and a["right"] <= chart["svg"]["right"] + 1, a
                for b in labels[i + 1 :]:
                    assert not overlap(a, b), (a, b)
        if run == "ratos_nan":
            eval_chart = next(c for c in charts if _eval_chart(c))
            assert sum("first non-finite" in x["text"] for x in eval_chart["labels"]) == 2


def _eval_chart(chart: dict[str, Any]) -> bool:
    return any("eval_loss" in label["text"] for label in chart["labels"])
