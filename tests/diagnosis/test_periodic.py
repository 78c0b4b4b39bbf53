import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_sawtooth
from tests.diagnosis.helpers import frame, noisy

S = DiagnosisSettings()


def with_sawtooth(n: int, at: int, period: int, swing: float, seed: int = 0):
    step_time = noisy(n, 0.2, 0.04, seed)
    step_time[at:] *= 1 + swing * (np.arange(n - at) % period) / period
    return frame(n, step_time=step_time)


def test_sawtooth_is_found_with_its_period():
    (f,) = detect_sawtooth(with_sawtooth(600, 300, 4, 0.8), S)
    assert (f.kind, f.severity) == ("sawtooth", "warning")
    assert f.details["period_points"] == 4
    assert 280 <= f.step <= 310 and f.end_step == 600
    assert "period of 4 logged points" in f.message


def test_alternating_slow_fast_steps():
    (f,) = detect_sawtooth(with_sawtooth(400, 100, 2, 1.0), S)
    assert f.details["period_points"] == 2


def test_noise_spikes_and_constant_series_are_quiet():
    step_time = noisy(20000, 0.2, 0.08, seed=3)
    step_time[np.random.default_rng(4).random(20000) < 0.005] *= 5  # input-pipeline hiccups
    assert detect_sawtooth(frame(20000, step_time=step_time), S) == []
    assert detect_sawtooth(frame(500, step_time=0.2), S) == []


def test_short_and_missing():
    assert detect_sawtooth(frame(10, step_time=[0.1, 0.3] * 5), S) == []
    assert detect_sawtooth(frame(100, loss=1.0), S) == []
    (f,) = detect_sawtooth(frame(600, throughput=1 / with_sawtooth(600, 300, 3, 1.0)["step_time"]), S)
    assert f.details["period_points"] == 3
