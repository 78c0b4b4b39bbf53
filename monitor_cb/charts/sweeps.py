"""Sweep views over many runs: parallel coordinates (config keys -> metric) and one key against a metric.

Both take a table with one row per run (the runs table's ``frame``: config columns, ``<metric>.<stat>``
columns, ``id`` and ``name``) and the column names to draw, as W&B's sweep charts and TensorBoard's
HParams do. Axis rules, shared by both:

* a column whose values are all numbers is numeric; one with text, booleans or lists is
  categorical, one tick per distinct value (sorted as text);
* a numeric column whose values are all positive and span at least a decade (learning rates,
  weight decay) is drawn on a log scale;
* with at most :data:`MAX_TICKS` distinct values, the ticks are those values;
* a run without the value (a config key it lacks) sits on a ``—`` tick below the axis, a NaN/±inf
  metric on a ``NaN`` tick (and in red): nothing is silently dropped.

Run names and config values are user text: they are HTML-escaped before plotly sees them.
"""

from __future__ import annotations

import json
import math
import numbers
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from monitor_cb.charts.style import NONFINITE_COLOR, compact_template, escape_html

MAX_RUNS = 200
MAX_TICKS = 10
MIN_TICK_GAP = 0.04  # ticks at the values only when no two are closer than this share of the axis
LOG_RATIO = 10.0  # positive values spanning at least a decade get a log axis
MISSING_TEXT = "—"
NONFINITE_TEXT = "NaN"
POINT_COLOR = "#1f77b4"
HOVER = "%{customdata[0]}<br>%{customdata[3]}: %{customdata[1]}<br>%{customdata[4]}: %{customdata[2]}<extra></extra>"
FINITE_TOP = 0.85  # line colour of the worst finite run (the best is 0); non-finite and missing are 1.0 (red)
_VIRIDIS = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")


@dataclass(frozen=True)
class Axis:
    """One column mapped to positions: ``positions[i]`` is run i's place on the axis."""

    label: str
    positions: np.ndarray  # float; specials (missing, non-finite) below the data range
    tickvals: list[float]
    ticktext: list[str]
    range: tuple[float, float]
    numeric: bool
    log: bool
    finite: np.ndarray  # bool per run: a real value (not missing, not non-finite)


def column_axis(label: str, values: Sequence[Any], continuous: bool = False) -> Axis:
    """Positions, ticks and range of one column (see the module docstring for the rules).

    ``continuous`` (a metric) always gets evenly spaced round ticks, never one per value.
    """
    present = [v for v in values if not _missing(v)]
    if present and all(_is_number(v) for v in present):
        return _numeric_axis(label, values, continuous)
    return _categorical_axis(label, values)


def _numeric_axis(label: str, values: Sequence[Any], continuous: bool) -> Axis:
    raw = np.array([math.nan if _missing(v) else float(v) for v in values], dtype=np.float64)
    missing = np.array([_missing(v) for v in values], dtype=bool)
    finite = np.isfinite(raw)
    nonfinite = ~finite & ~missing
    data = raw[finite]
    log = bool(data.size and data.min() > 0 and data.max() / data.min() >= LOG_RATIO)
    scaled = np.log10(np.where(finite, raw, 1.0)) if log else np.where(finite, raw, 0.0)
    lo, hi = (float(scaled[finite].min()), float(scaled[finite].max())) if data.size else (0.0, 1.0)
    span = hi - lo or max(abs(hi), 1.0)
    distinct = np.unique(data)
    at_values = np.log10(distinct) if log else distinct
    spaced = distinct.size < 2 or float(np.diff(at_values).min()) >= MIN_TICK_GAP * span
    if not continuous and 0 < distinct.size <= MAX_TICKS and spaced:
        tick_values = list(at_values)
        tick_text = [_number_text(v) for v in distinct]
    else:
        tick_values = nice_ticks(lo, hi, log)
        tick_text = [_number_text(10**v if log else v) for v in tick_values]
    positions = scaled.astype(np.float64)
    bottom = lo
    for mask, text in ((nonfinite, NONFINITE_TEXT), (missing, MISSING_TEXT)):
        if mask.any():
            bottom -= 0.15 * span
            positions[mask] = bottom
            tick_values.append(bottom)
            tick_text.append(text)
    pad = 0.03 * span
    return Axis(
        label, positions, [float(v) for v in tick_values], tick_text, (bottom - pad, hi + pad), True, log, finite
    )


def nice_ticks(lo: float, hi: float, log: bool = False, target: int = 5) -> list[float]:
    """About ``target`` round tick positions within ``[lo, hi]`` (1, 2, 5 x 10^k; in log10 units when ``log``)."""
    if not hi > lo:
        return [lo]
    if log and hi - lo >= 2:
        step = max(1, math.ceil((hi - lo) / target))
        return [float(d) for d in range(math.ceil(lo), math.floor(hi) + 1, step)]
    if log:  # less than two decades: 1, 2, 5 times the decades inside the range
        marks = [math.log10(m * 10.0**d) for d in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)]
        inside = [m for m in marks if lo - 1e-9 <= m <= hi + 1e-9]
        return inside if len(inside) >= 2 else [lo, hi]
    raw = (hi - lo) / target
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + k * step, 12) for k in range(int((hi - first) / step + 1e-9) + 1)]


def _categorical_axis(label: str, values: Sequence[Any]) -> Axis:
    texts = [MISSING_TEXT if _missing(v) else _value_text(v) for v in values]
    categories = sorted({t for t in texts if t != MISSING_TEXT}, key=lambda t: (t.lower(), t))
    if MISSING_TEXT in texts:
        categories.append(MISSING_TEXT)
    index = {c: float(i) for i, c in enumerate(categories)}
    # the first category on top, as a list reads; a missing value at the bottom
    top = float(len(categories) - 1)
    positions = np.array([top - index[t] for t in texts], dtype=np.float64)
    tickvals = [top - index[c] for c in categories]
    finite = np.array([t != MISSING_TEXT for t in texts], dtype=bool)
    return Axis(label, positions, tickvals, categories, (-0.5, top + 0.5), False, False, finite)


# ----------------------------------------------------------------------------- parallel coordinates
def parallel_coordinates_figure(
    table: pd.DataFrame,
    dims: Sequence[str],
    metric: str,
    *,
    lower_is_better: bool = True,
    max_runs: int = MAX_RUNS,
    title: str | None = None,
    height: int | None = 420,
) -> go.Figure:
    """One line per run through an axis per config key in ``dims`` and, last, the ``metric`` axis.

    Lines are coloured by the metric (viridis, the best value darkest); a run whose metric is
    NaN/±inf or missing is red on the metric's ``NaN`` / ``—`` tick.

    Raises:
        KeyError: a column is not in ``table``.
    """
    _check_columns(table, [*dims, metric])
    shown, note = _limit(table, max_runs)
    axes = [column_axis(d, list(shown[d])) for d in dims]
    metric_axis = column_axis(metric, list(shown[metric]), continuous=True)
    dimensions = [_dimension(a) for a in (*axes, metric_axis)]
    color, scale = _line_colors(metric_axis, lower_is_better)
    heading = title if title is not None else f"{metric} by {', '.join(dims)}"
    return go.Figure(
        {
            "data": [
                {
                    "type": "parcoords",
                    "dimensions": dimensions,
                    "line": {"color": color.tolist(), "colorscale": scale, "cmin": 0.0, "cmax": 1.0},
                    "labelangle": -20 if len(dimensions) > 6 else 0,
                }
            ],
            "layout": {
                "template": compact_template(),
                "title": {"text": escape_html(heading + note), "x": 0, "xanchor": "left", "font": {"size": 14}},
                "height": height,
                "margin": {"l": 60, "r": 60, "t": 80, "b": 30},
            },
        },
        skip_invalid=False,
    )


def _dimension(axis: Axis) -> dict[str, Any]:
    return {
        "label": escape_html(axis.label) + (" (log)" if axis.log else ""),
        "values": axis.positions.tolist(),
        "tickvals": axis.tickvals,
        "ticktext": [escape_html(t) for t in axis.ticktext],
        "range": list(axis.range),
    }


def _line_colors(metric: Axis, lower_is_better: bool) -> tuple[np.ndarray, list[list[Any]]]:
    """Per run a number in [0, 1]: finite metrics over [0, FINITE_TOP] (best 0: darkest, the most visible
    on white), others 1.0 (red).

    Parcoords samples its colour scale into a small texture, so red starts well above FINITE_TOP.
    """
    color = np.ones(metric.positions.size)
    good = metric.finite
    if good.any():
        values = metric.positions[good]
        lo, hi = values.min(), values.max()
        t = (values - lo) / (hi - lo) if hi > lo else np.full(values.size, 0.5)
        if metric.numeric and not lower_is_better:
            t = 1.0 - t
        color[good] = FINITE_TOP * t
    stops = [[FINITE_TOP * i / (len(_VIRIDIS) - 1), c] for i, c in enumerate(_VIRIDIS)]
    return color, [*stops, [0.9, _VIRIDIS[-1]], [0.95, NONFINITE_COLOR], [1.0, NONFINITE_COLOR]]


# ----------------------------------------------------------------------------- scatter
LEGEND_MAX_RUNS = 30  # up to this many runs the scatter has a legend of runs (beyond, the hover names them)


def sweep_scatter_figure(
    table: pd.DataFrame,
    x: str,
    y: str,
    *,
    colors: Mapping[str, str] | None = None,
    log_y: bool | None = None,
    max_runs: int = MAX_RUNS,
    title: str | None = None,
    height: int | None = 380,
) -> go.Figure:
    """One point per run: config key ``x`` against metric ``y``, the run's name in the hover and, up to
    :data:`LEGEND_MAX_RUNS` runs, in a legend beside the plot (in the run's colour).

    Args:
        colors: run id -> colour (the compare colours), else one colour for all.
        log_y: log y axis; None decides by the axis rules (positive values spanning a decade).

    Runs without ``x`` are drawn at ``—``; runs whose ``y`` is NaN/±inf as red X markers on a ``NaN``
    line above the points; runs without ``y`` are left out and counted in the title.

    Raises:
        KeyError: a column is not in ``table``.
    """
    _check_columns(table, [x, y, "id"])
    shown, note = _limit(table, max_runs)
    y_values = list(shown[y])
    has_y = np.array([not _missing(v) for v in y_values], dtype=bool)
    if not has_y.all():
        note += f" · {int((~has_y).sum())} without {y}"
    shown = shown[has_y].reset_index(drop=True)
    x_axis = column_axis(x, list(shown[x]))
    y_raw = np.array([float(v) if _is_number(v) else math.nan for v in shown[y]], dtype=np.float64)
    finite = np.isfinite(y_raw)
    data = y_raw[finite]
    if log_y is None:
        log_y = bool(data.size and data.min() > 0 and data.max() / data.min() >= LOG_RATIO)
    names = [escape_html(str(n)) for n in shown.get("name", shown["id"])]
    x_text = [escape_html(_value_text(v)) if not _missing(v) else MISSING_TEXT for v in shown[x]]
    point_colors = [(colors or {}).get(str(i), POINT_COLOR) for i in shown["id"]]
    # user text goes through customdata (escaped), never into the template, where %{...} would be read
    labels = (escape_html(x), escape_html(y))
    hover = [(n, xt, _number_text(v), *labels) for n, xt, v in zip(names, x_text, y_raw, strict=True)]
    legend = len(shown) <= LEGEND_MAX_RUNS
    if legend:  # one trace per run: the legend names each run in its colour (a click hides it)
        traces = [
            {
                "type": "scatter",
                "mode": "markers",
                "name": name,
                "legendgroup": escape_html(str(run_id)),
                "x": [float(x_axis.positions[i])] if finite[i] else [],
                "y": [float(y_raw[i])] if finite[i] else [],
                "marker": {"size": 9, "color": point_colors[i], "line": {"width": 0.5, "color": "#ffffff"}},
                "customdata": [hover[i]] if finite[i] else [],
                "hovertemplate": HOVER,
            }
            for i, (name, run_id) in enumerate(zip(names, shown["id"], strict=True))
        ]
    else:
        traces = [
            {
                "type": "scatter",
                "mode": "markers",
                "name": escape_html(y),
                "x": x_axis.positions[finite].tolist(),
                "y": y_raw[finite].tolist(),
                "marker": {
                    "size": 9,
                    "color": _pick(point_colors, finite),
                    "line": {"width": 0.5, "color": "#ffffff"},
                },
                "customdata": _pick(hover, finite),
                "hovertemplate": HOVER,
            }
        ]
    if (~finite).any():
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{escape_html(y)} not finite",
                "showlegend": False,
                "x": x_axis.positions[~finite].tolist(),
                "y": [_nan_line(data, log_y)] * int((~finite).sum()),
                "marker": {"symbol": "x", "size": 10, "color": NONFINITE_COLOR},
                "customdata": _pick(hover, ~finite),
                "hovertemplate": HOVER,
            }
        )
    heading = title if title is not None else f"{y} by {x}"
    return go.Figure(
        {
            "data": traces,
            "layout": {
                "template": compact_template(),
                "title": {"text": escape_html(heading + note), "x": 0, "xanchor": "left", "font": {"size": 14}},
                "height": height,
                "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
                "showlegend": legend,
                # beside the plot, scrolling when long: it never covers the points
                "legend": {"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top", "title": {"text": "run"}},
                "hovermode": "closest",
                "xaxis": {
                    "title": {"text": escape_html(x) + (" (log)" if x_axis.log else "")},
                    "tickvals": x_axis.tickvals,
                    "ticktext": [escape_html(t) for t in x_axis.ticktext],
                    "range": list(x_axis.range),
                    "zeroline": False,
                },
                "yaxis": {"title": {"text": escape_html(y)}, "type": "log" if log_y else "linear"},
            },
        },
        skip_invalid=False,
    )


def _nan_line(finite: np.ndarray, log_y: bool) -> float:
    """Where non-finite values are drawn: a little above the highest finite value."""
    if finite.size == 0:
        return 1.0
    hi, lo = float(finite.max()), float(finite.min())
    if log_y:
        return hi * 2.0
    return hi + 0.08 * ((hi - lo) or max(abs(hi), 1.0))


# ----------------------------------------------------------------------------- helpers
def _check_columns(table: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise KeyError(f"no column(s) {missing} in the table; columns are {list(table.columns)}")


def _limit(table: pd.DataFrame, max_runs: int) -> tuple[pd.DataFrame, str]:
    if len(table) <= max_runs:
        return table.reset_index(drop=True), ""
    return table.iloc[:max_runs].reset_index(drop=True), f" (first {max_runs} of {len(table)} runs)"


def _pick(items: Sequence[Any], mask: np.ndarray) -> list[Any]:
    return [item for item, keep in zip(items, mask, strict=True) if keep]


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA


def _is_number(value: Any) -> bool:
    """A real number a double holds; a JSON integer of 400 digits (float() refuses it) is shown as text."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        return False
    return not isinstance(value, int) or -sys.float_info.max <= value <= sys.float_info.max


def _number_text(value: float) -> str:
    if math.isnan(value):
        return NONFINITE_TEXT
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


def _value_text(value: Any) -> str:
    """A value as a tick or hover shows it: numbers to 4 digits, text as is, the rest as JSON."""
    if _is_number(value):
        return _number_text(float(value))
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)
