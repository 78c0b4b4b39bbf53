"""ema_debiased must equal TensorBoard's smoothing loop, including its NaN and constant-series rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor_cb.analysis.smoothing import ema_debiased


def tensorboard_smoothing(values: list[float], weight: float) -> list[float]:
    """A line-by-line port of TensorBoard's ``resmoothDataset`` / ``classicSmoothing``."""
    if all(v == values[0] for v in values):
        return list(values)
    last, num_accum, out = 0.0, 0, []
    for value in values:
        if not math.isfinite(value):
            out.append(value)
            continue
        last = last * weight + (1 - weight) * value
        num_accum += 1
        out.append(last / (1 - weight**num_accum))
    return out


def test_hand_computed_case():
    # w = 0.5: last = 0.5, 0.5*0.5+0.5*3 = 1.75; debias 1-0.5 = 0.5, 1-0.25 = 0.75
    assert ema_debiased([1.0, 3.0], 0.5) == pytest.approx([1.0, 1.75 / 0.75])
    # third value 2: last = 1.75*0.5 + 1 = 1.875; debias 0.875
    assert ema_debiased([1.0, 3.0, 2.0], 0.5)[2] == pytest.approx(1.875 / 0.875)


def test_first_value_is_unbiased():
    assert ema_debiased([5.0, 7.0], 0.99)[0] == pytest.approx(5.0)


def test_nonfinite_passed_through_and_skipped():
    values = [1.0, 3.0, math.nan, math.inf, 2.0, -math.inf, 4.0]
    out = ema_debiased(values, 0.5)
    assert math.isnan(out[2])
    assert out[3] == math.inf and out[5] == -math.inf
    # the NaN/inf do not count in the debias and do not poison later values
    assert out[4] == pytest.approx(ema_debiased([1.0, 3.0, 2.0], 0.5)[2])
    assert np.isfinite(out[[0, 1, 4, 6]]).all()
    np.testing.assert_allclose(out, tensorboard_smoothing(values, 0.5), rtol=1e-12)


def test_constant_series_stays_exactly_constant():
    out = ema_debiased(np.full(1000, 0.1), 0.9)
    assert (out == 0.1).all()


def test_weight_zero_is_identity():
    values = np.array([3.0, math.nan, -1.0, 7.0])
    np.testing.assert_array_equal(ema_debiased(values, 0.0), values)


def test_empty_input():
    out = ema_debiased([], 0.6)
    assert out.shape == (0,) and out.dtype == np.float64


def test_input_not_modified():
    values = np.array([1.0, 2.0, 3.0])
    ema_debiased(values, 0.9)
    np.testing.assert_array_equal(values, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("weight", [-0.1, 1.0, 1.5, math.nan])
def test_weight_bounds_validated(weight):
    with pytest.raises(ValueError, match="smoothing weight"):
        ema_debiased([1.0, 2.0], weight)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(-1e6, 1e6), st.sampled_from([math.nan, math.inf, -math.inf])), min_size=1, max_size=60
    ),
    st.floats(0.0, 0.999),
)
def test_matches_tensorboard_loop(values, weight):
    expected = np.array(tensorboard_smoothing(values, weight))
    out = ema_debiased(values, weight)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(out[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
    np.testing.assert_allclose(out[finite], expected[finite], rtol=1e-9, atol=1e-6)


def test_running_mean_and_gaussian_smooth_like_their_names_and_keep_nan_apart() -> None:
    import numpy as np

    from monitor_cb.analysis.smoothing import gaussian, running_mean, smooth, window_for

    assert [window_for(w) for w in (0.0, 0.6, 0.9, 0.99)] == [1, 4, 19, 199]
    y = np.array([1.0, 2.0, 3.0, np.nan, 4.0, 5.0])
    out = running_mean(y, 3)
    assert np.isnan(out[3]), "a NaN passes through"
    np.testing.assert_allclose(out[[0, 1, 2, 4, 5]], [1.0, 1.5, 2.0, 3.0, 4.0])  # the last 3 finite points
    rng = np.random.default_rng(0)
    noisy = np.linspace(0, 1, 2000) + rng.normal(0, 0.2, 2000)
    smooth_g = gaussian(noisy, 41)
    assert np.std(np.diff(smooth_g)) < 0.05 * np.std(np.diff(noisy)), "much smoother"
    assert abs(float(np.mean(smooth_g[500:1500] - np.linspace(0, 1, 2000)[500:1500]))) < 0.02, "centred: no lag"
    lagging = running_mean(noisy, 41)
    assert float(np.mean(np.linspace(0, 1, 2000)[500:1500] - lagging[500:1500])) > 0.005, "a trailing mean lags"
    np.testing.assert_allclose(smooth(noisy, 0.9, "ema"), smooth(noisy, 0.9))
    with pytest.raises(ValueError, match="unknown smoother"):
        smooth(noisy, 0.5, "median")
