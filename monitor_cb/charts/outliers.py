"""Y scaling that fits the bulk of the drawn points: a first loss of 1e12 no longer flattens the rest to 0.

TensorBoard's "ignore outliers in chart scaling" takes the 5th to 95th percentile; that would cut off the
loss spikes a user must see. Here a point is an outlier only when it lies far beyond the bulk: more
than :data:`FENCE` times the bulk's spread (the 5th to 95th percentile; at least twice the median's
size, so a loss of 2 keeps its spikes to 14; on a log axis in decades, at least one) past it, and only
when such points would squeeze the others into under a third of the axis. The axis then spans every
point inside the fence; each point outside is drawn as a triangle at the axis edge, in its trace's
colour, whose hover says the true value.
A chart with no such point keeps plotly's autorange: nothing changes for a well-behaved curve.

:func:`fit_bulk_spec` works on a figure's plain dicts, as :mod:`monitor_cb.charts.axes` does, so
:class:`~monitor_cb.charts.traces.FigureSpec` applies it to every builder that asks for it
(``ChartOptions(fit_bulk=True)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from monitor_cb.charts.axes import constant_axis

BULK_QUANTILES = (0.05, 0.95)
FENCE = 3.0  # an outlier lies more than this many bulk spreads beyond the bulk
# Linear axis: the spread is at least twice |median|, so a flat loss of 2 keeps its spikes to 14 while a
# first loss of 155 or 1e12 is an outlier. Log axis: at least a decade (three decades beyond the bulk).
MIN_REL_SPREAD = 2.0
MIN_LOG_SPREAD = 1.0
# ... and only when they squeeze the rest into less than this fraction of the axis
FLATTENS = 1 / 3
PAD = 0.05  # of the span, each side (as plotly's autorange leaves room)
MIN_POINTS = 8  # fewer drawn points: no statistics, autorange
EDGE_SYMBOLS = {"hi": "triangle-up", "lo": "triangle-down"}


@dataclass(frozen=True)
class BulkRange:
    """The y range that fits the bulk: ``lo``/``hi`` in data units, and whether anything lies outside."""

    lo: float
    hi: float
    log: bool

    def axis(self) -> dict[str, Any]:
        """The layout of an axis showing ``[lo, hi]`` with a margin (log axes in log10 units)."""
        if self.lo == self.hi:
            return {k: v for k, v in constant_axis(self.lo, self.log).items() if k in ("range", "autorange")}
        a, b = (math.log10(self.lo), math.log10(self.hi)) if self.log else (self.lo, self.hi)
        pad = (b - a) * PAD
        return {"range": [a - pad, b + pad], "autorange": False}

    def edge(self, side: str) -> float:
        """The y at which an outlier of ``side`` ("lo"/"hi") is marked: just inside the drawn range."""
        a, b = (math.log10(self.lo), math.log10(self.hi)) if self.log else (self.lo, self.hi)
        pad = (b - a) * PAD if b > a else (0.5 if self.log else abs(a) * 0.5 or 1.0)
        at = b + pad * 0.6 if side == "hi" else a - pad * 0.6
        return 10.0**at if self.log else at


def bulk_range(values: np.ndarray, log: bool = False) -> BulkRange | None:
    """The range of the points within the fence, or None when every point is inside it (keep autorange).

    ``values``: the drawn y values of one axis (non-finite ones, and those <= 0 on a log axis, are ignored).
    """
    y = np.asarray(values, dtype=np.float64).ravel()
    y = y[np.isfinite(y) & (y > 0)] if log else y[np.isfinite(y)]
    if y.size < MIN_POINTS:
        return None
    scaled = np.log10(y) if log else y
    q_lo, median, q_hi = np.quantile(scaled, (BULK_QUANTILES[0], 0.5, BULK_QUANTILES[1]))
    floor = MIN_LOG_SPREAD if log else MIN_REL_SPREAD * abs(median)
    spread = max(q_hi - q_lo, floor)
    if spread <= 0:  # all zeros in the bulk: any non-zero point is far
        spread = max(float(np.max(np.abs(scaled))) * 1e-3, 1e-300)
        if not np.any(np.abs(scaled) > 0):
            return None
    lo_fence, hi_fence = q_lo - FENCE * spread, q_hi + FENCE * spread
    inside = (scaled >= lo_fence) & (scaled <= hi_fence)
    if inside.all() or not inside.any():
        return None
    kept_span = float(scaled[inside].max() - scaled[inside].min())
    if kept_span > FLATTENS * float(scaled.max() - scaled.min()):
        return None  # the points outside do not squeeze the rest (a loss falling from 2.3 to 0.1 keeps its start)
    kept = y[inside]
    return BulkRange(float(kept.min()), float(kept.max()), log)


def fit_bulk_spec(data: list[dict[str, Any]], layout: dict[str, Any]) -> None:
    """Per y axis of a figure's plain dicts: the bulk's range and edge markers for the points beyond, in place.

    An axis whose range is already set (a zoom, a pinned constant) is left alone. Only line traces count
    (markers such as non-finite X's sit on the curve already), and per legend group only the one with the
    most points (the raw line beside a smoothed one): an EMA after a first loss of 1e12 passes through every
    magnitude on its way down and would make them all look like the bulk. It gives the edge markers too.
    """
    for ref, traces in _line_traces(data).items():
        name = "yaxis" + ref[1:]
        axis = layout.get(name) or {}
        if axis.get("range") is not None or axis.get("autorange") is False:
            continue
        log = axis.get("type") == "log"
        raw = _densest_per_group(traces)
        fit = bulk_range(np.concatenate([_floats(t["y"]) for t in raw]), log)
        if fit is None:
            continue
        layout[name] = {**axis, **fit.axis()}
        for trace in raw:
            data.extend(_edge_markers(trace, fit, ref))


def _line_traces(data: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for trace in data:
        if trace.get("visible") is False or trace.get("y") is None:
            continue
        if "lines" not in str(trace.get("mode", "lines")) or trace.get("type") not in ("scatter", "scattergl"):
            continue
        out.setdefault(trace.get("yaxis") or "y", []).append(trace)
    return out


def _densest_per_group(traces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    best: dict[Any, dict[str, Any]] = {}
    for i, trace in enumerate(traces):
        group = trace.get("legendgroup") or ("trace", i)
        if group not in best or _floats(trace["y"]).size > _floats(best[group]["y"]).size:
            best[group] = trace
    return list(best.values())


def _edge_markers(trace: dict[str, Any], fit: BulkRange, ref: str) -> list[dict[str, Any]]:
    """Triangles at the axis edge for this trace's points beyond the range (hover: the true value)."""
    y = _floats(trace["y"])
    x = np.asarray(trace.get("x") if trace.get("x") is not None else np.arange(y.size))
    if x.size != y.size:
        return []
    with np.errstate(invalid="ignore"):
        low = (y < fit.lo) & ((y > 0) if fit.log else True)
        sides = {"hi": np.isfinite(y) & (y > fit.hi), "lo": np.isfinite(y) & low}
    color = (trace.get("line") or {}).get("color")
    name = str(trace.get("name", ""))
    label = name.removesuffix(" (raw)")
    out = []
    for side, beyond in sides.items():
        if not beyond.any():
            continue
        marker: dict[str, Any] = {"symbol": EDGE_SYMBOLS[side], "size": 9, "line": {"width": 1, "color": "#444"}}
        if color:
            marker["color"] = color
        out.append(
            {
                "type": "scatter",
                "x": x[beyond],
                "y": np.full(int(beyond.sum()), fit.edge(side), dtype=np.float64),
                "name": f"{label} beyond the axis",
                "mode": "markers",
                "marker": marker,
                "legendgroup": trace.get("legendgroup"),
                "showlegend": False,
                "yaxis": ref,
                "customdata": y[beyond],
                "hovertemplate": f"{label}: %{{customdata:.4g}} (off the scale: Show outliers)<extra></extra>",
                **({"visible": trace["visible"]} if "visible" in trace else {}),
            }
        )
    return out


def _floats(values: Any) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return np.empty(0)


__all__ = ["BULK_QUANTILES", "FENCE", "BulkRange", "bulk_range", "fit_bulk_spec"]
