"""Side-by-side compare panels: the chosen metrics per run, linked x, shared y (toggle), empty panels say why."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from monitor_cb.charts.side import MIN_SHARE, SideView, share_y, shared_x_blanks, side_view
from monitor_cb.compare.align import align_runs
from monitor_cb.compare.rundata import RunData
from monitor_cb.views.compare_session import CompareSettings, x_bounds


def run(run_id: str, steps: int, scale: float, **extra: np.ndarray) -> RunData:
    step = np.arange(1, steps + 1)
    frame = pd.DataFrame({"step": step, "t": 1000.0 + step, "loss": scale * np.exp(-step / 50), **extra})
    return RunData(run_id, run_id, frame)


def panels(runs: list[RunData], metrics: tuple[str, ...], **settings: object) -> dict:
    options = CompareSettings(metrics=metrics, smoothing=0.0, **settings).chart_options()  # type: ignore[arg-type]
    aligned = align_runs(runs, "step")
    bounds = (1, max(len(r.frame) for r in runs))
    shared = bool(settings.get("shared_y", True))
    return side_view(runs, aligned, metrics, options, shared_y=shared, x_bounds=bounds).panels


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


# ----------------------------------------------------------------------------- panels that stay readable
REAL_RUNS = Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"
ISSUE_RUNS = ("mask2former_mgm", "nyu_ssod_d2", "ddpg_pilot", "qwen25_medical", "echarts_tb")


def drawn_share(fig: go.Figure) -> tuple[float, float] | None:
    """The share of the panel's width and of its height the drawn curves span (1.0 on an autoranged axis,
    which fits the data); None for an empty panel."""
    xs, ys = [], []
    for trace in fig.data:
        if trace.x is None or trace.y is None:
            continue
        x = np.asarray(trace.x, dtype=np.float64)
        y = np.asarray(trace.y, dtype=np.float64)
        xs.append(x[np.isfinite(x)])
        ys.append(y[np.isfinite(y)])
    x, y = np.concatenate(xs) if xs else np.empty(0), np.concatenate(ys) if ys else np.empty(0)
    if not x.size or not y.size:
        return None

    def share(values: np.ndarray, shown: Any) -> float:
        if shown is None:
            return 1.0
        lo, hi = float(shown[0]), float(shown[1])
        inside = values[(values >= lo) & (values <= hi)]
        if not inside.size:
            return 0.0
        own = float(values.max() - values.min())
        if own <= 1e-9 * max(abs(float(values.max())), 1e-300):
            return 1.0  # a flat line is a visible line at its level
        return float(inside.max() - inside.min()) / (hi - lo)

    return share(x, fig.layout.xaxis.range), share(y, fig.layout.yaxis.range)


def test_runs_with_wildly_different_step_ranges_get_their_own_x_by_default() -> None:
    runs = [run("short", 200, 1.0), run("long", 200, 1.0)]
    runs[1].frame["step"] = runs[1].frame["step"] * 20_000  # 4M steps, as an RL run's timesteps
    aligned = align_runs(runs, "step")
    assert shared_x_blanks(aligned)
    options = CompareSettings(metrics=("loss",), smoothing=0.0).chart_options()
    view = side_view(runs, aligned, ("loss",), options, x_bounds=(1, 4_000_000))
    assert view.shared_x is False
    short = view.panels["short"][0]
    assert short.layout.xaxis.range is None, "autorange: the short run fills its panel"
    assert len(short.data[0].x) == 200, "drawn on its own grid, not with the union's few bins"
    linked = side_view(runs, aligned, ("loss",), options, x_bounds=(1, 4_000_000), shared_x=True)
    assert linked.shared_x and list(linked.panels["short"][0].layout.xaxis.range) == [1, 4_000_000]
    assert not shared_x_blanks(align_runs([run("a", 100, 1.0), run("b", 300, 1.0)], "step"))


def test_shared_y_is_left_off_only_for_the_metric_that_would_flatten_a_run() -> None:
    runs = [run("small", 100, 1.0, lr=np.linspace(0, 1e-3, 100)), run("huge", 100, 1e4, lr=np.linspace(0, 2e-3, 100))]
    options = CompareSettings(metrics=("loss", "lr"), smoothing=0.0).chart_options()
    view = side_view(runs, align_runs(runs, "step"), ("loss", "lr"), options, x_bounds=(1, 100))
    assert view.unshared_y == ("loss",)
    assert view.panels["small"][0].layout.yaxis.range is None
    assert list(view.panels["small"][1].layout.yaxis.range) == list(view.panels["huge"][1].layout.yaxis.range)
    flat = [run("a", 100, 1.0, lr=np.full(100, 1e-3)), run("b", 100, 1.0, lr=np.linspace(0, 1e-3, 100))]
    flat_view = side_view(flat, align_runs(flat, "step"), ("lr",), options, x_bounds=(1, 100))
    assert flat_view.unshared_y == (), "a constant lr is a visible line at its level: sharing keeps it"


def real_data(names: list[str]) -> list[RunData]:
    from monitor_cb.ingest import RunStore
    from monitor_cb.views.compare_session import load_run

    store = RunStore(REAL_RUNS)
    infos = {r.id: r for r in store.list_runs()}
    return [d for d in (load_run(store, infos[n]) for n in names) if d is not None]


def assert_no_blank_panel(runs: list[RunData], metrics: tuple[str, ...], log_y: bool = False) -> SideView:
    settings = CompareSettings(metrics=metrics, log_y=log_y)
    aligned = align_runs(runs, "step")
    view = side_view(runs, aligned, metrics, settings.chart_options(), x_bounds=x_bounds(aligned))
    assert set(view.panels) == {r.id for r in runs}
    for run_id, figs in view.panels.items():
        for metric, fig in zip(metrics, figs, strict=True):
            share = drawn_share(fig)
            if share is None:
                assert metric not in next(r for r in runs if r.id == run_id).frame.columns
                continue
            assert share[0] >= MIN_SHARE and share[1] >= MIN_SHARE, (run_id, metric, share)
    return view


@pytest.mark.skipif(not (REAL_RUNS / "labels.json").is_file(), reason=f"no real_runs corpus at {REAL_RUNS}")
def test_the_issue_runs_side_by_side_fill_every_panel() -> None:
    runs = real_data(list(ISSUE_RUNS))
    assert len(runs) == 5
    view = assert_no_blank_panel(runs, ("loss", "lr"))
    assert view.shared_x is False, "2,000 epochs next to 4.67M timesteps: one x range would blank four panels"
    assert "loss" in view.unshared_y, "ddpg_pilot's loss ~1e4 next to losses ~1"
    assert_no_blank_panel(runs, ("loss",), log_y=True)


@pytest.mark.skipif(not (REAL_RUNS / "labels.json").is_file(), reason=f"no real_runs corpus at {REAL_RUNS}")
def test_sixty_real_runs_side_by_side_fill_every_panel() -> None:
    names = sorted(p.parent.name for p in REAL_RUNS.glob("*/metrics.jsonl"))[:60]
    runs = real_data(names)
    assert len(runs) == 60
    assert_no_blank_panel(runs, ("loss",))
