"""PreparedFigure: the dict it was prepared with, shared; plotly objects only when read."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io

from monitor_cb.charts.prepared import PreparedFigure


def figure() -> go.Figure:
    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[3.0, 2.0, 1.0], name="loss"))
    fig.update_layout(title="Loss", shapes=[{"type": "line", "x0": 2, "x1": 2, "y0": 0, "y1": 1, "yref": "paper"}])
    return fig


def test_a_prepared_figure_sends_the_same_json_and_shares_its_dict() -> None:
    fig = figure()
    prepared = PreparedFigure.of(fig)
    assert prepared.to_dict() is prepared.to_dict()
    assert plotly.io.to_json(prepared, validate=False) == plotly.io.to_json(fig, validate=False)
    assert PreparedFigure.of(prepared) is prepared


def test_prepared_from_a_dict_reads_like_a_figure() -> None:
    spec = figure().to_dict()
    prepared = PreparedFigure.of(spec)
    assert prepared.to_dict()["data"] is spec["data"], "taken as it is, not copied"
    # the plotly objects are built from the dict when read, and say what is drawn
    assert [t.name for t in prepared.data] == ["loss"]
    assert prepared.layout.title.text == "Loss" and prepared.layout.shapes[0].x0 == 2
    assert json.loads(prepared.to_json()) == json.loads(go.Figure(spec).to_json())


def test_an_empty_dict_is_an_empty_figure() -> None:
    prepared = PreparedFigure.of({})
    assert prepared.to_dict() == {"data": [], "layout": {}}
    assert len(prepared.data) == 0
