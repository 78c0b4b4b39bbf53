"""Look of the training-curve figures: colours that mean the same on every panel, one compact layout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from monitor_cb.analysis.series import XAxis

NONFINITE_COLOR = "#d62728"
THRESHOLD_COLOR = "#d62728"
# D3's palette without its red, which is kept for trouble (NaN markers, thresholds).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
# The same metric keeps its colour on every panel; others take the first free palette colour.
METRIC_COLORS = {
    "loss": PALETTE[0],
    "lr": PALETTE[1],
    "grad_norm": PALETTE[2],
    "throughput": PALETTE[3],
    "eval_loss": PALETTE[1],
    "eval_accuracy": PALETTE[2],
    "step_time": PALETTE[0],
    "data_time": PALETTE[1],
}
RAW_OPACITY = 0.3
# Traces with more points than this use WebGL; fewer stay SVG (crisper, and browsers cap WebGL contexts).
GL_MIN_POINTS = 1000


def apply_layout(
    fig: go.Figure,
    xa: XAxis,
    *,
    y_title: str,
    y2_title: str | None,
    log_y: bool,
    log_y2: bool,
    x_range: tuple[Any, Any] | None,
    uirevision: Any,
    title: str | None,
    height: int | None,
) -> None:
    """Axis titles and types, legend on top, small margins, ``uirevision`` and the re-applied zoom."""
    fig.update_layout(
        title=_title(title),
        height=height,
        margin={"l": 55, "r": 55 if y2_title else 15, "t": 60 if title else 30, "b": 40},
        # with a title the legend moves right of it, on the same line
        legend={
            "orientation": "h",
            "yanchor": "bottom",
            "y": 1.02,
            "xanchor": "right" if title else "left",
            "x": 1 if title else 0,
        },
        hovermode="x",
        uirevision=uirevision,
        xaxis={"title": {"text": xa.title}, "type": "date" if xa.is_datetime else "linear"},
        yaxis={"title": {"text": y_title}, "type": "log" if log_y else "linear", "exponentformat": "power"},
    )
    if y2_title is not None:
        fig.update_layout(
            yaxis2={
                "title": {"text": y2_title},
                "type": "log" if log_y2 else "linear",
                "overlaying": "y",
                "side": "right",
                # plotly.js 3 syncs an overlaying axis' ticks to the left grid, giving values like 0.000886
                "tickmode": "auto",
                "showgrid": False,
                "exponentformat": "power",
            }
        )
    if x_range is not None:
        fig.update_xaxes(range=list(x_range), autorange=False)


def _title(title: str | None) -> dict[str, Any] | None:
    if not title:
        return None
    return {
        "text": title,
        "x": 0,
        "xanchor": "left",
        "xref": "paper",
        "y": 1,
        "yref": "container",
        "yanchor": "top",
        "pad": {"t": 8},
        "font": {"size": 14},
    }


def colors_for(metrics: Sequence[str]) -> dict[str, str]:
    """A distinct colour per metric, the well-known ones fixed so they match across panels."""
    chosen: dict[str, str] = {}
    for metric in metrics:
        fixed = METRIC_COLORS.get(metric)
        if fixed is not None and fixed not in chosen.values():
            chosen[metric] = fixed
    for metric in metrics:
        if metric not in chosen:
            free = [c for c in PALETTE if c not in chosen.values()]
            chosen[metric] = free[0] if free else PALETTE[len(chosen) % len(PALETTE)]
    return chosen
