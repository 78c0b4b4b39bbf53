"""monitor_cb.views.zoom: zoom and legend events in steps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from monitor_cb.views.zoom import (
    ZoomState,
    apply_legend_event,
    apply_zoom_event,
    monotonic_x,
    x_range_for,
)
from tests.views.helpers import frame


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
