"""Figure builders for training curves: plotly only, every builder returns a ``go.Figure``.

One core (:func:`dual_axis_figure`) draws metrics on a left and a right y axis: per metric a
faint raw trace behind the solid smoothed one (TensorBoard's EMA), downsampled to about
``n_out`` points with spikes kept, logged NaN/±inf drawn as red X markers (at the last finite
value, the real value in the hover text) with a dotted line at the first one, and points beyond
a threshold drawn red. The other builders are thin presets over it for one page panel each.

Common keyword arguments of every builder:
    x: an x-axis kind from :data:`monitor_cb.analysis.series.X_KINDS` (``step``, ``time``,
        ``elapsed_min``, ``samples``, ...) or any frame column.
    smoothing: TensorBoard smoothing weight in ``[0, 1)``; 0 draws only the raw trace.
    x_range: ``(lo, hi)`` to re-apply a user's zoom (datetimes for ``x="time"``), None = autorange.
    uirevision: kept constant across refreshes so zoom and legend clicks survive; change it
        (e.g. to the run id) to reset them.
    logged: per-column "was logged" masks (``RunFrame.masks``); without one, every NaN in a
        column is drawn as a logged NaN. Pass it for sparse columns such as ``eval_*``.
    n_out: point budget per trace.
    rank: for a frame merging several ranks, the rank drawn (default the lowest); NaN/±inf of the
        other ranks are still marked.
    cache_key: e.g. the run id, for a chart rebuilt on every live refresh: smoothing and
        downsampling are cached per series and extended with the new rows only (a long series is
        then downsampled in fixed blocks: same spikes and NaN points, a few different picks).
    rows: row positions (``iloc``: a slice or an index array) to draw, e.g. a zoomed step range at
        full resolution. Smoothing and the ``elapsed_*`` origin still use the whole frame, so a
        zoomed curve is the same curve, not one restarted at the zoom's left edge. None = all rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from monitor_cb.analysis.downsample import DEFAULT_N_OUT
from monitor_cb.analysis.series import float_values, x_axis
from monitor_cb.analysis.smoothing import ema_debiased
from monitor_cb.charts.style import NONFINITE_COLOR, THRESHOLD_COLOR, colors_for, layout_dict
from monitor_cb.charts.traces import (
    FigureSpec,
    Masks,
    MetricPlot,
    Ranks,
    RowFilter,
    Rows,
    Threshold,
    add_first_nonfinite_line,
    add_metric,
    rows_mask,
)

__all__ = [
    "DEFAULT_UIREVISION",
    "NONFINITE_COLOR",
    "THRESHOLD_COLOR",
    "Masks",
    "Rows",
    "Threshold",
    "XRange",
    "components_figure",
    "dual_axis_figure",
    "empty_figure",
    "eval_figure",
    "is_schedule",
    "memory_figure",
    "timing_figure",
]

XRange = tuple[Any, Any] | None
DEFAULT_UIREVISION = "monitor"
GIB = float(2**30)
# Schedules, not measurements: an EMA would only make them lag (``lr``, ``lr_group0``, ``loss_scale``).
SCHEDULE_PATTERN = re.compile(r"^(lr(_group\w*)?|loss_scale)$")


def is_schedule(metric: str) -> bool:
    """Whether ``metric`` is a schedule the trainer sets (never smoothed)."""
    return bool(SCHEDULE_PATTERN.match(str(metric)))


def dual_axis_figure(
    df: pd.DataFrame,
    x: str = "step",
    left: Sequence[str] = ("loss",),
    right: Sequence[str] = (),
    smoothing: float = 0.0,
    log_y: bool = False,
    thresholds: Mapping[str, Threshold] | None = None,
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    log_y2: bool = False,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
    rows: Rows = None,
    rank: int | None = None,
    title: str | None = None,
    y_title: str | None = None,
    y2_title: str | None = None,
    height: int | None = None,
    markers: Sequence[str] = (),
    cache_key: Any = None,
) -> go.Figure:
    """Metrics ``left`` on the left y axis and ``right`` on the right one, against ``x``.

    Args:
        df: a run frame (``step``, ``t``, metric columns), sorted by step.
        left: metrics for the left axis; columns missing from ``df`` are skipped.
        right: metrics for the right axis (``yaxis2``); empty = no right axis.
        log_y: log scale on the left axis; values <= 0 are left out of the drawn line.
        thresholds: per metric an upper bound or ``(lower, upper)``; drawn points beyond it are
            red markers and the bound is a dashed line.
        log_y2: log scale on the right axis.
        title, y_title, y2_title: labels; axis titles default to the metric names.
        height: figure height in px (None = plotly's default).
        markers: metrics drawn raw (never smoothed) as lines with markers: sparse series such as
            ``eval_loss``, where an EMA over a handful of points would only lag. Schedules
            (``lr``, ``lr_group*``, ``loss_scale``: :func:`is_schedule`) are never smoothed either.
        cache_key: a hashable naming the frame's source (e.g. the run id) for a live chart that is
            rebuilt on every refresh: the EMA and downsampling of each series are then cached and
            extended with only the new rows (see :mod:`monitor_cb.analysis.series_cache`).
        rank: for a frame that merges several ranks (``RunStore.read(run_id).frame``): the rank whose
            curves are drawn, default the lowest. Non-finite values of every other rank are still
            drawn as markers (the hover names the rank), so a NaN on rank 5 is never hidden.

    Returns:
        The figure. Trace names: ``<metric>`` (smoothed, or raw when smoothing is 0),
        ``<metric> (raw)`` (only with smoothing), and the marker traces ``<metric> non-finite`` and
        ``<metric> beyond threshold`` (grouped with the metric in the legend, not listed).
    """
    ema_debiased([], smoothing)  # validate the weight before any work
    xa = x_axis(df, x)
    draw = rows_mask(len(df), rows)
    ranks = Ranks.of(df, rank)
    fig = FigureSpec()
    thresholds = thresholds or {}
    first_bad: dict[Any, list[str]] = {}
    colors = colors_for([m for m in (*left, *right) if m in df.columns])
    for yaxis, metrics, log in (("y", left, log_y), ("y2", right, log_y2)):
        for metric in metrics:
            if metric not in df.columns:
                continue
            plot = MetricPlot(
                metric=metric,
                yaxis=yaxis,
                color=colors[metric],
                smoothing=0.0 if metric in markers or is_schedule(metric) else smoothing,
                log=log,
                threshold=thresholds.get(metric),
                with_markers=metric in markers,
                schedule=is_schedule(metric) and metric not in markers,
            )
            bad_x = add_metric(fig, df, xa, plot, RowFilter(logged, draw, ranks), n_out, cache_key)
            if bad_x is not None:
                first_bad.setdefault(bad_x, []).append(metric)
    for bad_x, names in sorted(first_bad.items(), key=lambda item: item[0]):
        add_first_nonfinite_line(fig, bad_x, names, xa)
    present_right = [m for m in right if m in df.columns]
    layout = layout_dict(
        xa,
        y_title=y_title or ", ".join(m for m in left if m in df.columns),
        y2_title=(y2_title or ", ".join(present_right)) if present_right else None,
        log_y=log_y,
        log_y2=log_y2,
        x_range=x_range,
        uirevision=uirevision,
        title=title,
        height=height,
    )
    return fig.figure(layout)


def eval_figure(
    df: pd.DataFrame,
    x: str = "step",
    train: str = "loss",
    evals: Sequence[str] | None = None,
    smoothing: float = 0.0,
    log_y: bool = False,
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
    rows: Rows = None,
    rank: int | None = None,
    cache_key: Any = None,
) -> go.Figure:
    """Train loss against eval metrics: ``*loss*`` evals share the left axis, others (accuracy) go right.

    ``evals`` defaults to every ``eval_*`` column. Eval points are drawn with markers since they are sparse.
    """
    if evals is None:
        evals = [c for c in df.columns if str(c).startswith("eval_")]
    left = [train, *(e for e in evals if "loss" in e)]
    right = [e for e in evals if "loss" not in e]
    return dual_axis_figure(
        df,
        x,
        left,
        right,
        smoothing,
        log_y,
        None,
        x_range,
        uirevision,
        logged=logged,
        rows=rows,
        rank=rank,
        cache_key=cache_key,
        n_out=n_out,
        markers=list(evals),
        y_title="loss",
        y2_title=", ".join(right) if right else None,
    )


def components_figure(
    df: pd.DataFrame,
    x: str = "step",
    total: str = "loss",
    components: Sequence[str] | None = None,
    smoothing: float = 0.0,
    log_y: bool = False,
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
    rows: Rows = None,
    rank: int | None = None,
    cache_key: Any = None,
) -> go.Figure:
    """The total loss with its components (``loss_<name>`` columns by default) on one axis."""
    if components is None:
        components = [c for c in df.columns if str(c).startswith("loss_") and c != "loss_scale"]
    return dual_axis_figure(
        df,
        x,
        [total, *components],
        (),
        smoothing,
        log_y,
        None,
        x_range,
        uirevision,
        logged=logged,
        rows=rows,
        rank=rank,
        cache_key=cache_key,
        n_out=n_out,
        y_title="loss",
    )


def timing_figure(
    df: pd.DataFrame,
    x: str = "step",
    smoothing: float = 0.0,
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
    rows: Rows = None,
    rank: int | None = None,
    cache_key: Any = None,
) -> go.Figure:
    """``step_time`` and ``data_time`` (s) left, ``throughput`` right: shows whether input is the bottleneck."""
    return dual_axis_figure(
        df,
        x,
        ["step_time", "data_time"],
        ["throughput"],
        smoothing,
        False,
        None,
        x_range,
        uirevision,
        logged=logged,
        rows=rows,
        rank=rank,
        cache_key=cache_key,
        n_out=n_out,
        y_title="seconds per step",
        y2_title="samples/s",
    )


def memory_figure(
    df: pd.DataFrame,
    x: str = "step",
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
    rows: Rows = None,
    rank: int | None = None,
    cache_key: Any = None,
) -> go.Figure:
    """Device memory (allocated, peak) and host RSS in GiB, unsmoothed, on one axis."""
    columns = [c for c in ("mem_device", "mem_device_peak", "mem_host_rss") if c in df.columns]
    keep = [c for c in dict.fromkeys(("step", "t", "rank", "samples", x)) if c in df.columns and c not in columns]
    gib = df[keep].copy()
    for column in columns:
        gib[column] = float_values(df[column]) / GIB
    return dual_axis_figure(
        gib,
        x,
        columns,
        (),
        0.0,
        False,
        None,
        x_range,
        uirevision,
        logged=logged,
        rows=rows,
        rank=rank,
        cache_key=cache_key,
        n_out=n_out,
        y_title="GiB",
    )


def empty_figure(message: str, height: int | None = None) -> go.Figure:
    """A blank figure carrying ``message`` in its middle, for a panel with nothing to draw yet."""
    fig = go.Figure()
    fig.add_annotation(
        text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font={"size": 14, "color": "#7f7f7f"}
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(margin={"l": 10, "r": 10, "t": 10, "b": 10}, height=height)
    return fig
