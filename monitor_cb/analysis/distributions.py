"""Histograms over steps as percentile bands, as TensorBoard's distributions view draws them (pure).

Each histogram's percentiles are read off its cumulative counts, linearly inside a bucket. The
percentiles are TensorBoard's: the median, the bands of +-1, 2 and 3 standard deviations of a normal
distribution (15.9-84.1, 6.7-93.3 ...), and the minimum and maximum, so a user reads this view as
the one they know.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# TensorBoard's compressed-histogram basis points (tensorboard/plugins/distribution/compressor.py), in percent
PERCENTILES: tuple[float, ...] = (0.0, 6.68, 15.87, 30.85, 50.0, 69.15, 84.13, 93.32, 100.0)


@dataclass(frozen=True)
class Bands:
    """Per step, the values at :data:`PERCENTILES` (NaN where a histogram is empty)."""

    steps: np.ndarray
    values: np.ndarray  # (steps, len(PERCENTILES))
    percentiles: tuple[float, ...] = PERCENTILES


def histogram_percentiles(
    edges: np.ndarray, counts: np.ndarray, percentiles: Sequence[float] = PERCENTILES
) -> np.ndarray:
    """The values at ``percentiles`` of one histogram (``len(edges) == len(counts) + 1``)."""
    edges = np.asarray(edges, np.float64)
    counts = np.clip(np.nan_to_num(np.asarray(counts, np.float64)), 0, None)
    total = counts.sum()
    if edges.size != counts.size + 1 or counts.size == 0 or total <= 0 or not np.isfinite(edges).all():
        return np.full(len(percentiles), np.nan)
    cum = np.concatenate([[0.0], np.cumsum(counts)])
    targets = np.asarray(percentiles, np.float64) / 100.0 * total
    # the first bucket whose cumulative count reaches the target, then linear inside it
    i = np.clip(np.searchsorted(cum, targets, side="left"), 1, counts.size)
    inside = np.where(counts[i - 1] > 0, (targets - cum[i - 1]) / np.where(counts[i - 1] > 0, counts[i - 1], 1), 0.0)
    out = edges[i - 1] + np.clip(inside, 0.0, 1.0) * (edges[i] - edges[i - 1])
    nonempty = np.flatnonzero(counts > 0)
    out[np.asarray(percentiles) <= 0] = edges[nonempty[0]]
    out[np.asarray(percentiles) >= 100] = edges[nonempty[-1] + 1]
    return out


def percentile_bands(
    steps: np.ndarray,
    edges: Sequence[np.ndarray],
    counts: Sequence[np.ndarray],
    percentiles: Sequence[float] = PERCENTILES,
) -> Bands:
    """:func:`histogram_percentiles` of every histogram of a tag, in step order."""
    steps = np.asarray(steps, np.int64)
    values = np.array([histogram_percentiles(e, c, percentiles) for e, c in zip(edges, counts, strict=True)])
    values = values.reshape(len(steps), len(percentiles))
    order = np.argsort(steps, kind="stable")
    return Bands(steps[order], values[order], tuple(percentiles))
