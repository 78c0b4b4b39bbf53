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

from monitor_cb.diagnosis._cache import frame_memo

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
    """The finite values of column ``name`` with their steps; None when it is missing or has none.

    Computed once per :func:`~monitor_cb.diagnosis.engine.diagnose` call (callers never write to it).
    """
    return frame_memo(frame, ("finite", len(frame), name), lambda: _finite_series(frame, name))


def _finite_series(frame: pd.DataFrame, name: str) -> Series | None:
    values = column(frame, name)
    if values is None:
        return None
    rows = np.flatnonzero(np.isfinite(values))
    if rows.size == 0:
        return None
    return Series(rows, frame_steps(frame)[rows], values[rows])


def frame_steps(frame: pd.DataFrame) -> np.ndarray:
    """The ``step`` column as int64 (row numbers + 1 when the frame has none), once per diagnose call."""
    return frame_memo(frame, ("steps", len(frame)), lambda: _frame_steps(frame))


def _frame_steps(frame: pd.DataFrame) -> np.ndarray:
    if "step" not in frame.columns:
        return np.arange(1, len(frame) + 1, dtype=np.int64)
    steps = frame["step"]
    if steps.dtype == np.int64:
        return steps.to_numpy()
    return pd.to_numeric(steps, errors="coerce").fillna(-1).to_numpy(dtype=np.int64)


def column(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """``frame[name]`` as float64 (NaN for gaps), or None when absent (once per diagnose call)."""
    if name not in frame.columns:
        return None
    return frame_memo(frame, ("column", len(frame), name), lambda: _column(frame, name))


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
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


# --------------------------------------------------------------------------- own-noise baselines
_MAD_TO_SIGMA = 1.4826
_Q90_TO_SIGMA = 1.0 / 1.6449  # the 90th percentile of |Gaussian noise| is 1.645 sigma


def trailing_noise(values: np.ndarray, window: int, min_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Robust trend and noise scale of the points before each point (NaN where fewer than ``min_points``).

    The series is cut into blocks of about ``window / 7`` points. Each block gets a median and a
    straight trend line (through the medians of its two halves); its noise is the spread of the
    *residuals* around that line, the larger of 1.4826 x their median absolute value and their 90th
    percentile / 1.645, so a falling curve does not count as noise and bursty noise (a GRPO loss
    that is ~0 except when a group has an advantage) is not judged against its quiet stretches alone.

    Returns ``(level, sigma)`` per point: the median of the last 3 complete block medians before the
    point's own block, or the last one when lower (recent enough to follow a falling loss, robust to a
    spike shorter than half a block), and the median of the noise of the last ~7 blocks.
    """
    n = values.size
    block = block_size(window)
    k_sigma = max(1, round(window / block)) | 1
    nb = n // block
    level = np.full(n, np.nan)
    sigma = np.full(n, np.nan)
    if nb == 0:
        return level, sigma
    full = values[: nb * block].reshape(nb, block)
    half = block // 2
    block_med = row_median(full)
    # the slope through the means of the two halves (cheaper than medians; one spike in a block only
    # widens that block's residuals, and the noise is the median over blocks)
    first, second = full[:, :half].mean(axis=1), full[:, block - half :].mean(axis=1)
    slope = (second - first) / (block - half)
    offsets = np.arange(block) - (block - 1) / 2.0
    resid = full - block_med[:, None]  # in place from here: this runs over every point of the series
    resid -= slope[:, None] * offsets[None, :]
    np.abs(resid, out=resid)
    mid = block // 2
    q90 = min(block - 1, int(np.ceil(0.9 * block)) - 1)
    resid.partition((mid, q90), axis=1)
    scale = np.maximum(_MAD_TO_SIGMA * resid[:, mid], _Q90_TO_SIGMA * resid[:, q90])
    # the median of the last 3 blocks, or the last block when it is lower: a falling loss (a decade per
    # hundred points early in training) is followed without lag, a spike still never raises the level
    base_level = np.fmin(_trailing_blocks_median(block_med, 3), np.concatenate(([np.nan], block_med)))
    base_sigma = _trailing_blocks_median(scale, k_sigma)
    enough = np.minimum(np.arange(nb + 1), 3) * block >= min_points
    base_level[~enough] = np.nan
    owner = np.arange(n) // block
    return base_level[owner], base_sigma[owner]


def trailing_level(values: np.ndarray, window: int, min_points: int) -> np.ndarray:
    """The level half of :func:`trailing_noise` alone (one partition of the data): for a cheap first look."""
    n = values.size
    block = block_size(window)
    nb = n // block
    if nb == 0:
        return np.full(n, np.nan)
    block_med = row_median(values[: nb * block].reshape(nb, block))
    level = np.fmin(_trailing_blocks_median(block_med, 3), np.concatenate(([np.nan], block_med)))
    level[~(np.minimum(np.arange(nb + 1), 3) * block >= min_points)] = np.nan
    return level[np.arange(n) // block]


def quantum(values: np.ndarray, sample: int = 4096) -> float:
    """The resolution the values were logged at (``1e-4`` for a Trainer's 4-decimal rounding), 0 if none.

    The largest power of ten of which nearly every (sampled, non-zero) value is a whole multiple.
    """
    x = values[np.isfinite(values) & (values != 0)]
    if x.size < 20:
        return 0.0
    if x.size > sample:
        x = x[:: x.size // sample]
    for digits in range(0, 9):
        scaled = x * 10.0**digits
        # float64 keeps ~16 digits: a logged decimal is within ~1e-9 of a whole multiple, a random value is not
        whole = np.abs(scaled - np.round(scaled)) <= np.maximum(1e-6, 1e-9 * np.abs(scaled))
        if whole.mean() >= 0.98:
            return 10.0**-digits
    return 0.0


def positive(values: np.ndarray) -> bool:
    """Whether every value is above zero: such a series is judged on the log scale (ratios)."""
    return bool(values.size) and bool(np.all(values > 0))


def forward_median(values: np.ndarray, width: int) -> np.ndarray:
    """Median of ``values[i : i + width]`` for each i (NaN where fewer than ``width`` remain)."""
    out = np.full(values.size, np.nan)
    if values.size >= width:
        windows = sliding_window_view(values, width)
        out[: windows.shape[0]] = row_median(windows) if width % 2 else np.median(windows, axis=1)
    return out


def range_min(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``min(values[starts[i] : ends[i] + 1])`` for every i (inclusive ranges, start <= end), via a sparse table."""
    n = values.size
    if n == 0:
        return np.zeros(0)
    table = [values]
    span = 1
    while 2 * span <= n:
        prev = table[-1]
        table.append(np.minimum(prev[: prev.size - span], prev[span:]))
        span *= 2
    length = ends - starts + 1
    level = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
    out = np.empty(starts.size)
    for k in np.unique(level):
        pick = level == k
        row = table[k]
        out[pick] = np.minimum(row[starts[pick]], row[ends[pick] - (1 << k) + 1])
    return out


def majority(mask: np.ndarray, window: int, least: int = 0) -> np.ndarray:
    """Per i: more than half (and at least ``least``) of ``mask[i - window + 1 : i + 1]`` is True.

    False for the first ``window - 1`` entries.
    Healthy series rarely have flagged points, so when they are sparse only the windows around them
    are counted (binary searches on their positions) instead of a cumulative sum over everything.
    """
    n = mask.size
    out = np.zeros(n, dtype=bool)
    hits = np.flatnonzero(mask)
    if hits.size == 0 or n < window:
        return out
    need = max(window // 2 + 1, least)
    if hits.size * window > n // 4:
        out[:] = rolling_count(mask, window) >= need
    else:
        ends = np.unique((hits[:, None] + np.arange(window)[None, :]).ravel())
        ends = ends[ends < n]
        count = np.searchsorted(hits, ends, side="right") - np.searchsorted(hits, ends - window, side="right")
        out[ends[count >= need]] = True
    out[: window - 1] = False
    return out
