"""LiveSeries: each column, mask and x axis of a run read extracted once, with the semantics of the frame helpers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from monitor_cb.analysis import live_series
from monitor_cb.analysis.live_series import LiveSeries, last_unmasked
from monitor_cb.analysis.series import first_nonfinite, latest
from monitor_cb.ingest import RunStore
from monitor_cb.views.kpis import compute_kpis
from monitor_cb.views.live import ChartSettings
from monitor_cb.views.live_refresh import LiveRequest, build_figures
from monitor_cb.views.zoom import ZoomState
from tests.app.conftest import write_run


def frame(n: int = 1000) -> pd.DataFrame:
    steps = np.arange(1, n + 1)
    eval_loss = np.full(n, np.nan)
    eval_loss[::100] = 1.0
    return pd.DataFrame(
        {
            "step": steps,
            "t": 1.7e9 + steps * 0.1,
            "loss": 3.0 / steps,
            "lr": np.full(n, 1e-3),
            "throughput": np.full(n, 800.0),
            "grad_norm": np.linspace(1, 2, n),
            "eval_loss": eval_loss,
        }
    )


def test_a_refresh_converts_each_column_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiles, banner and the three default charts read one LiveSeries: no column is converted twice."""
    write_run(tmp_path, "r", steps=300, close=None)
    store = RunStore(tmp_path)
    data = store.read("r")
    calls: Counter[str] = Counter()
    real = live_series.float_values

    def counted(column: pd.Series) -> np.ndarray:
        calls[str(column.name)] += 1
        return real(column)

    monkeypatch.setattr(live_series, "float_values", counted)
    series = LiveSeries.of(data)
    run = store.run_info("r")
    compute_kpis(series, run, 0.0)
    series.first_nonfinite("loss")
    figures = build_figures(series, run, LiveRequest(ChartSettings(smoothing=0.6), ZoomState()))
    assert set(figures) == {"loss_lr", "speed_grad", "eval"}
    assert calls["loss"] == 1, "loss is drawn on three charts and shown in a tile"
    assert max(calls.values()) == 1, calls
    built = series.extractions
    build_figures(series, run, LiveRequest(ChartSettings(smoothing=0.6), ZoomState()))
    assert series.extractions == built, "a second build reuses every array"


def test_arrays_are_read_only_and_shared() -> None:
    series = LiveSeries(frame())
    values = series.values("loss")
    assert values is series.values("loss")
    with pytest.raises(ValueError):
        values[0] = 1.0
    assert not series.selection("eval_loss", "step").y.flags.writeable


def test_latest_and_first_nonfinite_match_the_frame_helpers() -> None:
    df = frame()
    df.loc[500, "loss"] = np.nan
    masks = {"eval_loss": ~np.isnan(df["eval_loss"].to_numpy()), "loss": np.ones(len(df), bool)}
    series = LiveSeries(df, masks)
    for column in ("loss", "eval_loss", "lr"):
        assert series.latest(column) == latest(df, column, masks)
    assert series.first_nonfinite("loss") == first_nonfinite(df, "loss", masks)
    assert series.latest("missing") is None and series.first_nonfinite("missing") is None


def test_last_value_keeps_the_tile_rules() -> None:
    """With a mask the last logged value (NaN included); without one the last finite value or an inf tail."""
    df = pd.DataFrame({"step": [1, 2, 3], "loss": [2.0, np.inf, np.nan], "acc": [np.nan, 0.5, np.nan]})
    assert LiveSeries(df).last_value("loss") == np.inf
    assert LiveSeries(df).last_value("acc") == 0.5
    masked = LiveSeries(df, {"loss": np.array([True, True, True])}).last_value("loss")
    assert masked is not None and np.isnan(masked)
    assert last_unmasked(np.array([np.nan, np.nan])) is None


def test_a_value_logged_long_before_the_newest_rows_is_found() -> None:
    n = 10_000
    df = pd.DataFrame({"step": np.arange(n), "eval_loss": np.full(n, np.nan)})
    df.loc[100, "eval_loss"] = 0.7
    assert LiveSeries(df).last_value("eval_loss") == 0.7
    assert LiveSeries(df, {"eval_loss": ~np.isnan(df["eval_loss"].to_numpy())}).latest("eval_loss") == (100, 0.7)


def test_selection_drops_unlogged_rows_and_sorts_a_clock_that_stepped_back() -> None:
    df = pd.DataFrame({"step": [1, 2, 3, 4], "t": [10.0, 12.0, 11.0, np.nan], "loss": [1.0, np.nan, 3.0, 4.0]})
    series = LiveSeries(df, {"loss": np.array([True, False, True, True])})
    sel = series.selection("loss", "elapsed_s")
    assert sel.steps.tolist() == [1, 3]  # step 2 not logged, step 4 has no time
    assert sel.x.tolist() == [0.0, 1.0]
    back = LiveSeries(df).selection("loss", "time")
    assert back.steps.tolist() == [1, 3, 2]


def test_a_missing_x_column_raises_and_is_not_remembered() -> None:
    series = LiveSeries(pd.DataFrame({"step": [1, 2], "loss": [1.0, 2.0]}))
    with pytest.raises(KeyError, match="'t'"):
        series.x_axis("time")
    with pytest.raises(KeyError):
        series.x_axis("time")


def test_the_drawn_rank_is_found_once_for_every_chart_of_a_refresh(tmp_path: Path) -> None:
    from monitor_cb.charts.traces import Ranks

    df = frame().assign(rank=np.tile([0, 1], 500))
    series = LiveSeries(df)
    first = Ranks.of(series, None)
    assert first.chosen == 0.0 and first.mask is not None and int(first.mask.sum()) == 500
    assert Ranks.of(series, None) is first, "the second chart reuses the scan"
    assert Ranks.of(series, 1).chosen == 1.0
    assert Ranks.of(LiveSeries(df), None) is not first, "another data version scans again"


def test_an_x_axis_is_checked_once_for_every_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = live_series.valid_x
    monkeypatch.setattr(live_series, "valid_x", lambda values: calls.append(len(values)) or real(values))
    df = frame()
    df.loc[500, "t"] = df.loc[10, "t"]  # the clock stepped back once: the time axis is sorted for drawing
    series = LiveSeries(df)
    for metric in ("loss", "lr", "throughput", "grad_norm"):
        series.selection(metric, "step")
        sel = series.selection(metric, "time")
        assert sel.order is not None and bool(np.all(np.diff(sel.x.astype(np.int64)) >= 0))
    assert calls == [len(df), len(df)], "one check per axis, not per metric"
    assert series.selection("eval_loss", "step").order is None
