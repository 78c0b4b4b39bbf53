import numpy as np
import pytest

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


def _points_to_flag(f, onset: int) -> int | None:
    """Logged points after ``onset`` (row) that detect_throughput_drop needs to see before flagging it."""
    for k in range(0, 40):
        if detect_throughput_drop(f.iloc[: onset + 1 + k], S):
            return k + 1
    return None


def test_a_drop_is_judged_by_size_times_points_not_wall_time():
    # a record every 16 ms: the old wall-clock rule (3 s) needed ~190 points for any drop (issue 12)
    f = timing(1000, None, 1, False)
    f["t"] = 1.76e9 + np.arange(1000) * 0.016
    big = f.copy()
    big.loc[400:, "throughput"] *= 0.15  # an 85% drop: a few points are enough
    assert _points_to_flag(big, 400) <= S.drop_min_points
    small = f.copy()
    small.loc[400:, "throughput"] *= 0.65  # a 35% drop needs more points, still far fewer than 20
    needed = _points_to_flag(small, 400)
    assert S.drop_min_points < needed <= 12
    (found,) = detect_throughput_drop(small, S)
    assert found.step == 401 and "size x points" in found.why


def test_a_burst_shorter_than_drop_min_points_is_not_a_drop():
    f = timing(1000, None, 1, False)
    f.loc[400 : 400 + S.drop_min_points - 2, "throughput"] *= 0.15  # two 85%-slow points in a row
    f.loc[700, "throughput"] *= 0.1
    assert detect_throughput_drop(f, S) == []


def test_rate_from_record_times_when_nothing_else_is_logged():
    t = 1.76e9 + np.cumsum(np.random.default_rng(3).lognormal(np.log(0.5), 0.03, 600))
    t[400:] = t[399] + np.cumsum(np.full(200, 0.5 / 0.4))  # 40% of the speed from record 400 on
    f = frame(600, loss=noisy(600))
    f["t"] = t
    (found,) = detect_throughput_drop(f, S)
    assert 400 <= found.step <= 403 and found.details["unit"] == "steps/s (from record times)"
    assert found.details["fall"] == pytest.approx(0.6, abs=0.05)
