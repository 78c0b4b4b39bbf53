"""Y scaling that fits the bulk: a first loss of 1e12 hides nothing, spikes stay drawn, a clean curve is unchanged."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from monitor_cb.charts.figures import dual_axis_figure
from monitor_cb.charts.options import ChartOptions
from monitor_cb.charts.outliers import bulk_range, fit_bulk_spec
from monitor_cb.compare.align import align_runs
from monitor_cb.compare.rundata import RunData

N = 3000
SPIKES = {1000: 9.0, 2000: 12.0}  # a loss of about 2 spiking to 4.5x and 6x


def loss_with_outlier(first: float = 1e12) -> np.ndarray:
    rng = np.random.default_rng(7)
    loss = 2.0 + 0.1 * rng.standard_normal(N)
    loss[0] = first
    for step, value in SPIKES.items():
        loss[step] = value
    return loss


def frame(loss: np.ndarray) -> pd.DataFrame:
    step = np.arange(loss.size)
    return pd.DataFrame({"step": step, "t": 1.7e9 + step * 0.5, "loss": loss})


def shown(axis_range: list[float], log: bool) -> tuple[float, float]:
    lo, hi = axis_range
    return (10.0**lo, 10.0**hi) if log else (lo, hi)


@pytest.mark.parametrize("smoothing", [0.0, 0.6])
@pytest.mark.parametrize("first", [1e12, 155.0, 2.9e12])
@pytest.mark.parametrize("log", [False, True])
def test_a_huge_first_loss_leaves_the_spikes_in_sight(first: float, log: bool, smoothing: float) -> None:
    options = ChartOptions(fit_bulk=True, log_y=log, smoothing=smoothing)  # an EMA falls from 1e12 through all sizes
    fig = dual_axis_figure(frame(loss_with_outlier(first)), ["loss"], [], options)
    if log and first < 1e3:  # two decades above the bulk: a log axis shows it all, autorange stays
        assert fig.layout.yaxis.range is None
        return
    lo, hi = shown(list(fig.layout.yaxis.range), log)
    assert fig.layout.yaxis.autorange is False
    assert hi >= max(SPIKES.values()), "every spike is inside the axis"
    assert hi < first / 5, "the first loss is not"
    if not log:
        # the bulk (about 2) takes a readable part of the height, not a line at the bottom
        assert (2.0 - lo) / (hi - lo) > 0.02
    if hi < first:
        marks = [t for t in fig.data if t.name == "loss beyond the axis"]
        assert len(marks) == 1
        mark = marks[0]
        assert mark.marker.symbol == "triangle-up"
        assert list(mark.customdata) == pytest.approx([first], rel=1e-6), "the hover says the true value"
        assert lo <= mark.y[0] <= hi, "the mark sits at the edge, inside the drawn range"


def test_off_switch_keeps_autorange_and_adds_no_marks() -> None:
    fig = dual_axis_figure(frame(loss_with_outlier()), ["loss"], [], ChartOptions(fit_bulk=False))
    assert fig.layout.yaxis.range is None
    assert not [t for t in fig.data if "beyond the axis" in (t.name or "")]


def test_a_clean_curve_is_left_to_autorange() -> None:
    step = np.arange(N)
    decaying = 11.0 * np.exp(-step / 400) + 2.0  # a loss falling from 13 to 2: no outlier
    fig = dual_axis_figure(frame(decaying), ["loss"], [], ChartOptions(fit_bulk=True, smoothing=0.6))
    assert fig.layout.yaxis.range is None
    assert len(fig.data) == 2  # raw and smoothed, no marks


def test_marks_come_from_the_raw_trace_only_once_per_metric() -> None:
    fig = dual_axis_figure(frame(loss_with_outlier()), ["loss"], [], ChartOptions(fit_bulk=True, smoothing=0.9))
    marks = [t for t in fig.data if "beyond the axis" in (t.name or "")]
    assert len(marks) == 1 and len(marks[0].x) == 1


def test_prepared_figures_get_the_same_range() -> None:
    from monitor_cb.charts.options import ChartData

    options = ChartOptions(fit_bulk=True)
    data = frame(loss_with_outlier())
    plain = dual_axis_figure(data, ["loss"], [], options)
    prepared = dual_axis_figure(ChartData(data, prepared=True), ["loss"], [], options).to_dict()
    assert prepared["layout"]["yaxis"]["range"] == pytest.approx(list(plain.layout.yaxis.range), rel=1e-9)
    assert any(t.get("name") == "loss beyond the axis" for t in prepared["data"])


def test_a_zoomed_or_set_axis_is_left_alone() -> None:
    data = [{"type": "scatter", "mode": "lines", "x": np.arange(N), "y": loss_with_outlier()}]
    layout = {"yaxis": {"range": [0, 5], "autorange": False}}
    fit_bulk_spec(data, layout)
    assert layout["yaxis"]["range"] == [0, 5] and len(data) == 1


def test_a_low_outlier_is_marked_at_the_bottom() -> None:
    loss = loss_with_outlier(2.0)
    loss[5] = -1e9
    fig = dual_axis_figure(frame(loss), ["loss"], [], ChartOptions(fit_bulk=True))
    lo, _ = fig.layout.yaxis.range
    mark = next(t for t in fig.data if t.name == "loss beyond the axis")
    assert mark.marker.symbol == "triangle-down" and lo > -100


def test_compare_overlay_fits_the_bulk() -> None:
    from monitor_cb.charts.overlay import overlay_figures

    runs = [RunData("a", "a", frame(loss_with_outlier()), None), RunData("b", "b", frame(loss_with_outlier(3.0)), None)]
    figs = overlay_figures(runs, align_runs(runs, "step"), ["loss"], ChartOptions(fit_bulk=True))
    _, hi = figs["loss"].layout.yaxis.range
    assert max(SPIKES.values()) <= hi < 1e3


@pytest.mark.parametrize(
    "values",
    [
        np.array([]),
        np.full(50, np.nan),
        np.zeros(100),
        np.full(100, 3.0),
        np.array([1.0, 2.0, 3.0]),  # too few to judge
        np.linspace(0, 1, 100),
    ],
)
def test_nothing_to_fit(values: np.ndarray) -> None:
    assert bulk_range(values) is None


def test_all_zeros_but_one_point() -> None:
    values = np.zeros(100)
    values[3] = 1e6
    fit = bulk_range(values)
    assert fit is not None and fit.lo == fit.hi == 0.0
    assert math.isfinite(fit.axis()["range"][0])


def test_log_axis_ignores_non_positive_values() -> None:
    values = np.concatenate([np.full(50, -5.0), 2.0 + np.linspace(0, 1, 100), [1e15]])
    fit = bulk_range(values, log=True)
    assert fit is not None and fit.lo > 0 and fit.hi < 10
