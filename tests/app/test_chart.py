"""``pages._chart``: with Plotly's basic bundle served, the pages' line charts go to the thin component with the
very figure ``st.plotly_chart`` would have drawn; anything else, or no bundle, goes to ``st.plotly_chart``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.views import bundle_route
from monitor_cb.views.plotly_bundle import URL_PATH
from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import THIN_CHART, assert_ok, run_entry, thin_charts


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process serves the bundle, as the dashboard's server does (for this test only)."""
    monkeypatch.setattr(bundle_route, "_SERVED", {URL_PATH})


def _plotly_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_live_charts_go_to_the_thin_chart_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: None
) -> None:
    write_run(tmp_path, "run1", steps=120)
    monkeypatch.setenv("MONITOR_LOGDIR", str(tmp_path))
    at = run_entry(DASHBOARD, {"run": "run1"})
    assert_ok(at)
    thin = thin_charts(at)
    assert len(thin) >= 2 and _plotly_specs(at) == []
    element = next(el for el in at.get("bidi_component") if el.proto.component_name == THIN_CHART)
    data = json.loads(element.proto.json)
    assert data["src"] == "./" + URL_PATH and data["config"]["displaylogo"] is False and data["height"] > 0
    assert not element.proto.isolate_styles  # in the page's DOM: the chart listener and CSS reach it

    monkeypatch.setattr(bundle_route, "_SERVED", set())  # the same page without the bundle
    plain = run_entry(DASHBOARD, {"run": "run1"})
    assert_ok(plain)
    assert thin_charts(plain) == [] and _plotly_specs(plain) == thin


def _mixed() -> None:
    import plotly.graph_objects as go

    from pages._chart import plotly_chart

    plotly_chart(go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout={"height": 222}), "chart_line", {})
    plotly_chart(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])), "chart_heat", {})
    plotly_chart(go.Figure(go.Bar(x=[1], y=[2])), "chart_bar", {})


def test_a_trace_type_the_bundle_lacks_goes_to_st_plotly_chart(served: None) -> None:
    at = AppTest.from_function(_mixed).run()
    assert_ok(at)
    thin = [el for el in at.get("bidi_component") if el.proto.component_name == THIN_CHART]
    assert [json.loads(el.proto.json)["height"] for el in thin] == [222, 450]  # the figure's height, else 450
    assert [t["type"] for f in thin_charts(at) for t in f["data"]] == ["scatter", "bar"]
    assert [t["type"] for f in _plotly_specs(at) for t in f["data"]] == ["heatmap"]


def test_without_the_bundle_every_chart_is_st_plotly_chart() -> None:
    at = AppTest.from_function(_mixed).run()
    assert_ok(at)
    assert thin_charts(at) == [] and len(_plotly_specs(at)) == 3
