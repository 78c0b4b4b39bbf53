import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_throughput_drop
from tests.diagnosis.helpers import frame, noisy

S = DiagnosisSettings()


def timing(n: int, at: int | None, factor: float, input_bound: bool, seed: int = 0):
    step_time = noisy(n, 0.05, 0.05, seed)
    data_time = noisy(n, 0.002, 0.2, seed + 1)
    if at is not None:
        extra = step_time[at:] * (factor - 1)
        step_time[at:] += extra
        if input_bound:
            data_time[at:] += extra
    return frame(n, throughput=32 / step_time, step_time=step_time, data_time=data_time)


def test_sustained_drop_blamed_on_the_input_pipeline():
    (f,) = detect_throughput_drop(timing(600, 400, 6.0, True), S)
    assert (f.kind, f.severity) == ("throughput_drop", "warning")
    assert 400 <= f.step <= 403 and f.end_step == 600
    assert f.details["cause"] == "input"
    assert "input pipeline" in f.message and "still there" in f.message
    assert "samples/s" in f.message


def test_sustained_drop_not_from_data_wait():
    (f,) = detect_throughput_drop(timing(600, 400, 3.0, False), S)
    assert f.details["cause"] == "compute"
    assert "compute or communication" in f.message


def test_drop_that_ends_has_an_end_step():
    f = timing(800, 300, 4.0, False)
    f.loc[400:, ["throughput", "step_time"]] = timing(800, None, 1, False).loc[400:, ["throughput", "step_time"]]
    (found,) = detect_throughput_drop(f, S)
    assert 395 <= found.end_step <= 410
    assert "until step" in found.message


def test_single_slow_steps_and_steady_runs_are_quiet():
    f = timing(2000, None, 1, False)
    slow = np.arange(100, 2000, 97)
    f.loc[slow, "throughput"] /= 8
    assert detect_throughput_drop(f, S) == []
    assert detect_throughput_drop(frame(500, throughput=100.0), S) == []


def test_fallbacks_and_missing_columns():
    f = timing(600, 400, 5.0, True).drop(columns=["throughput", "data_time"])
    (found,) = detect_throughput_drop(f, S)  # from step_time alone
    assert "steps/s" in found.message and found.details["cause"] == "unknown"
    assert detect_throughput_drop(frame(600, loss=1.0), S) == []
    assert detect_throughput_drop(frame(10, throughput=[100] * 5 + [10] * 5), S) == []  # too short
    assert detect_throughput_drop(frame(100, throughput=np.nan), S) == []


def test_a_drop_must_last_in_wall_time_too():
    f = timing(1000, None, 1, False)
    f["t"] = 1.76e9 + np.arange(1000) * 0.016  # a record every 16 ms (a tiny model on a busy CPU)
    short = int(S.drop_min_seconds / 0.016 * 0.8)  # slow points lasting 80% of drop_min_seconds
    f.loc[400 : 400 + short, "throughput"] /= 3
    assert detect_throughput_drop(f, S) == []
    f.loc[400 + short + 1 : 400 + 2 * short, "throughput"] /= 3  # now 160% of it
    (found,) = detect_throughput_drop(f, S)
    assert found.step == 401
