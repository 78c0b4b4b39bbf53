"""Zoom and legend state of the live charts: what an event from the browser means, in steps."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


@dataclass
class ZoomState:
    """The user's x zoom, kept as a step range so it survives refreshes and x-axis changes.

    ``lo``/``hi`` are steps (None = open end). ``hidden`` maps chart key -> legend entries the user
    switched off, re-applied to each new figure because a redraw with new data forgets them.
    ``exact`` is ``(x kind, x0, x1)``: the range a drag set, drawn as it was (not snapped to the
    whole steps ``lo``/``hi`` hold) while the x axis is still of that kind.
    """

    lo: float | None = None
    hi: float | None = None
    hidden: dict[str, list[str]] = field(default_factory=dict)
    exact: tuple[str, Any, Any] | None = None

    @property
    def active(self) -> bool:
        return self.lo is not None or self.hi is not None

    def reset(self) -> None:
        self.lo = self.hi = None


def monotonic_x(values: np.ndarray) -> np.ndarray:
    """x values as float64 made non-decreasing (datetimes as ns), so steps and x map both ways."""
    arr = np.asarray(values)
    if np.issubdtype(arr.dtype, np.datetime64):
        arr = arr.astype("datetime64[ns]").astype(np.int64).astype(np.float64)
    arr = np.asarray(arr, dtype=np.float64)
    if arr.size == 0:
        return arr
    filled = np.where(np.isfinite(arr), arr, -np.inf)
    return np.maximum.accumulate(filled)


def x_to_step(x_value: float, xs: np.ndarray, steps: np.ndarray) -> float:
    """The step drawn at ``x_value`` on an x axis whose values per row are ``xs`` (non-decreasing)."""
    if xs.size == 0:
        return x_value
    if x_value <= xs[0]:
        return float(steps[0])
    if x_value >= xs[-1]:
        return float(steps[-1])
    i = int(np.searchsorted(xs, x_value, side="left"))
    x0, x1 = xs[i - 1], xs[i]
    s0, s1 = float(steps[i - 1]), float(steps[i])
    return s0 if x1 <= x0 else s0 + (s1 - s0) * (x_value - x0) / (x1 - x0)


def step_to_x(step: float, xs: np.ndarray, steps: np.ndarray) -> float:
    """Inverse of :func:`x_to_step`; beyond the last step the x axis is extrapolated linearly by step."""
    if xs.size == 0:
        return step
    s = steps.astype(np.float64)
    if xs.size == 1 or step <= s[-1]:
        return float(np.interp(step, s, xs))
    return float(xs[-1] + (step - s[-1]) / _steps_per_x(xs, steps))


def parse_x_value(value: Any, is_datetime: bool) -> float | None:
    """One end of a plotly x range from the browser (a number, or a date string) as float (ns for dates).

    The value comes from the browser, so anything else (objects, huge strings) is rejected as None.
    """
    if isinstance(value, bool):
        return None
    if is_datetime:
        if not isinstance(value, (str, int, float)) or (isinstance(value, str) and len(value) > 40):
            return None
        try:
            stamp = pd.Timestamp(value)
        except (ValueError, TypeError, OverflowError):
            return None
        if stamp is pd.NaT:
            return None
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC").tz_localize(None)
        return float(stamp.value)
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and len(value) <= 40:
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def apply_zoom_event(state: ZoomState, event: Any, xs: np.ndarray, steps: np.ndarray, is_datetime: bool) -> bool:
    """Update ``state`` from a browser relayout event; True when it changed.

    ``event`` is ``{"reset": true}`` (double-click: back to the whole run, following new points) or
    ``{"x0": a, "x1": b}`` in the chart's x units; ``xs``/``steps`` are the drawn frame's
    :func:`monotonic_x` values and steps, used to turn the x range into a step range.
    """
    if not isinstance(event, Mapping):
        return False
    if event.get("reset"):
        changed = state.active
        state.reset()
        return changed
    a = parse_x_value(event.get("x0"), is_datetime)
    b = parse_x_value(event.get("x1"), is_datetime)
    if a is None or b is None:
        return False
    lo_x, hi_x = min(a, b), max(a, b)
    lo, hi = x_to_step(lo_x, xs, steps), x_to_step(hi_x, xs, steps)
    if len(steps) and hi_x >= xs[-1]:
        # The user's range reaches past the newest point: keep the same width in steps beyond it.
        hi = float(steps[-1]) + (hi_x - xs[-1]) * _steps_per_x(xs, steps)
    new = (lo, hi)
    changed = new != (state.lo, state.hi)
    state.lo, state.hi = new
    return changed


def _steps_per_x(xs: np.ndarray, steps: np.ndarray) -> float:
    span = float(xs[-1] - xs[0]) if xs.size > 1 else 0.0
    return float(steps[-1] - steps[0]) / span if span > 0 else 1.0


def apply_legend_event(state: ZoomState, event: Any, known_charts: Iterable[str]) -> bool:
    """Record the legend entries a user switched off in one chart; True when it changed."""
    if not isinstance(event, Mapping):
        return False
    chart = event.get("chart")
    hidden = event.get("hidden")
    if chart not in set(known_charts) or not isinstance(hidden, list):
        return False
    names = sorted({h for h in hidden if isinstance(h, str) and len(h) <= 200})[:100]
    if state.hidden.get(chart, []) == names:
        return False
    state.hidden[chart] = names
    return True


def rows_in_steps(steps: np.ndarray, lo: float | None, hi: float | None) -> slice:
    """The rows to re-read for a zoomed step range: those inside it plus one neighbour each side.

    The neighbours make the lines run to the chart's edges instead of stopping short of them.
    """
    n = len(steps)
    start = 0 if lo is None else max(int(np.searchsorted(steps, lo, side="left")) - 1, 0)
    stop = n if hi is None else min(int(np.searchsorted(steps, hi, side="right")) + 1, n)
    return slice(start, max(stop, start))


def x_range_for(state: ZoomState, xs_raw: np.ndarray, xs: np.ndarray, steps: np.ndarray) -> tuple[Any, Any] | None:
    """The zoom as an x range in the chart's units (datetimes for a wall-time axis), None = autorange."""
    if not state.active or len(steps) == 0:
        return None
    lo = state.lo if state.lo is not None else float(steps[0])
    hi = state.hi if state.hi is not None else float(steps[-1])
    a, b = step_to_x(lo, xs, steps), step_to_x(hi, xs, steps)
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    if np.issubdtype(np.asarray(xs_raw).dtype, np.datetime64):
        # a datetime holds microseconds: the nanoseconds of a zoom's edge are below what a chart can show
        return pd.Timestamp(int(a)).to_pydatetime(warn=False), pd.Timestamp(int(b)).to_pydatetime(warn=False)
    return a, b
