"""monitor_cb.views.live: the live page's figures and the rows a zoomed chart re-reads."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from monitor_cb.views.live import ChartSettings, figures_key, live_figures, zoomed_rows
from monitor_cb.views.zoom import (
    ZoomState,
    rows_in_steps,
)
from tests.views.helpers import frame


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
    from monitor_cb.train.writer import MetricsWriter

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


@pytest.mark.parametrize("x", ["step", "time"])
def test_prepared_figures_draw_what_plotly_objects_draw(x: str) -> None:
    """The live refresh builds its figures' dicts directly (``prepared=True``): the browser must receive what the
    plotly objects would give, with NaN marks, thresholds, a constant (pinned) axis, hidden entries and every panel."""
    import json

    import plotly.io

    from monitor_cb.charts.notes import add_note
    from monitor_cb.charts.prepared import PreparedFigure

    n = 3000
    rng = np.random.default_rng(1)
    df = frame(
        n,
        throughput=np.full(n, 800.0),  # constant: its axis is pinned
        grad_norm=1 + rng.random(n),
        eval_loss=np.nan,
        step_time=np.full(n, 0.2),
        mem_device=np.full(n, 2.0**31),
        loss_ce=np.linspace(2, 1, n),
    )
    df.loc[df.index[::300], "eval_loss"] = 2.0
    df.loc[[700, 701], "loss"] = [np.nan, np.inf]
    logged = {"eval_loss": df["eval_loss"].notna().to_numpy()}
    panels = ("loss_lr", "speed_grad", "eval", "components", "timing", "memory")
    settings = ChartSettings(panels=panels, x=x, thresholds={"grad_norm": (None, 1.5)}, log_y=True)
    zoom = ZoomState(hidden={"chart_loss_lr": ["lr"]})
    plain = live_figures(df, settings, zoom, logged)
    prepared = live_figures(df, settings, zoom, logged, prepared=True)
    assert list(prepared) == list(plain) == list(panels)
    add_note(plain["speed_grad"], "a note")
    add_note(prepared["speed_grad"], "a note")
    for key in panels:
        assert isinstance(prepared[key], PreparedFigure)
        sent = json.loads(plotly.io.to_json(prepared[key], validate=False))
        assert sent == json.loads(plotly.io.to_json(plain[key], validate=False)), key
    speed = json.loads(plotly.io.to_json(prepared["speed_grad"], validate=False))["layout"]
    assert speed["yaxis"]["tickvals"] == [800.0], "the constant throughput axis is pinned"
    assert speed["annotations"][-1]["text"] == "a note"
