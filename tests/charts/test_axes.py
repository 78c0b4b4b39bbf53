"""A constant series' axis shows its value (not a -1..1 range with the line on the "0" tick).

Every builder is checked on the figure it returns: the axis holding the constant series has a range
around the value and one tick labelled with it; an axis with a varying series keeps autorange.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from monitor_cb.charts.axes import constant_axis, pin_constant_axes, tick_text
from monitor_cb.charts.figures import components_figure, dual_axis_figure, eval_figure, memory_figure, timing_figure
from monitor_cb.charts.options import ChartOptions
from monitor_cb.charts.rank_figures import per_rank_figure, rank_band_figure, rank_step_time_figure, utilisation_figure

N = 200


def frame(ranks: int = 1, **constant: float) -> pd.DataFrame:
    """A run with a falling loss (and every column of ``constant`` held at its value), ``ranks`` ranks."""
    parts = []
    for rank in range(ranks):
        step = np.arange(1, N + 1)
        part = {"step": step, "t": 1.7e9 + step * 0.5 + rank * 0.01, "rank": np.full(N, rank)}
        part["loss"] = 3.0 * np.exp(-step / 60) + 0.1
        part["step_time"] = 0.5 + 0.01 * np.sin(step) + rank * 0.001
        part.update({k: np.full(N, v) for k, v in constant.items()})
        parts.append(pd.DataFrame(part))
    return pd.concat(parts, ignore_index=True).sort_values(["step", "rank"], kind="stable").reset_index(drop=True)


def assert_shows(axis: Any, value: float) -> None:
    lo, hi = axis.range
    assert lo < value < hi and axis.autorange is False
    assert len(axis.tickvals) == 1 and axis.tickvals[0] == pytest.approx(value, rel=1e-6)
    assert axis.ticktext == (tick_text(value),)
    assert (hi - lo) <= 2 * abs(value) + 1e-12 if value else (hi - lo) == 2  # the line is not a dot in a wide range


def assert_auto(axis: Any) -> None:
    assert axis.range is None and axis.tickvals is None


def test_the_reported_case_lr_on_the_right_axis() -> None:
    fig = dual_axis_figure(frame(lr=0.01), ["loss"], ["lr"], ChartOptions(smoothing=0.6))
    assert_shows(fig.layout.yaxis2, 0.01)
    assert fig.layout.yaxis2.ticktext == ("0.01",)
    assert_auto(fig.layout.yaxis)  # the falling loss keeps plotly's autorange


@pytest.mark.parametrize("value", [0.00325, 4.11e-4, 1e-8, 1.0, 123456.0, -2.5, 0.0])
def test_any_constant_value_on_the_left_axis(value: float) -> None:
    df = frame(const=value)
    fig = dual_axis_figure(df, ["const"], [], ChartOptions(smoothing=0.6))
    assert_shows(fig.layout.yaxis, float(np.float32(value)))


def test_a_log_axis_is_pinned_in_decades() -> None:
    fig = dual_axis_figure(frame(lr=1e-3), ["lr"], [], ChartOptions(log_y=True))
    lo, hi = fig.layout.yaxis.range
    assert lo < np.log10(1e-3) < hi and fig.layout.yaxis.tickvals[0] == pytest.approx(1e-3)


def test_a_threshold_line_elsewhere_stays_in_view() -> None:
    fig = dual_axis_figure(frame(lr=0.01), ["lr"], [], ChartOptions(thresholds={"lr": 0.05}))
    assert_auto(fig.layout.yaxis)


def test_a_zoomed_or_chosen_range_is_kept() -> None:
    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[5, 5, 5]), layout={"yaxis": {"range": [0, 10]}})
    pin_constant_axes(fig)
    assert fig.layout.yaxis.range == (0, 10) and fig.layout.yaxis.tickvals is None


def test_constant_axis_layout() -> None:
    assert constant_axis(0.01, log=False)["range"] == pytest.approx([0.005, 0.015])
    assert constant_axis(0.0, log=False)["range"] == [-1.0, 1.0]
    assert constant_axis(100.0, log=True)["range"] == pytest.approx([1.5, 2.5])
    values = (0.01, 0.00325, 4.11e-5, 1.5e6, -2.0, 123456.789)
    assert [tick_text(v) for v in values] == ["0.01", "3.25e-3", "4.11e-5", "1.5e6", "-2", "123,457"]


BUILDERS: dict[str, tuple[Callable[[], go.Figure], str, float]] = {
    "eval": (lambda: eval_figure(frame(eval_accuracy=0.5)), "yaxis2", 0.5),
    "components": (lambda: components_figure(frame(loss_aux=0.25), total="loss_aux"), "yaxis", 0.25),
    "timing": (lambda: timing_figure(frame(throughput=800.0)), "yaxis2", 800.0),
    "memory": (lambda: memory_figure(frame(mem_device=2.0 * 2**30)), "yaxis", 2.0),
    "rank band": (lambda: rank_band_figure(frame(ranks=3, lr=0.01), "lr"), "yaxis", 0.01),
    "per rank": (lambda: per_rank_figure(frame(ranks=3, lr=0.01), "lr"), "yaxis", 0.01),
    "utilisation": (lambda: utilisation_figure(frame(sys_cpu_percent=40.0, mem_host_rss=2.0**30)), "yaxis", 40.0),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_every_builder_shows_a_constant_series_value(name: str) -> None:
    build, axis, value = BUILDERS[name]
    fig = build()
    assert_shows(fig.layout[axis], value)


def test_rank_step_time_with_one_constant_step_time() -> None:
    df = frame(ranks=2)
    df["step_time"] = 0.5
    fig = rank_step_time_figure(df)
    assert_shows(fig.layout.yaxis, 0.5)  # the per-rank boxes: every rank at 0.5 s


def test_compare_overlay_and_replay() -> None:
    from monitor_cb.charts.overlay import overlay_figures
    from monitor_cb.compare.align import align_runs
    from monitor_cb.compare.rundata import RunData
    from monitor_cb.views.replay import replay_figures

    runs = [RunData(id=f"r{i}", label=f"r{i}", frame=frame(lr=0.01)) for i in range(2)]
    figures = overlay_figures(runs, align_runs(runs, "step"), ("lr", "loss"), ChartOptions(n_out=500))
    assert_shows(figures["lr"].layout.yaxis, 0.01)
    assert_auto(figures["loss"].layout.yaxis)
    replayed = replay_figures(frame(lr=0.01), None, slice(0, 120))
    assert_shows(replayed[0].layout.yaxis2, 0.01)
