"""Series helpers: x-axis choices, first non-finite point, ranges, latest values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from monitor_cb.analysis.series import (
    X_KINDS,
    available_x,
    finite_range,
    first_nonfinite,
    float_values,
    latest,
    logged_rows,
    metric_columns,
    nonfinite_rows,
    unix_to_datetime64,
    x_axis,
)

T0 = 1_764_698_400.0


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": [10, 20, 30, 40],
            "t": [T0, T0 + 30, T0 + 90, T0 + 120],
            "rank": [0, 0, 0, 0],
            "seg": [1, 1, 1, 1],
            "loss": [2.0, math.nan, 1.5, math.inf],
            "samples": [320.0, 640.0, 960.0, 1280.0],
            "eval_loss": [math.nan, 2.2, math.nan, math.nan],
        }
    )


def test_x_axis_kinds(frame):
    assert x_axis(frame, "step").values.tolist() == [10, 20, 30, 40]
    assert x_axis(frame, "elapsed_s").values.tolist() == [0, 30, 90, 120]
    assert x_axis(frame, "elapsed_min").values.tolist() == [0, 0.5, 1.5, 2.0]
    assert x_axis(frame, "elapsed_h").values[-1] == pytest.approx(120 / 3600)
    time = x_axis(frame, "time")
    assert time.is_datetime and time.values[0] == np.datetime64("2025-12-02T18:00:00")
    assert x_axis(frame, "samples").title == "samples seen"
    assert set(available_x(frame)) == set(X_KINDS)


def test_x_axis_missing_column_names_it(frame):
    with pytest.raises(KeyError, match="'t'"):
        x_axis(frame.drop(columns="t"), "time")
    assert "samples" not in available_x(frame.drop(columns="samples"))


def test_unix_to_datetime64_handles_nan():
    out = unix_to_datetime64([T0, math.nan])
    assert out[0] == np.datetime64(pd.Timestamp(T0, unit="s"))
    assert np.isnat(out[1])


def test_first_nonfinite(frame):
    assert first_nonfinite(frame, "loss") == (20, T0 + 30)
    assert first_nonfinite(frame, "samples") is None
    assert first_nonfinite(frame, "absent") is None
    # with a logged mask, unlogged eval rows are not NaN points
    logged = {"eval_loss": [False, True, False, False]}
    assert first_nonfinite(frame, "eval_loss", logged) is None
    assert first_nonfinite(frame, "eval_loss") == (10, T0)


def test_nonfinite_rows_and_logged_rows(frame):
    assert nonfinite_rows(frame, "loss").tolist() == [1, 3]
    assert logged_rows(frame, "eval_loss", {"eval_loss": np.array([0, 1, 0, 0])}).tolist() == [0, 1, 0, 0]
    with pytest.raises(ValueError, match="rows"):
        logged_rows(frame, "eval_loss", {"eval_loss": [True]})


def test_finite_range():
    assert finite_range([3.0, math.nan, -1.0, math.inf]) == (-1.0, 3.0)
    assert finite_range([3.0, 0.0, -1.0, 0.5], positive_only=True) == (0.5, 3.0)
    assert finite_range([math.nan, math.inf]) is None
    assert finite_range([]) is None


def test_latest(frame):
    step, value = latest(frame, "loss")
    assert step == 40 and value == math.inf
    assert latest(frame, "eval_loss", {"eval_loss": [False, True, False, False]}) == (20, 2.2)
    assert latest(frame, "absent") is None


def test_metric_columns(frame):
    assert metric_columns(frame) == ["loss", "samples", "eval_loss"]


def test_nullable_columns_become_nan():
    df = pd.DataFrame(
        {
            "step": [1, 2, 3],
            "t": [T0, T0 + 1, T0 + 2],
            "samples": pd.array([32, None, 96], dtype="Int64"),
            "loss": pd.array([1.0, None, 3.0], dtype="Float64"),
        }
    )
    assert np.isnan(x_axis(df, "samples").values[1])
    assert first_nonfinite(df, "loss") == (2, T0 + 1)
    assert finite_range(float_values(df["loss"])) == (1.0, 3.0)
