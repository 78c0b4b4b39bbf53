"""Other frameworks' TensorBoard runs in a real Chromium: each opens on the Live page with its loss drawn.

Lightning and YOLOv5 runs written in their own tag names (monitor_cb.testing.framework_runs, explicit wall
times) at 1280 and 1440 px: the loss chart draws the run's loss metrics (YOLO's three together), the tiles
have values, and the page says which metric plays which role.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor_cb.testing.framework_runs import lightning, write_run, yolov5
from tests.browser.harness import browser_missing, chart_state, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
SHOTS = Path(__file__).parent / "screenshots"


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("tensorboard")


@pytest.mark.parametrize("width", [1280, 1440])
def test_lightning_and_yolo_runs_open_with_their_loss_drawn(tmp_path: Path, width: int) -> None:
    root = tmp_path / "logs"
    write_run(root / "pl", lightning(seed=7))
    write_run(root, yolov5(seed=7))  # runs/train/exp: discovery looks 3 folders deep
    cases = {
        "pl/lightning_logs/version_0": (["train_loss_step"], "Lightning"),
        "runs/train/exp": (["train/box_loss", "train/obj_loss", "train/cls_loss"], "YOLOv5"),
    }
    with streamlit_server(root, tmp_path / "streamlit.log") as url, chromium_page(width, 1000) as page:
        for run_id, (losses, who) in cases.items():
            page.goto(f"{url}/?run={run_id}")
            for loss in losses:

                def drawn(loss: str = loss) -> dict | None:
                    page.wait_for_timeout(20)
                    state = chart_state(page, "chart_loss_lr", loss)
                    return state if state and state["n"] > 0 else None

                state = poll(drawn, 120, what=f"{loss} on the loss chart")
                assert state["visible"] is not False
            text = page.inner_text("body")
            assert "No chart selected" not in text
            assert "Roles" in text and who in text
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / f"roles-{who}-{width}.png"))
