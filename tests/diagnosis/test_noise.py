"""The own-noise primitives: trend and residual noise, logging resolution, range minima, sparse majorities."""

import numpy as np

from monitor_cb.diagnosis._stats import majority, quantum, range_min, rolling_count, trailing_noise
from monitor_cb.diagnosis.noise import series_noise


def test_noise_is_the_spread_around_the_trend_not_the_level():
    rng = np.random.default_rng(1)
    x = np.linspace(10, 0, 3000) + 0.1 * rng.standard_normal(3000)  # a steep trend, small noise
    level, sigma = trailing_noise(x, 101, 20)
    assert 0.07 < np.nanmedian(sigma) < 0.14  # first differences or the level's spread would say ~0.3 / ~3
    assert np.all(np.isnan(level[:15])) and np.isfinite(level[-1])
    x[2000] = 100.0
    level2, _ = trailing_noise(x, 101, 20)
    np.testing.assert_allclose(level2, level, rtol=0.01)  # a spike hardly moves the trend (one order statistic)


def test_bursty_noise_counts_through_the_ninetieth_percentile():
    rng = np.random.default_rng(2)
    x = np.where(rng.random(2000) < 0.15, rng.normal(0, 0.03, 2000), 1e-5)  # GRPO-like
    _, sigma = trailing_noise(x, 101, 20)
    assert np.nanmedian(sigma) > 0.005


def test_quantum_finds_the_logging_resolution():
    assert quantum(np.round(np.random.default_rng(3).uniform(0, 2, 500), 4)) == 1e-4
    assert quantum(np.random.default_rng(4).uniform(0, 2, 500)) == 0.0
    assert quantum(np.array([1.0, 2.0])) == 0.0  # too few values to tell


def test_series_noise_floors_the_noise_at_the_rounding():
    values = np.round(np.full(500, 2.4e-4) * np.random.default_rng(5).lognormal(0, 0.05, 500), 4)
    noise = series_noise(values, 101, 20)
    assert noise.log and noise.quantum == 1e-4
    assert np.nanmin(noise.sigma) >= 1e-4 / 3e-4  # one rounding step at that level, on the log scale


def test_range_min_and_majority_match_brute_force():
    rng = np.random.default_rng(6)
    x = rng.standard_normal(500)
    starts = rng.integers(0, 400, 50)
    ends = starts + rng.integers(0, 100, 50)
    np.testing.assert_allclose(
        range_min(x, starts, ends), [x[a : b + 1].min() for a, b in zip(starts, ends, strict=True)]
    )
    for density in (0.01, 0.6):
        mask = rng.random(500) < density
        for w, least in ((5, 0), (7, 5)):
            expected = rolling_count(mask, w) >= max(w // 2 + 1, least)
            expected[: w - 1] = False
            np.testing.assert_array_equal(majority(mask, w, least), expected)
