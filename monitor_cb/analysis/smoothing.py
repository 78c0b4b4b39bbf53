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
