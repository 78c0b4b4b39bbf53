"""Figure builders: assert on the traces and layout a page will hand to st.plotly_chart."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from monitor_cb.charts.figures import (
    NONFINITE_COLOR,
    THRESHOLD_COLOR,
    ChartData,
    ChartOptions,
    components_figure,
    dual_axis_figure,
    empty_figure,
    eval_figure,
    memory_figure,
    timing_figure,
)

T0 = 1_764_698_400.0


def make_frame(n: int = 5000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    step = np.arange(1, n + 1)
    df = pd.DataFrame(
        {
            "step": step,
            "t": T0 + step * 0.2,
            "rank": 0,
            "seg": 1,
            "loss": 3.0 * np.exp(-step / (n / 3)) + 0.5 + rng.normal(0, 0.05, n),
            "lr": np.linspace(1e-3, 1e-4, n),
            "grad_norm": rng.lognormal(0, 0.2, n),
            "samples": step * 32.0,
        }
    )
    return df


def by_name(fig: go.Figure) -> dict[str, go.BaseTraceType]:
    return {trace.name: trace for trace in fig.data}


def test_traces_and_axes_with_smoothing():
    fig = dual_axis_figure(make_frame(), ["loss", "grad_norm"], ["lr"], ChartOptions(smoothing=0.6))
    traces = by_name(fig)
    # lr is a schedule: never smoothed, one trace
    assert set(traces) == {"loss", "loss (raw)", "grad_norm", "grad_norm (raw)", "lr"}
    assert traces["loss"].yaxis == "y" and traces["grad_norm (raw)"].yaxis == "y"
    assert traces["lr"].yaxis == "y2"
    assert fig.layout.yaxis2.overlaying == "y" and fig.layout.yaxis2.side == "right"
    # raw is faint and hidden from the legend; smoothed is solid and shares its colour
    assert traces["loss (raw)"].opacity < 0.5 and traces["loss (raw)"].showlegend is False
    assert traces["loss"].line.color == traces["loss (raw)"].line.color
    assert fig.data[0].name == "loss (raw)"  # raw drawn first, i.e. behind
    assert fig.layout.yaxis.title.text == "loss, grad_norm" and fig.layout.yaxis2.title.text == "lr"
    assert fig.layout.yaxis2.tickmode == "auto"
    assert fig.layout.legend.orientation == "h"


def test_smoothed_trace_is_tensorboard_ema():
    df = make_frame(500)
    fig = dual_axis_figure(df, ["loss"], options=ChartOptions(smoothing=0.9))
    smoothed = by_name(fig)["loss"]
    expected = pd.Series(df["loss"]).ewm(alpha=0.1).mean().to_numpy()
    np.testing.assert_allclose(np.asarray(smoothed.y, dtype=float), expected)


def test_no_smoothing_draws_one_trace_per_metric_and_no_right_axis():
    fig = dual_axis_figure(make_frame(), ["loss"], [], ChartOptions(smoothing=0.0))
    assert [t.name for t in fig.data] == ["loss"]
    assert "yaxis2" not in fig.to_dict()["layout"]


def test_missing_columns_are_skipped():
    fig = dual_axis_figure(make_frame(100), ["loss", "nope"], ["also_nope"])
    assert [t.name for t in fig.data] == ["loss"]


def test_points_per_trace_are_bounded_and_spike_kept():
    df = make_frame(200_000)
    df.loc[123_456, "loss"] = 40.0
    fig = dual_axis_figure(df, ["loss"], ["lr"], ChartOptions(smoothing=0.8, n_out=1000))
    for trace in fig.data:
        assert len(trace.x) <= 1002
    raw = by_name(fig)["loss (raw)"]
    assert 40.0 in np.asarray(raw.y)
    assert isinstance(raw, go.Scatter)  # 1000 points: still SVG
    big = dual_axis_figure(df, ["loss"], options=ChartOptions(smoothing=0.8, n_out=8000))
    assert isinstance(by_name(big)["loss (raw)"], go.Scattergl)  # traces beyond every offered budget use WebGL
    assert isinstance(dual_axis_figure(make_frame(100), ["loss"]).data[0], go.Scatter)


def test_nonfinite_markers_and_first_nonfinite_line():
    df = make_frame(20_000)
    df.loc[[4999, 15_000], "loss"] = [math.nan, math.inf]
    df.loc[9999, "grad_norm"] = -math.inf
    fig = dual_axis_figure(df, ["loss", "grad_norm"], ["lr"], ChartOptions(smoothing=0.6))
    traces = by_name(fig)
    marks = traces["loss non-finite"]
    assert list(marks.x) == [5000, 15_001]
    assert marks.marker.color == NONFINITE_COLOR and marks.marker.symbol == "x"
    # placed at the last finite value before it, the real value in the hover text
    assert marks.y[0] == pytest.approx(df.loc[4998, "loss"])
    assert marks.y[1] == pytest.approx(df.loc[14_999, "loss"])
    assert "NaN" in marks.text[0] and "step 5000" in marks.text[0] and "+inf" in marks.text[1]
    assert list(traces["grad_norm non-finite"].x) == [10_000]
    assert "-inf" in traces["grad_norm non-finite"].text[0]
    # the drawn line has a gap there, the smoothed line stays finite after it
    raw_x = np.asarray(traces["loss (raw)"].x)
    raw_y = np.asarray(traces["loss (raw)"].y, dtype=float)
    assert math.isnan(raw_y[raw_x == 5000][0])
    smooth_x = np.asarray(traces["loss"].x)  # the smoothed trend is drawn with fewer points of its own
    assert len(smooth_x) < len(raw_x)
    assert np.isfinite(np.asarray(traces["loss"].y, dtype=float)[smooth_x > 5000][:10]).all()
    # one dotted line per first non-finite x, labelled with the metric
    lines = [s for s in fig.layout.shapes if s.yref == "paper"]
    assert sorted(s.x0 for s in lines) == [5000, 10_000]
    texts = [a.text for a in fig.layout.annotations]
    assert any("loss" in t and "5,000" in t for t in texts)


def test_first_nonfinite_label_runs_towards_the_middle():
    # plotly autoranges over annotations: a label running right of the last point would widen the axis
    for at, anchor in ((18_000, "right"), (1000, "left")):
        df = make_frame(20_000)
        df.loc[at, "loss"] = math.nan
        (label,) = dual_axis_figure(df, ["loss"]).layout.annotations
        assert label.xanchor == anchor and label.x == at + 1


def test_nonfinite_marker_before_any_finite_value():
    df = make_frame(10)
    df.loc[0, "loss"] = math.nan
    fig = dual_axis_figure(df, ["loss"])
    marks = by_name(fig)["loss non-finite"]
    assert marks.y[0] == pytest.approx(df.loc[1, "loss"])  # falls back to the first finite value after


def test_long_nan_tail_is_capped():
    df = make_frame(100_000)
    df.loc[50_000:, "loss"] = math.nan
    fig = dual_axis_figure(df, ["loss"], options=ChartOptions(n_out=500))
    assert len(by_name(fig)["loss non-finite"].x) <= 502
    assert by_name(fig)["loss non-finite"].x[0] == 50_001


def test_threshold_points_red_and_line_drawn():
    df = make_frame(1000)
    df.loc[[100, 600], "grad_norm"] = [12.0, 30.0]
    fig = dual_axis_figure(df, ["loss"], ["grad_norm"], ChartOptions(thresholds={"grad_norm": 10.0}))
    beyond = by_name(fig)["grad_norm beyond threshold"]
    assert list(beyond.x) == [101, 601] and list(beyond.y) == [12.0, 30.0]
    assert beyond.marker.color == THRESHOLD_COLOR and beyond.yaxis == "y2"
    hlines = [s for s in fig.layout.shapes if s.xref == "paper"]
    assert [(s.y0, s.yref) for s in hlines] == [(10.0, "y2")]


def test_threshold_lower_and_upper_bounds():
    df = make_frame(1000)
    df.loc[5, "loss"] = 0.01
    df.loc[6, "loss"] = 9.0
    fig = dual_axis_figure(df, ["loss"], options=ChartOptions(thresholds={"loss": (0.1, 5.0)}))
    assert list(by_name(fig)["loss beyond threshold"].x) == [6, 7]


def test_log_y_masks_non_positive_values():
    df = make_frame(1000)
    df.loc[[10, 20], "loss"] = [0.0, -1.0]
    fig = dual_axis_figure(df, ["loss"], ["lr"], ChartOptions(smoothing=0.5, log_y=True), log_y2=True)
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"
    for name in ("loss", "loss (raw)"):
        y = np.asarray(by_name(fig)[name].y, dtype=float)
        assert not (y[np.isfinite(y)] <= 0).any()
    raw = by_name(fig)["loss (raw)"]
    assert math.isnan(np.asarray(raw.y, dtype=float)[10])
    assert "loss non-finite" not in by_name(fig)  # masked for the axis, not a NaN


def test_log_y_nan_marker_is_positive():
    df = make_frame(100)
    df["loss"] = -1.0
    df.loc[50, "loss"] = math.nan
    fig = dual_axis_figure(df, ["loss"], options=ChartOptions(log_y=True))
    assert by_name(fig)["loss non-finite"].y[0] > 0


def test_x_range_and_uirevision():
    fig = dual_axis_figure(make_frame(), ["loss"], options=ChartOptions(x_range=(100, 900), uirevision="run-7"))
    assert tuple(fig.layout.xaxis.range) == (100, 900)
    assert fig.layout.uirevision == "run-7"
    # marked as the server's, so the page's listener does not report it back as a user's zoom (a rerun)
    assert fig.layout.meta == {"server_x_range": True}
    auto = dual_axis_figure(make_frame(), ["loss"])
    assert auto.layout.xaxis.range is None and auto.layout.meta is None


@pytest.mark.parametrize("kind", ["time", "elapsed_min", "samples"])
def test_x_kinds(kind):
    df = make_frame(3000)
    df.loc[100, "loss"] = math.nan
    fig = dual_axis_figure(df, ["loss"], options=ChartOptions(x=kind, smoothing=0.3))
    raw = by_name(fig)["loss (raw)"]
    if kind == "time":
        assert fig.layout.xaxis.type == "date"
        assert np.asarray(raw.x).dtype.kind == "M"
    assert fig.layout.xaxis.title.text
    assert len(by_name(fig)["loss non-finite"].x) == 1
    fig.to_json()  # serialises, including the datetime shape


def test_time_x_range_and_vline():
    df = make_frame(1000)
    df.loc[500, "loss"] = math.nan
    lo, hi = pd.Timestamp(T0, unit="s"), pd.Timestamp(T0 + 100, unit="s")
    fig = dual_axis_figure(df, ["loss"], options=ChartOptions(x="time", x_range=(lo, hi)))
    assert tuple(fig.layout.xaxis.range) == (lo, hi)
    line = next(s for s in fig.layout.shapes if s.yref == "paper")
    assert pd.Timestamp(line.x0) == pd.Timestamp(T0 + 501 * 0.2, unit="s").round("ms")
    assert any(a.text.endswith("2025-12-02 18:01:40") for a in fig.layout.annotations)


def test_logged_masks_keep_sparse_eval_columns_clean():
    df = make_frame(2000)
    df["eval_loss"] = np.nan
    df.loc[199::200, "eval_loss"] = np.linspace(3, 1, 10)
    logged = {"eval_loss": df["eval_loss"].notna().to_numpy()}
    fig = eval_figure(ChartData(df, logged=logged), ChartOptions(smoothing=0.6))
    traces = by_name(fig)
    assert "eval_loss non-finite" not in traces
    assert len(traces["eval_loss"].x) == 10 and traces["eval_loss"].mode == "lines+markers"
    assert traces["eval_loss"].yaxis == "y" and "loss (raw)" in traces  # train smoothed, eval raw
    assert "eval_loss (raw)" not in traces


def test_eval_figure_puts_accuracy_on_the_right():
    df = make_frame(1000)
    df["eval_loss"] = df["loss"] * 1.1
    df["eval_accuracy"] = np.linspace(0.1, 0.9, 1000)
    traces = by_name(eval_figure(df))
    assert traces["eval_accuracy"].yaxis == "y2" and traces["eval_loss"].yaxis == "y"


def test_components_timing_memory():
    df = make_frame(1000)
    df["loss_ce"] = df["loss"] * 0.8
    df["loss_aux"] = df["loss"] * 0.2
    df["loss_scale"] = 1024.0
    df["step_time"] = 0.2
    df["data_time"] = 0.01
    df["throughput"] = 160.0
    df["mem_device"] = 2.0 * 2**30
    df["mem_host_rss"] = 3.0 * 2**30
    names = [t.name for t in components_figure(df).data]
    assert names == ["loss", "loss_ce", "loss_aux"]
    timing = by_name(timing_figure(df))
    assert timing["step_time"].yaxis == "y" and timing["data_time"].yaxis == "y"
    assert timing["throughput"].yaxis == "y2"
    memory = memory_figure(df)
    assert by_name(memory)["mem_device"].y[0] == pytest.approx(2.0)
    assert memory.layout.yaxis.title.text == "GiB"


def test_empty_figure_and_empty_frame():
    fig = empty_figure("waiting for the first record")
    assert fig.layout.annotations[0].text == "waiting for the first record"
    empty = make_frame(0)
    assert len(dual_axis_figure(empty, ["loss"], ["lr"], ChartOptions(smoothing=0.6)).data) == 0


def test_bad_smoothing_rejected():
    with pytest.raises(ValueError, match="smoothing"):
        dual_axis_figure(make_frame(10), ["loss"], options=ChartOptions(smoothing=1.0))


def test_rows_draws_a_zoomed_range_smoothed_over_the_whole_run():
    df = make_frame(20_000)
    df.loc[5500, "loss"] = math.nan
    full = by_name(dual_axis_figure(df, ["loss"], options=ChartOptions(smoothing=0.9, n_out=100_000)))["loss"]
    zoomed = dual_axis_figure(
        ChartData(df, rows=slice(5000, 6000)), ["loss"], options=ChartOptions(x="elapsed_s", smoothing=0.9)
    )
    traces = by_name(zoomed)
    assert len(traces["loss (raw)"].x) == 1000  # every point of the range, no downsampling
    np.testing.assert_allclose(np.asarray(traces["loss"].y, dtype=float), np.asarray(full.y, dtype=float)[5000:6000])
    assert traces["loss (raw)"].x[0] == pytest.approx(5000 * 0.2)  # elapsed measured from the run's start
    assert list(traces["loss non-finite"].x) == [pytest.approx(5500 * 0.2)]
    positions = dual_axis_figure(ChartData(df, rows=np.arange(100, 200)), ["loss"])
    assert list(by_name(positions)["loss"].x) == list(range(101, 201))
    assert len(dual_axis_figure(ChartData(df, rows=slice(0, 0)), ["loss"]).data) == 0


def test_colours_are_stable_per_metric_and_distinct_within_a_figure():
    df = make_frame(100)
    for i in range(12):
        df[f"m{i}"] = float(i)
    a = by_name(dual_axis_figure(df, ["grad_norm", "m0"], ["loss"]))
    b = by_name(dual_axis_figure(df, ["loss"], ["lr"]))
    assert a["loss"].line.color == b["loss"].line.color
    assert len({a[n].line.color for n in ("grad_norm", "m0", "loss")}) == 3
    many = dual_axis_figure(df, [f"m{i}" for i in range(12)])
    assert len({t.line.color for t in many.data}) == 9  # the whole palette is used before repeating


def test_nullable_dtypes_and_missing_x_values():
    df = make_frame(100)
    df["samples"] = pd.array([None, *range(32, 32 * 100, 32)], dtype="Int64")
    df["loss"] = df["loss"].astype("Float64")
    fig = dual_axis_figure(df, ["loss"], options=ChartOptions(x="samples"))
    assert len(fig.data[0].x) == 99  # the row without an x value is left out


def merged_ranks(n: int = 3000, world: int = 4) -> pd.DataFrame:
    """A frame as RunStore.frame(run_id) returns for a multi-rank run: sorted by step, then rank."""
    parts = []
    for rank in range(world):
        part = make_frame(n, seed=rank)
        part["rank"] = rank
        part["loss"] += rank  # ranks differ, so a zig-zag between them would show
        parts.append(part)
    return pd.concat(parts).sort_values(["step", "rank"], kind="stable").reset_index(drop=True)


def test_merged_ranks_draw_one_rank_and_mark_nans_of_all():
    df = merged_ranks()
    bad_row = df.index[(df["rank"] == 2) & (df["step"] == 1500)][0]
    df.loc[bad_row, "loss"] = math.nan
    fig = dual_axis_figure(df, ["loss"], options=ChartOptions(smoothing=0.5))
    traces = by_name(fig)
    raw = traces["loss (raw)"]
    assert len(raw.x) == 2000 and (np.diff(np.asarray(raw.x)) > 0).all()  # one rank, no zig-zag
    assert np.asarray(raw.y, dtype=float).max() < 5  # rank 0's values, not rank 3's (+3)
    marks = traces["loss non-finite"]
    assert list(marks.x) == [1500] and "rank 2" in marks.text[0]
    assert marks.y[0] == pytest.approx(df.loc[(df["rank"] == 0) & (df["step"] == 1500), "loss"].iloc[0])
    assert any("1,500" in a.text for a in fig.layout.annotations)
    rank3 = by_name(dual_axis_figure(ChartData(df, rank=3), ["loss"]))["loss"]
    assert np.asarray(rank3.y, dtype=float).min() > 3


def test_single_rank_frame_needs_no_rank_handling():
    df = make_frame(100)
    df.loc[10, "loss"] = math.nan
    marks = by_name(dual_axis_figure(df, ["loss"]))["loss non-finite"]
    assert "rank" not in marks.text[0]


def test_memory_figure_keeps_rank_and_custom_x():
    df = merged_ranks(100, world=2)
    df["mem_device"] = (1.0 + df["rank"]) * 2**30
    df["my_x"] = df["step"] * 2.0
    trace = by_name(memory_figure(df, ChartOptions(x="my_x")))["mem_device"]
    assert len(trace.x) == 100 and set(np.asarray(trace.y)) == {1.0}  # rank 0 only


def test_live_cache_gives_the_figure_a_fresh_cache_gives():
    from monitor_cb.analysis import series_cache

    df = make_frame(120_000)
    df.loc[[50_000, 119_990], "loss"] = [math.nan, math.inf]
    df.loc[77_777, "loss"] = 40.0
    options = ChartOptions(smoothing=0.6, n_out=1000)
    dual_axis_figure(ChartData(df.iloc[:100_000], cache_key="run-a"), ["loss"], ["lr"], options)  # an earlier refresh
    extended = dual_axis_figure(ChartData(df, cache_key="run-a"), ["loss"], ["lr"], options)
    series_cache.SERIES_CACHE.clear()
    fresh = dual_axis_figure(ChartData(df, cache_key="run-a"), ["loss"], ["lr"], options)

    assert [t.name for t in extended.data] == [t.name for t in fresh.data]
    for a, b in zip(extended.data, fresh.data, strict=True):
        np.testing.assert_array_equal(np.asarray(a.x), np.asarray(b.x))
        np.testing.assert_array_equal(np.asarray(a.y), np.asarray(b.y))
    traces = by_name(extended)
    assert 40.0 in np.asarray(traces["loss (raw)"].y)  # the spike
    assert list(traces["loss non-finite"].x) == [50_001, 119_991]
    assert np.asarray(traces["loss (raw)"].x).dtype == np.int32  # 32-bit arrays from the builder
    assert np.asarray(traces["loss (raw)"].y).dtype == np.float32
    assert len(traces["loss"].x) < len(traces["loss (raw)"].x) / 4  # the smoothed trend is thinner
    assert "lr (raw)" not in traces  # a schedule is not smoothed


def test_names_from_run_data_are_escaped_and_hidden_right_axis_draws_no_zero_line():
    df = make_frame(100)
    df["<b>x</b>&"] = df["loss"]
    fig = dual_axis_figure(df, ["<b>x</b>&"], ["lr"], ChartOptions(smoothing=0.5))
    names = {t.name for t in fig.data}
    assert "&lt;b&gt;x&lt;/b&gt;&amp;" in names and not any("<b>" in n for n in names)
    assert all("<b>" not in (t.hovertemplate or "") for t in fig.data)
    assert "<b>" not in fig.layout.yaxis.title.text
    assert fig.layout.yaxis2.zeroline is False and fig.layout.yaxis2.showgrid is False


def test_first_nonfinite_label_writes_a_big_step_in_full():
    """Step 1,234,567 is not "1.23457e+06" (a rounded, misleading step)."""
    df = make_frame(300)
    df["step"] = df["step"] + 1_234_266
    df.loc[df.index[-1], "loss"] = math.nan
    (label,) = dual_axis_figure(df, ["loss"]).layout.annotations
    assert label.text.endswith("@ step 1,234,566") or label.text.endswith("@ step 1,234,567"), label.text


def test_a_step_axis_writes_its_ticks_in_full():
    """Plotly's default writes steps near a million as "0.999955M"."""
    fig = dual_axis_figure(make_frame(300), ["loss"])
    assert fig.layout.xaxis.tickformat == ","
    assert dual_axis_figure(make_frame(300), ["loss"], options=ChartOptions(x="time")).layout.xaxis.tickformat is None


def test_axis_titles_make_room_for_their_tick_labels() -> None:
    """automargin on every axis: a y title never sits on "1e12" ticks, nor the x title on rotated step ticks."""
    import numpy as np
    import pandas as pd

    from monitor_cb.charts.figures import dual_axis_figure
    from monitor_cb.charts.options import ChartOptions

    steps = np.arange(1, 101) * 50_000
    frame = pd.DataFrame({"step": steps, "loss": np.linspace(1e12, 3e12, 100), "lr": np.full(100, 1e-3)})
    fig = dual_axis_figure(frame, ["loss"], ["lr"], ChartOptions())
    assert fig.layout.xaxis.automargin and fig.layout.yaxis.automargin and fig.layout.yaxis2.automargin
