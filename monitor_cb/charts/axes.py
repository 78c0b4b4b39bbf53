"""A y axis whose drawn values are all one number shows that number.

Plotly's autorange puts a constant series in the middle of a default range: a learning rate held
at 0.01 sits on the "0" tick of a -1..1 axis and reads as zero. :func:`pin_constant_axes` gives
such an axis a range around the value and a single tick labelled with it. Every figure builder in
``monitor_cb.charts`` (and the compare overlay) calls it once its traces are in.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# Half the span around a constant value v: |v| / 2 (so the range is [v/2, 3v/2] for v > 0), or 1 for 0;
# on a log axis half a decade each side.
_REL_HALF_SPAN = 0.5
_LOG_HALF_SPAN = 0.5
_SAME = 1e-6  # relative difference within float32 rounding: still one value


def tick_text(value: float) -> str:
    """``0.01``, ``3.25e-3``, ``4.11e-5``, ``1.5e6``: four significant digits, short, as the value tiles write them."""
    rounded = float(f"{value:.4g}")  # a float32 0.0099999998 is 0.01
    if rounded != 0 and (abs(rounded) < 1e-2 or abs(rounded) >= 1e6):
        mantissa, exponent = f"{rounded:.3e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    if abs(value) >= 1e3:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def constant_axis(value: float, log: bool) -> dict[str, Any]:
    """Layout for an axis whose every drawn value is ``value``: a range around it, one tick at it."""
    if log:
        center = math.log10(value)
        span = [center - _LOG_HALF_SPAN, center + _LOG_HALF_SPAN]
    else:
        half = abs(value) * _REL_HALF_SPAN or 1.0
        span = [value - half, value + half]
    return {
        "range": span,
        "autorange": False,
        "tickmode": "array",
        "tickvals": [value],
        "ticktext": [tick_text(value)],
        "automargin": True,  # room for the label beside the axis title
    }


def pin_constant_axes(fig: Any) -> Any:
    """Give each y axis whose drawn values (and threshold lines) are one number a range and tick at it.

    An axis whose range is already set (a zoom, a chosen range) is left alone, as is one with no
    finite value (an empty chart). Returns ``fig``.
    """
    traces = [(t.visible, getattr(t, "yaxis", None), _drawn_y(t)) for t in fig.data]
    shapes = [(s.yref, s.y0, s.y1) for s in fig.layout.shapes or ()]
    for name, update in _pins(traces, shapes, lambda name: _axis_state(fig.layout[name])).items():
        fig.layout[name].update(update)
    return fig


def pin_constant_axes_spec(data: list[dict[str, Any]], layout: dict[str, Any]) -> None:
    """:func:`pin_constant_axes` on a figure's plain dicts (line traces with numpy arrays), in place."""
    empty = np.empty(0)
    traces = [(t.get("visible"), t.get("yaxis"), _floats(t["y"]) if t.get("y") is not None else empty) for t in data]
    shapes = [(s.get("yref"), s.get("y0"), s.get("y1")) for s in layout.get("shapes") or ()]
    for name, update in _pins(traces, shapes, lambda name: _axis_state(layout.get(name) or {})).items():
        layout[name] = {**(layout.get(name) or {}), **update}


def _axis_state(axis: Any) -> tuple[Any, Any, Any]:
    """(range, autorange, type) of a layout axis, an object or a dict."""
    if isinstance(axis, dict):
        return axis.get("range"), axis.get("autorange"), axis.get("type")
    return axis.range, axis.autorange, axis.type


def _pins(
    traces: list[tuple[Any, Any, np.ndarray]], shapes: list[tuple[Any, Any, Any]], axis_of: Any
) -> dict[str, dict[str, Any]]:
    """Axis name -> the layout that pins it, from (visible, yaxis, drawn y) per trace and (yref, y0, y1) per shape."""
    values: dict[str, list[np.ndarray]] = {}
    for visible, yaxis, drawn in traces:
        if visible is False:
            continue
        if drawn.size:
            values.setdefault(yaxis or "y", []).append(drawn)
    for yref, y0, y1 in shapes:
        ref = yref or "y"
        if ref in values and y0 is not None and y0 == y1:  # a horizontal line: a threshold
            values[ref].append(_floats([y0]))
    out = {}
    for ref, arrays in values.items():
        name = "yaxis" + ref[1:]
        span, autorange, kind = axis_of(name)
        if span is not None or autorange is False:
            continue
        log = kind == "log"
        drawn = np.concatenate(arrays)
        drawn = drawn[np.isfinite(drawn) & ((drawn > 0) if log else True)]
        # float32 traces (compact arrays) next to float64 ones: 0.0099999998 and 0.01 are one value
        if drawn.size and drawn.max() - drawn.min() <= _SAME * max(abs(drawn.min()), abs(drawn.max())):
            out[name] = constant_axis(float(drawn.max()), log)
    return out


def _drawn_y(trace: Any) -> np.ndarray:
    """The y values a trace draws: its ``y``, or a precomputed box's statistics."""
    y = getattr(trace, "y", None)
    if y is not None:
        return _floats(y)
    if trace.type == "box":
        stats = [getattr(trace, k, None) for k in ("lowerfence", "q1", "median", "q3", "upperfence")]
        return np.concatenate([_floats(v) for v in stats if v is not None] or [np.empty(0)])
    return np.empty(0)


def _floats(values: Any) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return np.empty(0)
