"""Mean with a min-max band across the runs of a group (seeds), on shared bins."""

from __future__ import annotations

import numpy as np
import pytest

from monitor_cb.compare.group_bands import band_edges, group_band


def test_same_steps_give_the_exact_per_step_mean_min_and_max() -> None:
    x = np.arange(1, 101, dtype=float)
    rng = np.random.default_rng(0)
    ys = [np.exp(-x / 30) + rng.normal(0, 0.01, x.size) for _ in range(3)]
    band = group_band([(x, y) for y in ys])
    stacked = np.vstack(ys)
    np.testing.assert_array_equal(band.x, x)
    np.testing.assert_allclose(band.mean, stacked.mean(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(band.lo, stacked.min(axis=0))
    np.testing.assert_array_equal(band.hi, stacked.max(axis=0))
    assert (band.n == 3).all() and (band.nonfinite == 0).all()


def test_runs_logged_at_different_intervals_share_bins() -> None:
    fine = (np.arange(1, 1001, dtype=float), np.full(1000, 1.0))
    coarse = (np.arange(10, 1001, 10, dtype=float), np.full(100, 3.0))
    band = group_band([fine, coarse], n_bins=100)
    assert band.x.size == 100
    assert np.allclose(band.mean, 2.0) and np.allclose(band.lo, 1.0) and np.allclose(band.hi, 3.0)
    assert (band.n == 2).all()


def test_nan_is_counted_not_averaged() -> None:
    x = np.arange(1, 6, dtype=float)
    a = np.array([1.0, 1.0, np.nan, np.nan, np.nan])  # diverged at step 3
    b = np.array([3.0, 3.0, 3.0, 3.0, 3.0])
    band = group_band([(x, a), (x, b)])
    np.testing.assert_array_equal(band.mean, [2.0, 2.0, 3.0, 3.0, 3.0])
    np.testing.assert_array_equal(band.n, [2, 2, 1, 1, 1])
    np.testing.assert_array_equal(band.nonfinite, [0, 0, 1, 1, 1])
    only_nan = group_band([(x[:2], np.array([np.nan, np.inf]))])
    assert np.isnan(only_nan.mean).all() and (only_nan.nonfinite == 1).all() and only_nan.x.size == 2


def test_a_run_that_stopped_early_leaves_the_rest_to_the_others() -> None:
    short = (np.arange(1, 51, dtype=float), np.zeros(50))
    long = (np.arange(1, 101, dtype=float), np.ones(100))
    band = group_band([short, long])
    assert band.x.size == 100
    np.testing.assert_array_equal(band.n, [2] * 50 + [1] * 50)
    np.testing.assert_array_equal(band.mean[50:], 1.0)


def test_empty_and_bad_inputs() -> None:
    assert group_band([]).x.size == 0
    assert band_edges([np.array([np.nan])]) is None
    with pytest.raises(ValueError, match="differ in length"):
        group_band([(np.arange(3.0), np.arange(2.0))])


def test_twenty_runs_of_100k_steps_are_cheap() -> None:
    """Not a timing test: the band of 20 x 100k points has the default 1,000 bins and sane values."""
    x = np.arange(1, 100_001, dtype=float)
    series = [(x, np.full(x.size, float(i))) for i in range(20)]
    band = group_band(series)
    assert band.x.size == 1000 and np.allclose(band.mean, 9.5) and (band.lo == 0).all() and (band.hi == 19).all()
