"""The traces of one metric: raw and smoothed lines, non-finite markers, threshold markers.

Internal to :mod:`monitor_cb.charts`; :mod:`monitor_cb.charts.figures` is the public API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from _plotly_utils.utils import to_typed_array_spec

from monitor_cb.analysis.downsample import downsample_indices
from monitor_cb.analysis.live_series import LiveSeries
from monitor_cb.analysis.live_series import valid_x as valid_x
from monitor_cb.analysis.series import XAxis
from monitor_cb.analysis.series_cache import SERIES_CACHE
from monitor_cb.analysis.smoothing import ema_debiased, smooth
from monitor_cb.charts.axes import pin_constant_axes, pin_constant_axes_spec
from monitor_cb.charts.options import Masks, Rows, Threshold
from monitor_cb.charts.outliers import fit_bulk_spec
from monitor_cb.charts.prepared import PreparedFigure
from monitor_cb.charts.scatter import drawable, nonfinite_label, scatter
from monitor_cb.charts.single_x import pin_single_x_spec
from monitor_cb.charts.style import NONFINITE_COLOR, RAW_OPACITY, THRESHOLD_COLOR, compact_array, escape_html

# The smoothed line is a trend, and a schedule (lr) is smooth by construction: they are drawn with
# this fraction of a raw trace's points (a 1M-step run at 2,000 points per raw trace fits 100 kB).
SMOOTH_POINTS_FRACTION = 8
SCHEDULE_POINTS_FRACTION = 4


class FigureSpec:
    """Traces, shapes and annotations collected as plain dicts, made into a ``go.Figure`` once.

    Adding to a ``go.Figure`` validates every property (about 1 ms per trace); building the figure
    once from dicts the builders made themselves skips that. Has the ``add_trace`` /
    ``add_shape`` / ``add_annotation`` subset of ``go.Figure`` the trace helpers use.
    """

    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []
        self.shapes: list[dict[str, Any]] = []
        self.annotations: list[dict[str, Any]] = []

    def add_trace(self, trace: dict[str, Any]) -> None:
        self.data.append(trace)

    def add_shape(self, **shape: Any) -> None:
        self.shapes.append(shape)

    def add_annotation(self, **annotation: Any) -> None:
        self.annotations.append(annotation)

    def figure(self, layout: dict[str, Any], fit_bulk: bool = False) -> go.Figure:
        """The ``go.Figure`` (built unvalidated: every value here comes from the builders' code).

        ``fit_bulk``: y axes fit the bulk of the points, outliers marked at the edge
        (:mod:`~monitor_cb.charts.outliers`).
        """
        layout = self._layout(layout, fit_bulk)
        fig = go.Figure(data=self.data, layout=layout, _validate=False)
        # later changes by a caller are checked (and normalised) as usual
        for obj in (fig, fig.layout, *fig.data):
            obj._validate = True
        return pin_constant_axes(fig)

    def prepared(self, layout: dict[str, Any], fit_bulk: bool = False) -> PreparedFigure:
        """The finished figure as its dict, with no plotly objects built: what :meth:`figure` followed by
        ``to_dict()`` gives, at a fraction of the cost (a live refresh builds every chart anew)."""
        layout = self._layout(layout, fit_bulk)
        pin_constant_axes_spec(self.data, layout)
        return PreparedFigure.of({"data": typed_arrays(self.data), "layout": typed_arrays(layout)})

    def _layout(self, layout: dict[str, Any], fit_bulk: bool) -> dict[str, Any]:
        layout = dict(layout)
        if self.shapes:
            layout["shapes"] = self.shapes
        if self.annotations:
            layout["annotations"] = self.annotations
        if fit_bulk:
            fit_bulk_spec(self.data, layout)
        pin_single_x_spec(self.data, layout)
        return layout


def typed_arrays(value: Any) -> Any:
    """``value`` with every numpy array as plotly's base64 typed array, as ``go.Figure.to_dict`` writes it."""
    if isinstance(value, np.ndarray):
        return to_typed_array_spec(value)
    if isinstance(value, dict):
        return {k: v if k in _UNTYPED_KEYS else typed_arrays(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [typed_arrays(v) for v in value]
    return value


_UNTYPED_KEYS = frozenset({"geojson", "layer", "layers", "range"})  # plotly leaves these as they are


Figureish = go.Figure | FigureSpec


@dataclass(frozen=True)
class MetricPlot:
    metric: str
    yaxis: str  # "y" (left) or "y2" (right)
    color: str
    smoothing: float
    log: bool
    threshold: Threshold | None
    with_markers: bool
    schedule: bool = False  # drawn with fewer points (SCHEDULE_POINTS_FRACTION)
    smoother: str = "ema"  # a key of monitor_cb.analysis.smoothing.SMOOTHERS


@dataclass(frozen=True)
class Ranks:
    """Which rows belong to the drawn rank of a multi-rank frame (``mask`` None: one rank only)."""

    mask: np.ndarray | None
    ranks: np.ndarray | None
    chosen: float | None = None

    @classmethod
    def of(cls, df: pd.DataFrame | LiveSeries, rank: int | None) -> Ranks:
        """The rows of ``rank`` (None: the lowest, when there are several); once per series (each
        chart of a refresh asks, and the scan is over the whole run)."""
        series = LiveSeries.of(df)
        return series.memo(("ranks", rank), lambda: cls._of(series, rank))  # type: ignore[no-any-return]

    @classmethod
    def _of(cls, series: LiveSeries, rank: int | None) -> Ranks:
        if not series.has("rank") or len(series) == 0:
            return cls(None, None)
        ranks = series.values("rank")
        if not np.isfinite(ranks).any():
            return cls(None, None)
        lowest, highest = np.nanmin(ranks), np.nanmax(ranks)  # cheaper than np.unique on 1M rows
        if rank is None and lowest == highest:
            return cls(None, None)
        chosen = float(rank) if rank is not None else float(lowest)
        return cls(ranks == chosen, ranks, chosen)


@dataclass(frozen=True)
class RowFilter:
    """Row filters of one figure: logged masks, the drawn range (``rows=``) and the drawn rank."""

    logged: Masks
    draw: np.ndarray | None
    ranks: Ranks
    others: Mapping[str, Any] | None = None  # metric -> other ranks' NaN/±inf cells (one rank's frame)


def add_metric(
    fig: Figureish,
    df: pd.DataFrame | LiveSeries,
    xa: XAxis,
    plot: MetricPlot,
    filters: RowFilter,
    n_out: int,
    cache_key: Any = None,
) -> Any:
    """Add one metric's traces; return the x of its first drawn non-finite point, or None.

    With a ``cache_key`` (e.g. the run id; hashable) the EMA and the downsampling of the whole
    series are kept in :data:`SERIES_CACHE` and only extended on the next call: a live refresh
    then costs the new rows, not the run's length. A long series is then downsampled block by
    block (:func:`~monitor_cb.analysis.series_cache.block_downsample`): the same spikes and
    non-finite points, and the same figure as a fresh cache would give. ``df`` may be the refresh's
    :class:`~monitor_cb.analysis.live_series.LiveSeries`, whose arrays every figure shares.
    """
    df = df if isinstance(df, LiveSeries) else LiveSeries(df, filters.logged)
    selected = _select(df, xa, plot.metric, filters)
    if selected is None:
        return None
    xv, y, steps, drawn_rows = selected
    key = None if cache_key is None else (cache_key, plot.metric, xa.kind, filters.ranks.chosen)
    smooth_all = _smoothed(key, xv, y, plot.smoothing, plot.smoother)
    if drawn_rows is not None:  # smoothed over everything, drawn only where asked
        xv, y = xv[drawn_rows], y[drawn_rows]
        steps = steps[drawn_rows] if steps is not None else None
        smooth_all = smooth_all[drawn_rows] if smooth_all is not None else None
        key = None  # a zoom window is drawn at full resolution, not from the cached blocks
    if y.size == 0:
        return None
    picked = _downsampled(key, xv, y, n_out // SCHEDULE_POINTS_FRACTION if plot.schedule else n_out, n_out)
    x_drawn, y_drawn = xv[picked], y[picked]
    name = escape_html(plot.metric)
    line_mode = "lines+markers" if plot.with_markers else "lines"
    common = {"mode": line_mode, "legendgroup": plot.metric, "yaxis": plot.yaxis}
    if smooth_all is not None:
        raw_style = {"line": {"color": plot.color, "width": 1}, "opacity": RAW_OPACITY, "showlegend": False}
        fig.add_trace(
            scatter(
                x_drawn,
                drawable(y_drawn, plot.log),
                name=f"{name} (raw)",
                hovertemplate=f"{name} raw: %{{y:.4g}}<extra></extra>",
                **raw_style,
                **common,
            )
        )
        smooth_key = None if key is None else (*key, "smoothed", plot.smoothing, plot.smoother)
        # thinner only once the raw trace is downsampled: a short series keeps every smoothed point
        thin = n_out // SMOOTH_POINTS_FRACTION if y.size > n_out else n_out
        at = _downsampled(smooth_key, xv, smooth_all, thin, n_out)
        fig.add_trace(
            scatter(
                xv[at],
                drawable(smooth_all[at], plot.log),
                name=name,
                line={"color": plot.color, "width": 2},
                hovertemplate=f"{name}: %{{y:.4g}}<extra></extra>",
                **common,
            )
        )
    else:
        fig.add_trace(
            scatter(
                x_drawn,
                drawable(y_drawn, plot.log),
                name=name,
                line={"color": plot.color, "width": 1.5},
                hovertemplate=f"{name}: %{{y:.4g}}<extra></extra>",
                **common,
            )
        )
    if plot.threshold is not None:
        _add_threshold(fig, x_drawn, y_drawn, plot)
    bad = picked[~np.isfinite(y_drawn)]
    points = BadPoints.of_drawn(xv, y, bad, plot, steps, filters.ranks)
    points = points.plus(BadPoints.of_other_ranks(df, xa, plot, filters, xv, y, n_out))
    cells = (filters.others or {}).get(plot.metric)
    if cells is not None and len(cells) and steps is not None:
        points = points.plus(BadPoints.of_cells(cells, plot, xv, y, steps, n_out))
    return points.add_to(fig, plot)


def _smoothed(key: Any, xv: np.ndarray, y: np.ndarray, weight: float, smoother: str = "ema") -> np.ndarray | None:
    if weight <= 0:
        return None
    if smoother != "ema":  # O(n) from cumulative sums: no incremental cache needed
        return smooth(y, weight, smoother)
    if key is None:
        return ema_debiased(y, weight)
    return SERIES_CACHE.ema(key, xv, y, weight)


def _downsampled(key: Any, xv: np.ndarray, y: np.ndarray, n_out: int, max_nonfinite: int) -> np.ndarray:
    """Rows to draw: cached blocks for a whole live series, else the whole series downsampled at once."""
    n_out = max(n_out, 4)
    if key is None:
        return downsample_indices(xv, y, n_out, max_nonfinite=max_nonfinite)
    return SERIES_CACHE.downsample(key, xv, y, n_out, max_nonfinite)


def _select(
    series: LiveSeries, xa: XAxis, metric: str, filters: RowFilter
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None] | None:
    """x, y, step of the drawn rank's rows where ``metric`` was logged and x is valid, sorted by x
    (built once per refresh by the series), and which of them lie in the drawn range."""
    sel = series.selection(metric, xa, filters.ranks.mask, filters.ranks.chosen)
    if len(sel) == 0:
        return None
    draw = filters.draw
    if draw is not None and sel.rows is not None:
        draw = draw[sel.rows]
    if draw is not None and sel.order is not None:
        draw = draw[sel.order]
    return sel.x, sel.y, sel.steps, (None if draw is None or draw.all() else draw)


def _on_curve(drawn_x: np.ndarray, drawn_y: np.ndarray, x: np.ndarray, log: bool) -> np.ndarray:
    """The drawn curve's last drawable value at or before each ``x`` (where a non-finite mark sits)."""
    good = np.flatnonzero(~np.isnan(drawable(drawn_y, log)))
    if not good.size:
        return np.full(x.size, 1.0 if log else 0.0)
    before = np.searchsorted(drawn_x[good], x, side="right") - 1
    return drawn_y[good[np.maximum(before, 0)]]


@dataclass(frozen=True)
class BadPoints:
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
        plot: MetricPlot,
        steps: np.ndarray | None,
        ranks: Ranks,
    ) -> BadPoints:
        """The drawn series' own NaN/±inf: a NaN has no height, so it sits at the last finite value before it."""
        if bad.size == 0:
            return cls(xv[:0], np.empty(0), [])
        suffix = ""
        if ranks.mask is not None and ranks.ranks is not None:
            suffix = f" (rank {int(ranks.ranks[ranks.mask][0])})" if ranks.mask.any() else ""
        where = [f"step {int(s)}" for s in steps[bad]] if steps is not None else [str(v) for v in xv[bad]]
        metric = escape_html(plot.metric)
        text = [f"{metric} = {nonfinite_label(v)} at {w}{suffix}" for v, w in zip(y[bad], where, strict=True)]
        return cls(xv[bad], _anchor_values(y, bad, plot.log), text)

    @classmethod
    def of_other_ranks(
        cls,
        df: LiveSeries,
        xa: XAxis,
        plot: MetricPlot,
        filters: RowFilter,
        drawn_x: np.ndarray,
        drawn_y: np.ndarray,
        cap: int,
    ) -> BadPoints:
        """NaN/±inf on ranks that are not drawn, placed on the drawn curve at the same x."""
        ranks = filters.ranks
        if ranks.mask is None or ranks.ranks is None:
            return cls(xa.values[:0], np.empty(0), [])
        y_all = df.values(plot.metric)
        other = ~ranks.mask & ~np.isfinite(y_all) & df.logged(plot.metric)
        other &= valid_x(xa.values)
        if filters.draw is not None:
            other &= filters.draw
        rows = np.flatnonzero(other)
        if rows.size > cap:
            rows = rows[np.unique(np.linspace(0, rows.size - 1, cap).round().astype(np.int64))]
        if rows.size == 0:
            return cls(xa.values[:0], np.empty(0), [])
        x_other = xa.values[rows]
        anchor = _on_curve(drawn_x, drawn_y, x_other, plot.log)
        steps = df.steps()[rows] if df.has("step") else x_other
        text = [
            f"{escape_html(plot.metric)} = {nonfinite_label(v)} at step {int(s)} (rank {int(r)})"
            for v, s, r in zip(y_all[rows], steps, ranks.ranks[rows], strict=True)
        ]
        return cls(x_other, anchor, text)

    @classmethod
    def of_cells(
        cls, cells: Any, plot: MetricPlot, drawn_x: np.ndarray, drawn_y: np.ndarray, drawn_steps: np.ndarray, cap: int
    ) -> BadPoints:
        """Other ranks' NaN/±inf cells (``NonFinite``: steps, ranks, values), on the drawn curve at their step."""
        steps = np.asarray(cells.steps)
        rows = np.arange(steps.size)
        if drawn_steps.size:  # only within the drawn steps (a zoom draws a range)
            rows = rows[(steps >= drawn_steps.min()) & (steps <= drawn_steps.max())]
        if rows.size > cap:
            rows = rows[np.unique(np.linspace(0, rows.size - 1, cap).round().astype(np.int64))]
        if rows.size == 0:
            return cls(drawn_x[:0], np.empty(0), [])
        order = np.argsort(drawn_steps, kind="stable")
        at = order[np.minimum(np.searchsorted(drawn_steps[order], steps[rows]), order.size - 1)]
        x_other = drawn_x[at]
        anchor = _on_curve(drawn_x, drawn_y, x_other, plot.log)
        values, ranks = np.asarray(cells.values)[rows], np.asarray(cells.ranks)[rows]
        text = [
            f"{escape_html(plot.metric)} = {nonfinite_label(v)} at step {int(s)} (rank {int(r)})"
            for v, s, r in zip(values, steps[rows], ranks, strict=True)
        ]
        return cls(x_other, anchor, text)

    def plus(self, other: BadPoints) -> BadPoints:
        if not other.text:
            return self
        if not self.text:
            return other
        x = np.concatenate([self.x, other.x])
        order = np.argsort(x, kind="stable")
        text = self.text + other.text
        return BadPoints(x[order], np.concatenate([self.y, other.y])[order], [text[i] for i in order])

    def add_to(self, fig: Figureish, plot: MetricPlot) -> Any:
        """Add the red X marker trace; return the first marked x (None when there is none)."""
        if not self.text:
            return None
        fig.add_trace(
            dict(
                type="scatter",
                x=compact_array(self.x, is_x=True),
                y=compact_array(np.asarray(self.y, dtype=np.float64), is_x=False),
                name=f"{escape_html(plot.metric)} non-finite",
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


def rows_mask(n: int, rows: Rows) -> np.ndarray | None:
    """``rows`` (slice or positions) as a boolean mask over the frame; None when every row is drawn."""
    if rows is None:
        return None
    mask = np.zeros(n, dtype=bool)
    if isinstance(rows, slice):
        mask[rows] = True
    else:
        mask[np.asarray(rows, dtype=np.int64)] = True
    return mask


def _add_threshold(fig: Figureish, xv: np.ndarray, y: np.ndarray, plot: MetricPlot) -> None:
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
        dict(
            type="scatter",
            x=compact_array(xv[beyond], is_x=True),
            y=compact_array(y[beyond], is_x=False),
            name=f"{escape_html(plot.metric)} beyond threshold",
            mode="markers",
            marker={"size": 6, "color": THRESHOLD_COLOR},
            legendgroup=plot.metric,
            showlegend=False,
            yaxis=plot.yaxis,
            hovertemplate=f"{escape_html(plot.metric)}: %{{y:.4g}} (beyond threshold)<extra></extra>",
        )
    )


# The label starts this far beside its line: the finding's own label ("nan", drawn upright on the line,
# about 12 px wide) would cover its first letters. Each further label on the chart sits a row lower.
NONFINITE_LABEL_GAP_PX = 9
NONFINITE_LABEL_ROW_PX = 16


def add_first_nonfinite_line(fig: Figureish, x_value: Any, names: list[str], xa: XAxis, row: int = 0) -> None:
    """Dotted vertical line and label at the first non-finite point (shape + annotation: add_vline
    with an annotation fails on datetime axes). ``row``: the label's place among the chart's
    non-finite labels (0 = top), so that two (loss and eval_loss) do not run into each other."""
    # plotly autoranges over annotations: text running off the data would widen the x axis, so
    # the label extends towards the middle of the data (usually left: runs die near their end).
    valid = xa.values[valid_x(xa.values)]
    mid = valid.min() + (valid.max() - valid.min()) / 2 if valid.size else x_value
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
        at = _number_text(x_value) if isinstance(x_value, (int, float, np.number)) else str(x_value)
    fig.add_annotation(
        x=x_value,
        xref="x",
        y=1,
        yref="paper",
        yanchor="top",
        xanchor=anchor,
        xshift=NONFINITE_LABEL_GAP_PX if anchor == "left" else -NONFINITE_LABEL_GAP_PX,
        yshift=-NONFINITE_LABEL_ROW_PX * row,
        text=escape_html(f"first non-finite {', '.join(names)} @ {xa.title} {at}"),
        showarrow=False,
        font={"color": NONFINITE_COLOR, "size": 11},
        bgcolor="rgba(255,255,255,0.7)",
    )


def _number_text(value: Any) -> str:
    """A step (or other x) in the label: ``1,234,567`` in full, not ``1.23457e+06``; ``12.5`` as is."""
    number = float(value)
    if number.is_integer() and abs(number) < 1e18:
        return f"{int(number):,}"
    return f"{number:,.6g}"


def _plain_x(value: Any, is_datetime: bool) -> Any:
    """A numpy scalar as a value plotly shapes accept (whole milliseconds for dates, float otherwise)."""
    if is_datetime:
        return pd.Timestamp(value).round("ms")
    return value.item() if hasattr(value, "item") else value


def _anchor_values(y: np.ndarray, bad: np.ndarray, log: bool) -> np.ndarray:
    """For each position in ``bad``, the last drawable value before it (else the first after; else 1 or 0)."""
    good = np.flatnonzero(~np.isnan(drawable(y, log)))
    if good.size == 0:
        return np.full(bad.size, 1.0 if log else 0.0)
    before = np.searchsorted(good, bad) - 1  # bad positions are never in good
    source = good[np.where(before >= 0, before, 0)]
    return y[source]


def _bounds(threshold: Threshold | None) -> tuple[float | None, float | None]:
    if threshold is None:
        return None, None
    if isinstance(threshold, tuple):
        lower, upper = threshold
        return lower, upper
    return None, float(threshold)
