import itertools

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


def test_record_times_of_a_file_written_faster_than_any_step_give_one_note():
    # tensorboardX stamps events as fast as a script adds them: 20 us apart, no training step is that fast
    f = frame(3000, loss=noisy(3000))
    f["t"] = 1.76e9 + np.cumsum(np.random.default_rng(1).lognormal(np.log(2e-5), 0.5, 3000))
    f.loc[1500:, "t"] += np.cumsum(np.full(1500, 2e-5))  # "slower" halfway: not a rate, nothing to find
    (note,) = detect_throughput_drop(f, S)
    assert (note.kind, note.severity) == ("throughput_drop", "info")
    assert note.details["variant"] == "not_judged" and "faster than any training step" in note.message


def test_record_times_written_in_bursts_or_coarse_give_one_note():
    rng = np.random.default_rng(2)
    bursts = frame(2000, loss=noisy(2000))
    gaps = np.where(np.arange(2000) % 50 == 0, 25.0, 1e-3)  # 50 records 1 ms apart, then a 25 s wait
    bursts["t"] = 1.76e9 + np.cumsum(gaps * rng.lognormal(0, 0.05, 2000))
    (note,) = detect_throughput_drop(bursts, S)
    assert note.severity == "info" and "bursts" in note.message
    coarse = frame(2000, loss=noisy(2000))
    coarse["t"] = np.floor(1.76e9 + np.arange(2000) * 0.1)  # 1 s resolution, 10 steps a second
    (note,) = detect_throughput_drop(coarse, S)
    assert note.severity == "info" and "share a time stamp" in note.message


def test_real_record_times_are_still_a_rate():
    # steps ~0.5 s apart with an evaluation every 100 steps and one long outage: times that mean something
    rng = np.random.default_rng(4)
    dt = rng.lognormal(np.log(0.5), 0.05, 1500)
    dt[::100] += 30.0
    dt[700] += 86_400.0
    f = frame(1500, loss=noisy(1500))
    f["t"] = 1.76e9 + np.cumsum(dt)
    assert [x for x in detect_throughput_drop(f, S) if x.severity == "info"] == []


@pytest.mark.parametrize("seed", range(12))
def test_every_finding_is_one_drop_at_least_as_large_as_its_threshold(seed: int):
    # noisy rates with dips of 15-45% of various lengths, as a busy CPU gives: each finding's fall
    # agrees with the threshold its text names, and no two findings describe the same drop
    rng = np.random.default_rng(seed)
    n = 3000
    rate = 100 * rng.lognormal(0, 0.12, n)
    for start in rng.integers(100, n - 100, 12):
        rate[start : start + rng.integers(3, 40)] *= 1 - rng.uniform(0.15, 0.45)
    found = detect_throughput_drop(frame(n, throughput=rate), S)
    for f in found:
        # the threshold is never below drop_frac whatever the last bits of the CPU's exp/log (the product
        # clamps it), and the fall is judged against it with the product's own 1e-9 slack
        assert f.details["threshold"] >= S.drop_frac, f.message
        assert f.details["fall"] >= f.details["threshold"] - 1e-9, f.message
        assert f"-{round(f.details['fall'] * 100)}%" in f.message or f.details["fall"] >= 0.995
    steps = [f.step for f in found]
    assert len(steps) == len(set(steps))
    spans = sorted((f.step, f.end_step) for f in found)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))
