"""monitor_cb.views.kpis: the live page's tiles (KPIs) and how values are written."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from monitor_cb.analysis.live_series import LiveSeries
from monitor_cb.views.kpis import compute_kpis, format_count, format_value, nan_banner
from tests.views.helpers import FakeRun, frame


def test_kpis_running_with_total_and_eta() -> None:
    df = frame(100, t0=1000.0, dt=0.5, throughput=np.full(100, 800.0), epoch=np.repeat([1, 2], 50))
    run = FakeRun("r", status="running", last_write=1049.5, meta={"total_steps": 2000, "first_start_time": 990.0})
    k = compute_kpis(df, run, now=1050.0)
    assert k.step == 1000 and k.total_steps == 2000 and k.epoch == 2
    assert k.steps_per_s == pytest.approx(20.0)
    assert k.eta_s == pytest.approx(50.0)
    assert k.elapsed_s == pytest.approx(60.0)
    assert k.loss == pytest.approx(1.0) and k.throughput == 800.0 and k.grad_norm is None
    assert not k.stale and (k.step, k.total_steps) == (1000, 2000)


def test_kpis_stale_and_finished() -> None:
    df = frame(10)
    stale = compute_kpis(df, FakeRun("r", status="running", last_write=1000.0), now=1000.0 + 3600)
    assert stale.stale and stale.eta_s is None
    assert compute_kpis(df, FakeRun("r", status="stalled", last_write=1000.0), now=1001.0).stale
    done = compute_kpis(df, FakeRun("r", status="finished", last_write=1000.0), now=1000.0 + 3600)
    assert not done.stale


def test_kpis_show_a_nonfinite_tail_and_skip_gaps() -> None:
    loss = np.array([2.0, 1.5, np.inf])
    df = pd.DataFrame({"step": [1, 2, 3], "t": [1.0, 2.0, 3.0], "loss": loss, "eval_acc": [np.nan, 0.5, np.nan]})
    k = compute_kpis(df, FakeRun("r"), now=4.0)
    assert k.loss == math.inf and format_value(k.loss) == "inf"
    assert LiveSeries(df).last_value("eval_acc") == 0.5
    assert compute_kpis(df.iloc[:0], FakeRun("r", last_step=None), now=4.0).loss is None


def test_nan_banner() -> None:
    assert nan_banner(None, "loss", 0.0) is None
    text = nan_banner((412, 1000.0), "loss", now=1000.0 + 180)
    assert text == "loss became NaN/Inf at step 412, 3 min ago"


def test_kpi_of_a_column_last_logged_long_ago() -> None:
    n = 10_000
    eval_loss = np.full(n, np.nan)
    eval_loss[100] = 0.7  # logged once, long before the newest rows
    df = frame(n, eval_loss=eval_loss)
    assert LiveSeries(df).last_value("eval_loss") == 0.7
    assert LiveSeries(df, {"eval_loss": ~np.isnan(eval_loss)}).last_value("eval_loss") == 0.7
    assert LiveSeries(df).last_value("missing") is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "–"),
        (math.nan, "NaN"),
        (-math.inf, "-inf"),
        (0.0, "0"),
        (2.30215, "2.302"),
        (4.39e-4, "4.39e-4"),
        (1e-3, "1e-3"),
        (1234567.0, "1.235e6"),
        (812.5, "812.5"),
        (0.00325, "3.25e-3"),
        (np.float32(0.01), "0.01"),  # a float32 0.0099999998 is not "1e-2"
        (123456.789, "123,457"),  # not "1.235e+05"
        (-9999.4, "-9,999"),
        (1e-12, "1e-12"),
    ],
)
def test_format_value(value: float | None, text: str) -> None:
    assert format_value(value, 4 if text != "4.39e-4" else 3) == text
    assert len(text) <= 10


def test_format_count() -> None:
    assert [format_count(v) for v in (None, 0, 12345, 1_000_000)] == ["–", "0", "12,345", "1,000,000"]
