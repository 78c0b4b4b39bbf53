import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_divergence
from tests.diagnosis.helpers import decaying_loss, frame, noisy

S = DiagnosisSettings()


def test_a_loss_whose_trend_climbs_and_stays_up_diverges():
    # a preference objective getting worse from the start (iplm_rl-like): 2.4 -> 2.9 and staying there
    loss = np.concatenate([noisy(30, 2.4, 0.03, seed=1), noisy(170, 2.9, 0.03, seed=2)])
    (f,) = detect_divergence(frame(200, loss=loss), S)
    assert (f.kind, f.severity) == ("divergence", "warning")
    assert 30 <= f.step <= 50 and f.end_step == 200
    assert "+2" in f.message and "Why:" in f.message and "given back" in f.why


def test_a_falling_noisy_loss_and_a_tiny_drift_near_zero_do_not_diverge():
    assert detect_divergence(frame(3000, loss=decaying_loss(3000, rel=0.2)), S) == []
    # fell from 10 to 0.02, then drifts to 0.04: +100% relative, but 0.2% of the progress made
    loss = np.concatenate([np.geomspace(10, 0.02, 200), np.linspace(0.02, 0.04, 800)]) * noisy(1000, 1, 0.1, seed=3)
    assert detect_divergence(frame(1000, loss=loss), S) == []


def test_a_rise_while_the_eval_loss_stays_at_its_best_is_only_an_info():
    loss = np.concatenate([noisy(30, 2.4, 0.03, seed=1), noisy(170, 2.9, 0.03, seed=2)])
    f = frame(200, loss=loss, eval_loss=np.nan)
    f.loc[[19, 79, 139, 199], "eval_loss"] = [1.0, 0.99, 0.98, 0.98]
    (found,) = detect_divergence(f, S)
    assert found.severity == "info" and "eval loss is still at its best" in found.message


def test_an_objective_rising_from_its_first_values_and_a_short_bump_are_not_divergence():
    # an RL critic (ddpg_pilot-like): its loss grows x10 over the first 20 points as the returns grow, then wanders
    rng = np.random.default_rng(5)
    early = np.geomspace(800, 9000, 20) * rng.lognormal(0, 0.3, 20)
    later = 9000 * rng.lognormal(0, 0.3, 380)
    later[200:210] *= 2.5  # a 10-point bump of the critic loss, back after it
    assert detect_divergence(frame(400, loss=np.concatenate([early, later])), S) == []
    # the same climb after the series has a level to compare with is divergence
    flat, climb = 9000 * rng.lognormal(0, 0.3, 100), np.geomspace(9000, 90000, 20)
    settled = np.concatenate([flat, climb, 90000 * rng.lognormal(0, 0.3, 80)])
    assert [f.kind for f in detect_divergence(frame(200, loss=settled), S)] == ["divergence"]


def test_policy_gradient_objectives_and_short_runs_are_not_judged():
    rng = np.random.default_rng(4)
    assert detect_divergence(frame(300, loss=-25 + 20 * rng.standard_normal(300)), S) == []
    assert detect_divergence(frame(20, loss=np.linspace(1, 3, 20)), S) == []
