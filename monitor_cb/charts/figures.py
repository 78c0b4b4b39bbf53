"""Figure builders for training curves: plotly only, every builder returns a ``go.Figure``.

One core (:func:`dual_axis_figure`) draws metrics on a left and a right y axis: per metric a
faint raw trace behind the solid smoothed one (TensorBoard's EMA), downsampled to about
``n_out`` points with spikes kept, logged NaN/±inf drawn as red X markers (at the last finite
value, the real value in the hover text) with a dotted line at the first one, and points beyond
a threshold drawn red. The other builders are thin presets over it for one page panel each.

Every builder takes what to draw from (:class:`~monitor_cb.charts.options.ChartData`: the frame,
its "was logged" masks, the drawn rows and rank, a cache key; a bare DataFrame works too) and how
to draw it (:class:`~monitor_cb.charts.options.ChartOptions`: x axis, smoothing, log scale,
thresholds, point budget, zoom, ``uirevision``, height), which the pages' settings produce.

```python
options = ChartOptions(x="step", smoothing=0.6, thresholds={"grad_norm": 10.0})
fig = dual_axis_figure(ChartData(data.frame, logged=data.masks), ["loss"], ["lr"], options)
```
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from monitor_cb.analysis.roles import role_of
from monitor_cb.analysis.smoothing import ema_debiased
from monitor_cb.charts.options import (
    DEFAULT_UIREVISION,
    ChartData,
    ChartOptions,
    Masks,
    Rows,
    Threshold,
    XRange,
)
from monitor_cb.charts.style import NONFINITE_COLOR, THRESHOLD_COLOR, Labels, colors_for, layout_dict
from monitor_cb.charts.traces import (
    FigureSpec,
    MetricPlot,
    Ranks,
    RowFilter,
    add_first_nonfinite_line,
    add_metric,
    rows_mask,
)

__all__ = [
    "DEFAULT_UIREVISION",
    "NONFINITE_COLOR",
    "THRESHOLD_COLOR",
    "ChartData",
    "ChartOptions",
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

GIB = float(2**30)
# Schedules, not measurements: an EMA would only make them lag (``lr``, ``lr_group0``, ``loss_scale``).
SCHEDULE_PATTERN = re.compile(r"^(lr(_group\w*)?|loss_scale)$")
DEFAULT_OPTIONS = ChartOptions()


def is_schedule(metric: str) -> bool:
    """Whether ``metric`` is a schedule the trainer sets (never smoothed): ours, or any name playing the
    learning rate or the loss scale (``train/learning_rate``, ``lr-AdamW``, ``x/lr0``)."""
    return bool(SCHEDULE_PATTERN.match(str(metric))) or role_of(str(metric)) in ("lr", "loss_scale")


def dual_axis_figure(
    data: ChartData | pd.DataFrame,
    left: Sequence[str] = ("loss",),
    right: Sequence[str] = (),
    options: ChartOptions = DEFAULT_OPTIONS,
    *,
    title: str | None = None,
    y_title: str | None = None,
    y2_title: str | None = None,
    markers: Sequence[str] = (),
    log_y2: bool = False,
) -> go.Figure:
    """Metrics ``left`` on the left y axis and ``right`` on the right one, against ``options.x``.

    Args:
        data: the frame to draw from (a bare DataFrame: every row, every NaN taken as logged).
        left: metrics for the left axis; columns missing from the frame are skipped.
        right: metrics for the right axis (``yaxis2``); empty = no right axis.
        options: x axis, smoothing, log scale of the left axis, thresholds, budget, zoom, height.
        title, y_title, y2_title: labels; axis titles default to the metric names.
        markers: metrics drawn raw (never smoothed) as lines with markers: sparse series such as
            ``eval_loss``, where an EMA over a handful of points would only lag. Schedules
            (``lr``, ``lr_group*``, ``loss_scale``: :func:`is_schedule`) are never smoothed either.
        log_y2: log scale on the right axis.

    Returns:
        The figure. Trace names: ``<metric>`` (smoothed, or raw when smoothing is 0),
        ``<metric> (raw)`` (only with smoothing), and the marker traces ``<metric> non-finite`` and
        ``<metric> beyond threshold`` (grouped with the metric in the legend, not listed).
    """
    ema_debiased([], options.smoothing)  # validate the weight before any work
    data = ChartData.of(data)
    df, series = data.frame, data.series
    xa = series.x_axis(options.x)
    filters = RowFilter(data.logged, rows_mask(len(df), data.rows), Ranks.of(series, data.rank), data.other_ranks)
    fig = FigureSpec()
    first_bad: dict[Any, list[str]] = {}
    colors = colors_for([m for m in (*left, *right) if m in df.columns])
    for yaxis, metrics, log in (("y", left, options.log_y), ("y2", right, log_y2)):
        for metric in metrics:
            if metric not in df.columns:
                continue
            plot = MetricPlot(
                metric=metric,
                yaxis=yaxis,
                color=colors[metric],
                smoothing=0.0 if metric in markers or is_schedule(metric) else options.smoothing,
                log=log,
                threshold=options.threshold(metric),
                with_markers=metric in markers,
                schedule=is_schedule(metric) and metric not in markers,
                smoother=options.smoother,
            )
            bad_x = add_metric(fig, series, xa, plot, filters, options.n_out, data.cache_key)
            if bad_x is not None:
                first_bad.setdefault(bad_x, []).append(metric)
    for row, (bad_x, names) in enumerate(sorted(first_bad.items(), key=lambda item: item[0])):
        add_first_nonfinite_line(fig, bad_x, names, xa, row)
    present_right = [m for m in right if m in df.columns]
    labels = Labels(
        y=y_title or ", ".join(m for m in left if m in df.columns),
        y2=(y2_title or ", ".join(present_right)) if present_right else None,
        title=title,
    )
    layout = layout_dict(xa, options, labels, log_y2=log_y2)
    return fig.prepared(layout, options.fit_bulk) if data.prepared else fig.figure(layout, options.fit_bulk)


def eval_figure(
    data: ChartData | pd.DataFrame,
    options: ChartOptions = DEFAULT_OPTIONS,
    *,
    train: str | Sequence[str] = "loss",
    evals: Sequence[str] | None = None,
    eval_losses: Sequence[str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """Train loss against eval metrics: eval losses share the left axis, others (accuracy) go right.

    ``train``: the training loss(es). ``evals`` defaults to every ``eval_*`` column; ``eval_losses`` (those
    of ``evals`` on the loss axis) to the ones with ``loss`` in their name. Eval points are drawn with
    markers since they are sparse; thresholds do not apply here.
    """
    df = ChartData.of(data).frame
    if evals is None:
        evals = [c for c in df.columns if str(c).startswith("eval_")]
    if eval_losses is None:
        eval_losses = [e for e in evals if "loss" in e]
    trains = [train] if isinstance(train, str) else list(train)
    left = [*trains, *(e for e in evals if e in eval_losses)]
    right = [e for e in evals if e not in eval_losses]
    return dual_axis_figure(
        data,
        left,
        right,
        replace(options, thresholds=()),
        markers=list(evals),
        title=title,
        y_title="loss",
        y2_title=", ".join(right) if right else None,
    )


def components_figure(
    data: ChartData | pd.DataFrame,
    options: ChartOptions = DEFAULT_OPTIONS,
    *,
    total: str = "loss",
    components: Sequence[str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """The total loss with its components (``loss_<name>`` columns by default) on one axis."""
    df = ChartData.of(data).frame
    if components is None:
        components = [c for c in df.columns if str(c).startswith("loss_") and c != "loss_scale"]
    return dual_axis_figure(
        data, [total, *components], (), replace(options, thresholds=()), title=title, y_title="loss"
    )


def timing_figure(
    data: ChartData | pd.DataFrame,
    options: ChartOptions = DEFAULT_OPTIONS,
    *,
    title: str | None = None,
    step_time: Sequence[str] = ("step_time",),
    throughput: Sequence[str] = ("throughput",),
) -> go.Figure:
    """Step time and ``data_time`` (s) left, throughput right: shows whether input is the bottleneck.

    ``step_time``, ``throughput``: the metrics playing those roles (ours by default)."""
    return dual_axis_figure(
        data,
        [*step_time, "data_time"],
        list(throughput),
        replace(options, log_y=False, thresholds=()),
        title=title,
        y_title="seconds per step",
        y2_title="samples/s",
    )


def memory_figure(
    data: ChartData | pd.DataFrame, options: ChartOptions = DEFAULT_OPTIONS, *, title: str | None = None
) -> go.Figure:
    """Device memory (allocated, peak) and host RSS in GiB, unsmoothed, on one axis."""
    data = ChartData.of(data)
    df = data.frame
    columns = [c for c in ("mem_device", "mem_device_peak", "mem_host_rss") if c in df.columns]
    keep = [
        c for c in dict.fromkeys(("step", "t", "rank", "samples", options.x)) if c in df.columns and c not in columns
    ]
    gib = df[keep].copy()
    for column in columns:
        gib[column] = data.series.values(column) / GIB
    return dual_axis_figure(
        data.with_frame(gib),
        columns,
        (),
        replace(options, smoothing=0.0, log_y=False, thresholds=()),
        title=title,
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
