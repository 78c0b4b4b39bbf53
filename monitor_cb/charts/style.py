"""Look of the training-curve figures: colours that mean the same on every panel, one compact layout."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from monitor_cb.analysis.series import XAxis
from monitor_cb.charts.axes import pin_constant_axes
from monitor_cb.charts.options import ChartOptions

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


@dataclass(frozen=True)
class Labels:
    """A figure's texts (plain text; escaped when the layout is built)."""

    y: str
    y2: str | None = None  # None: no right axis
    title: str | None = None


def apply_layout(fig: go.Figure, xa: XAxis, options: ChartOptions, labels: Labels, *, log_y2: bool = False) -> None:
    """Axis titles and types, legend on top, small margins, ``uirevision``, the re-applied zoom, and
    a constant series' value on its axis (:func:`~monitor_cb.charts.axes.pin_constant_axes`)."""
    layout = layout_dict(xa, options, labels, log_y2=log_y2)
    layout.pop("template")  # a figure built elsewhere keeps its own template
    fig.update_layout(layout)
    pin_constant_axes(fig)


def layout_dict(xa: XAxis, options: ChartOptions, labels: Labels, *, log_y2: bool = False) -> dict[str, Any]:
    """The layout :func:`apply_layout` sets, as a plain dict (titles are plain text, escaped here)."""
    # automargin: the margins grow to hold the tick labels, so a title never sits on them (a y title on
    # "1e12" ticks, rotated step ticks on the "step" title of a narrow side-by-side panel)
    server_range = False
    xaxis: dict[str, Any] = {
        "title": {"text": escape_html(xa.title)},
        "type": "date" if xa.is_datetime else "linear",
        "automargin": True,
    }
    if not xa.is_datetime:
        xaxis["tickformat"] = ","  # step 999,955, not plotly's "0.999955M"
        if options.log_x:
            xaxis["type"] = "log"
    if options.x_range is not None:
        shown = list(options.x_range)
        if xaxis.get("type") == "log":  # a log axis' range is in log10 units
            lo, hi = (float(v) for v in shown)
            shown = [math.log10(lo), math.log10(hi)] if lo > 0 and hi > 0 else None
        if shown is not None:
            xaxis.update(range=shown, autorange=False)
            # the page's chart listener reports a range it finds on a page's first charts as a zoom made
            # before it listened; this one came from here (a zoom kept, a link's from/to), so it is not
            server_range = True
    title, y2_title = labels.title, labels.y2
    layout: dict[str, Any] = {
        "template": compact_template(),
        "title": _title(title),
        "height": options.height,
        "margin": {"l": 55, "r": 55 if y2_title else 15, "t": 60 if title else 30, "b": 40},
        # with a title the legend moves right of it, on the same line
        "legend": {
            "orientation": "h",
            "yanchor": "bottom",
            "y": 1.02,
            "xanchor": "right" if title else "left",
            "x": 1 if title else 0,
        },
        "hovermode": "x",
        "uirevision": options.uirevision,
        "xaxis": xaxis,
        "yaxis": {
            "title": {"text": escape_html(labels.y)},
            "type": "log" if options.log_y else "linear",
            "exponentformat": "power",
            "automargin": True,
        },
    }
    if y2_title is not None:
        layout["yaxis2"] = {
            "title": {"text": escape_html(y2_title)},
            "type": "log" if log_y2 else "linear",
            "overlaying": "y",
            "side": "right",
            "automargin": True,
            # plotly.js 3 syncs an overlaying axis' ticks to the left grid, giving values like 0.000886
            "tickmode": "auto",
            "showgrid": False,
            # with its traces hidden in the legend, the axis would draw a zero line across the chart
            "zeroline": False,
            "exponentformat": "power",
        }
    if server_range:
        layout["meta"] = {"server_x_range": True}
    return {k: v for k, v in layout.items() if v is not None}


# What a line chart takes from a template; colour scales, geo, ternary, ... are left out.
TEMPLATE_KEYS = frozenset(
    {"font", "paper_bgcolor", "plot_bgcolor", "xaxis", "yaxis", "colorway", "hoverlabel", "hovermode", "title"}
)
_TEMPLATES: dict[str, dict[str, Any]] = {}


def compact_template() -> dict[str, Any]:
    """The default plotly template, only what gives a line chart its look (7 kB per figure less)."""
    name = pio.templates.default
    key = name if isinstance(name, str) else repr(name)
    cached = _TEMPLATES.get(key)
    if cached is None:
        look = pio.templates[name].layout.to_plotly_json() if isinstance(name, str) and name else {}
        cached = _TEMPLATES[key] = {"layout": {k: v for k, v in look.items() if k in TEMPLATE_KEYS}}
    return cached


def escape_html(text: str) -> str:
    """Text from run data for plotly, which renders a subset of HTML in names, hovers and titles."""
    return html.escape(str(text), quote=False)


_INT32_MAX = 2**31 - 1


def compact_array(values: np.ndarray, is_x: bool) -> np.ndarray:
    """An array as plotly should send it: 32-bit where that loses nothing drawn.

    Plotly encodes numpy arrays as base64 typed arrays; float32 keeps 7 significant digits (the
    hover shows 4), integer x values that fit stay exact as int32, wall-clock x stays datetime,
    and a float x keeps 64 bits once float32 would no longer resolve 0.01 of a unit.
    """
    values = np.asarray(values)
    if values.dtype.kind not in "iuf" or values.dtype.itemsize <= 4 or values.size == 0:
        return values
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if finite.size == 0:
        return values.astype(np.float32) if not is_x else values
    lo, hi = finite.min(), finite.max()
    integral = values.dtype.kind in "iu" or bool(np.all(finite == np.round(finite)))
    if integral and finite.size == values.size and lo >= -_INT32_MAX and hi <= _INT32_MAX:
        return values.astype(np.int32)  # steps, samples: exact
    if not is_x:
        return values.astype(np.float32)
    return values.astype(np.float32) if max(abs(lo), abs(hi)) < 1e5 else values


def _title(title: str | None) -> dict[str, Any] | None:
    if not title:
        return None
    return {
        "text": escape_html(title),
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


def marks_to_log_x(spec: dict[str, Any]) -> dict[str, Any]:
    """A figure dict whose x axis is log, with its annotations' data x (the labels of the lines at a
    step and of finding bands) in log10 units, as plotly.js reads an annotation's position on a log
    axis: a label at step 218 would otherwise stand at 10**218 and squeeze the curves to the left edge.
    Shapes keep data units (plotly.js 3 places them by value; measured in Chromium). Labels at x <= 0
    are dropped."""
    layout = dict(spec.get("layout") or {})  # a copy: the figure's own dict may be shared (cached)
    spec = {**spec, "layout": layout}
    kept = []
    for item in layout.get("annotations") or ():
        item = dict(item)
        if str(item.get("xref", "x")) == "x":
            x = item.get("x")
            if not (isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0):
                continue
            item["x"] = math.log10(float(x))
        kept.append(item)
    if "annotations" in layout:
        layout["annotations"] = kept
    return spec
