"""Histograms over steps: TensorBoard's distributions view (percentile bands) and one histogram at a step.

The bands are drawn from the outside in (min-max, then +-2, +-1, +-0.5 sigma of a normal) with
rising opacity and the median as a line, as TensorBoard draws them. Tag names are run-derived text
and are HTML-escaped.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from monitor_cb.analysis.distributions import Bands
from monitor_cb.charts.style import PALETTE, escape_html

BAND_COLOR = (31, 119, 180)  # PALETTE[0] as RGB
HEIGHT = 320


def distribution_figure(bands: Bands, title: str) -> go.Figure:
    """Percentile bands over steps (see the module)."""
    x = bands.steps.astype(np.float64)
    n = len(bands.percentiles)
    traces: list[go.BaseTraceType] = []
    for k in range(n // 2):  # outer pair first
        lo, hi = bands.values[:, k], bands.values[:, n - 1 - k]
        alpha = 0.12 + 0.14 * k
        fill = f"rgba({BAND_COLOR[0]},{BAND_COLOR[1]},{BAND_COLOR[2]},{alpha:.2f})"
        label = f"{bands.percentiles[k]:g}–{bands.percentiles[n - 1 - k]:g}%"
        traces.append(go.Scatter(x=x, y=lo, mode="lines", line={"width": 0}, hoverinfo="skip", showlegend=False))
        traces.append(
            go.Scatter(
                x=x,
                y=hi,
                mode="lines",
                line={"width": 0},
                fill="tonexty",
                fillcolor=fill,
                name=label,
                hovertemplate=f"step %{{x}}<br>{label}: up to %{{y:.4g}}<extra></extra>",
            )
        )
    if n % 2:
        traces.append(
            go.Scatter(
                x=x,
                y=bands.values[:, n // 2],
                mode="lines",
                line={"color": PALETTE[0], "width": 1.5},
                name="median",
                hovertemplate="step %{x}<br>median %{y:.4g}<extra></extra>",
            )
        )
    fig = go.Figure(traces)
    fig.update_layout(
        title={"text": escape_html(title), "x": 0.0, "font": {"size": 14}},
        height=HEIGHT,
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        xaxis={"title": {"text": "step"}, "automargin": True},
        yaxis={"automargin": True},
        showlegend=False,
        template="plotly_white",
        uirevision=title,
    )
    return fig


def histogram_figure(edges: np.ndarray, counts: np.ndarray, title: str) -> go.Figure:
    """One histogram as bars on its own bucket edges."""
    edges = np.asarray(edges, np.float64)
    counts = np.asarray(counts, np.float64)
    widths = np.diff(edges) if edges.size > 1 else np.empty(0)
    fig = go.Figure(
        go.Bar(
            x=(edges[:-1] + widths / 2) if edges.size > 1 else [],
            y=counts,
            width=widths,
            marker={"color": PALETTE[0], "line": {"width": 0}},
            hovertemplate="%{x:.4g}<br>count %{y:,.0f}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": escape_html(title), "x": 0.0, "font": {"size": 14}},
        height=HEIGHT,
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        xaxis={"title": {"text": "value"}, "automargin": True},
        yaxis={"title": {"text": "count"}, "automargin": True},
        bargap=0,
        template="plotly_white",
    )
    return fig
