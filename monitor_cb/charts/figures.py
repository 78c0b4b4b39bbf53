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
    logged: per-column "was logged" masks (``RunStore.logged_mask``); without one, every NaN in a
        column is drawn as a logged NaN. Pass it for sparse columns such as ``eval_*``.
    n_out: point budget per trace.
    rank: for a frame merging several ranks, the rank drawn (default the lowest); NaN/±inf of the
        other ranks are still marked.
    rows: row positions (``iloc``: a slice or an index array) to draw, e.g. a zoomed step range at
        full resolution. Smoothing and the ``elapsed_*`` origin still use the whole frame, so a
        zoomed curve is the same curve, not one restarted at the zoom's left edge. None = all rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from numpy.typing import ArrayLike

from monitor_cb.analysis.downsample import DEFAULT_N_OUT, downsample_indices
from monitor_cb.analysis.series import XAxis, float_values, logged_rows, x_axis
from monitor_cb.analysis.smoothing import ema_debiased

# A threshold is an upper bound, or (lower, upper) with None for "no bound on that side".
Threshold = float | tuple[float | None, float | None]
XRange = tuple[Any, Any] | None
Masks = Mapping[str, ArrayLike] | None
Rows = ArrayLike | slice | None

DEFAULT_UIREVISION = "monitor"
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
GIB = float(2**30)


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
            ``eval_loss``, where an EMA over a handful of points would only lag.
        rank: for a frame that merges several ranks (``RunStore.frame(run_id)``): the rank whose
            curves are drawn, default the lowest. Non-finite values of every other rank are still
            drawn as markers (the hover names the rank), so a NaN on rank 5 is never hidden.

    Returns:
        The figure. Trace names: ``<metric>`` (smoothed, or raw when smoothing is 0),
        ``<metric> (raw)`` (only with smoothing), and the marker traces ``<metric> non-finite`` and
        ``<metric> beyond threshold`` (grouped with the metric in the legend, not listed).
    """
    ema_debiased([], smoothing)  # validate the weight before any work
    xa = x_axis(df, x)
    draw = _rows_mask(len(df), rows)
    ranks = _Ranks.of(df, rank)
    fig = go.Figure()
    thresholds = thresholds or {}
    first_bad: dict[Any, list[str]] = {}
    colors = _colors([m for m in (*left, *right) if m in df.columns])
    for yaxis, metrics, log in (("y", left, log_y), ("y2", right, log_y2)):
        for metric in metrics:
            if metric not in df.columns:
                continue
            plot = _MetricPlot(
                metric=metric,
                yaxis=yaxis,
                color=colors[metric],
                smoothing=0.0 if metric in markers else smoothing,
                log=log,
                threshold=thresholds.get(metric),
                with_markers=metric in markers,
            )
            bad_x = _add_metric(fig, df, xa, plot, _Rows(logged, draw, ranks), n_out)
            if bad_x is not None:
                first_bad.setdefault(bad_x, []).append(metric)
    for bad_x, names in sorted(first_bad.items(), key=lambda item: item[0]):
        _add_first_nonfinite_line(fig, bad_x, names, xa)
    present_right = [m for m in right if m in df.columns]
    _layout(
        fig,
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
    return fig


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


# ----------------------------------------------------------------------------- core
@dataclass(frozen=True)
class _MetricPlot:
    metric: str
    yaxis: str  # "y" (left) or "y2" (right)
    color: str
    smoothing: float
    log: bool
    threshold: Threshold | None
    with_markers: bool


@dataclass(frozen=True)
class _Ranks:
    """Which rows belong to the drawn rank of a multi-rank frame (``mask`` None: one rank only)."""

    mask: np.ndarray | None
    ranks: np.ndarray | None

    @classmethod
    def of(cls, df: pd.DataFrame, rank: int | None) -> _Ranks:
        if "rank" not in df.columns or len(df) == 0:
            return cls(None, None)
        ranks = float_values(df["rank"])
        if not np.isfinite(ranks).any():
            return cls(None, None)
        lowest, highest = np.nanmin(ranks), np.nanmax(ranks)  # cheaper than np.unique on 1M rows
        if rank is None and lowest == highest:
            return cls(None, None)
        chosen = float(rank) if rank is not None else float(lowest)
        return cls(ranks == chosen, ranks)


@dataclass(frozen=True)
class _Rows:
    """Row filters of one figure: logged masks, the drawn range (``rows=``) and the drawn rank."""

    logged: Masks
    draw: np.ndarray | None
    ranks: _Ranks


def _add_metric(fig: go.Figure, df: pd.DataFrame, xa: XAxis, plot: _MetricPlot, filters: _Rows, n_out: int) -> Any:
    """Add one metric's traces; return the x of its first drawn non-finite point, or None."""
    selected = _select(df, xa, plot.metric, filters)
    if selected is None:
        return None
    xv, y, steps, drawn_rows = selected
    smooth_all = ema_debiased(y, plot.smoothing) if plot.smoothing > 0 else None
    if drawn_rows is not None:  # smoothed over everything, drawn only where asked
        xv, y = xv[drawn_rows], y[drawn_rows]
        steps = steps[drawn_rows] if steps is not None else None
        smooth_all = smooth_all[drawn_rows] if smooth_all is not None else None
    if y.size == 0:
        return None
    picked = downsample_indices(xv, y, n_out, max_nonfinite=n_out)
    x_drawn, y_drawn = xv[picked], y[picked]
    line_mode = "lines+markers" if plot.with_markers else "lines"
    common = {"mode": line_mode, "legendgroup": plot.metric, "yaxis": plot.yaxis}
    if smooth_all is not None:
        smooth = smooth_all[picked]
        raw_style = {"line": {"color": plot.color, "width": 1}, "opacity": RAW_OPACITY, "showlegend": False}
        fig.add_trace(
            _scatter(
                x_drawn,
                _drawable(y_drawn, plot.log),
                name=f"{plot.metric} (raw)",
                hovertemplate=f"{plot.metric} raw: %{{y:.4g}}<extra></extra>",
                **raw_style,
                **common,
            )
        )
        fig.add_trace(
            _scatter(
                x_drawn,
                _drawable(smooth, plot.log),
                name=plot.metric,
                line={"color": plot.color, "width": 2},
                hovertemplate=f"{plot.metric}: %{{y:.4g}}<extra></extra>",
                **common,
            )
        )
    else:
        fig.add_trace(
            _scatter(
                x_drawn,
                _drawable(y_drawn, plot.log),
                name=plot.metric,
                line={"color": plot.color, "width": 1.5},
                hovertemplate=f"{plot.metric}: %{{y:.4g}}<extra></extra>",
                **common,
            )
        )
    if plot.threshold is not None:
        _add_threshold(fig, x_drawn, y_drawn, plot)
    bad = picked[~np.isfinite(y_drawn)]
    points = _BadPoints.of_drawn(xv, y, bad, plot, steps, filters.ranks)
    points = points.plus(_BadPoints.of_other_ranks(df, xa, plot, filters, xv, y, n_out))
    return points.add_to(fig, plot)


def _select(
    df: pd.DataFrame, xa: XAxis, metric: str, filters: _Rows
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None] | None:
    """x, y, step of the drawn rank's rows where ``metric`` was logged and x is valid, sorted by x,
    and which of them lie in the drawn range."""
    y = float_values(df[metric])
    xv = xa.values
    steps = df["step"].to_numpy() if "step" in df.columns else None
    draw = filters.draw
    keep = logged_rows(df, metric, filters.logged) & _valid_x(xv)
    if filters.ranks.mask is not None:
        keep &= filters.ranks.mask
    if not keep.all():  # copying 1M rows costs milliseconds: only when some rows drop out
        picked = np.flatnonzero(keep)
        xv, y = xv[picked], y[picked]
        steps = steps[picked] if steps is not None else None
        draw = draw[picked] if draw is not None else None
    if y.size == 0:
        return None
    if not _non_decreasing(xv):  # wall time can step back after a clock change
        order = np.argsort(xv, kind="stable")
        xv, y = xv[order], y[order]
        steps = steps[order] if steps is not None else None
        draw = draw[order] if draw is not None else None
    return xv, y, steps, (None if draw is None or draw.all() else draw)


@dataclass(frozen=True)
class _BadPoints:
    """Non-finite points to mark: where, at what height, and the hover text with the real value."""

    x: np.ndarray
    y: np.ndarray
    text: list[str]

    @classmethod
    def of_drawn(
        cls,
        xv: np.ndarray,
        y: np.ndarray,
        bad: np.ndarray,
        plot: _MetricPlot,
        steps: np.ndarray | None,
        ranks: _Ranks,
    ) -> _BadPoints:
        """The drawn series' own NaN/±inf: a NaN has no height, so it sits at the last finite value before it."""
        if bad.size == 0:
            return cls(xv[:0], np.empty(0), [])
        suffix = ""
        if ranks.mask is not None and ranks.ranks is not None:
            suffix = f" (rank {int(ranks.ranks[ranks.mask][0])})" if ranks.mask.any() else ""
        where = [f"step {int(s)}" for s in steps[bad]] if steps is not None else [str(v) for v in xv[bad]]
        text = [f"{plot.metric} = {_nonfinite_label(v)} at {w}{suffix}" for v, w in zip(y[bad], where, strict=True)]
        return cls(xv[bad], _anchor_values(y, bad, plot.log), text)

    @classmethod
    def of_other_ranks(
        cls,
        df: pd.DataFrame,
        xa: XAxis,
        plot: _MetricPlot,
        filters: _Rows,
        drawn_x: np.ndarray,
        drawn_y: np.ndarray,
        cap: int,
    ) -> _BadPoints:
        """NaN/±inf on ranks that are not drawn, placed on the drawn curve at the same x."""
        ranks = filters.ranks
        if ranks.mask is None or ranks.ranks is None:
            return cls(xa.values[:0], np.empty(0), [])
        y_all = float_values(df[plot.metric])
        other = ~ranks.mask & ~np.isfinite(y_all) & logged_rows(df, plot.metric, filters.logged)
        other &= _valid_x(xa.values)
        if filters.draw is not None:
            other &= filters.draw
        rows = np.flatnonzero(other)
        if rows.size > cap:
            rows = rows[np.unique(np.linspace(0, rows.size - 1, cap).round().astype(np.int64))]
        if rows.size == 0:
            return cls(xa.values[:0], np.empty(0), [])
        x_other = xa.values[rows]
        good = np.flatnonzero(~np.isnan(_drawable(drawn_y, plot.log)))
        if good.size:
            before = np.searchsorted(drawn_x[good], x_other, side="right") - 1
            anchor = drawn_y[good[np.maximum(before, 0)]]
        else:
            anchor = np.full(rows.size, 1.0 if plot.log else 0.0)
        steps = df["step"].to_numpy()[rows] if "step" in df.columns else x_other
        text = [
            f"{plot.metric} = {_nonfinite_label(v)} at step {int(s)} (rank {int(r)})"
            for v, s, r in zip(y_all[rows], steps, ranks.ranks[rows], strict=True)
        ]
        return cls(x_other, anchor, text)

    def plus(self, other: _BadPoints) -> _BadPoints:
        if not other.text:
            return self
        if not self.text:
            return other
        x = np.concatenate([self.x, other.x])
        order = np.argsort(x, kind="stable")
        text = self.text + other.text
        return _BadPoints(x[order], np.concatenate([self.y, other.y])[order], [text[i] for i in order])

    def add_to(self, fig: go.Figure, plot: _MetricPlot) -> Any:
        """Add the red X marker trace; return the first marked x (None when there is none)."""
        if not self.text:
            return None
        fig.add_trace(
            go.Scatter(
                x=self.x,
                y=self.y,
                name=f"{plot.metric} non-finite",
                mode="markers",
                marker={"symbol": "x", "size": 10, "color": NONFINITE_COLOR, "line": {"width": 1}},
                legendgroup=plot.metric,
                showlegend=False,  # hover tells what it is; the legend stays one line per metric
                yaxis=plot.yaxis,
                text=self.text,
                hovertemplate="%{text}<extra></extra>",
            )
        )
        return self.x[0]


def _rows_mask(n: int, rows: Rows) -> np.ndarray | None:
    """``rows`` (slice or positions) as a boolean mask over the frame; None when every row is drawn."""
    if rows is None:
        return None
    mask = np.zeros(n, dtype=bool)
    if isinstance(rows, slice):
        mask[rows] = True
    else:
        mask[np.asarray(rows, dtype=np.int64)] = True
    return mask


def _add_threshold(fig: go.Figure, xv: np.ndarray, y: np.ndarray, plot: _MetricPlot) -> None:
    """Red markers on drawn points beyond the bound(s), and a dashed line at each bound."""
    lower, upper = _bounds(plot.threshold)
    beyond = np.zeros(y.size, dtype=bool)
    with np.errstate(invalid="ignore"):
        if upper is not None:
            beyond |= y > upper
        if lower is not None:
            beyond |= y < lower
    beyond &= np.isfinite(y)
    if plot.log:
        beyond &= y > 0
    for bound in (lower, upper):
        if bound is not None and not (plot.log and bound <= 0):
            fig.add_shape(
                type="line",
                xref="paper",
                x0=0,
                x1=1,
                yref=plot.yaxis,
                y0=bound,
                y1=bound,
                line={"color": THRESHOLD_COLOR, "width": 1, "dash": "dash"},
                opacity=0.6,
            )
    if not beyond.any():
        return
    fig.add_trace(
        go.Scatter(
            x=xv[beyond],
            y=y[beyond],
            name=f"{plot.metric} beyond threshold",
            mode="markers",
            marker={"size": 6, "color": THRESHOLD_COLOR},
            legendgroup=plot.metric,
            showlegend=False,
            yaxis=plot.yaxis,
            hovertemplate=f"{plot.metric}: %{{y:.4g}} (beyond threshold)<extra></extra>",
        )
    )


def _add_first_nonfinite_line(fig: go.Figure, x_value: Any, names: list[str], xa: XAxis) -> None:
    """Dotted vertical line and label at the first non-finite point (shape + annotation: add_vline
    with an annotation fails on datetime axes)."""
    # plotly autoranges over annotations: text running off the data would widen the x axis, so
    # the label extends towards the middle of the data (usually left: runs die near their end).
    valid = xa.values[_valid_x(xa.values)]
    mid = valid[0] + (valid[-1] - valid[0]) / 2 if valid.size else x_value
    anchor = "right" if x_value > mid else "left"
    x_value = _plain_x(x_value, xa.is_datetime)
    fig.add_shape(
        type="line",
        xref="x",
        x0=x_value,
        x1=x_value,
        yref="paper",
        y0=0,
        y1=1,
        line={"color": NONFINITE_COLOR, "width": 1, "dash": "dot"},
    )
    if isinstance(x_value, pd.Timestamp):
        at = x_value.strftime("%Y-%m-%d %H:%M:%S")
    else:
        at = f"{x_value:g}" if isinstance(x_value, (int, float)) else str(x_value)
    fig.add_annotation(
        x=x_value,
        xref="x",
        y=1,
        yref="paper",
        yanchor="top",
        xanchor=anchor,
        text=f"first non-finite {', '.join(names)} @ {xa.title} {at}",
        showarrow=False,
        font={"color": NONFINITE_COLOR, "size": 11},
        bgcolor="rgba(255,255,255,0.7)",
    )


def _layout(
    fig: go.Figure,
    xa: XAxis,
    *,
    y_title: str,
    y2_title: str | None,
    log_y: bool,
    log_y2: bool,
    x_range: XRange,
    uirevision: Any,
    title: str | None,
    height: int | None,
) -> None:
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


def _colors(metrics: Sequence[str]) -> dict[str, str]:
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


def _plain_x(value: Any, is_datetime: bool) -> Any:
    """A numpy scalar as a value plotly shapes accept (whole milliseconds for dates, float otherwise)."""
    if is_datetime:
        return pd.Timestamp(value).round("ms")
    return value.item() if hasattr(value, "item") else value


def _scatter(x: np.ndarray, y: np.ndarray, **kwargs: Any) -> go.Scatter | go.Scattergl:
    trace = go.Scattergl if x.size > GL_MIN_POINTS else go.Scatter
    return trace(x=x, y=y, **kwargs)


def _drawable(y: np.ndarray, log: bool) -> np.ndarray:
    """y with non-finite values (and values <= 0 on a log axis) as NaN gaps."""
    out = np.where(np.isfinite(y), y, np.nan)
    if log:
        with np.errstate(invalid="ignore"):
            out[out <= 0] = np.nan
    return out


def _anchor_values(y: np.ndarray, bad: np.ndarray, log: bool) -> np.ndarray:
    """For each position in ``bad``, the last drawable value before it (else the first after; else 1 or 0)."""
    good = np.flatnonzero(~np.isnan(_drawable(y, log)))
    if good.size == 0:
        return np.full(bad.size, 1.0 if log else 0.0)
    before = np.searchsorted(good, bad) - 1  # bad positions are never in good
    source = good[np.where(before >= 0, before, 0)]
    return y[source]


def _valid_x(values: np.ndarray) -> np.ndarray:
    if np.issubdtype(values.dtype, np.datetime64):
        return ~np.isnat(values)
    return np.isfinite(values.astype(np.float64, copy=False))


def _non_decreasing(values: np.ndarray) -> bool:
    return bool(np.all(values[1:] >= values[:-1]))


def _bounds(threshold: Threshold | None) -> tuple[float | None, float | None]:
    if threshold is None:
        return None, None
    if isinstance(threshold, tuple):
        lower, upper = threshold
        return lower, upper
    return None, float(threshold)


def _nonfinite_label(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    return "+inf" if value > 0 else "-inf"
