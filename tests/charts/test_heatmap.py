"""The family heatmap: clipped log ratios, NaN/Inf at the top of the scale, names escaped, the selected row outlined."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import plotly.io as pio
import pytest

from monitor_cb.analysis.family_matrix import HeatmapData
from monitor_cb.charts.heatmap import RATIO_LIMIT, HeatmapMark, family_heatmap
from monitor_cb.charts.prepared import PreparedFigure


def _data() -> HeatmapData:
    ratio = np.array([[0.0, 0.1, 3.5], [0.0, np.nan, -0.2]])
    return HeatmapData(
        members=("model.layers.0.w", "<i>x</i>"),
        start=np.array([1, 11, 21]),
        end=np.array([10, 20, 30]),
        ratio=ratio,
        value=np.array([[1.0, 1.2, 3000.0], [2.0, np.nan, 1.3]]),
        nonfinite=np.array([[False, False, False], [False, False, True]]),
        judged=np.ones((2, 3), bool),
    )


def decoded(array: Any) -> np.ndarray:
    """A figure array as the browser reads it: a list, or plotly's ``{"dtype", "bdata", "shape"}`` base64 form."""
    if isinstance(array, dict) and "bdata" in array:
        raw = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"])).astype(float)
        shape = array.get("shape")
        return raw.reshape([int(n) for n in str(shape).split(",")]) if shape else raw
    return np.asarray(array, float)


def test_cells_hover_and_escaping():
    fig = family_heatmap(_data(), "grad_norm: 2 parameters", [HeatmapMark("model.layers.0.w", 21, "first")])
    heat, mark = fig.to_dict()["data"]
    z = decoded(heat["z"])
    assert z[0, 2] == RATIO_LIMIT  # 3,000x is clipped to the end of the scale
    assert z[1, 2] == RATIO_LIMIT  # NaN/Inf logged: the top of the scale
    assert np.isnan(z[1, 1])  # not logged: a gap
    assert list(heat["y"]) == ["model.layers.0.w", "&lt;i&gt;x&lt;/i&gt;"]
    custom = decoded(heat["customdata"])  # numbers: (value, factor) per cell
    assert np.isnan(custom[1, 2, 0]) and np.isinf(custom[1, 2, 1])  # NaN/Inf logged
    assert custom[0, 2, 0] == 3000.0 and custom[0, 2, 1] == pytest.approx(10**3.5, rel=1e-5)
    assert np.isnan(custom[1, 1, 0])  # not logged
    assert list(decoded(heat["x"])) == [5.5, 15.5, 25.5]
    assert list(mark["y"]) == ["model.layers.0.w"] and list(mark["x"]) == [21]


def test_selected_row_outlined_and_height_bounded():
    fig = family_heatmap(_data(), "t", selected="<i>x</i>")
    (shape,) = fig.layout.shapes
    assert shape.y0 == 0.5 and shape.y1 == 1.5
    assert 320 <= fig.layout.height <= 900


def test_built_as_a_dict_without_plotly_objects():
    """The figure is its dict, built once: no plotly objects or validation on a draw (they cost 0.3-0.6 s at
    1,000 parameters), and the dict is one plotly itself accepts and renders the same."""
    fig = family_heatmap(_data(), "t", [HeatmapMark("<i>x</i>", 21, "first")], selected="<i>x</i>")
    assert isinstance(fig, PreparedFigure)
    spec = fig.to_dict()
    pio.to_json(fig)  # as Streamlit sends it
    assert fig._objects is None and fig.to_dict() is spec  # nothing built, nothing copied
    assert spec["layout"]["template"]["layout"]["plot_bgcolor"] == "white"  # plotly_white's look
    checked = pio.from_json(pio.to_json(spec), skip_invalid=False)  # plotly's own validation accepts it
    assert [t.type for t in checked.data] == ["heatmap", "scatter"]
