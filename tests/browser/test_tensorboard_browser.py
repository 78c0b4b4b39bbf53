"""A MindFormers TensorBoard run opened in the dashboard, as a TensorBoard user would, in a real Chromium.

The run (tensorboardX, MindFormers' tags, 30k steps) is read at full resolution: the Live page's loss
chart reaches the last step, the run reads "ended" (nobody saw it written), float32 values show as
their shortest decimal, and a steady rate of record times raises no throughput or stall finding.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.browser.harness import browser_missing, chart_state, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
SHOTS = Path(__file__).parent / "screenshots"
STEPS = 30_000


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


T0 = 1_700_000_000.0  # a fixed start: the run's record times are the test's, not the machine's
STEP_S = 0.5  # one step every half second, evenly: a steady rate whatever the machine's load while writing


def write_events(run_dir: Path) -> None:
    from tensorboardX import SummaryWriter

    # Explicit wall times: written "as fast as the machine goes", a loaded machine's pauses looked like a
    # throughput drop ("throughput fell from 8,372 to 3,888 steps/s (from record times)") and failed the test.
    writer = SummaryWriter(str(run_dir), max_queue=10000)
    for step in range(1, STEPS + 1):
        t = T0 + step * STEP_S
        writer.add_scalar("loss", 2.0 * math.exp(-step / STEPS) + 0.01 * math.sin(step), step, walltime=t)
        writer.add_scalar("grad-norm", 1.0 + 0.1 * math.cos(step), step, walltime=t)
        if step % 10 == 0:
            writer.add_scalar("learning-rate", 1e-4 * (1 - step / STEPS), step, walltime=t)
    writer.close()


def test_a_tensorboard_run_draws_every_step_and_reads_as_ended(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_events(root / "tbrun")
    with streamlit_server(root, tmp_path / "streamlit.log") as url, chromium_page(1440, 1000) as page:
        page.goto(f"{url}/?run=tbrun")

        def drawn() -> dict | None:
            page.wait_for_timeout(20)
            state = chart_state(page, "chart_loss_lr", "loss")
            return state if state and (state.get("maxX") or 0) >= STEPS else None

        state = poll(drawn, 120, what="the loss chart at the last step")
        assert state["maxX"] == STEPS
        text = page.inner_text("body")
        assert "ended" in text
        assert "stalled" not in text and "throughput fell" not in text
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "tensorboard-run-1440.png"))
