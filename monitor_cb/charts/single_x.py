"""A chart whose points all sit at one x (a run's single evaluation) gets an axis around that x.

Plotly gives such an axis a width of about 2 and fractional ticks: one eval at step 215,337 read
"215,336 · 215,336.5 · 215,337 · 215,337.5 · 215,338". Here the axis is pinned around the point, with one
tick at it, written as the step is. A range already set (a zoom, a shared range) is left alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_PAD = 0.05  # of the value, at least 1 on each side
_SAME = 1e-9


def pin_single_x_spec(data: list[dict[str, Any]], layout: dict[str, Any]) -> None:
    """Pin ``layout["xaxis"]`` (in place) when every drawn x of ``data`` is one number."""
    axis = layout.get("xaxis") or {}
    if axis.get("range") is not None or axis.get("autorange") is False or axis.get("type") in ("log", "date"):
        return
    xs = [_numbers(t.get("x")) for t in data if t.get("visible") is not False and t.get("x") is not None]
    if not xs or any(x is None for x in xs):  # a date or text axis
        return
    drawn = np.concatenate([x for x in xs if x is not None])
    drawn = drawn[np.isfinite(drawn)]
    if not drawn.size or drawn.max() - drawn.min() > _SAME * max(1.0, abs(float(drawn.max()))):
        return
    x = float(drawn.max())
    pad = max(1.0, _PAD * abs(x))
    layout["xaxis"] = {
        **axis,
        "range": [x - pad, x + pad],
        "autorange": False,
        "tickmode": "array",
        "tickvals": [x],
        "ticktext": [_text(x)],
    }


def _numbers(values: Any) -> np.ndarray | None:
    """The values as floats, None when they are not numbers (dates, text)."""
    array = np.asarray(values)
    if array.dtype.kind in "iuf":
        return array.astype(np.float64).ravel()
    if array.dtype.kind == "O":
        try:
            return np.asarray([float(v) for v in array.ravel() if v is not None], dtype=np.float64)
        except (TypeError, ValueError):
            return None
    return None


def _text(x: float) -> str:
    return f"{int(x):,}" if x.is_integer() and abs(x) < 1e18 else f"{x:,.6g}"
