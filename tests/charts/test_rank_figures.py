"""Multi-rank and telemetry figure builders: the traces a page hands to st.plotly_chart."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor_cb.charts.options import ChartData, ChartOptions
from monitor_cb.charts.rank_figures import (
    per_rank_figure,
    rank_band_figure,
    rank_color,
    rank_step_time_figure,
    telemetry_columns,
    utilisation_figure,
)
from monitor_cb.testing.synthetic_ranks import healthy_ranks_run, labelled_ranks_run


@pytest.fixture(scope="module")
def small() -> pd.DataFrame:
    return healthy_ranks_run(21, n_points=300)


@pytest.fixture(scope="module")
def big() -> pd.DataFrame:
    """8 ranks x 125,000 steps = 1M rows."""
    return healthy_ranks_run(22, n_points=125_000)


def names(fig) -> list[str]:
    return [t.name for t in fig.data]


def test_band_is_mean_in_min_max_across_ranks(small):
    fig = rank_band_figure(small, "loss")
    assert names(fig) == ["loss min", "loss min–max across ranks", "loss mean"]
    lo, hi, mean = fig.data
    assert hi.fill == "tonexty" and lo.showlegend is False
    per_step = small.groupby("step")["loss"]
    np.testing.assert_allclose(mean.y, per_step.mean().to_numpy())
    np.testing.assert_allclose(lo.y, per_step.min().to_numpy())
    np.testing.assert_allclose(hi.y, per_step.max().to_numpy())
    assert set(hi.customdata) <= set(range(8))  # the hover names the rank holding the max


def test_band_with_smoothing_keeps_the_raw_mean():
    frame = healthy_ranks_run(3, n_points=200)
    fig = rank_band_figure(frame, "loss", ChartOptions(smoothing=0.6))
    assert names(fig)[-2:] == ["loss mean (raw)", "loss mean"]
    with pytest.raises(ValueError, match="smoothing"):
        rank_band_figure(frame, "loss", ChartOptions(smoothing=1.0))


def test_nan_on_one_rank_is_a_marker_naming_it_not_hidden_by_the_mean(small):
    frame = small.copy()
    step = int(frame["step"].iloc[800])
    frame.loc[(frame["step"] == step) & (frame["rank"] == 5), "loss"] = np.nan
    frame.loc[(frame["step"] == step) & (frame["rank"] == 2), "loss"] = np.inf
    fig = rank_band_figure(frame, "loss")
    (marker,) = [t for t in fig.data if t.name == "loss non-finite"]
    assert list(marker.x) == [step]
    assert marker.text == (f"loss = +inf on rank 2; NaN on rank 5 at step {step}",)
    mean = next(t for t in fig.data if t.name == "loss mean")
    at = list(mean.x).index(step)
    assert np.isfinite(mean.y[at])  # the mean of the other six ranks
    assert marker.y[0] == pytest.approx(mean.y[at])
    assert any("first non-finite" in a.text for a in fig.layout.annotations)


def test_not_logged_is_not_a_nan(small):
    frame = small.copy()
    frame.loc[frame["rank"] == 3, "loss"] = np.nan
    logged = {"loss": (frame["rank"] != 3).to_numpy()}
    assert "loss non-finite" not in names(rank_band_figure(ChartData(frame, logged=logged), "loss"))
    assert "loss non-finite" in names(rank_band_figure(frame, "loss"))


def test_band_on_wall_time(small):
    fig = rank_band_figure(small, "loss", ChartOptions(x="time"))
    assert np.issubdtype(np.asarray(fig.data[-1].x).dtype, np.datetime64)
    assert fig.layout.xaxis.type == "date"


def test_point_budget_and_spikes_survive_on_1m_rows(big):
    frame = big.copy()
    spike_row = int(np.flatnonzero((frame["rank"] == 6).to_numpy())[70_000])
    frame.loc[spike_row, "loss"] = 1e3
    fig = rank_band_figure(frame, "loss", ChartOptions(n_out=2000))
    assert all(len(t.x) <= 2000 for t in fig.data)
    hi = next(t for t in fig.data if t.name == "loss min–max across ranks")
    assert max(hi.y) == 1e3 and 6 in set(hi.customdata)
    assert max(next(t for t in fig.data if t.name == "loss mean").y) == pytest.approx(
        frame.groupby("step")["loss"].mean().max()
    )
    per_rank = per_rank_figure(big, "loss", ChartOptions(n_out=2000))
    assert len(per_rank.data) == 8 and all(len(t.x) <= 2002 for t in per_rank.data)
    st = rank_step_time_figure(big, ChartOptions(n_out=2000))
    assert all(len(t.x) <= 2000 for t in st.data)


def test_per_rank_traces_have_stable_colours(small):
    fig = per_rank_figure(small, "loss")
    assert names(fig) == [f"rank {r}" for r in range(8)]
    assert [t.line.color for t in fig.data] == [rank_color(r) for r in range(8)]
    some = per_rank_figure(small, "loss", ChartOptions(smoothing=0.5), ranks=[6, 2])
    assert names(some) == ["rank 6 (raw)", "rank 6", "rank 2 (raw)", "rank 2"]
    assert some.data[1].line.color == rank_color(6) == fig.data[6].line.color


def test_per_rank_marks_a_nan_on_its_rank(small):
    frame = small.copy()
    frame.loc[(frame["rank"] == 4) & (frame["step"] == frame["step"].iloc[-1]), "grad_norm"] = np.nan
    fig = per_rank_figure(frame, "grad_norm")
    (marker,) = [t for t in fig.data if t.name.endswith("non-finite")]
    assert marker.name == "rank 4 non-finite" and "rank 4 = NaN" in marker.text[0]


def test_step_time_shows_the_straggler():
    run = labelled_ranks_run("straggler", seed=4, n_points=800)
    fig = rank_step_time_figure(run.frame, last=200)
    boxes = [t for t in fig.data if t.type == "box"]
    lines = [t for t in fig.data if t.type != "box"]
    assert len(boxes) == len(lines) == 8
    medians = [b.median[0] for b in boxes]
    assert int(np.argmax(medians)) == run.rank
    slow = lines[run.rank]
    assert slow.name.startswith(f"rank {run.rank} · ") and float(slow.name.split("· ")[1].rstrip("×")) > 1.3
    assert len(slow.x) == 200
    assert sum(1 for s in fig.layout.shapes if s.line.dash == "dash") == 1  # the straggler threshold


def test_utilisation_and_memory_on_two_axes_skipping_absent_columns(small):
    frame = small.copy()
    sampled = np.arange(len(frame)) % 5 == 0  # the 1 Hz sampler joins some rows only
    frame["gpu_util"] = np.where(sampled, 75.0, np.nan)
    frame["sys_cpu_percent"] = np.where(sampled, 30.0, np.nan)
    frame["mem_device"] = np.where(sampled, 4 * 2**30, np.nan)
    assert telemetry_columns(frame) == ["gpu_util", "sys_cpu_percent", "mem_device"]
    fig = utilisation_figure(frame)
    assert names(fig) == ["gpu_util", "sys_cpu_percent", "mem_device"]
    assert [t.yaxis for t in fig.data] == ["y", "y", "y2"]
    assert fig.data[2].y[0] == pytest.approx(4.0)  # GiB
    assert fig.layout.yaxis2.title.text == "GiB"
    assert fig.layout.yaxis.title.text == "utilisation %"
    assert not [t for t in fig.data if "non-finite" in t.name]  # not sampled is not a NaN


def test_npu_memory_derived_and_percent_memory_without_bytes(small):
    frame = small[["step", "t", "rank", "seg"]].copy()
    frame["npu_util"] = 50.0
    frame["npu_mem_util"] = 25.0
    frame["npu_mem_total_mb"] = 65536.0
    fig = utilisation_figure(ChartData(frame, rank=3))
    assert names(fig) == ["npu_util", "npu_mem"]
    assert fig.data[1].y[0] == pytest.approx(16.0)
    frame = small[["step", "t", "rank", "seg"]].copy()
    frame["sys_mem_percent"] = 40.0
    assert names(utilisation_figure(frame)) == ["sys_mem_percent"]


def test_nothing_to_draw_gives_an_empty_figure(small):
    for fig in (
        rank_band_figure(small, "nope"),
        per_rank_figure(small, "nope"),
        rank_step_time_figure(small.drop(columns=["step_time"])),
        utilisation_figure(small),
    ):
        assert len(fig.data) == 0 and fig.layout.annotations
    assert telemetry_columns(small) == []
