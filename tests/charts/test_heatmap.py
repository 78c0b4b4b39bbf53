"""The family heatmap: clipped log ratios, NaN/Inf at the top of the scale, names escaped, the selected row outlined."""

from __future__ import annotations

import numpy as np
import pytest

from monitor_cb.analysis.family_matrix import HeatmapData
from monitor_cb.charts.heatmap import RATIO_LIMIT, HeatmapMark, family_heatmap


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


def test_cells_hover_and_escaping():
    fig = family_heatmap(_data(), "grad_norm: 2 parameters", [HeatmapMark("model.layers.0.w", 21, "first")])
    heat, mark = fig.data
    z = np.asarray(heat.z, float)
    assert z[0, 2] == RATIO_LIMIT  # 3,000x is clipped to the end of the scale
    assert z[1, 2] == RATIO_LIMIT  # NaN/Inf logged: the top of the scale
    assert np.isnan(z[1, 1])  # not logged: a gap
    assert list(heat.y) == ["model.layers.0.w", "&lt;i&gt;x&lt;/i&gt;"]
    custom = np.asarray(heat.customdata, float)  # numbers: (value, factor) per cell
    assert np.isnan(custom[1, 2, 0]) and np.isinf(custom[1, 2, 1])  # NaN/Inf logged
    assert custom[0, 2, 0] == 3000.0 and custom[0, 2, 1] == pytest.approx(10**3.5, rel=1e-5)
    assert np.isnan(custom[1, 1, 0])  # not logged
    assert list(heat.x) == [5.5, 15.5, 25.5]
    assert list(mark.y) == ["model.layers.0.w"] and list(mark.x) == [21]


def test_selected_row_outlined_and_height_bounded():
    fig = family_heatmap(_data(), "t", selected="<i>x</i>")
    (shape,) = fig.layout.shapes
    assert shape.y0 == 0.5 and shape.y1 == 1.5
    assert 320 <= fig.layout.height <= 900
