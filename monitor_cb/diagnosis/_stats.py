"""Vectorised robust statistics shared by the detectors: trailing block baselines, episodes, columns.

A rolling median over a 1M-point series costs ~0.3 s in pandas; the detectors need several per run,
so baselines here are medians of *block* medians: the series is cut into blocks of ``block`` points,
each block's median (and noise scale) is taken once, and a point is judged against the median of the
``blocks`` complete blocks before its own. That costs one partition of the data (~20 ms per 1M
points), lags the baseline by at most one block, and keeps the robustness of a median: a spike
moves one block median at most.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

# Columns that describe a record rather than measure training (as in analysis.series).
INDEX_COLUMNS = frozenset({"step", "t", "rank", "seg", "epoch", "event", "reason"})
# |x_i - x_{i-1}| of Gaussian noise has median 0.6745 * sqrt(2) * sigma.
_DIFF_MAD_TO_SIGMA = 1.0 / (0.6744897501960817 * np.sqrt(2.0))


@dataclass(frozen=True)
class Series:
    """The finite points of one metric: positions in the frame, steps, values."""

    rows: np.ndarray  # positions (0-based) in the frame
    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return int(self.values.size)


def finite_series(frame: pd.DataFrame, name: str) -> Series | None:
    """The finite values of column ``name`` with their steps; None when it is missing or has none."""
    values = column(frame, name)
    if values is None:
        return None
    rows = np.flatnonzero(np.isfinite(values))
    if rows.size == 0:
        return None
    return Series(rows, frame_steps(frame)[rows], values[rows])


def frame_steps(frame: pd.DataFrame) -> np.ndarray:
    """The ``step`` column as int64 (row numbers + 1 when the frame has none)."""
    if "step" not in frame.columns:
        return np.arange(1, len(frame) + 1, dtype=np.int64)
    steps = frame["step"]
    if steps.dtype == np.int64:
        return steps.to_numpy()
    return pd.to_numeric(steps, errors="coerce").fillna(-1).to_numpy(dtype=np.int64)


def column(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """``frame[name]`` as float64 (NaN for gaps), or None when absent."""
    if name not in frame.columns:
        return None
    series = frame[name]
    if series.dtype == np.float64:
        return series.to_numpy()  # no copy; callers never write to it
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def train_rows(frame: pd.DataFrame) -> np.ndarray:
    """Rows that carry training metrics, as opposed to eval-only or event-only rows.

    A NaN in a train column means "logged NaN" on a train row and "not logged" elsewhere (an eval
    record merged onto a step that had no train record). ``frame.attrs["logged"]`` (column -> mask,
    from ``RunFrame.masks``) is not needed: a row is eval/event-only when every train column
    is NaN and it has an eval value or an event.
    """
    n = len(frame)
    metric = [c for c in frame.columns if c not in INDEX_COLUMNS]
    train = [c for c in metric if not str(c).startswith("eval_")]
    if not train:
        return np.zeros(n, dtype=bool)
    has_train = np.zeros(n, dtype=bool)
    for c in train:
        values = column(frame, c)
        if values is not None:
            has_train |= ~np.isnan(values)
    other = np.zeros(n, dtype=bool)
    for c in metric:
        if str(c).startswith("eval_"):
            other |= frame[c].notna().to_numpy()
    if "event" in frame.columns:
        other |= frame["event"].notna().to_numpy()
    return has_train | ~other


def block_size(window: int) -> int:
    """Block length for a baseline of about ``window`` points: about 7 blocks, odd, at least 5 points each."""
    return max(5, (window // 7) | 1)


def trailing_baseline(
    values: np.ndarray, window: int, min_points: int, *, with_sigma: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Robust level and noise of the ~``window`` points before each point (NaN where too few).

    Returns ``(median, sigma)`` per point: the median of the previous complete block medians, and
    a noise scale from the median absolute first difference (insensitive to slow trends), floored at
    a millionth of the level so a constant series does not give a zero scale (zeros without
    ``with_sigma``, which skips that half of the work).
    """
    n = values.size
    block = block_size(window)
    k = max(1, round(window / block)) | 1  # odd, for a single-partition median
    nb = n // block
    median = np.full(n, np.nan)
    sigma = np.full(n, np.nan)
    if nb == 0:
        return median, sigma
    full = values[: nb * block].reshape(nb, block)
    block_med = row_median(full)
    base_med = _trailing_blocks_median(block_med, k)
    if with_sigma:
        diffs = np.abs(np.diff(values[: nb * block], prepend=values[0])).reshape(nb, block)
        base_sig = _trailing_blocks_median(row_median(diffs) * _DIFF_MAD_TO_SIGMA, k)
    else:  # the caller only needs the level
        base_sig = np.zeros_like(base_med)
    enough = np.minimum(np.arange(nb + 1), k) * block >= min_points  # blocks before block b
    base_med[~enough] = np.nan
    owner = np.arange(n) // block  # the block each point sits in; its baseline is the blocks before
    median = base_med[owner]
    sigma = np.maximum(base_sig[owner], 1e-6 * np.abs(median))
    return median, sigma


def row_median(a: np.ndarray) -> np.ndarray:
    """Median of each row: one ``partition`` (for odd widths, no averaging of two middles)."""
    width = a.shape[1]
    if width % 2 == 0:
        return np.median(a, axis=1)
    return np.partition(a, width // 2, axis=1)[:, width // 2]


def _trailing_blocks_median(block_values: np.ndarray, k: int) -> np.ndarray:
    """Entry b (0..nb): median of blocks b-k..b-1 (NaN for b == 0)."""
    padded = np.concatenate((np.full(k, np.nan), block_values))
    windows = sliding_window_view(padded, k)  # window j covers blocks j-k..j-1
    with np.errstate(all="ignore"):
        out = np.full(windows.shape[0], np.nan)
        counts = np.sum(~np.isnan(windows), axis=1)
        full_rows = counts == k
        out[full_rows] = row_median(windows[full_rows])
        for j in np.flatnonzero((counts > 0) & ~full_rows):  # only the first k-1 entries
            out[j] = np.nanmedian(windows[j])
    return out


def episodes(mask: np.ndarray, max_gap: int = 0) -> list[tuple[int, int]]:
    """Runs of True in ``mask`` as ``(first, last)`` index pairs, merging runs at most ``max_gap`` apart."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) > max_gap + 1)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]]))
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def rolling_count(mask: np.ndarray, window: int) -> np.ndarray:
    """How many of the last ``window`` entries (this one included) are True."""
    csum = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
    hi = np.arange(1, mask.size + 1)
    return csum[hi] - csum[np.maximum(hi - window, 0)]


def run_lengths(mask: np.ndarray) -> np.ndarray:
    """For each entry, how many consecutive True entries end here (0 where False)."""
    if mask.size == 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.arange(mask.size)
    last_false = np.maximum.accumulate(np.where(mask, -1, idx))
    return np.where(mask, idx - last_false, 0)
