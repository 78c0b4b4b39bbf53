"""The live page in a real Chromium, reading a run that a writer ships to a moto S3 server as it trains."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.storage.shipper import UploadOptions
from monitor_cb.train.writer import MetricsWriter
from tests.browser.harness import browser_missing, chart_state, chromium_page, poll, streamlit_server
from tests.objectstore import SECRET, S3Env

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
CHART = "chart_loss_lr"


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


def _log(writer: MetricsWriter, first: int, last: int) -> int:
    for s in range(first, last + 1):
        writer.log(step=s, epoch=1, loss=2.5 * math.exp(-s / 150) + 0.2, lr=1e-3, throughput=900.0, grad_norm=1.0)
    return last


def _shown(page: Any, min_step: int) -> dict[str, Any] | None:
    state = chart_state(page, CHART, "loss")
    return state if state and state["maxX"] is not None and state["maxX"] >= min_step else None


def test_live_page_follows_a_run_in_a_bucket(s3_env: S3Env, tmp_path: Path) -> None:
    upload = UploadOptions(s3_env.url("logs", "node-run"), interval_s=2.0)
    writer = MetricsWriter(tmp_path / "node-run", rank=0, world_size=1, fsync_interval=0, upload=upload)
    try:
        last = _log(writer, 1, 200)
        with (
            streamlit_server(s3_env.url("logs"), tmp_path / "streamlit.log") as url,
            chromium_page(1280, 1100) as page,
        ):
            page.goto(f"{url}/?run=node-run", wait_until="domcontentloaded")
            page.get_by_text("1 s", exact=True).click()
            poll(lambda: _shown(page, last), timeout=30, what="the first 200 steps from the bucket")
            SHOTS.mkdir(exist_ok=True)
            for width in (1280, 1440):
                page.set_viewport_size({"width": width, "height": 1100})
                last = _log(writer, last + 1, last + 10)  # shipped within 2 s, read at the next 1 s refresh
                poll(lambda last=last: _shown(page, last), timeout=15, what=f"step {last} from the bucket")
                body = page.inner_text("body")
                assert f"s3://{s3_env.bucket}/logs" in body and SECRET not in page.content()
                page.screenshot(path=str(SHOTS / f"remote-live-{width}.png"), full_page=True)
    finally:
        writer.close()
