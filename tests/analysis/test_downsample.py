"""downsample_indices keeps what a user must see: spikes, every non-finite point, both ends."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor_cb.analysis.downsample import downsample_frame, downsample_indices

N = 1_000_000


@pytest.fixture(scope="module")
def noisy() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = np.arange(1, N + 1)
    y = 2.0 * np.exp(-x / 3e5) + rng.normal(0, 0.05, N)
    return x, y


def check_indices(idx: np.ndarray, n: int) -> None:
    assert idx.dtype == np.int64
    assert (np.diff(idx) > 0).all(), "indices must be strictly increasing"
    assert idx[0] == 0 and idx[-1] == n - 1


def test_single_point_spike_survives(noisy):
    x, y = noisy
    for at in (1, 123_457, 999_998):
        spiked = y.copy()
        spiked[at] = 50.0
        idx = downsample_indices(x, spiked, 2000)
        assert at in idx
        check_indices(idx, N)
        assert idx.size <= 2 * 2000


def test_negative_spike_survives(noisy):
    x, y = noisy
    dipped = y.copy()
    dipped[654_321] = -30.0
    assert 654_321 in downsample_indices(x, dipped, 2000)


def test_every_nonfinite_point_is_kept(noisy):
    x, y = noisy
    bad = np.random.default_rng(1).choice(N, 500, replace=False)
    y = y.copy()
    y[bad[:300]] = np.nan
    y[bad[300:400]] = np.inf
    y[bad[400:]] = -np.inf
    idx = downsample_indices(x, y, 2000)
    assert np.isin(bad, idx).all()
    check_indices(idx, N)
    assert idx.size <= 2 * 2000 + bad.size + 2


def test_last_and_first_point_kept_even_when_nonfinite(noisy):
    x, y = noisy
    y = y.copy()
    y[-1] = np.nan
    idx = downsample_indices(x, y, 1000)
    assert idx[-1] == N - 1 and idx[0] == 0


def test_short_series_returned_whole():
    y = np.array([1.0, np.nan, 3.0])
    np.testing.assert_array_equal(downsample_indices(np.arange(3), y, 2000), [0, 1, 2])
    assert downsample_indices([], [], 2000).size == 0


def test_output_is_near_n_out(noisy):
    x, y = noisy
    idx = downsample_indices(x, y, 2000)
    assert 1000 <= idx.size <= 2002


def test_float_and_datetime_x(noisy):
    x, y = noisy
    t = (1.7e9 + x * 0.25 * 1e9).astype("datetime64[ns]")
    a = downsample_indices(x.astype(np.float64), y, 500)
    b = downsample_indices(t, y, 500)
    check_indices(a, N)
    check_indices(b, N)


def test_all_nonfinite_and_mostly_nonfinite():
    y = np.full(10_000, np.nan)
    np.testing.assert_array_equal(downsample_indices(np.arange(10_000), y, 100), np.arange(10_000))
    y[::1000] = 1.0  # 10 finite points, fewer than n_out
    assert downsample_indices(np.arange(10_000), y, 100).size == 10_000


def test_max_nonfinite_caps_a_long_nan_tail():
    y = np.concatenate([np.linspace(1, 0, 50_000), np.full(50_000, np.nan)])
    y[20_000:20_010] = np.inf
    idx = downsample_indices(np.arange(y.size), y, 1000, max_nonfinite=100)
    bad = idx[~np.isfinite(y[idx])]
    assert bad.size <= 100 + 2
    # stretch boundaries survive: where the inf burst starts and ends, where the NaN tail starts
    assert {20_000, 20_009, 50_000, 99_999} <= set(bad.tolist())


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_out"):
        downsample_indices(np.arange(10), np.arange(10.0), 2)
    with pytest.raises(ValueError, match="length"):
        downsample_indices(np.arange(10), np.arange(20.0), 5)


def test_downsample_frame_union_and_logged_masks():
    n = 200_000
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"step": np.arange(1, n + 1), "loss": rng.normal(size=n), "lr": np.linspace(1, 0, n)})
    df["eval_loss"] = np.nan
    df.loc[::5000, "eval_loss"] = 1.0
    df.loc[77_777, "loss"] = 99.0
    df.loc[88_888, "loss"] = np.nan
    eval_logged = df["eval_loss"].notna().to_numpy()
    rows = downsample_frame(df, "step", ["loss", "lr", "eval_loss"], 3000, logged={"eval_loss": eval_logged})
    assert (np.diff(rows) > 0).all()
    assert {77_777, 88_888} <= set(rows.tolist())
    # unlogged eval rows are not treated as NaN points, so the union stays small
    assert rows.size < 3 * 1024 + 50
    assert set(np.flatnonzero(eval_logged).tolist()) <= set(rows.tolist())


def test_downsample_frame_missing_columns():
    df = pd.DataFrame({"step": [1, 2, 3], "loss": [1.0, 2.0, 3.0]})
    assert downsample_frame(df, "step", ["nope"], 100).size == 0
    np.testing.assert_array_equal(downsample_frame(df, "step", [], 100), [0, 1, 2])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(st.floats(-1e9, 1e9), st.sampled_from([np.nan, np.inf, -np.inf])), min_size=0, max_size=400),
    st.integers(4, 60),
)
def test_properties_hold_for_any_series(values, n_out):
    y = np.array(values, dtype=np.float64)
    idx = downsample_indices(np.arange(y.size), y, n_out)
    if y.size == 0:
        assert idx.size == 0
        return
    check_indices(idx, y.size)
    assert np.isin(np.flatnonzero(~np.isfinite(y)), idx).all()
    assert idx.size <= max(y.size, 2 * n_out + 2 + int((~np.isfinite(y)).sum()))
    if np.isfinite(y).any():  # the global extremes of the finite values survive
        finite = np.where(np.isfinite(y), y, np.nan)
        assert np.nanmax(finite) in y[idx] and np.nanmin(finite) in y[idx]
