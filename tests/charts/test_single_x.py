"""One x for every point (a single evaluation): an axis around it with one tick, not 215,336.5."""

from __future__ import annotations

import numpy as np

from monitor_cb.charts.single_x import pin_single_x_spec


def test_one_step_gets_one_tick_written_as_a_step() -> None:
    layout: dict = {"xaxis": {"title": {"text": "step"}}}
    pin_single_x_spec([{"x": np.array([215_337]), "y": np.array([0.5])}], layout)
    axis = layout["xaxis"]
    assert axis["tickvals"] == [215_337] and axis["ticktext"] == ["215,337"]
    lo, hi = axis["range"]
    assert lo < 215_337 < hi and axis["title"] == {"text": "step"}


def test_left_alone_when_there_is_more_than_one_x_a_range_or_dates() -> None:
    cases = [
        ({"xaxis": {}}, [{"x": np.array([1, 2]), "y": np.array([1.0, 2.0])}]),
        ({"xaxis": {"range": [0, 10]}}, [{"x": np.array([5]), "y": np.array([1.0])}]),
        ({"xaxis": {"type": "log"}}, [{"x": np.array([5]), "y": np.array([1.0])}]),
        ({"xaxis": {}}, [{"x": np.array(["2026-12-07T03:00:00"]), "y": np.array([1.0])}]),
        ({"xaxis": {}}, []),
    ]
    for layout, data in cases:
        before = {k: dict(v) for k, v in layout.items()}
        pin_single_x_spec(data, layout)
        assert layout == before, (layout, data)


def test_a_hidden_trace_does_not_count_and_a_fraction_stays_a_fraction() -> None:
    layout: dict = {}
    data = [{"x": [2.5, 2.5], "y": [1.0, 2.0]}, {"x": [1.0, 9.0], "y": [1.0, 1.0], "visible": False}]
    pin_single_x_spec(data, layout)
    assert layout["xaxis"]["ticktext"] == ["2.5"] and layout["xaxis"]["range"] == [1.5, 3.5]
