"""A run's life seen in a real Chromium: what describes it refreshes together, and the page follows
it being deleted and written again without a reload.

The sidebar's summary of the selected run ("running · steps 1–50 · 50 records") once stayed as it
was when the page was drawn while the tiles refreshed; and a page left on "No runs under … yet"
never looked again. Screenshots go to ``tests/browser/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.train.writer import MetricsWriter
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


def write(writer: MetricsWriter, first: int, last: int) -> None:
    for step in range(first, last + 1):
        writer.log(step=step, loss=2.0 * math.exp(-step / 50) + 0.1, lr=1e-3, throughput=500.0, grad_norm=1.0)
    assert writer.flush(5.0)


def sidebar(page: Any) -> str:
    return page.get_by_test_id("stSidebar").inner_text()


def picked(page: Any) -> str:
    """The run picker's shown label."""
    return page.locator("[data-testid=stSidebar] [data-testid=stSelectbox] input").first.input_value()


def step_tile(page: Any) -> str:
    node = page.get_by_test_id("stMetricValue")
    return node.first.inner_text().strip() if node.count() else ""


def test_the_sidebar_follows_the_run_and_a_recreated_run_shows_without_a_reload(tmp_path: Path) -> None:
    SHOTS.mkdir(exist_ok=True)
    root = tmp_path / "logs"
    writer = MetricsWriter(root / "r", rank=0, world_size=1, fsync_interval=0)
    write(writer, 1, 50)
    with streamlit_server(root, tmp_path / "streamlit.log") as url, chromium_page(width=1440, height=1000) as page:
        page.goto(f"{url}/?run=r", wait_until="domcontentloaded")
        poll(lambda: step_tile(page) == "50", timeout=45, what="step 50 in the tiles")
        poll(lambda: "running · steps 1–50 · 50 records" in sidebar(page), timeout=10, what="the run summary")
        assert picked(page) == "r · running"

        # the run goes on and finishes: the tiles, the summary and the run picker all say so
        write(writer, 51, 80)
        writer.close("finished")
        poll(lambda: step_tile(page) == "80", timeout=15, what="step 80 in the tiles")
        poll(
            lambda: "finished · steps 1–80 · 80 records" in sidebar(page) and picked(page).startswith("r · finished"),
            timeout=15,
            what="the sidebar saying finished, step 80",
        )
        assert "running" not in sidebar(page)
        page.screenshot(path=str(SHOTS / "lifecycle-finished.png"), full_page=True)

        # deleted: the page says so; written again: the page shows it, with no reload
        shutil.rmtree(root / "r")
        poll(lambda: page.get_by_text("No runs under").count() > 0, timeout=20, what="the empty-root page")
        page.screenshot(path=str(SHOTS / "lifecycle-deleted.png"), full_page=True)
        again = MetricsWriter(root / "r", rank=0, world_size=1, fsync_interval=0)
        write(again, 1, 20)
        poll(lambda: step_tile(page) == "20", timeout=20, what="the recreated run on the page")
        poll(lambda: "running · steps 1–20 · 20 records" in sidebar(page), timeout=10, what="its summary")
        page.screenshot(path=str(SHOTS / "lifecycle-recreated.png"), full_page=True)
        again.close("finished")
