"""Figures of the compare page: one chart per metric overlaying runs, and one run's panels side by side.

Every trace of a run carries ``legendgroup=<run id>``, so a legend click hides all of that run's
traces in a chart; the page re-applies the hidden runs (``hidden``) to every chart, so it hides the
run everywhere. Run names come from files anyone can write: they are HTML-escaped before plotly
sees them (plotly reads a few HTML tags in names and hover text).
"""

from __future__ import annotations

import html
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from monitor_cb.analysis.series import XAxis, float_values, logged_rows
from monitor_cb.charts.style import GL_MIN_POINTS, NONFINITE_COLOR, RAW_OPACITY, apply_layout
from monitor_cb.compare.align import (
    Aligned,
    align,
    as_numeric,
    duration_s,
    grid_edges,
    grid_indices,
    reference_interval,
    relative_kind,
    smooth_on_grid,
)
from monitor_cb.compare.colors import run_colors

DEFAULT_POINTS = 1000  # grid bins per chart; each bin draws up to two points per run
ZOOM_FULL_POINTS = 5000  # a side-by-side zoom this narrow (in rows) is drawn point for point


@dataclass(frozen=True)
class RunData:
    """One selected run as the compare logic needs it (the page builds it from the RunStore)."""

    id: str
    label: str
    frame: pd.DataFrame
    logged: Mapping[str, np.ndarray] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    status: str = "finished"
    version: tuple[Any, ...] = ()  # RunFrame.key when read from a store: changes exactly when the rows do


@dataclass(frozen=True)
class CompareSettings:
    """What the compare page's controls decided."""

    metrics: tuple[str, ...] = ("loss",)
    alignment: str = "step"
    smoothing: float = 0.6
    log_y: bool = False
    n_points: int = DEFAULT_POINTS
    x_range: tuple[Any, Any] | None = None  # in the alignment's units (datetimes for wall time)
    hidden: frozenset[str] = frozenset()  # run ids the user hid with a legend click


@dataclass(frozen=True)
class Alignment:
    """Every run's x values on the chosen alignment, and the runs that cannot be drawn on it."""

    kind: str
    x: dict[str, Aligned]
    skipped: tuple[str, ...]
    title: str
    is_datetime: bool


def plotly_text(text: str) -> str:
    """User text for a plotly name or hover label: shown literally, never read as HTML."""
    return html.escape(str(text), quote=False)


def align_runs(runs: Sequence[RunData], alignment: str) -> Alignment:
    """x values for every run (one relative-time unit for all); runs lacking what the alignment needs are skipped."""
    relative = relative_kind([duration_s(r.frame) for r in runs]) if alignment == "relative" else None
    xs: dict[str, Aligned] = {}
    skipped = []
    for run in runs:
        aligned = align(run.frame, alignment, run.meta, relative) if len(run.frame) else None
        if aligned is None:
            skipped.append(run.id)
        else:
            xs[run.id] = aligned
    first = next(iter(xs.values()), None)
    title = first.title if first is not None else alignment
    return Alignment(alignment, xs, tuple(skipped), title, bool(first and first.is_datetime))


def metric_options(runs: Sequence[RunData]) -> list[str]:
    """Metrics any selected run logged, well-known ones first."""
    from monitor_cb.analysis.series import metric_columns

    seen: dict[str, None] = {}
    for run in runs:
        for column in metric_columns(run.frame):
            if column not in ("samples",):
                seen.setdefault(column, None)
    preferred = [m for m in ("loss", "eval_loss", "eval_accuracy", "lr", "grad_norm", "throughput") if m in seen]
    return preferred + [m for m in seen if m not in preferred]


def overlay_figures(
    runs: Sequence[RunData], settings: CompareSettings, uirevision: Any = "compare"
) -> tuple[dict[str, go.Figure], Alignment]:
    """One figure per metric in ``settings.metrics`` (metric -> figure), all on one x grid."""
    from monitor_cb.view import compact_figure

    aligned = align_runs(runs, settings.alignment)
    colors = run_colors([r.id for r in runs])
    numeric = {run_id: a.numeric() for run_id, a in aligned.x.items()}
    lo_hi = _numeric_range(settings.x_range)
    span = [_clip(x, lo_hi) for x in numeric.values()]
    edges = grid_edges(span, max(settings.n_points // 2, 8))
    ref_dx = reference_interval(list(numeric.values()))
    xa = XAxis(settings.alignment, np.empty(0), aligned.title, aligned.is_datetime)
    figures: dict[str, go.Figure] = {}
    for metric in settings.metrics:
        fig = go.Figure()
        for run in runs:
            if run.id in aligned.x and metric in run.frame.columns:
                curve = _curve(run, metric, aligned.x[run.id], numeric[run.id])
                if curve is not None:
                    _add_run(fig, run, metric, curve, colors[run.id], settings, edges, ref_dx, lo_hi)
        apply_layout(
            fig,
            xa,
            y_title=metric,
            y2_title=None,
            log_y=settings.log_y,
            log_y2=False,
            x_range=settings.x_range,
            uirevision=uirevision,
            title=metric,
            height=360,
        )
        fig.update_layout(legend={"groupclick": "togglegroup"})
        compact_figure(fig)
        figures[metric] = fig
    return figures, aligned


@dataclass(frozen=True)
class _Curve:
    x: np.ndarray  # drawn x values (datetimes kept)
    xn: np.ndarray  # numeric x
    y: np.ndarray
    steps: np.ndarray
    # NaN/±inf logged on the other ranks of a multi-rank run: (x, numeric x, step, rank, value)
    others: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None


_MAX_OTHER_RANK_MARKS = 1000


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


def _add_run(
    fig: go.Figure,
    run: RunData,
    metric: str,
    curve: _Curve,
    color: str,
    settings: CompareSettings,
    edges: np.ndarray | None,
    ref_dx: float | None,
    lo_hi: tuple[float, float] | None,
) -> None:
    sparse = metric.startswith("eval_")  # a handful of eval points: drawn raw with markers, as on the live page
    smoothing = 0.0 if sparse else settings.smoothing
    smooth = smooth_on_grid(curve.xn, curve.y, smoothing, ref_dx) if smoothing > 0 else None
    picked = grid_indices(curve.xn, curve.y, edges)
    if lo_hi is not None:  # zoomed: the rows inside the range plus one neighbour each side
        inside = np.flatnonzero((curve.xn >= lo_hi[0]) & (curve.xn <= lo_hi[1]))
        if inside.size:
            lo, hi = max(inside[0] - 1, 0), min(inside[-1] + 1, curve.xn.size - 1)
            picked = picked[(picked >= lo) & (picked <= hi)]
            picked = np.union1d(picked, [lo, hi]).astype(np.int64)
    x, y = curve.x[picked], curve.y[picked]
    label = plotly_text(run.label)
    visible: Any = "legendonly" if run.id in settings.hidden else True
    common = {"legendgroup": run.id, "visible": visible, "mode": "lines+markers" if sparse else "lines"}
    drawn_y = _drawable(y, settings.log_y)
    if smooth is not None:
        fig.add_trace(
            _scatter(
                x,
                drawn_y,
                name=f"{label} (raw)",
                line={"color": color, "width": 1},
                opacity=RAW_OPACITY,
                showlegend=False,
                hovertemplate=f"{label} raw: %{{y:.4g}}<extra></extra>",
                **common,
            )
        )
        y_line = _drawable(smooth[picked], settings.log_y)
    else:
        y_line = drawn_y
    fig.add_trace(
        _scatter(
            x,
            y_line,
            name=label,
            line={"color": color, "width": 2},
            hovertemplate=f"{label}: %{{y:.4g}}<extra></extra>",
            **common,
        )
    )
    _add_nonfinite(fig, run, metric, curve, picked, drawn_y, settings.log_y, visible)


def _add_nonfinite(
    fig: go.Figure,
    run: RunData,
    metric: str,
    curve: _Curve,
    picked: np.ndarray,
    drawn_y: np.ndarray,
    log_y: bool,
    visible: Any,
) -> None:
    """Red X markers at the run's NaN/±inf (and its other ranks'), at the last drawn value before each."""
    label = plotly_text(run.label)
    y, xn = curve.y[picked], curve.xn[picked]
    bad = np.flatnonzero(~np.isfinite(y))
    xs, at, text = (
        [curve.x[picked][bad]],
        [xn[bad]],
        [
            f"{label}: {metric} = {_label(v)} at step {int(s)}"
            for v, s in zip(y[bad], curve.steps[picked][bad], strict=True)
        ],
    )
    if curve.others is not None:
        ox, oxn, osteps, oranks, ovalues = curve.others
        xs.append(ox)
        at.append(oxn)
        text += [
            f"{label}: {metric} = {_label(v)} at step {int(s)} (rank {int(r)})"
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
    fig.add_trace(
        go.Scatter(
            x=np.concatenate(xs),
            y=anchor,
            name=f"{label} non-finite",
            mode="markers",
            marker={"symbol": "x", "size": 10, "color": NONFINITE_COLOR, "line": {"width": 1}},
            legendgroup=run.id,
            showlegend=False,
            visible=visible,
            text=text,
            hovertemplate="%{text}<extra></extra>",
        )
    )


def _scatter(x: np.ndarray, y: np.ndarray, **kwargs: Any) -> go.Scatter | go.Scattergl:
    trace = go.Scattergl if x.size > GL_MIN_POINTS else go.Scatter
    return trace(x=x, y=y, **kwargs)


def _drawable(y: np.ndarray, log: bool) -> np.ndarray:
    out = np.where(np.isfinite(y), y, np.nan)
    if log:
        with np.errstate(invalid="ignore"):
            out[out <= 0] = np.nan
    return out


def _label(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    return "+inf" if value > 0 else "-inf"


def _numeric_range(x_range: tuple[Any, Any] | None) -> tuple[float, float] | None:
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
    return frozenset(r.id for r in runs if plotly_text(r.label) in names)


# ----------------------------------------------------------------------------- side by side
SIDE_PANELS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("Loss and learning rate", ("loss",), ("lr",)),
    ("Throughput and gradient norm", ("throughput",), ("grad_norm",)),
)


def side_by_side_figures(
    run: RunData, settings: CompareSettings, aligned: Aligned, uirevision: Any = "side"
) -> list[go.Figure]:
    """One run's dual-axis panels (the live page's charts) on the compare alignment, with the shared x range."""
    from monitor_cb.charts.figures import dual_axis_figure, eval_figure
    from monitor_cb.view import compact_figure

    frame, x = _with_x(run.frame, aligned, settings.alignment)
    logged = dict(run.logged) or None
    rows = _rows_in_range(aligned.numeric(), _numeric_range(settings.x_range))
    # inside a zoom every point up to ZOOM_FULL_POINTS (then downsampled as usual)
    n_out = settings.n_points if rows is None else max(settings.n_points, min(rows.size, ZOOM_FULL_POINTS))
    figures = []
    for title, left, right in SIDE_PANELS:
        if not any(m in frame.columns for m in (*left, *right)):
            continue
        fig = dual_axis_figure(
            frame,
            x,
            left,
            right,
            settings.smoothing,
            settings.log_y,
            None,
            settings.x_range,
            uirevision,
            logged=logged,
            n_out=n_out,
            rows=rows,
            title=title,
            height=300,
        )
        compact_figure(fig)
        figures.append(fig)
    if any(str(c).startswith("eval_") for c in frame.columns):
        fig = eval_figure(
            frame,
            x,
            smoothing=settings.smoothing,
            x_range=settings.x_range,
            uirevision=uirevision,
            logged=logged,
            rows=rows,
            n_out=n_out,
        )
        set_title(fig, "Eval metrics against train loss", height=300)
        compact_figure(fig)
        figures.append(fig)
    return figures


def _rows_in_range(xn: np.ndarray, lo_hi: tuple[float, float] | None) -> np.ndarray | None:
    """Rows whose x lies in the range plus one neighbour each side (lines reach the edges); None = all."""
    if lo_hi is None:
        return None
    inside = (xn >= lo_hi[0]) & (xn <= lo_hi[1])
    grown = inside | np.r_[inside[1:], False] | np.r_[False, inside[:-1]]
    return np.flatnonzero(grown)


def set_title(fig: go.Figure, title: str, height: int | None = None) -> None:
    """A title at the top left with the legend moved right of it, as the dual-axis builder places them."""
    fig.update_layout(
        title={
            "text": title,
            "x": 0,
            "xanchor": "left",
            "xref": "paper",
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 8},
            "font": {"size": 14},
        },
        legend={"xanchor": "right", "x": 1},
        margin={"t": 60},
        height=height,
    )


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
