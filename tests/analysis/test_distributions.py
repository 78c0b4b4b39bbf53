"""Percentiles read off a histogram's buckets, against numpy's on the raw values."""

from __future__ import annotations

import numpy as np
import pytest

from monitor_cb.analysis.distributions import PERCENTILES, histogram_percentiles, percentile_bands


def test_percentiles_of_fine_buckets_match_the_raw_values():
    values = np.random.default_rng(3).normal(2.0, 0.5, 50_000)
    counts, edges = np.histogram(values, bins=400)
    ours = histogram_percentiles(edges, counts)
    theirs = np.percentile(values, PERCENTILES)
    np.testing.assert_allclose(ours, theirs, atol=2 * (edges[1] - edges[0]))


def test_empty_and_malformed_histograms_are_nan():
    assert np.isnan(histogram_percentiles(np.array([0.0, 1.0]), np.array([0]))).all()
    assert np.isnan(histogram_percentiles(np.array([0.0, 1.0, 2.0]), np.array([1]))).all()
    assert np.isnan(histogram_percentiles(np.array([0.0, np.inf]), np.array([3]))).all()


def test_one_bucket_and_band_order():
    out = histogram_percentiles(np.array([1.0, 3.0]), np.array([10]), (0, 50, 100))
    assert out == pytest.approx([1.0, 2.0, 3.0])
    bands = percentile_bands(
        np.array([5, 1]), [np.array([0.0, 1.0]), np.array([0.0, 2.0])], [np.array([1]), np.array([1])]
    )
    assert list(bands.steps) == [1, 5] and bands.values[0, -1] == 2.0
