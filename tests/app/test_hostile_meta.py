"""Metadata files are read from disk, so any JSON can be in them: the pages show such a run all the same."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, charts, run_entry
from tests.app.test_text_values import COMPARE_ENTRY, assert_good_losses_drawn, write_hostile_run

BIG = "1" + "0" * 400  # a JSON integer no double holds: float() of it raises OverflowError
HOSTILE = {
    "running": (
        '{"name": 5, "status": "running", "reason": {"a": 1}, "pid": BIG, "host": "HOST", "start_time": BIG,'
        ' "first_start_time": BIG, "end_time": "abc", "config": [1], "batch_size": BIG, "world_size": "x",'
        ' "total_steps": 1e400, "rank": [0], "device_id": {"x": 1}, "notified": 5}'
    )
    .replace("BIG", BIG)
    .replace("HOST", socket.gethostname()),
    "finished": (
        '{"name": [1], "status": "finished", "reason": 1e400, "start_time": BIG, "first_start_time": BIG,'
        ' "end_time": BIG, "config": {"batch_size": BIG, "lr": [1e400]}, "world_size": BIG}'
    ).replace("BIG", BIG),
}


@pytest.fixture(params=list(HOSTILE))
def hostile(request: pytest.FixtureRequest, log_root: Path) -> str:
    """Which metadata the run ``hostile`` under the log root holds."""
    run = write_hostile_run(log_root, "hostile", "1.0")  # a text loss at step 50 as well
    (run / "metrics.meta.json").write_text(HOSTILE[request.param])
    write_hostile_run(log_root, "other", "NaN")
    return str(request.param)


def test_live_page(hostile: str) -> None:
    at = run_entry(DASHBOARD, {"run": "hostile"})
    assert_ok(at)
    assert_good_losses_drawn(at, "loss (raw)")


def test_compare_page(hostile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONITOR_TEST_PAGE", raising=False)
    at = run_entry(COMPARE_ENTRY, {"runs": ["hostile", "other"], "metric": ["loss"], "align": "samples"})
    assert_ok(at)
    at = run_entry(COMPARE_ENTRY, {"runs": ["hostile", "other"], "metric": ["loss"]})
    assert_ok(at)
    assert_good_losses_drawn(at, "hostile")


def test_replay_page(hostile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_TEST_PAGE", "replay")
    at = run_entry(COMPARE_ENTRY, {"run": "hostile"})
    assert_ok(at)
    if hostile == "finished":  # a running run is not replayable: another one is shown
        assert at.sidebar.selectbox(key="rp_run").value == "hostile"
        assert_good_losses_drawn(at, "loss (raw)")
    assert charts(at)
