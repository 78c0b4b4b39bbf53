"""TensorBoard's scalar smoothing, so curves look the same as in the tool users know.

TensorBoard (``vz_line_chart2/line-chart.ts`` ``resmoothDataset``, later
``line_chart_v2/data_transformer.ts`` ``classicSmoothing``) runs a first-order
IIR filter started at 0 and divides by ``1 - w**n`` (n = finite points seen so
far) to remove the bias towards 0. Non-finite points are passed through and are
not fed into the filter, so one NaN does not poison the rest of the curve; a
series whose values are all equal is returned unchanged (TensorBoard #786).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike


def ema_debiased(values: ArrayLike, weight: float) -> np.ndarray:
    """Debiased exponential moving average, exactly TensorBoard's smoothing slider.

    Args:
        values: the raw series in drawing order (NaN / ±inf allowed).
        weight: the slider value, ``0 <= weight < 1``; 0 returns the values unchanged.

    Returns:
        A float64 array of the same length; non-finite inputs appear unchanged at their positions.

    Raises:
        ValueError: ``weight`` outside ``[0, 1)`` (at 1 TensorBoard draws a flat 0, which is never wanted).
    """
    weight = float(weight)
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    y = np.array(values, dtype=np.float64, copy=True).reshape(-1)
    if y.size == 0 or weight == 0.0 or np.all(y == y[0]):
        return y
    finite = np.isfinite(y)
    # pandas' adjusted EWM is sum(w**i * v[n-i]) / sum(w**i), which is algebraically TensorBoard's
    # last / (1 - w**n); it runs in C, about 100x faster than a Python loop on 1M points.
    y[finite] = pd.Series(y[finite]).ewm(alpha=1.0 - weight, adjust=True).mean().to_numpy()
    return y


# ----------------------------------------------------------------------------- other smoothers
# What W&B and SwanLab offer beside TensorBoard's EMA. One slider drives them all: its weight w maps
# to the EMA's own effective window, (1 + w) / (1 - w) points (0.6 -> 4, 0.9 -> 19, 0.99 -> 199).
SMOOTHERS: dict[str, str] = {
    "ema": "EMA (TensorBoard)",
    "mean": "Running average",
    "gaussian": "Gaussian",
}
DEFAULT_SMOOTHER = "ema"


def window_for(weight: float) -> int:
    """The window (points) a smoothing weight stands for: the EMA's effective window, at least 1."""
    weight = float(weight)
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    return max(1, round((1.0 + weight) / (1.0 - weight)))


def running_mean(values: ArrayLike, window: int) -> np.ndarray:
    """The plain mean of each point and the ``window - 1`` finite points before it (fewer at the
    start), as W&B's "running average"; non-finite values pass through and are not averaged."""
    y = np.array(values, dtype=np.float64, copy=True).reshape(-1)
    finite = np.isfinite(y)
    if window <= 1 or finite.sum() < 2:
        return y
    v = y[finite]
    sums = np.cumsum(np.r_[0.0, v])
    idx = np.arange(1, v.size + 1)
    start = np.maximum(idx - window, 0)
    y[finite] = (sums[idx] - sums[start]) / (idx - start)
    return y


def gaussian(values: ArrayLike, window: int) -> np.ndarray:
    """A centred Gaussian smoothing over the finite points (sigma = ``window`` / 4), as three passes
    of a centred box filter (O(n), within a few percent of the true kernel); the edges average over
    the points there are. Non-finite values pass through and are not averaged."""
    y = np.array(values, dtype=np.float64, copy=True).reshape(-1)
    finite = np.isfinite(y)
    if window <= 1 or finite.sum() < 2:
        return y
    sigma = window / 4.0
    # three box passes of width w give variance 3 * (w**2 - 1) / 12 = sigma**2
    width = max(1, round(np.sqrt(4.0 * sigma * sigma + 1.0)))
    v = y[finite]
    for _ in range(3):
        v = _centred_box(v, width)
    y[finite] = v
    return y


def _centred_box(v: np.ndarray, width: int) -> np.ndarray:
    half = width // 2
    sums = np.cumsum(np.r_[0.0, v])
    idx = np.arange(v.size)
    lo = np.maximum(idx - half, 0)
    hi = np.minimum(idx + (width - half), v.size)
    return (sums[hi] - sums[lo]) / (hi - lo)


def smooth(values: ArrayLike, weight: float, smoother: str = DEFAULT_SMOOTHER) -> np.ndarray:
    """``values`` smoothed by ``smoother`` (a key of :data:`SMOOTHERS`) at slider weight ``weight``.

    Raises:
        ValueError: an unknown smoother, or a weight outside ``[0, 1)``.
    """
    if smoother == "ema":
        return ema_debiased(values, weight)
    if smoother not in SMOOTHERS:
        raise ValueError(f"unknown smoother {smoother!r}; choose one of {sorted(SMOOTHERS)}")
    window = window_for(weight)
    return running_mean(values, window) if smoother == "mean" else gaussian(values, window)
