"""Group charts on Compare: per group a mean line inside a filled min-max band across its runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from monitor_cb.charts.group_traces import band_traces, group_figures
from monitor_cb.compare.align import align_runs
from monitor_cb.compare.group_bands import group_band
from monitor_cb.compare.rundata import RunData
from monitor_cb.views.compare_session import CompareSettings, build_view


def run(run_id: str, offset: float, lr: float, steps: int = 40, nan_at: int | None = None) -> RunData:
    step = np.arange(1, steps + 1)
    loss = 2.0 - step / 40 + offset
    if nan_at is not None:
        loss = loss.copy()
        loss[nan_at - 1] = math.nan
    frame = pd.DataFrame({"step": step, "t": 1_700_000_000.0 + step, "loss": loss})
    return RunData(run_id, run_id, frame, meta={"config": {"lr": lr, "seed": int(offset * 10)}})


RUNS = [run("a0", 0.0, 1e-3), run("a1", 0.2, 1e-3), run("b0", 1.0, 1e-2), run("b1", 1.4, 1e-2, nan_at=20)]


def figures(settings: CompareSettings, runs: list[RunData] = RUNS) -> dict:
    return build_view(runs, settings).figures


def test_one_mean_line_and_band_per_group_with_exact_means() -> None:
    fig = figures(CompareSettings(metrics=("loss",), smoothing=0.0, group_by="lr"))["loss"]
    means = {t.name: t for t in fig.data if t.showlegend is not False}
    assert set(means) == {"lr=0.001 (2 runs)", "lr=0.01 (2 runs)"}
    first = means["lr=0.001 (2 runs)"]
    assert np.allclose(np.asarray(first.y), 2.0 - np.arange(1, 41) / 40 + 0.1), "the per-step mean of the seeds"
    fills = [t for t in fig.data if t.fill == "tonexty"]
    assert len(fills) == 2 and all(str(t.fillcolor).startswith("rgba(") for t in fills)
    lo = next(t for t in fills if t.legendgroup == "lr=0.001 (2 runs)")
    assert np.allclose(np.asarray(lo.y), 2.0 - np.arange(1, 41) / 40), "the band's lower edge is the lowest run"


def test_a_nan_a_run_logged_is_marked_not_averaged() -> None:
    fig = figures(CompareSettings(metrics=("loss",), smoothing=0.0, group_by="lr"))["loss"]
    mean = next(t for t in fig.data if t.name == "lr=0.01 (2 runs)")
    at20 = float(np.asarray(mean.y)[19])
    assert at20 == pytest.approx(2.0 - 20 / 40 + 1.0), "the NaN run is left out of the mean at step 20"
    marks = [t for t in fig.data if getattr(t.marker, "symbol", None) == "x"]
    assert len(marks) == 1 and list(marks[0].x) == [20]


def test_groups_get_distinct_colours_and_runs_without_the_key_are_a_group() -> None:
    runs = [*RUNS, RunData("c", "c", RUNS[0].frame, meta={})]
    view = build_view(runs, CompareSettings(metrics=("loss",), smoothing=0.0, group_by="lr"))
    names = [t.name for t in view.figures["loss"].data if t.showlegend is not False]
    assert "lr=— (1 run)" in names
    colours = {t.line.color for t in view.figures["loss"].data if t.showlegend is not False}
    assert len(colours) == 3


def test_smoothing_is_applied_before_the_band_and_the_zoom_clips_it() -> None:
    settings = CompareSettings(metrics=("loss",), smoothing=0.9, group_by="lr", x_range=(10, 30))
    fig = figures(settings)["loss"]
    mean = next(t for t in fig.data if t.name == "lr=0.001 (2 runs)")
    x = np.asarray(mean.x)
    assert x.min() >= 10 and x.max() <= 30
    raw = 2.0 - x / 40 + 0.1
    assert not np.allclose(np.asarray(mean.y), raw), "smoothed"


def test_wall_time_alignment_gives_datetimes() -> None:
    fig = figures(CompareSettings(metrics=("loss",), alignment="wall", smoothing=0.0, group_by="lr"))["loss"]
    mean = next(t for t in fig.data if t.name == "lr=0.001 (2 runs)")
    assert np.asarray(mean.x).dtype.kind == "M"


def test_hostile_group_values_are_escaped() -> None:
    runs = [RunData("h", "h", RUNS[0].frame, meta={"config": {"k": "<b>x</b>"}}), RUNS[1]]
    aligned = align_runs(runs, "step")
    options = CompareSettings(metrics=("loss",)).chart_options()
    fig = group_figures(runs, aligned, ("loss",), options, {"k=<b>x</b>": ("h",)}, {})["loss"]
    assert all("<b>" not in str(t.name) for t in fig.data) and any("&lt;b&gt;" in str(t.name) for t in fig.data)


def test_band_traces_of_an_empty_band_draw_nothing_visible() -> None:
    band = group_band([])
    traces = band_traces(band, "g", "#1f77b4", is_datetime=False)
    assert all(len(t["x"]) == 0 for t in traces)
