"""SeriesCache: extending the cached EMA and block downsampling equals recomputing from scratch."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor_cb.analysis.downsample import downsample_indices
from monitor_cb.analysis.series_cache import SeriesCache, block_downsample, block_size
from monitor_cb.analysis.smoothing import ema_debiased

values = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([np.nan, np.inf, -np.inf]))
chunks = st.lists(st.lists(values, min_size=0, max_size=300), min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(chunks, st.sampled_from([0.0, 0.3, 0.6, 0.9, 0.99, 0.0001]))
def test_ema_extended_by_appends_equals_recomputed(parts, weight):
    cache = SeriesCache()
    y = np.empty(0)
    for part in parts:
        y = np.concatenate([y, np.asarray(part, dtype=np.float64)])
        got = cache.ema("k", np.arange(y.size), y, weight)
        np.testing.assert_array_equal(got, ema_debiased(y, weight))  # bit for bit


def test_ema_large_tail_and_reset_or_truncation_recompute():
    rng = np.random.default_rng(0)
    y = rng.standard_normal(50_000)
    y[[10, 30_000]] = [np.nan, np.inf]
    cache = SeriesCache()
    x = np.arange(y.size)
    np.testing.assert_array_equal(cache.ema("k", x[:100], y[:100], 0.6), ema_debiased(y[:100], 0.6))
    np.testing.assert_array_equal(cache.ema("k", x, y, 0.6), ema_debiased(y, 0.6))  # 49,900 new rows
    np.testing.assert_array_equal(cache.ema("k", x[:20_000], y[:20_000], 0.6), ema_debiased(y[:20_000], 0.6))
    changed = y.copy()
    changed[5] += 1.0  # the run was rewritten (a reset): same length, other values
    np.testing.assert_array_equal(cache.ema("k", x, changed, 0.6), ema_debiased(changed, 0.6))
    assert not cache.ema("k", x, y, 0.6).flags.writeable


def series(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.standard_normal(n)
    y[rng.random(n) < 1e-3] = np.nan
    y[rng.random(n) < 5e-4] = np.inf
    y[rng.integers(0, n, 5)] = 50.0  # spikes
    return np.arange(n) * 2, y


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 20_000), min_size=1, max_size=5), st.sampled_from([100, 500]), st.integers(0, 9))
def test_block_downsample_extended_equals_uncached(steps, n_out, seed):
    x_all, y_all = series(sum(steps), seed)
    cache = SeriesCache()
    n = 0
    for step in steps:
        n += step
        x, y = x_all[:n], y_all[:n]
        cached = cache.downsample("k", x, y, n_out, max_nonfinite=n_out)
        np.testing.assert_array_equal(cached, block_downsample(x, y, n_out, max_nonfinite=n_out))


def test_blocks_keep_spikes_and_nonfinite_like_the_uncached_path():
    x, y = series(1_000_000, 1)
    n_out = 2000
    assert block_size(y.size, n_out) > 0
    cache = SeriesCache()
    cache.downsample("k", x[:-500], y[:-500], n_out, max_nonfinite=10**6)  # a cached prefix, then appended
    blocks = cache.downsample("k", x, y, n_out, max_nonfinite=10**6)
    whole = downsample_indices(x, y, n_out, max_nonfinite=10**6)
    bad = np.flatnonzero(~np.isfinite(y))
    assert np.isin(bad, blocks).all() and np.isin(bad, whole).all()
    spikes = np.flatnonzero(y == 50.0)
    assert np.isin(spikes, blocks).all()
    assert np.isin(whole[np.isfinite(y[whole])], np.arange(y.size)).all()
    assert blocks[0] == 0 and blocks[-1] == y.size - 1
    finite_points = np.isfinite(y[blocks]).sum()
    assert 0.8 * n_out <= finite_points <= 1.1 * n_out


def test_cache_is_bounded_and_thread_safe():
    cache = SeriesCache(max_entries=4, max_bytes=10 * 2**20)
    x, y = series(200_000, 2)
    errors = []

    def work(i: int) -> None:
        try:
            for k in range(6):
                n = 150_000 + 1000 * k
                got = cache.ema(("run", i % 6), x[:n], y[:n], 0.6)
                np.testing.assert_array_equal(got, ema_debiased(y[:n], 0.6))
                ds = cache.downsample(("run", i % 6), x[:n], y[:n], 500, 500)
                np.testing.assert_array_equal(ds, block_downsample(x[:n], y[:n], 500, 500))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) <= 4
