"""Unit tests of the live page's plain logic (monitor_cb.dashboard's live-page modules): what AppTest cannot drive."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from monitor_cb.dashboard.kpis import _kpi_value, _last_value, compute_kpis, format_count, format_value, nan_banner
from monitor_cb.dashboard.live import ChartSettings, figures_key, live_figures, zoomed_rows
from monitor_cb.dashboard.logdir import resolve_logdir
from monitor_cb.dashboard.panels import panels_for
from monitor_cb.dashboard.runlist import filter_runs, format_age, format_clock, format_duration, pick_run, run_label
from monitor_cb.dashboard.thresholds import parse_thresholds
from monitor_cb.dashboard.zoom import (
    ZoomState,
    apply_legend_event,
    apply_zoom_event,
    monotonic_x,
    rows_in_steps,
    x_range_for,
)


@dataclass
class FakeRun:
    id: str
    name: str = ""
    status: str = "running"
    last_write: float = 1000.0
    last_step: int | None = None
    n_records: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


def frame(n: int = 100, t0: float = 1000.0, dt: float = 0.5, **cols: Any) -> pd.DataFrame:
    steps = np.arange(1, n + 1) * 10
    data = {"step": steps, "t": t0 + np.arange(n) * dt, "loss": np.linspace(3, 1, n), "lr": np.full(n, 1e-3)}
    data.update(cols)
    return pd.DataFrame(data)


# ----------------------------------------------------------------------------- log root
def test_logdir_from_argv_env_default(tmp_path: Path) -> None:
    assert resolve_logdir(["--logdir", str(tmp_path)], {}) == tmp_path.resolve()
    assert resolve_logdir([f"--logdir={tmp_path}"], {}) == tmp_path.resolve()
    assert resolve_logdir([], {"MONITOR_LOGDIR": str(tmp_path / "x")}) == (tmp_path / "x").resolve()
    assert resolve_logdir([], {}, cwd=tmp_path) == (tmp_path / "logs").resolve()
    # the command line wins over the environment
    assert resolve_logdir(["--logdir", "a"], {"MONITOR_LOGDIR": "b"}, cwd=tmp_path) == tmp_path / "a"


# ----------------------------------------------------------------------------- run list
@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "–"), (math.nan, "–"), (-3, "0 s"), (4.2, "4 s"), (600, "10 min"), (3 * 3600, "3.0 h"), (5 * 86400, "5 d")],
)
def test_format_age(seconds: float | None, text: str) -> None:
    assert format_age(seconds) == text


def test_format_duration() -> None:
    assert format_duration(3723) == "1:02:03"
    assert format_duration(None) == "–"


def test_filter_and_pick_runs() -> None:
    runs = [FakeRun("bert/exp2", "exp2", "failed"), FakeRun("exp1", "exp1", "finished")]
    assert [r.id for r in filter_runs(runs, "")] == ["bert/exp2", "exp1"]
    assert [r.id for r in filter_runs(runs, "BERT fail")] == ["bert/exp2"]
    assert filter_runs(runs, "nothing") == []
    ids = [r.id for r in runs]
    assert pick_run(ids, "exp1") == "exp1"
    assert pick_run(ids, "gone") == "bert/exp2"  # newest first
    assert pick_run([], "x") is None


def test_run_labels_are_plain_text_that_does_not_go_stale() -> None:
    """A select box's labels are drawn once per page run: no age that goes stale, no emoji."""
    t = 1_700_000_000.0
    ended = FakeRun("bert/exp2", "exp2", "failed", last_write=t)
    clock = format_clock(t, t + 60)
    assert run_label(ended, now=t + 10) == run_label(ended, now=t + 50) == f"bert/exp2 · failed · {clock}"
    assert len(clock) == 5 and clock[2] == ":"  # the same day: the time of day
    assert format_clock(t, t + 40 * 86400).count(" ") == 2  # another day this year: "Dec 02 14:05"
    assert format_clock(t, t + 400 * 86400)[:4].isdigit()  # another year: the date in full
    assert run_label(FakeRun("live", "live", "running", last_write=t), now=t + 500) == "live · running"
    assert all(ord(c) < 0x2000 or c in "·–" for c in run_label(ended, now=t))


# ----------------------------------------------------------------------------- KPIs
def test_kpis_running_with_total_and_eta() -> None:
    df = frame(100, t0=1000.0, dt=0.5, throughput=np.full(100, 800.0), epoch=np.repeat([1, 2], 50))
    run = FakeRun("r", status="running", last_write=1049.5, meta={"total_steps": 2000, "first_start_time": 990.0})
    k = compute_kpis(df, run, now=1050.0)
    assert k.step == 1000 and k.total_steps == 2000 and k.epoch == 2
    assert k.steps_per_s == pytest.approx(20.0)
    assert k.eta_s == pytest.approx(50.0)
    assert k.elapsed_s == pytest.approx(60.0)
    assert k.loss == pytest.approx(1.0) and k.throughput == 800.0 and k.grad_norm is None
    assert not k.stale and (k.step, k.total_steps) == (1000, 2000)


def test_kpis_stale_and_finished() -> None:
    df = frame(10)
    stale = compute_kpis(df, FakeRun("r", status="running", last_write=1000.0), now=1000.0 + 3600)
    assert stale.stale and stale.eta_s is None
    assert compute_kpis(df, FakeRun("r", status="stalled", last_write=1000.0), now=1001.0).stale
    done = compute_kpis(df, FakeRun("r", status="finished", last_write=1000.0), now=1000.0 + 3600)
    assert not done.stale


def test_kpis_show_a_nonfinite_tail_and_skip_gaps() -> None:
    loss = np.array([2.0, 1.5, np.inf])
    df = pd.DataFrame({"step": [1, 2, 3], "t": [1.0, 2.0, 3.0], "loss": loss, "eval_acc": [np.nan, 0.5, np.nan]})
    k = compute_kpis(df, FakeRun("r"), now=4.0)
    assert k.loss == math.inf and format_value(k.loss) == "inf"
    assert _last_value(df, "eval_acc") == 0.5
    assert compute_kpis(df.iloc[:0], FakeRun("r", last_step=None), now=4.0).loss is None


def test_nan_banner() -> None:
    assert nan_banner(None, "loss", 0.0) is None
    text = nan_banner((412, 1000.0), "loss", now=1000.0 + 180)
    assert text == "loss became NaN/Inf at step 412, 3 min ago"


# ----------------------------------------------------------------------------- panels, thresholds
def test_panels_follow_columns() -> None:
    keys = [p.key for p in panels_for(["step", "t", "loss", "lr", "loss_scale"])]
    assert keys == ["loss_lr", "custom"]  # loss_scale is not a component loss
    keys = [p.key for p in panels_for(["loss", "eval_loss", "loss_cls", "data_time", "mem_host_rss"])]
    assert keys == ["loss_lr", "eval", "components", "timing", "memory", "custom"]


def test_parse_thresholds() -> None:
    limits, bad = parse_thresholds("grad_norm > 10, loss < 0.01; loss > 5\nnonsense")
    assert limits == {"grad_norm": (None, 10.0), "loss": (0.01, 5.0)}
    assert bad == ["nonsense"]
    assert parse_thresholds("") == ({}, [])


# ----------------------------------------------------------------------------- zoom
def test_zoom_event_maps_x_to_steps_and_back() -> None:
    df = frame(100)  # steps 10..1000, t 1000..1049.5
    steps = df["step"].to_numpy()
    xs = monotonic_x(df["t"].to_numpy() - 1000.0)  # relative seconds
    state = ZoomState()
    assert apply_zoom_event(state, {"chart": "chart_loss_lr", "x0": 4.5, "x1": 9.5}, xs, steps, False)
    assert (state.lo, state.hi) == pytest.approx((100.0, 200.0))
    assert x_range_for(state, xs, xs, steps) == pytest.approx((4.5, 9.5))
    # the same event again changes nothing; a reset clears it
    assert not apply_zoom_event(state, {"x0": 4.5, "x1": 9.5}, xs, steps, False)
    assert apply_zoom_event(state, {"reset": True}, xs, steps, False) and not state.active


def test_zoom_event_past_the_newest_point_keeps_its_width() -> None:
    steps = np.array([1, 2, 3, 4])
    xs = steps.astype(float)
    state = ZoomState()
    apply_zoom_event(state, {"x0": 3, "x1": 10}, xs, steps, False)
    assert (state.lo, state.hi) == (3.0, 10.0)
    assert x_range_for(state, xs, xs, steps) == (3.0, 10.0)


def test_zoom_event_with_dates_and_garbage() -> None:
    t = pd.to_datetime(np.array([0, 10, 20], dtype=float), unit="s").to_numpy()
    steps = np.array([1, 2, 3])
    xs = monotonic_x(t)
    state = ZoomState()
    assert apply_zoom_event(state, {"x0": "1970-01-01 00:00:05", "x1": "1970-01-01 00:00:15"}, xs, steps, True)
    assert (state.lo, state.hi) == pytest.approx((1.5, 2.5))
    lo, _hi = x_range_for(state, t, xs, steps)
    assert pd.Timestamp(lo) == pd.Timestamp("1970-01-01 00:00:05")
    for junk in (None, [], {"x0": "drop table", "x1": 3}, {"x0": {"a": 1}, "x1": 2}, {"x0": "9" * 100, "x1": 1}):
        assert not apply_zoom_event(ZoomState(), junk, xs, steps, True)
    assert not apply_zoom_event(ZoomState(), {"x0": math.nan, "x1": 1}, xs, steps, False)


def test_legend_event() -> None:
    state = ZoomState()
    assert apply_legend_event(state, {"chart": "chart_eval", "hidden": ["lr", 3, "lr"]}, ["chart_eval"])
    assert state.hidden == {"chart_eval": ["lr"]}
    assert not apply_legend_event(state, {"chart": "chart_eval", "hidden": ["lr"]}, ["chart_eval"])
    assert not apply_legend_event(state, {"chart": "other", "hidden": []}, ["chart_eval"])
    assert not apply_legend_event(state, "junk", ["chart_eval"])


def test_rows_for_a_zoomed_range() -> None:
    steps = np.arange(1, 101)
    assert rows_in_steps(steps, None, None) == slice(0, 100)
    assert rows_in_steps(steps, 10, 20) == slice(8, 21)  # steps 9..21: one neighbour each side
    df = pd.DataFrame({"step": steps})
    rows = zoomed_rows(df, ZoomState(lo=50, hi=60), context=0.0)
    assert list(df["step"].to_numpy()[rows]) == list(range(49, 62))
    rows = zoomed_rows(df, ZoomState(lo=50, hi=60))  # one zoom width of context each side
    assert list(df["step"].to_numpy()[rows]) == list(range(39, 72))
    assert list(df["step"].to_numpy()[zoomed_rows(df, ZoomState(lo=95))]) == list(range(94, 101))
    assert zoomed_rows(df, ZoomState()) is None


# ----------------------------------------------------------------------------- figures
def test_live_figures_hold_the_panels_traces_zoom_and_hidden_entries() -> None:
    n = 5000
    df = frame(n, throughput=np.full(n, 800.0), grad_norm=np.linspace(0, 20, n), eval_loss=np.nan)
    df.loc[df.index[::500], "eval_loss"] = 2.0
    settings = ChartSettings(panels=("loss_lr", "speed_grad", "eval"), thresholds={"grad_norm": (None, 0.5)})
    zoom = ZoomState(lo=1000, hi=2000, hidden={"chart_loss_lr": ["lr"]})
    logged = {"eval_loss": df["eval_loss"].notna().to_numpy()}
    figs = live_figures(df, settings, zoom, logged)
    assert list(figs) == ["loss_lr", "speed_grad", "eval"]
    loss_lr = figs["loss_lr"]
    names = [t.name for t in loss_lr.data]
    assert "loss" in names and "loss (raw)" in names and "lr" in names
    assert {t.name: t.visible for t in loss_lr.data}["lr"] == "legendonly"
    assert loss_lr.layout.yaxis2.overlaying == "y"
    assert tuple(loss_lr.layout.xaxis.range) == pytest.approx((1000, 2000))
    # zoomed: the range is drawn at full resolution (every step 1000..2000 plus neighbours)
    raw = next(t for t in loss_lr.data if t.name == "loss (raw)")
    assert sum(1000 <= x <= 2000 for x in raw.x) == 101
    assert min(raw.x) < 1000 and max(raw.x) <= 3010  # one zoom width of context each side
    assert any("threshold" in (t.name or "") for t in figs["speed_grad"].data)
    unzoomed = live_figures(df, settings, ZoomState())
    assert unzoomed["loss_lr"].layout.xaxis.range is None


def test_a_dragged_range_is_drawn_as_dragged_not_snapped_to_whole_steps() -> None:
    """The step inputs hold whole steps around a drag; the chart keeps the dragged range itself, so it
    does not jump when the next refresh redraws it (on a wall-clock axis that was a second or more)."""
    df = frame(300)
    settings = ChartSettings(panels=("loss_lr",))
    dragged = ZoomState(lo=1000, hi=2001, exact=("step", 1000.4, 2000.6))
    assert tuple(live_figures(df, settings, dragged)["loss_lr"].layout.xaxis.range) == (1000.4, 2000.6)
    other_axis = ZoomState(lo=1000, hi=2001, exact=("time", "2026-01-01 00:00:01", "2026-01-01 00:00:09"))
    assert tuple(live_figures(df, settings, other_axis)["loss_lr"].layout.xaxis.range) == (1000, 2001)
    read = SimpleNamespace(key=("r", 1))  # what figures_key reads of a RunFrame
    assert figures_key(read, settings, dragged) != figures_key(read, settings, other_axis)


def test_figures_key_changes_with_new_rows_settings_and_zoom(tmp_path: Path) -> None:
    from monitor_cb.ingest import RunStore
    from monitor_cb.writer import MetricsWriter

    writer = MetricsWriter(tmp_path / "r")
    for s in range(1, 11):
        writer.log(step=s, loss=1.0 / s)
    writer.flush()
    store = RunStore(tmp_path, rescan_interval_s=0)
    data, settings = store.read("r"), ChartSettings()
    key = figures_key(data, settings, ZoomState())
    assert key == figures_key(store.read("r"), ChartSettings(), ZoomState())
    writer.log(step=11, loss=0.1)
    writer.close()
    assert key != figures_key(store.read("r"), settings, ZoomState())
    assert key != figures_key(data, ChartSettings(log_y=True), ZoomState())
    assert key != figures_key(data, settings, ZoomState(lo=3))
    assert key != figures_key(data, settings, ZoomState(hidden={"chart_loss_lr": ["lr"]}))


def test_live_figures_send_32_bit_arrays_and_a_small_template() -> None:
    import plotly.io

    n = 100_000
    df = frame(n, throughput=np.full(n, 800.0), grad_norm=np.linspace(0, 2, n))
    figs = live_figures(df, ChartSettings(n_out=1000), ZoomState())
    spec = plotly.io.to_json(figs["loss_lr"], validate=False)
    assert '"dtype":"f4"' in spec and '"dtype":"i4"' in spec and '"f8"' not in spec
    assert len(spec) < 60_000


def test_kpi_of_a_column_last_logged_long_ago() -> None:
    n = 10_000
    eval_loss = np.full(n, np.nan)
    eval_loss[100] = 0.7  # logged once, long before the newest rows
    df = frame(n, eval_loss=eval_loss)
    assert _kpi_value(df, "eval_loss", None) == 0.7
    assert _kpi_value(df, "eval_loss", {"eval_loss": ~np.isnan(eval_loss)}) == 0.7
    assert _kpi_value(df, "missing", None) is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "–"),
        (math.nan, "NaN"),
        (-math.inf, "-inf"),
        (0.0, "0"),
        (2.30215, "2.302"),
        (4.39e-4, "4.39e-4"),
        (1e-3, "1e-3"),
        (1234567.0, "1.235e6"),
        (812.5, "812.5"),
        (0.00325, "3.25e-3"),
        (np.float32(0.01), "0.01"),  # a float32 0.0099999998 is not "1e-2"
        (123456.789, "123,457"),  # not "1.235e+05"
        (-9999.4, "-9,999"),
        (1e-12, "1e-12"),
    ],
)
def test_format_value(value: float | None, text: str) -> None:
    assert format_value(value, 4 if text != "4.39e-4" else 3) == text
    assert len(text) <= 10


def test_format_count() -> None:
    assert [format_count(v) for v in (None, 0, 12345, 1_000_000)] == ["–", "0", "12,345", "1,000,000"]
