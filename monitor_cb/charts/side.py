"""The compare page's side-by-side panels: per run one panel per chosen metric, all panels alike.

A panel is the overlay chart of one run (:func:`~monitor_cb.charts.overlay.overlay_figures` with that
run alone), so it has the run's compare colour, the shared x grid and the same NaN markers. What
makes runs comparable side by side:

* every run shows the same metrics, in the chosen order (a run without one gets an empty panel
  that says so, so the grid stays aligned);
* linked x: every panel shows the same x range (the zoom, else the union of all runs' x);
* shared y (on by default): per metric, every run's panel has the same y range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import plotly.graph_objects as go

from monitor_cb.charts.options import ChartOptions
from monitor_cb.charts.overlay import overlay_figures
from monitor_cb.charts.style import escape_html
from monitor_cb.compare.align import Alignment
from monitor_cb.compare.colors import run_colors
from monitor_cb.compare.rundata import RunData

SIDE_HEIGHT = 280
Y_PAD = 0.05  # share of the y span added above and below a shared range


def side_figures(
    runs: Sequence[RunData],
    aligned: Alignment,
    metrics: Sequence[str],
    options: ChartOptions,
    *,
    colors: Mapping[str, str] | None = None,
    shared_y: bool = True,
    x_bounds: tuple[Any, Any] | None = None,
) -> dict[str, list[go.Figure]]:
    """Run id -> one figure per metric of ``metrics`` (runs that cannot be aligned are left out).

    Args:
        colors: the view's run colours (kept; see :func:`~monitor_cb.compare.colors.run_colors`).
        shared_y: one y range per metric across the runs.
        x_bounds: the x range every panel shows when there is no zoom (the union of the runs' x).
    """
    colors = run_colors([r.id for r in runs], previous=colors)
    options = replace(options, height=options.height or SIDE_HEIGHT)
    panels: dict[str, list[go.Figure]] = {}
    for run in runs:
        if run.id not in aligned.x:
            continue
        figures = overlay_figures([run], aligned, metrics, options, colors=colors)
        panels[run.id] = [_panel(figures[m], m) for m in metrics]
    x_range = options.x_range if options.x_range is not None else x_bounds
    for figs in panels.values():
        for fig in figs:
            fig.update_layout(showlegend=False)
            if x_range is not None:
                fig.update_xaxes(range=list(x_range), autorange=False)
    if shared_y:
        for i in range(len(metrics)):
            share_y([figs[i] for figs in panels.values()], options.log_y)
    return panels


def _panel(fig: go.Figure, metric: str) -> go.Figure:
    if not fig.data:
        fig.add_annotation(
            text=f"no {escape_html(metric)} in this run",
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            font={"color": "#7f7f7f"},
        )
    return fig


def y_extent(fig: go.Figure, log_y: bool) -> tuple[float, float] | None:
    """The lowest and highest finite y a figure draws (positive values only on a log axis)."""
    lows, highs = [], []
    for trace in fig.data:
        if getattr(trace, "visible", True) is False or trace.y is None:
            continue
        y = np.asarray(trace.y, dtype=np.float64)
        y = y[np.isfinite(y) & (y > 0)] if log_y else y[np.isfinite(y)]
        if y.size:
            lows.append(float(y.min()))
            highs.append(float(y.max()))
    return (min(lows), max(highs)) if lows else None


def share_y(figures: Sequence[go.Figure], log_y: bool) -> tuple[float, float] | None:
    """Give every figure the y range that holds all their finite values (log10 units on a log axis)."""
    extents = [e for e in (y_extent(f, log_y) for f in figures) if e is not None]
    if not extents:
        return None
    lo, hi = min(e[0] for e in extents), max(e[1] for e in extents)
    if log_y:
        lo, hi = math.log10(lo), math.log10(hi)
    pad = Y_PAD * (hi - lo) if hi > lo else (0.5 if log_y else max(abs(hi) * Y_PAD, 0.5))
    shown = (lo - pad, hi + pad)
    for fig in figures:
        fig.update_yaxes(range=list(shown), autorange=False)
    return shown
