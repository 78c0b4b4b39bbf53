"""A server's first listing of a root no index describes yet says what it is doing, then shows the runs.

A long file whose ends show steps at one stride is listed from its ends (monitor_cb.ingest.peek); any
other is parsed by the first listing (seconds for a root of long runs); the next ones use the root's
summary index. Here a run of 8 ranks x 400k rows whose log interval changed halfway (every step, then
every second step: only a read can count its rows; about 780 MB) makes that first listing last over
a second on a fresh server, even on a quiet machine (3 ranks took 0.45-0.73 s there, under the half
second after which Streamlit shows a spinner, and the test failed 1 time in 3). In a real headless
Chromium at 1280 px the page shows the "first time" message while it reads, then the run picker, and
the message is gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pages._shared import FIRST_LISTING
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
RANKS, STEPS = 8, 400_000


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


def write_run(root: Path) -> None:
    """One long run, a file per rank as the collector writes them (polars writes the lines: fast)."""
    import numpy as np
    import polars as pl

    run = root / "pretrain"
    run.mkdir(parents=True)
    half = STEPS // 2  # every step, then every second one (the log interval changed on a resume)
    step = np.concatenate([np.arange(1, half + 1), np.arange(half + 2, half + 2 + 2 * (STEPS - half), 2)]).astype(
        np.int64
    )
    for rank in range(RANKS):
        frame = pl.DataFrame(
            {
                "step": step,
                "t": 1_700_000_000.0 + step * 0.5 + rank * 1e-3,
                "rank": np.full(STEPS, rank, np.int64),
                "seg": np.ones(STEPS, np.int64),
                "loss": 2.0 / np.sqrt(step),
                "lr": np.full(STEPS, 1e-4),
            }
        )
        frame.write_ndjson(run / f"metrics.rank{rank}.jsonl")


def test_the_first_listing_of_a_fresh_root_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the server's own first listing at start (dashboard.py's prewarm), which could end before the
    # page asks: here the page itself lists the root, as it does whenever it comes before that listing ends.
    monkeypatch.setenv("MONITOR_PREWARM", "off")
    root = tmp_path / "logs"
    write_run(root)
    message = FIRST_LISTING[:40]
    with streamlit_server(root, tmp_path / "streamlit.log") as url, chromium_page(1280, 900) as page:
        page.goto(url)
        poll(lambda: page.get_by_text(message).count() > 0, 60, what="the first-listing message")
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "first-listing-1280.png"))
        poll(lambda: page.get_by_text("Run (1 of 1)").count() > 0, 120, what="the run picker")
        poll(lambda: page.get_by_text(message).count() == 0, 10, what="the message to go")
        page.screenshot(path=str(SHOTS / "first-listing-done-1280.png"))
