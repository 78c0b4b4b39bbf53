"""A group of runs as one curve: the mean across runs with a min-max band (seeds of one config).

Runs of a group rarely log at exactly the same x (different intervals, a resumed run, wall time).
:func:`group_band` puts every run on shared bins first: per run and bin the mean of its finite
values, then across runs the mean, the lowest and the highest of those, and how many runs had a
value there. Where every run logged the same steps and there are no more of them than bins, the
bins are those steps, so the mean is exactly the per-step mean across runs. A NaN/±inf a run
logged is never averaged in; the band counts it (``nonfinite``) so a chart can mark it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from monitor_cb.compare.align import grid_edges

DEFAULT_BINS = 1000


@dataclass(frozen=True)
class Band:
    """Per bin that any run reached: x, mean, min, max across runs, and counts (arrays of one length)."""

    x: np.ndarray  # the mean x of the values in the bin
    mean: np.ndarray  # NaN where no run had a finite value
    lo: np.ndarray
    hi: np.ndarray
    n: np.ndarray  # runs with a finite value in the bin
    nonfinite: np.ndarray  # runs that logged a NaN/±inf in the bin


def band_edges(xs: Sequence[np.ndarray], n_bins: int = DEFAULT_BINS) -> np.ndarray | None:
    """Bin edges: one bin per distinct x when there are at most ``n_bins`` of them, else ``n_bins`` equal bins."""
    finite = [x[np.isfinite(x)] for x in xs]
    distinct = np.unique(np.concatenate(finite)) if finite else np.empty(0)
    if distinct.size == 0:
        return None
    if distinct.size <= n_bins:
        mids = (distinct[1:] + distinct[:-1]) / 2.0
        return np.concatenate([[distinct[0] - 0.5], mids, [distinct[-1] + 0.5]])
    return grid_edges(finite, n_bins)


def group_band(
    series: Sequence[tuple[np.ndarray, np.ndarray]], edges: np.ndarray | None = None, n_bins: int = DEFAULT_BINS
) -> Band:
    """Mean and min-max band of several runs' ``(x, y)`` (x numeric, only the logged rows).

    Args:
        series: per run, x and y of equal length.
        edges: bin edges (increasing); default :func:`band_edges` over the runs' x.
        n_bins: bins for the default edges.
    """
    for x, y in series:
        if np.shape(x) != np.shape(y):
            raise ValueError(f"x and y differ in length ({np.size(x)} and {np.size(y)})")
    xs = [np.asarray(x, dtype=np.float64) for x, _ in series]
    edges = band_edges(xs, n_bins) if edges is None else np.asarray(edges, dtype=np.float64)
    if edges is None or edges.size < 2 or not series:
        empty = np.empty(0)
        return Band(empty, empty, empty, empty, np.empty(0, np.int64), np.empty(0, np.int64))
    n_out = edges.size - 1
    means = np.full((len(series), n_out), np.nan)
    bad = np.zeros((len(series), n_out), dtype=bool)
    x_sum = np.zeros(n_out)
    x_count = np.zeros(n_out)
    for row, (x, (_, y)) in enumerate(zip(xs, series, strict=True)):
        y = np.asarray(y, dtype=np.float64)
        inside = np.isfinite(x) & (x >= edges[0]) & (x <= edges[-1])
        bins = np.clip(np.searchsorted(edges, x[inside], side="right") - 1, 0, n_out - 1)
        values = y[inside]
        ok = np.isfinite(values)
        counts = np.bincount(bins[ok], minlength=n_out)
        sums = np.bincount(bins[ok], weights=values[ok], minlength=n_out)
        hit = counts > 0
        means[row, hit] = sums[hit] / counts[hit]
        bad[row] = np.bincount(bins[~ok], minlength=n_out) > 0
        x_sum += np.bincount(bins, weights=x[inside], minlength=n_out)
        x_count += np.bincount(bins, minlength=n_out)
    n = np.sum(np.isfinite(means), axis=0)
    nonfinite = np.sum(bad, axis=0)
    keep = (n > 0) | (nonfinite > 0)
    with np.errstate(invalid="ignore"):
        filled = np.where(np.isfinite(means), means, 0.0)
        mean = np.where(n > 0, filled.sum(axis=0) / np.maximum(n, 1), np.nan)
        lo = np.where(n > 0, np.where(np.isfinite(means), means, np.inf).min(axis=0), np.nan)
        hi = np.where(n > 0, np.where(np.isfinite(means), means, -np.inf).max(axis=0), np.nan)
        x_mid = x_sum / np.maximum(x_count, 1)
    return Band(x_mid[keep], mean[keep], lo[keep], hi[keep], n[keep].astype(np.int64), nonfinite[keep].astype(np.int64))
