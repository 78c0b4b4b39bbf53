"""A family as one heatmap: parameters (rows, in the model's order) x steps, coloured by the log ratio
of each bucket's extreme value to that parameter's own baseline, with the value on hover.

Red is above the baseline, blue below, white at it; the colour saturates at ``RATIO_LIMIT`` (100x),
so a 30x jump is deep red whatever the parameter's scale. A bucket where NaN or Inf was logged is
drawn at the top of the scale and says so on hover. Parameter names are run-derived text and are
HTML-escaped (plotly renders a subset of HTML in tick labels and hover text).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.io as pio

from monitor_cb.analysis.family_matrix import HeatmapData
from monitor_cb.charts.prepared import PreparedFigure
from monitor_cb.charts.style import escape_html
from monitor_cb.charts.traces import typed_arrays

RATIO_LIMIT = 2.0  # log10: 100x above or below the baseline is the end of the scale
COLORSCALE = [[0.0, "#2166ac"], [0.35, "#92c5de"], [0.5, "#f7f7f7"], [0.65, "#f4a582"], [1.0, "#b2182b"]]
ROW_PX, MIN_HEIGHT, MAX_HEIGHT = 14, 320, 900
MAX_TICK_ROWS = 60  # more rows than this: names on hover only


@dataclass(frozen=True)
class HeatmapMark:
    """A finding drawn on the heatmap: the row and step it names, and a short label (plain text)."""

    member: str
    step: int
    label: str


def family_heatmap(
    data: HeatmapData,
    title: str,
    marks: Sequence[HeatmapMark] = (),
    selected: str | None = None,
) -> PreparedFigure:
    """The family's heatmap (see the module); ``selected``: a row outlined (the one drawn below).

    Built as plotly's dict directly (a finished :class:`PreparedFigure`): plotly's validation of the
    layout and the ``plotly_white`` template alone cost 0.3-0.6 s a draw, on every refresh.
    """
    rows = list(_escaped(tuple(data.members)))
    ratio = np.where(data.nonfinite, RATIO_LIMIT, np.clip(data.ratio, -RATIO_LIMIT, RATIO_LIMIT)).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        factor = np.where(data.nonfinite, np.inf, 10.0**data.ratio)
    value = np.where(data.nonfinite, np.nan, data.value)
    # numbers, not text: 400k cells of hover strings cost seconds to build and megabytes to send
    custom = np.stack([value, factor], axis=-1).astype(np.float32)
    x = ((data.start + data.end) / 2.0).astype(np.float32)
    traces: list[dict[str, Any]] = [
        {
            "type": "heatmap",
            "z": ratio,
            "x": x,
            "y": rows,
            "customdata": custom,
            "zmin": -RATIO_LIMIT,
            "zmax": RATIO_LIMIT,
            "zmid": 0.0,
            "colorscale": COLORSCALE,
            "hoverongaps": False,
            "colorbar": {
                "title": {"text": "x baseline"},
                "tickvals": [-2, -1, 0, 1, 2],
                "ticktext": ["÷100", "÷10", "1x", "10x", "100x"],
                "thickness": 12,
            },
            "hovertemplate": "%{y}<br>step ~%{x:,.0f}<br>value %{customdata[0]:.4g}<br>%{customdata[1]:.3g}x its "
            "baseline<br>(NaN, Inf: NaN/Inf logged)<extra></extra>",
        }
    ]
    if marks:
        traces.append(
            {
                "type": "scatter",
                "x": [m.step for m in marks],
                "y": [escape_html(m.member) for m in marks],
                "mode": "markers",
                "marker": {"symbol": "circle-open", "size": 16, "color": "#111111", "line": {"width": 2.5}},
                "text": [escape_html(m.label) for m in marks],
                "hovertemplate": "%{text}<extra></extra>",
                "name": "finding",
                "showlegend": False,
            }
        )
    height = int(np.clip(ROW_PX * len(rows) + 120, MIN_HEIGHT, MAX_HEIGHT))
    layout: dict[str, Any] = {
        "title": {"text": escape_html(title), "x": 0.0, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 40, "b": 40},
        "xaxis": {"title": {"text": "step"}, "automargin": True},
        "yaxis": {
            "autorange": "reversed",  # the first layer on top, as the model lists them
            "showticklabels": len(rows) <= MAX_TICK_ROWS,
            "automargin": True,
            "type": "category",
        },
        "uirevision": title,
        "template": white_template(),
    }
    if selected is not None and selected in data.members:
        i = data.members.index(selected)
        layout["shapes"] = [
            {
                "type": "rect",
                "xref": "x domain",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": i - 0.5,
                "y1": i + 0.5,
                "line": {"color": "#111111", "width": 1.5},
                "fillcolor": "rgba(0,0,0,0)",
            }
        ]
    return PreparedFigure.of({"data": typed_arrays(traces), "layout": layout})


@functools.lru_cache(maxsize=32)
def _escaped(members: tuple[str, ...]) -> tuple[str, ...]:
    """The row names escaped, once per family (1,000 names cost 40 ms on every refresh)."""
    return tuple(escape_html(m) for m in members)


@functools.cache
def white_template() -> dict[str, Any]:
    """plotly's ``plotly_white`` template as a dict, built once (shared: never changed)."""
    return pio.templates["plotly_white"].to_plotly_json()
