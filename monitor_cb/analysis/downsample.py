"""Pick the rows worth drawing so a 1M-step curve plots fast without hiding anything.

MinMaxLTTB (tsdownsample, Rust) keeps the visual shape and every bucket's extremes, so a
one-step loss spike survives. The finite points are downsampled; every non-finite point
(NaN, ±inf) is added back because a NaN is exactly what a user must see, and the first
and last rows are always kept so the curve reaches the current step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from tsdownsample import MinMaxLTTBDownsampler

from monitor_cb.analysis.series import float_values, logged_rows

DEFAULT_N_OUT = 2000
# Below this many finite points per output point a Python-side split costs more than it saves.
_MIN_N_OUT = 4
_DOWNSAMPLER = MinMaxLTTBDownsampler()


def downsample_indices(
    x: ArrayLike, y: ArrayLike, n_out: int = DEFAULT_N_OUT, max_nonfinite: int | None = None
) -> np.ndarray:
    """Sorted row indices to draw for one series.

    Args:
        x: monotonically non-decreasing x values (numbers or ``datetime64``).
        y: the values; NaN and ±inf are allowed and always kept.
        n_out: target number of finite points (the result holds at most about
            ``n_out + 2 + number of non-finite points``).
        max_nonfinite: None keeps every non-finite point. A chart sets a cap because a run that
            went on after its loss became NaN can have 500k of them: then the first and last point
            of every non-finite stretch are kept, thinned evenly (the first one always) to the cap.

    Returns:
        ``int64`` indices into ``y``, strictly increasing; all indices when ``len(y) <= n_out``.
    """
    if n_out < _MIN_N_OUT:
        raise ValueError(f"n_out must be >= {_MIN_N_OUT}, got {n_out}")
    y_arr = np.asarray(y, dtype=np.float64).reshape(-1)
    n = y_arr.size
    if n <= n_out:
        return np.arange(n, dtype=np.int64)
    x_arr = _as_numeric_x(x)
    if x_arr.size != n:
        raise ValueError(f"x and y differ in length ({x_arr.size} != {n})")
    finite = np.isfinite(y_arr)
    if finite.all():
        picked = _minmax_lttb(x_arr, y_arr, n_out)
        return _with_ends(picked, n)
    finite_idx = np.flatnonzero(finite)
    if finite_idx.size > n_out:
        picked = finite_idx[_minmax_lttb(x_arr[finite_idx], y_arr[finite_idx], n_out)]
    else:
        picked = finite_idx
    bad = np.flatnonzero(~finite)
    if max_nonfinite is not None:
        bad = thin_nonfinite(bad, max_nonfinite)
    return _with_ends(np.union1d(picked, bad), n)


def thin_nonfinite(bad: np.ndarray, cap: int) -> np.ndarray:
    """At most ``cap`` of the sorted non-finite positions ``bad``: stretch ends first, then evenly spaced."""
    if bad.size <= cap:
        return bad
    gaps = np.flatnonzero(np.diff(bad) > 1)
    ends = np.unique(np.concatenate(([bad[0], bad[-1]], bad[gaps], bad[gaps + 1])))
    if ends.size > cap:
        ends = ends[np.unique(np.linspace(0, ends.size - 1, max(cap, 1)).round().astype(np.int64))]
    return ends


def downsample_frame(
    df: pd.DataFrame,
    x: str,
    columns: Sequence[str],
    n_out: int = DEFAULT_N_OUT,
    logged: Mapping[str, ArrayLike] | None = None,
) -> np.ndarray:
    """Row positions (``iloc``) to draw for several columns of one frame, on one common grid.

    Each column gets ``n_out // len(columns)`` points (at least 256 so a small budget never
    flattens a curve) and the union is returned, so traces on a dual-axis chart share rows and a
    unified hover lines them up. Rows where a column was not logged (``logged[col]`` False)
    do not count as non-finite points of that column.

    Args:
        df: a run frame sorted by ``x``.
        x: the x column.
        columns: metric columns to draw.
        n_out: total point budget for the frame.
        logged: optional per-column boolean masks (``RunFrame.masks``); absent means every
            NaN was logged as NaN.

    Returns:
        Sorted ``int64`` row positions.
    """
    if not columns or len(df) == 0:
        return np.arange(len(df), dtype=np.int64)
    per_column = max(n_out // len(columns), 256)
    xv = df[x].to_numpy()
    parts = []
    for column in columns:
        rows = np.flatnonzero(logged_rows(df, column, logged))
        if rows.size == 0:
            continue
        picked = downsample_indices(xv[rows], float_values(df[column])[rows], per_column)
        parts.append(rows[picked])
    if not parts:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.concatenate(parts))


def _minmax_lttb(x: np.ndarray, y: np.ndarray, n_out: int) -> np.ndarray:
    if y.size <= n_out:
        return np.arange(y.size, dtype=np.int64)
    # minmax_ratio=4: the MinMax preselection keeps 4 extremes per LTTB bucket, enough for spikes;
    # LTTB can still drop the series' own extremes when n_out is tiny, so they are added back.
    picked = _DOWNSAMPLER.downsample(x, y, n_out=n_out).astype(np.int64, copy=False)
    extremes = np.array([np.argmin(y), np.argmax(y)], dtype=np.int64)
    if np.isin(extremes, picked).all():
        return picked
    return np.union1d(picked, extremes)


def _with_ends(indices: np.ndarray, n: int) -> np.ndarray:
    """Add the first and last row unless already present (indices are sorted and unique)."""
    if indices.size and indices[0] == 0 and indices[-1] == n - 1:
        return indices.astype(np.int64, copy=False)
    return np.union1d(indices, np.array([0, n - 1], dtype=np.int64)).astype(np.int64, copy=False)


def _as_numeric_x(x: ArrayLike) -> np.ndarray:
    """x as a contiguous numeric array tsdownsample accepts (datetimes become int64 ns)."""
    arr = np.asarray(x).reshape(-1)
    if np.issubdtype(arr.dtype, np.datetime64) or np.issubdtype(arr.dtype, np.timedelta64):
        return np.ascontiguousarray(arr.astype("datetime64[ns]").view(np.int64))
    if arr.dtype == np.bool_ or arr.dtype == object:
        arr = arr.astype(np.float64)
    return np.ascontiguousarray(arr)
