"""The Live page's "Since update" tile for runs that ended long ago (issue 36, item 3): their files were
copied here minutes ago, but the tile must say when the run last logged, not when its file was copied."""

from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from monitor_cb.demo.samples import write_sample_runs
from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, run_entry
from tests.app.real_root import real_runs_root

DAY = 86400.0


def since_update(at: AppTest) -> str:
    return next(m.value for m in at.metric if m.label == "Since update")


def test_a_run_that_ended_days_ago_but_was_copied_now(log_root: Path) -> None:
    (run,) = write_sample_runs(log_root, n_runs=1, steps=60, seed=0, now=time.time() - 3 * DAY)
    assert time.time() - run.joinpath("metrics.jsonl").stat().st_mtime < 600, "the file was written just now"
    at = run_entry(DASHBOARD, {"run": run.name})
    assert_ok(at)
    assert since_update(at) == "3 d"


def test_a_real_run_copied_now_shows_its_own_last_record_time(log_root: Path) -> None:
    real_runs_root(log_root, ["echarts_tb"])  # TensorBoard wall times from years ago, no metadata
    at = run_entry(DASHBOARD, {"run": "echarts_tb"})
    assert_ok(at)
    days = since_update(at)
    assert days.endswith(" d") and int(days[:-2]) > 365, days


def test_a_real_run_whose_times_count_from_zero_has_no_age_to_show(log_root: Path) -> None:
    real_runs_root(log_root, ["qwen25_medical"])  # t is LLaMA-Factory's elapsed seconds
    at = run_entry(DASHBOARD, {"run": "qwen25_medical"})
    assert_ok(at)
    assert since_update(at) == "–"


def test_a_running_run_is_measured_from_its_last_write(log_root: Path) -> None:
    write_run(log_root, "live", steps=50, close=None)
    at = run_entry(DASHBOARD, {"run": "live"})
    assert_ok(at)
    assert since_update(at).endswith(" s")
