"""Sweep figures: parallel coordinates and key-vs-metric scatter, over runs-table frames."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from monitor_cb.charts.style import NONFINITE_COLOR
from monitor_cb.charts.sweeps import (
    FINITE_TOP,
    MISSING_TEXT,
    NONFINITE_TEXT,
    column_axis,
    nice_ticks,
    parallel_coordinates_figure,
    sweep_scatter_figure,
)
from monitor_cb.compare.runs_table import build_table
from monitor_cb.compare.runstats import StatsCache, store_loader
from monitor_cb.ingest import RunStore
from tests.compare.runs_helpers import write_sweep_run


def sweep_frame(n: int = 12) -> pd.DataFrame:
    lrs = [1e-4, 3e-4, 1e-3, 3e-3]
    rows = []
    for i in range(n):
        lr = lrs[i % 4]
        rows.append(
            {
                "id": f"run{i:02d}",
                "name": f"run{i:02d}",
                "lr": lr,
                "optimizer": ("adam", "sgd", "adamw")[i % 3],
                "layers": (6, 12)[i % 2],
                "loss.best": 0.5 + abs(math.log10(lr) + 3) / 4 + 0.01 * i,
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- axes
def test_numeric_axis_spanning_decades_is_log_with_the_values_as_ticks() -> None:
    axis = column_axis("lr", [1e-4, 1e-3, 1e-2, 1e-3])
    assert axis.numeric and axis.log
    np.testing.assert_allclose(axis.positions, [-4, -3, -2, -3])
    assert axis.ticktext == ["0.0001", "0.001", "0.01"]


def test_categorical_axis_and_missing_values() -> None:
    axis = column_axis("optimizer", ["sgd", "adam", None, "Adam", True])
    assert not axis.numeric and axis.ticktext == ["Adam", "adam", "sgd", "true", MISSING_TEXT]
    assert axis.positions[2] == min(axis.tickvals)  # missing at the bottom
    assert axis.finite.tolist() == [True, True, False, True, True]


def test_numeric_axis_with_nan_and_missing_gets_their_own_ticks_below() -> None:
    axis = column_axis("loss.last", [1.0, 2.0, math.nan, None, 1.5])
    assert axis.ticktext[-2:] == [NONFINITE_TEXT, MISSING_TEXT] and not axis.log
    assert axis.positions[3] < axis.positions[2] < axis.positions[0]
    assert axis.range[0] < axis.positions[3]
    assert axis.finite.tolist() == [True, True, False, False, True]


def test_many_close_or_continuous_values_get_round_ticks() -> None:
    assert column_axis("x", list(np.linspace(0, 1, 50))).ticktext == ["0", "0.2", "0.4", "0.6", "0.8", "1"]
    crowded = column_axis("x", [0.1, 0.1001, 0.11, 0.2, 0.85])  # few values, but two would overlap
    assert crowded.ticktext == ["0.2", "0.4", "0.6", "0.8"]
    metric = column_axis("loss.best", [0.5, 0.9], continuous=True)  # a metric: never one tick per value
    assert metric.ticktext == ["0.5", "0.6", "0.7", "0.8", "0.9"]


@pytest.mark.parametrize(
    ("lo", "hi", "log", "expected"),
    [
        (0.1, 0.8458, False, [0.2, 0.4, 0.6, 0.8]),
        (-3.0, 47.0, False, [0, 10, 20, 30, 40]),
        (-4.0, -1.5, True, [-4, -3, -2]),  # decades
        (-5.0, 3.0, True, [-5, -3, -1, 1, 3]),
        (1.0, 1.0, False, [1.0]),
    ],
)
def test_nice_ticks(lo: float, hi: float, log: bool, expected: list[float]) -> None:
    assert nice_ticks(lo, hi, log) == pytest.approx(expected)


def test_nice_log_ticks_within_two_decades_use_1_2_5() -> None:
    assert [round(10**t, 6) for t in nice_ticks(np.log10(0.006), np.log10(0.06), log=True)] == [0.01, 0.02, 0.05]


# ----------------------------------------------------------------------------- parallel coordinates
def test_parallel_coordinates_dimensions_and_colours() -> None:
    frame = sweep_frame()
    frame.loc[5, "loss.best"] = math.nan
    fig = parallel_coordinates_figure(frame, ["lr", "optimizer", "layers"], "loss.best")
    (trace,) = fig.data
    assert trace.type == "parcoords"
    assert [d.label for d in trace.dimensions] == ["lr (log)", "optimizer", "layers", "loss.best"]
    assert list(trace.dimensions[1].ticktext) == ["adam", "adamw", "sgd"]
    colors = np.array(trace.line.color)
    assert colors[5] == 1.0 and trace.line.colorscale[-1][1] == NONFINITE_COLOR  # the NaN run is red
    finite = np.delete(colors, 5)
    best = int(np.nanargmin(frame["loss.best"].to_numpy()))
    assert colors[best] == finite.min() == 0.0  # the best run darkest
    assert finite.max() == pytest.approx(FINITE_TOP)
    red_from = min(stop for stop, color in trace.line.colorscale if color == NONFINITE_COLOR)
    assert red_from - FINITE_TOP >= 0.09  # parcoords samples the scale coarsely: keep red well clear
    assert NONFINITE_TEXT in trace.dimensions[-1].ticktext


def test_parallel_coordinates_caps_the_runs_and_says_so() -> None:
    frame = sweep_frame(250)
    fig = parallel_coordinates_figure(frame, ["lr"], "loss.best")
    assert len(fig.data[0].dimensions[0].values) == 200
    assert "first 200 of 250 runs" in fig.layout.title.text


def test_user_text_is_escaped() -> None:
    frame = sweep_frame(3)
    frame["optimizer"] = ["<img src=x onerror=alert(1)>", "adam", "sgd"]
    frame["name"] = ["<b>bold</b>", "b", "c"]
    pc = parallel_coordinates_figure(frame, ["optimizer"], "loss.best")
    assert "&lt;img src=x onerror=alert(1)&gt;" in pc.data[0].dimensions[0].ticktext
    sc = sweep_scatter_figure(frame, "optimizer", "loss.best")
    assert sc.data[0].customdata[0][0] == "&lt;b&gt;bold&lt;/b&gt;"
    assert "<img" not in sc.to_json() and "<b>bold" not in sc.to_json()


def test_unknown_column_is_named() -> None:
    with pytest.raises(KeyError, match="'momentum'"):
        parallel_coordinates_figure(sweep_frame(), ["momentum"], "loss.best")


# ----------------------------------------------------------------------------- scatter
def test_scatter_one_point_per_run_log_x_and_run_colours() -> None:
    frame = sweep_frame()
    colors = {f"run{i:02d}": f"#0000{i:02x}" for i in range(12)}
    fig = sweep_scatter_figure(frame, "lr", "loss.best", colors=colors)
    assert len(fig.data) == 12 and all(len(t.x) == 1 for t in fig.data), "one trace per run: a legend of runs"
    assert fig.layout.showlegend is True and [t.name for t in fig.data] == [f"run{i:02d}" for i in range(12)]
    assert fig.data[3].marker.color == "#000003"
    assert fig.layout.xaxis.title.text == "lr (log)"
    np.testing.assert_allclose([t.x[0] for t in fig.data], np.log10(frame["lr"]))
    assert list(fig.layout.xaxis.ticktext) == ["0.0001", "0.0003", "0.001", "0.003"]
    assert fig.data[0].customdata[0][0] == "run00" and fig.layout.yaxis.type == "linear"
    many = sweep_scatter_figure(sweep_frame(40), "lr", "loss.best")
    (points,) = many.data
    assert len(points.x) == 40 and many.layout.showlegend is False, "40 runs: one trace, the hover names them"


def test_scatter_marks_nan_metrics_and_counts_missing_ones() -> None:
    frame = sweep_frame(6).astype({"loss.best": object})
    frame.loc[1, "loss.best"] = math.nan
    frame.loc[2, "loss.best"] = None
    fig = sweep_scatter_figure(frame, "optimizer", "loss.best")
    *runs, bad = fig.data
    points_y = [y for t in runs for y in t.y]
    assert len(runs) == 5 and len(points_y) == 4 and len(bad.x) == 1
    assert bad.marker.symbol == "x" and bad.marker.color == NONFINITE_COLOR
    assert bad.y[0] > max(points_y) and bad.customdata[0][2] == "NaN"
    assert "1 without loss.best" in fig.layout.title.text


def test_figures_from_a_real_runs_table(tmp_path: Path) -> None:
    """End to end: runs written with the writer, the runs table, both sweep views."""
    for i, lr in enumerate((1e-4, 1e-3, 1e-2)):
        for seed in (0, 1):
            write_sweep_run(tmp_path, f"lr{i}-s{seed}", lr=lr, seed=seed, steps=60, nan_from=40 if i == 2 else None)
    store = RunStore(tmp_path)
    table = build_table(store.list_runs(), StatsCache(store_loader(store)).get, time.time())
    pc = parallel_coordinates_figure(table.frame, ["lr", "seed"], "loss.last")
    assert [d.label for d in pc.data[0].dimensions] == ["lr (log)", "seed", "loss.last"]
    assert sorted(pc.data[0].line.color).count(1.0) == 2  # the two lr=1e-2 runs ended in NaN
    sc = sweep_scatter_figure(table.frame, "lr", "eval_accuracy.best")
    assert sum(len(t.x) for t in sc.data) == 6


def test_a_config_integer_no_double_holds_makes_a_categorical_axis() -> None:
    frame = sweep_frame()
    frame["lr"] = frame["lr"].astype(object)
    frame.loc[3, "lr"] = 10**400  # a 401-digit JSON integer from a metadata file: float() raises on it
    fig = parallel_coordinates_figure(frame, ["lr", "optimizer"], "loss.best")
    assert fig.data[0].dimensions[0].label == "lr"  # categorical: no log scale for it
    scatter = sweep_scatter_figure(frame, "lr", "loss.best")
    assert scatter.data
