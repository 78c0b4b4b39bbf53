"""Side-by-side compare panels: the chosen metrics per run, linked x, shared y (toggle), empty panels say why."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from monitor_cb.charts.side import share_y, side_figures
from monitor_cb.compare.align import align_runs
from monitor_cb.compare.rundata import RunData
from monitor_cb.dashboard.compare_session import CompareSettings


def run(run_id: str, steps: int, scale: float, **extra: np.ndarray) -> RunData:
    step = np.arange(1, steps + 1)
    frame = pd.DataFrame({"step": step, "t": 1000.0 + step, "loss": scale * np.exp(-step / 50), **extra})
    return RunData(run_id, run_id, frame)


def panels(runs: list[RunData], metrics: tuple[str, ...], **settings: object) -> dict:
    options = CompareSettings(metrics=metrics, smoothing=0.0, **settings).chart_options()  # type: ignore[arg-type]
    aligned = align_runs(runs, "step")
    bounds = (1, max(len(r.frame) for r in runs))
    shared = bool(settings.get("shared_y", True))
    return side_figures(runs, aligned, metrics, options, shared_y=shared, x_bounds=bounds)


def test_each_run_gets_one_panel_per_chosen_metric_in_order() -> None:
    runs = [run("a", 100, 1.0, lr=np.full(100, 1e-3)), run("b", 300, 5.0, lr=np.full(300, 2e-3))]
    out = panels(runs, ("lr", "loss"))
    assert list(out) == ["a", "b"]
    for figs in out.values():
        assert [f.layout.title.text for f in figs] == ["lr", "loss"]
        assert all(f.layout.showlegend is False for f in figs)


def test_x_is_linked_and_y_is_shared_per_metric() -> None:
    runs = [run("a", 100, 1.0), run("b", 300, 5.0)]
    out = panels(runs, ("loss",))
    a, b = out["a"][0], out["b"][0]
    assert list(a.layout.xaxis.range) == list(b.layout.xaxis.range) == [1, 300], "the union of the runs' x"
    assert list(a.layout.yaxis.range) == list(b.layout.yaxis.range)
    lo, hi = a.layout.yaxis.range
    assert lo < 1.0 * math.exp(-100 / 50) and hi > 5.0 * math.exp(-1 / 50), "holds both runs' values"
    apart = panels(runs, ("loss",), shared_y=False)
    assert apart["a"][0].layout.yaxis.range is None, "shared y off: each panel scales to its run"


def test_shared_log_y_is_in_decades_and_ignores_nan_and_non_positive() -> None:
    runs = [run("a", 100, 1.0), run("b", 100, 1000.0)]
    runs[0].frame.loc[10, "loss"] = math.nan
    out = panels(runs, ("loss",), log_y=True)
    lo, hi = out["a"][0].layout.yaxis.range
    assert lo < math.log10(1.0 * math.exp(-2)) and 3 < hi < 3.5


def test_a_run_without_the_metric_gets_an_empty_panel_that_says_so() -> None:
    runs = [run("a", 50, 1.0, grad_norm=np.ones(50)), run("b", 50, 1.0)]
    out = panels(runs, ("grad_norm",))
    assert not out["b"][0].data and "no grad_norm" in out["b"][0].layout.annotations[0].text
    assert len(out["a"][0].data) >= 1


def test_a_hostile_metric_name_is_escaped_in_the_empty_note() -> None:
    runs = [run("a", 20, 1.0, **{"<b>x</b>": np.ones(20)}), run("b", 20, 1.0)]
    out = panels(runs, ("<b>x</b>",))
    assert "&lt;b&gt;" in out["b"][0].layout.annotations[0].text


def test_share_y_with_nothing_drawn_is_none() -> None:
    import plotly.graph_objects as go

    assert share_y([go.Figure(), go.Figure()], log_y=False) is None
