"""The compare page's side-by-side panels: per run one panel per chosen metric, all panels alike.

A panel is the overlay chart of one run (:func:`~monitor_cb.charts.overlay.overlay_figures` with that
run alone), so it has the run's compare colour, the shared x grid and the same NaN markers. What
makes runs comparable side by side:

* every run shows the same metrics, in the chosen order (a run without one gets an empty panel
  that says so, so the grid stays aligned);
* linked x: every panel shows the same x range (the zoom, else the union of all runs' x), unless
  that would leave a run's curve in a sliver of its panel: runs whose step ranges differ wildly
  (4.67M RL timesteps next to 2,000 optimizer steps) get their own x range by default
  (:func:`shared_x_blanks`); the user can still link them;
* shared y (on by default): per metric, every run's panel has the same y range, but only for the
  metrics where that keeps every run's curve readable (:data:`SHARE_Y_MAX_RATIO`): a loss of 1e4
  next to losses of 1 would flatten the others to a line on the floor of their panels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
# A shared range is kept only while every run's own span is at least this share of it: below that a
# curve is a sliver of its panel (x) or a flat line on its floor (y), and the panel reads as empty.
MIN_SHARE = 0.1
SHARE_Y_MAX_RATIO = 1 / MIN_SHARE


@dataclass(frozen=True)
class SideView:
    """The side-by-side panels and how their axes were tied.

    Attributes:
        panels: run id -> one figure per chosen metric.
        shared_x: every panel shows the same x range.
        unshared_y: metrics whose y range was left per panel although shared y was asked for,
            because one run's values would have been flattened out of sight.
    """

    panels: dict[str, list[go.Figure]]
    shared_x: bool
    unshared_y: tuple[str, ...] = ()


def side_view(
    runs: Sequence[RunData],
    aligned: Alignment,
    metrics: Sequence[str],
    options: ChartOptions,
    *,
    colors: Mapping[str, str] | None = None,
    shared_y: bool = True,
    x_bounds: tuple[Any, Any] | None = None,
    shared_x: bool | None = None,
) -> SideView:
    """One figure per run and metric (runs that cannot be aligned are left out), axes tied where readable.

    Args:
        colors: the view's run colours (kept; see :func:`~monitor_cb.compare.colors.run_colors`).
        shared_y: one y range per metric across the runs, for the metrics where no run is flattened.
        x_bounds: the x range every panel shows when x is shared and there is no zoom (the union of the runs' x).
        shared_x: every panel on one x range; None (the default) shares it unless
            :func:`shared_x_blanks` says it would leave a run's curve in a sliver of its panel.
            Unshared, every panel has its own run's x (a zoom is made in each panel by itself).
    """
    colors = run_colors([r.id for r in runs], previous=colors)
    options = replace(options, height=options.height or SIDE_HEIGHT)
    if shared_x is None:
        shared_x = not shared_x_blanks(aligned)
    if not shared_x:
        options = replace(options, x_range=None)
    panels: dict[str, list[go.Figure]] = {}
    for run in runs:
        if run.id not in aligned.x:
            continue
        # Unshared x: the run's own grid, so a short run is not drawn with a handful of the union's bins.
        own = aligned if shared_x else replace(aligned, x={run.id: aligned.x[run.id]})
        figures = overlay_figures([run], own, metrics, options, colors=colors)
        panels[run.id] = [_panel(figures[m], m) for m in metrics]
    x_range = options.x_range if options.x_range is not None else x_bounds
    for figs in panels.values():
        for fig in figs:
            fig.update_layout(showlegend=False)
            if shared_x and x_range is not None:
                shown = _axis_range(x_range, options.log_x)
                if shown is not None:
                    fig.update_xaxes(range=shown, autorange=False)
    unshared: list[str] = []
    if shared_y:
        for i, metric in enumerate(metrics):
            column = [figs[i] for figs in panels.values()]
            if y_share_readable(column, options.log_y):
                share_y(column, options.log_y)
            else:
                unshared.append(metric)
    return SideView(panels, shared_x, tuple(unshared))


def _axis_range(x_range: tuple[Any, Any], log_x: bool) -> list[Any] | None:
    """An x range as plotly takes it: log10 units on a log axis (None when an end is not positive)."""
    if not log_x:
        return list(x_range)
    lo, hi = (float(v) for v in x_range)
    return [math.log10(lo), math.log10(hi)] if lo > 0 and hi > 0 else None


def _span(lo: float, hi: float) -> float:
    return max(hi - lo, 0.0)


def shared_x_blanks(aligned: Alignment) -> bool:
    """True when one x range for every panel would leave some run's curve in under
    :data:`MIN_SHARE` of its panel's width (or the runs' x ranges barely overlap)."""
    extents = []
    for a in aligned.x.values():
        x = a.numeric()
        x = x[np.isfinite(x)]
        if x.size:
            extents.append((float(x.min()), float(x.max())))
    if len(extents) < 2:
        return False
    union = _span(min(e[0] for e in extents), max(e[1] for e in extents))
    if union <= 0:
        return False
    return any(_span(*e) < MIN_SHARE * union for e in extents)


def y_share_readable(figures: Sequence[go.Figure], log_y: bool) -> bool:
    """True when one y range over ``figures`` keeps every curve readable: each figure's own span is
    at least :data:`MIN_SHARE` of the union's (log10 units on a log axis). A flat curve stays a visible
    line at its level, so it does not count against sharing."""
    extents = [e for e in (y_extent(f, log_y) for f in figures) if e is not None]
    if log_y:
        extents = [(math.log10(lo), math.log10(hi)) for lo, hi in extents]
    if len(extents) < 2:
        return True
    union = _span(min(e[0] for e in extents), max(e[1] for e in extents))
    if union <= 0:
        return True
    for lo, hi in extents:
        flat = _span(lo, hi) <= 1e-9 * max(abs(lo), abs(hi), 1e-300)
        if not flat and _span(lo, hi) < MIN_SHARE * union:
            return False
    return True


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
    """The lowest and highest finite y a figure draws (positive values only on a log axis); within its y range
    when one is set (the bulk of the points, :mod:`monitor_cb.charts.outliers`)."""
    lows, highs = [], []
    shown = _fixed_y(fig, log_y)
    for trace in fig.data:
        if getattr(trace, "visible", True) is False or trace.y is None:
            continue
        y = np.asarray(trace.y, dtype=np.float64)
        y = y[np.isfinite(y) & (y > 0)] if log_y else y[np.isfinite(y)]
        if shown is not None:
            y = y[(y >= shown[0]) & (y <= shown[1])]
        if y.size:
            lows.append(float(y.min()))
            highs.append(float(y.max()))
    return (min(lows), max(highs)) if lows else None


def _fixed_y(fig: go.Figure, log_y: bool) -> tuple[float, float] | None:
    """The left y axis' set range in data units, None for autorange."""
    axis = fig.layout.yaxis
    if axis.autorange is not False or axis.range is None:
        return None
    lo, hi = (float(v) for v in axis.range)
    return (10.0**lo, 10.0**hi) if log_y else (lo, hi)


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
