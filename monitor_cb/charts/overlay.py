"""Figures of the compare page: one chart per metric overlaying runs, and one run's panels side by side.

Every trace of a run carries ``legendgroup=<run id>``, so a legend click hides all of that run's
traces in a chart; the page re-applies the hidden runs (``hidden``) to every chart, so it hides the
run everywhere. Run names come from files anyone can write: they are HTML-escaped before plotly
sees them (plotly reads a few HTML tags in names and hover text).

```python
aligned = align_runs(runs, "step")
figures = overlay_figures(runs, aligned, ("loss", "eval_loss"), settings.chart_options())
panels = side_by_side_figures(run, aligned.x[run.id], "step", settings.chart_options())
```
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from monitor_cb.analysis.series import XAxis, float_values, logged_rows
from monitor_cb.charts.figures import dual_axis_figure, eval_figure
from monitor_cb.charts.options import ChartData, ChartOptions
from monitor_cb.charts.scatter import drawable, nonfinite_label, scatter
from monitor_cb.charts.style import NONFINITE_COLOR, RAW_OPACITY, Labels, compact_array, escape_html, layout_dict
from monitor_cb.charts.traces import FigureSpec
from monitor_cb.compare.align import (
    Aligned,
    Alignment,
    as_numeric,
    grid_edges,
    grid_indices,
    reference_interval,
    smooth_run,
)
from monitor_cb.compare.colors import run_colors
from monitor_cb.compare.rundata import RunData

OVERLAY_HEIGHT = 360  # px, when the options give none
MANY_RUNS = 8  # more runs than this in one chart: legend beside it, nearest-run hover, highlight on hover
SIDE_HEIGHT = 300
ZOOM_FULL_POINTS = 5000  # a side-by-side zoom this narrow (in rows) is drawn point for point
_MAX_OTHER_RANK_MARKS = 1000


def overlay_figures(
    runs: Sequence[RunData],
    aligned: Alignment,
    metrics: Sequence[str],
    options: ChartOptions,
    hidden: Collection[str] = frozenset(),
    colors: Mapping[str, str] | None = None,
) -> dict[str, go.Figure]:
    """One figure per metric (metric -> figure), every run on one x grid.

    ``aligned`` is :func:`~monitor_cb.compare.align.align_runs` of ``runs``; ``options.n_out`` is the
    number of grid points per chart (each bin keeps its lowest and highest value), ``options.x_range``
    a zoom in the alignment's units; ``hidden`` the run ids whose traces start hidden (legend only);
    ``colors`` the colours a view gave before (run id -> colour; kept, see
    :func:`~monitor_cb.compare.colors.run_colors`).
    """
    options = replace(options, height=options.height or OVERLAY_HEIGHT)
    colors = run_colors([r.id for r in runs], previous=colors)
    numeric = {run_id: a.numeric() for run_id, a in aligned.x.items()}
    lo_hi = numeric_range(options.x_range)
    span = [_clip(x, lo_hi) for x in numeric.values()]
    grid = _Grid(grid_edges(span, max(options.n_out // 2, 8)), reference_interval(list(numeric.values())), lo_hi)
    xa = XAxis(aligned.kind, np.empty(0), aligned.title, aligned.is_datetime)
    figures: dict[str, go.Figure] = {}
    for metric in metrics:
        spec = FigureSpec()
        for run in runs:
            if run.id in aligned.x and metric in run.frame.columns:
                curve = _curve(run, metric, aligned.x[run.id], numeric[run.id])
                if curve is not None:
                    look = _RunLook(run, colors[run.id], "legendonly" if run.id in hidden else True)
                    _add_run(spec, look, metric, curve, options, grid)
        figures[metric] = spec.figure(_layout(xa, options, metric, many=len(runs) > MANY_RUNS), options.fit_bulk)
    return figures


@dataclass(frozen=True)
class _Grid:
    """The shared x grid of one chart: bin edges, the reference logging interval, the zoom (numeric)."""

    edges: np.ndarray | None
    ref_dx: float | None
    lo_hi: tuple[float, float] | None


@dataclass(frozen=True)
class _RunLook:
    run: RunData
    color: str
    visible: Any  # True, or "legendonly" for a hidden run

    @property
    def label(self) -> str:
        return escape_html(self.run.label)


def _layout(xa: XAxis, options: ChartOptions, metric: str, many: bool = False) -> dict[str, Any]:
    """The chart's layout with the metric as title and y title; a legend click toggles a run's whole group.

    ``many`` (more than :data:`MANY_RUNS` runs): the legend is a column beside the plot that scrolls
    when longer than it (60 names above the chart took most of it), the hover shows the nearest run
    only (sixty values at one x are unreadable) and ``meta.highlight`` asks the page's chart listener
    (``pages/_zoom.py``) to dim every other run while the pointer is on one.
    """
    out = layout_dict(xa, options, Labels(y=metric, title=metric))
    out["legend"] = {**out["legend"], "groupclick": "togglegroup"}
    if many:
        out["legend"] = {
            "groupclick": "togglegroup",
            "orientation": "v",
            "x": 1.02,
            "xanchor": "left",
            "y": 1,
            "yanchor": "top",
            "font": {"size": 11},
        }
        out["hovermode"] = "closest"
        out["meta"] = {**out.get("meta", {}), "highlight": True}
    return out


@dataclass(frozen=True)
class _Curve:
    x: np.ndarray  # drawn x values (datetimes kept)
    xn: np.ndarray  # numeric x
    y: np.ndarray
    steps: np.ndarray
    # NaN/±inf logged on the other ranks of a multi-rank run: (x, numeric x, step, rank, value)
    others: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None


def run_curve(run: RunData, metric: str, aligned: Aligned) -> tuple[np.ndarray, np.ndarray] | None:
    """``(numeric x, y)`` of the run's logged rows of ``metric`` (lowest rank, sorted by x); None when none."""
    curve = _curve(run, metric, aligned, aligned.numeric())
    return None if curve is None else (curve.xn, curve.y)


def _curve(run: RunData, metric: str, aligned: Aligned, xn: np.ndarray) -> _Curve | None:
    """The run's logged rows of ``metric`` with a known x, on its lowest rank, sorted by x (and the other
    ranks' non-finite values, which are marked on that curve so a NaN on rank 5 is never hidden)."""
    frame = run.frame
    keep = logged_rows(frame, metric, run.logged) & np.isfinite(xn)
    values = float_values(frame[metric])
    others = None
    if "rank" in frame.columns and len(frame):
        ranks = float_values(frame["rank"])
        if np.isfinite(ranks).any() and np.nanmin(ranks) != np.nanmax(ranks):
            lowest = ranks == np.nanmin(ranks)
            bad = np.flatnonzero(keep & ~lowest & ~np.isfinite(values))[:_MAX_OTHER_RANK_MARKS]
            if bad.size:
                steps_all = frame["step"].to_numpy()
                others = (aligned.values[bad], xn[bad], steps_all[bad], ranks[bad], values[bad])
            keep &= lowest
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        return None
    x, n = aligned.values[rows], xn[rows]
    y = values[rows]
    steps = frame["step"].to_numpy()[rows]
    if np.any(np.diff(n) < 0):  # wall time that stepped back
        order = np.argsort(n, kind="stable")
        x, n, y, steps = x[order], n[order], y[order], steps[order]
    return _Curve(x, n, y, steps, others)


def _add_run(spec: FigureSpec, look: _RunLook, metric: str, curve: _Curve, options: ChartOptions, grid: _Grid) -> None:
    sparse = metric.startswith("eval_")  # a handful of eval points: drawn raw with markers, as on the live page
    smoothing = 0.0 if sparse else options.smoothing
    smooth = smooth_run(curve.xn, curve.y, smoothing, grid.ref_dx, options.smoother) if smoothing > 0 else None
    picked = grid_indices(curve.xn, curve.y, grid.edges)
    if grid.lo_hi is not None:  # zoomed: the rows inside the range plus one neighbour each side
        lo_hi = grid.lo_hi
        inside = np.flatnonzero((curve.xn >= lo_hi[0]) & (curve.xn <= lo_hi[1]))
        if inside.size:
            lo, hi = max(inside[0] - 1, 0), min(inside[-1] + 1, curve.xn.size - 1)
            picked = picked[(picked >= lo) & (picked <= hi)]
            picked = np.union1d(picked, [lo, hi]).astype(np.int64)
    x, y = curve.x[picked], curve.y[picked]
    label = look.label
    common = {"legendgroup": look.run.id, "visible": look.visible, "mode": "lines+markers" if sparse else "lines"}
    drawn_y = drawable(y, options.log_y)
    if smooth is not None:
        spec.add_trace(
            scatter(
                x,
                drawn_y,
                name=f"{label} (raw)",
                line={"color": look.color, "width": 1},
                opacity=RAW_OPACITY,
                showlegend=False,
                hovertemplate=f"{label} raw: %{{y:.4g}}<extra></extra>",
                **common,
            )
        )
        y_line = drawable(smooth[picked], options.log_y)
    else:
        y_line = drawn_y
    spec.add_trace(
        scatter(
            x,
            y_line,
            name=label,
            line={"color": look.color, "width": 2},
            hovertemplate=f"{label}: %{{y:.4g}}<extra></extra>",
            **common,
        )
    )
    _add_nonfinite(spec, look, metric, curve, picked, drawn_y, options.log_y)


def _add_nonfinite(
    spec: FigureSpec,
    look: _RunLook,
    metric: str,
    curve: _Curve,
    picked: np.ndarray,
    drawn_y: np.ndarray,
    log_y: bool,
) -> None:
    """Red X markers at the run's NaN/±inf (and its other ranks'), at the last drawn value before each."""
    label = look.label
    y, xn = curve.y[picked], curve.xn[picked]
    bad = np.flatnonzero(~np.isfinite(y))
    xs, at, text = (
        [curve.x[picked][bad]],
        [xn[bad]],
        [
            f"{label}: {metric} = {nonfinite_label(v)} at step {int(s)}"
            for v, s in zip(y[bad], curve.steps[picked][bad], strict=True)
        ],
    )
    if curve.others is not None:
        ox, oxn, osteps, oranks, ovalues = curve.others
        xs.append(ox)
        at.append(oxn)
        text += [
            f"{label}: {metric} = {nonfinite_label(v)} at step {int(s)} (rank {int(r)})"
            for v, s, r in zip(ovalues, osteps, oranks, strict=True)
        ]
    if not text:
        return
    where = np.concatenate(at)
    good = np.flatnonzero(np.isfinite(drawn_y))
    if good.size:
        before = np.searchsorted(xn[good], where, side="right") - 1
        anchor = drawn_y[good[np.maximum(before, 0)]]
    else:
        anchor = np.full(where.size, 1.0 if log_y else 0.0)
    spec.add_trace(
        {
            "type": "scatter",
            "x": compact_array(np.concatenate(xs), is_x=True),
            "y": compact_array(np.asarray(anchor, dtype=np.float64), is_x=False),
            "name": f"{label} non-finite",
            "mode": "markers",
            "marker": {"symbol": "x", "size": 10, "color": NONFINITE_COLOR, "line": {"width": 1}},
            "legendgroup": look.run.id,
            "showlegend": False,
            "visible": look.visible,
            "text": text,
            "hovertemplate": "%{text}<extra></extra>",
        }
    )


def numeric_range(x_range: tuple[Any, Any] | None) -> tuple[float, float] | None:
    """A zoom in the alignment's units (numbers or datetimes) as sorted floats (ns for dates); None if unreadable."""
    if x_range is None:
        return None
    a, b = (_to_number(v) for v in x_range)
    if a is None or b is None:
        return None
    return (min(a, b), max(a, b))


def _to_number(value: Any) -> float | None:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(as_numeric(np.array([pd.Timestamp(value).to_datetime64()]))[0])
    except (ValueError, TypeError):
        return None


def _clip(x: np.ndarray, lo_hi: tuple[float, float] | None) -> np.ndarray:
    return x if lo_hi is None else x[(x >= lo_hi[0]) & (x <= lo_hi[1])]


def hidden_runs(runs: Sequence[RunData], hidden_names: Collection[str]) -> frozenset[str]:
    """Run ids whose legend entry (the escaped label) is among ``hidden_names`` from a legend click."""
    names = set(hidden_names)
    return frozenset(r.id for r in runs if escape_html(r.label) in names)


# ----------------------------------------------------------------------------- side by side
SIDE_PANELS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("Loss and learning rate", ("loss",), ("lr",)),
    ("Throughput and gradient norm", ("throughput",), ("grad_norm",)),
)


def side_by_side_figures(run: RunData, aligned: Aligned, alignment: str, options: ChartOptions) -> list[go.Figure]:
    """One run's dual-axis panels (the live page's charts) on the compare alignment, with the shared x range.

    ``aligned`` is the run's x values (``Alignment.x[run.id]``); ``options.n_out`` the points per
    trace, raised inside a zoom up to :data:`ZOOM_FULL_POINTS` so a narrow zoom is drawn point for point.
    """
    frame, x = _with_x(run.frame, aligned, alignment)
    rows = _rows_in_range(aligned.numeric(), numeric_range(options.x_range))
    n_out = options.n_out if rows is None else max(options.n_out, min(rows.size, ZOOM_FULL_POINTS))
    options = replace(options, x=x, n_out=n_out, height=options.height or SIDE_HEIGHT)
    data = ChartData(frame, dict(run.logged) or None, rows)
    figures = [
        dual_axis_figure(data, left, right, options, title=title)
        for title, left, right in SIDE_PANELS
        if any(m in frame.columns for m in (*left, *right))
    ]
    if any(str(c).startswith("eval_") for c in frame.columns):
        figures.append(eval_figure(data, replace(options, log_y=False), title="Eval metrics against train loss"))
    return figures


def _rows_in_range(xn: np.ndarray, lo_hi: tuple[float, float] | None) -> np.ndarray | None:
    """Rows whose x lies in the range plus one neighbour each side (lines reach the edges); None = all."""
    if lo_hi is None:
        return None
    inside = (xn >= lo_hi[0]) & (xn <= lo_hi[1])
    grown = inside | np.r_[inside[1:], False] | np.r_[False, inside[:-1]]
    return np.flatnonzero(grown)


def _with_x(frame: pd.DataFrame, aligned: Aligned, alignment: str) -> tuple[pd.DataFrame, str]:
    """The frame and the x kind ``dual_axis_figure`` should draw for the compare alignment."""
    if alignment == "step":
        return frame, "step"
    if alignment == "wall":
        return frame, "time"
    out = frame.copy(deep=False)
    if alignment == "samples":
        out["samples"] = aligned.values
        return out, "samples"
    # relative: the unit chosen for all runs, in a column named like the axis title it becomes
    out[aligned.title] = aligned.values
    return out, aligned.title
