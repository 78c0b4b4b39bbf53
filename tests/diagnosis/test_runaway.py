import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_divergence
from monitor_cb.diagnosis.noise import series_noise
from monitor_cb.diagnosis.runaway import find_runaways
from tests.diagnosis.helpers import frame

S = DiagnosisSettings()


def _per_batch(n: int = 95, seed: int = 7) -> np.ndarray:
    """A flat per-batch loss whose values span two decades (tcn_intraday_diverge-like), median ~1.2."""
    return 1.2 * np.random.default_rng(seed).lognormal(0.0, 1.0, n)


def _divergence(loss: np.ndarray):
    return [f for f in detect_divergence(frame(loss.size, loss=loss), S) if f.kind == "divergence"]


def test_three_new_all_time_highs_in_a_row_are_a_run_away():
    base = _per_batch()
    top = base.max()
    loss = np.concatenate([base, [top * 1.3, top * 1.15, top * 1.4]])
    (f,) = _divergence(loss)
    assert (f.severity, f.details["rule"]) == ("warning", "runaway")
    assert (f.step, f.end_step, f.details["detected_step"]) == (96, 98, 98)
    assert f.details["earlier_max"] == top and f.details["history"] == 95 and f.details["factor"] >= 2
    # it says why, with the numbers and the thresholds
    assert "95 points before them" in f.why and "3 points in a row" in f.why and "2x the trend" in f.why
    assert "ran away" in f.message and "Why:" in f.message
    # the level rule alone does not see it: inside this noise the 15-point medians hardly move
    level_only = DiagnosisSettings(diverge_runaway_points=50)
    assert detect_divergence(frame(loss.size, loss=loss), level_only) == []


def test_one_or_two_new_highs_are_per_batch_noise():
    base = _per_batch()
    top, typical = base.max(), float(np.median(base))
    for tail in ([top * 1.3], [top * 1.3, top * 1.15], [top * 1.3, top * 1.15, typical], [top * 1.3, typical, top * 2]):
        loss = np.concatenate([base, tail])
        assert _divergence(loss) == [], tail


def test_a_run_away_needs_history_a_clear_factor_and_a_new_high():
    rng = np.random.default_rng(3)
    # the same three highs after only 20 points: the first values and warm-up set no level yet
    short = 1.2 * rng.lognormal(0.0, 1.0, 20)
    assert _divergence(np.concatenate([short, short.max() * np.array([1.3, 1.2, 1.4])])) == []
    # a quiet loss creeping just past its old high (1.2x its trend) is not running away
    quiet = 1.0 * rng.lognormal(0.0, 0.03, 100)
    assert _divergence(np.concatenate([quiet, [1.2, 1.21, 1.22]])) == []
    # a loss that fell from 10 and climbs to 3x its recent level, still below where it began
    fell = np.concatenate([np.geomspace(10, 1, 60), rng.lognormal(0.0, 0.1, 60)])
    assert _divergence(np.concatenate([fell, [3.0, 3.1, 3.2]])) == []


def test_the_rule_is_causal_and_a_continued_climb_is_one_episode():
    base = _per_batch()
    top = base.max()
    climb = top * np.array([1.3, 1.15, 1.4, 1.6, 1.5, 1.9, 2.5, 2.2])
    loss = np.concatenate([base, climb])
    noise = series_noise(loss, S.baseline_window, S.min_baseline)
    (run,) = find_runaways(loss, noise, S)
    assert (run.first, run.last, run.detected) == (95, 102, 97)
    for rows in (96, 97):  # the watcher, point by point: nothing until the third high
        assert _divergence(loss[:rows]) == []
    assert len(_divergence(loss[:98])) == 1


def test_a_run_away_while_the_eval_loss_is_at_its_best_is_only_an_info():
    base = _per_batch()
    top = base.max()
    loss = np.concatenate([base, [top * 1.3, top * 1.15, top * 1.4]])
    f = frame(loss.size, loss=loss, eval_loss=np.nan)
    f.loc[[9, 49, 94, 96, 97], "eval_loss"] = [1.0, 0.9, 0.85, 0.85, 0.84]
    (found,) = detect_divergence(f, S)
    assert found.severity == "info" and "eval loss is still at its best" in found.message


def test_a_run_away_the_loss_came_back_from_was_a_bump_not_divergence():
    base = _per_batch()
    top = base.max()
    highs = np.concatenate([base, [top * 1.3, top * 1.15, top * 1.4]])
    assert len(_divergence(np.concatenate([highs, [top * 1.2, top * 1.5]]))) == 1  # not yet judged: still up
    assert len(_divergence(np.concatenate([highs, top * np.linspace(1.1, 0.9, 10)]))) == 1  # stays up
    assert _divergence(np.concatenate([highs, _per_batch(10, seed=8)])) == []  # back at its level
