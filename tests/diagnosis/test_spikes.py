import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_grad_explosion, detect_loss_spike
from tests.diagnosis.helpers import decaying_loss, frame, noisy

S = DiagnosisSettings()


def test_grad_explosion_followed_by_nan_is_an_error():
    grad = noisy(300, 1.0, 0.15)
    grad[200:206] *= np.geomspace(5, 5000, 6)
    loss = decaying_loss(300)
    loss[204:206] *= 3
    f = frame(300, grad_norm=grad, loss=loss)
    f.loc[206:, ["loss", "grad_norm"]] = [np.nan, np.inf]
    found = detect_grad_explosion(f, S)
    assert [x.severity for x in found] == ["error"]
    assert found[0].step in (202, 203)  # 5x at step 201 is below the 20x threshold, ~20x at 202, ~80x at 203
    assert "peak at step" in found[0].message and "Why:" in found[0].message
    assert "went Inf" in found[0].message and "NaN" in found[0].message
    assert "gradient clipping" in found[0].message


def test_isolated_burst_the_loss_ignores_is_an_info_and_a_lasting_one_a_warning():
    grad = noisy(400, 2.0, 0.2, seed=1)
    grad[250] *= 80  # one step; clipping absorbs it, the loss does not react
    (f,) = detect_grad_explosion(frame(400, grad_norm=grad, loss=decaying_loss(400)), S)
    assert (f.severity, f.step, f.details["count"]) == ("info", 251, 1)
    assert f.details["largest_ratio"] > 50
    grad[250:254] = grad[249] * 80  # four steps: it persisted
    (f,) = detect_grad_explosion(frame(400, grad_norm=grad, loss=decaying_loss(400)), S)
    assert (f.severity, f.step) == ("warning", 251)
    assert f.details["ratio"] > 50 and "persisted" in f.message


def test_natural_bumps_and_constant_series_are_quiet():
    grad = noisy(2000, 1.0, 0.2, seed=2)
    grad[500:530] *= 1 + 6 * np.exp(-np.arange(30) / 5)  # a natural bump: up to 7x
    assert detect_grad_explosion(frame(2000, grad_norm=grad), S) == []
    assert detect_grad_explosion(frame(500, grad_norm=1.0), S) == []
    assert detect_loss_spike(frame(500, loss=2.0), S) == []


def test_short_runs_and_missing_columns():
    assert detect_grad_explosion(frame(5, grad_norm=[1, 1, 100, 1, 1]), S) == []  # no baseline yet
    assert detect_grad_explosion(frame(50, loss=1.0), S) == []
    assert detect_loss_spike(frame(50, grad_norm=1.0), S) == []
    assert detect_grad_explosion(frame(50, grad_norm=np.nan), S) == []
    assert detect_grad_explosion(frame(50, grad_norm=0.0), S) == []


def test_loss_spike_that_recovers_is_a_warning():
    loss = decaying_loss(600, seed=3)
    loss[400:403] *= 3
    (f,) = detect_loss_spike(frame(600, loss=loss), S)
    assert (f.kind, f.severity, f.step, f.end_step) == ("loss_spike", "warning", 401, 403)
    assert "came back by step" in f.message and "persisted" in f.why
    assert f.details["recovered_step"] is not None


def test_loss_jump_that_stays_is_an_error():
    loss = decaying_loss(600, seed=4)
    loss[400:] *= 2.5
    found = detect_loss_spike(frame(600, loss=loss), S)
    assert found[0].severity == "error"
    assert "diverged" in found[0].message


def test_spike_at_the_end_has_not_recovered_yet():
    loss = decaying_loss(300, seed=5)
    loss[-2:] *= 4
    (f,) = detect_loss_spike(frame(300, loss=loss), S)
    assert f.severity == "warning"
    assert "has not come back yet" in f.message


def test_noisy_healthy_loss_is_quiet():
    assert detect_loss_spike(frame(5000, loss=decaying_loss(5000, seed=6, rel=0.08)), S) == []


# --------------------------------------------------------------------------- judged against the series' own noise
def per_batch_loss(n: int, seed: int, spread: float = 0.6) -> np.ndarray:
    """A per-batch loss: a slow decline under right-skewed (lognormal) batch noise spanning ~a decade."""
    rng = np.random.default_rng(seed)
    return (0.4 + 2.0 * np.exp(-np.arange(n) / 400)) * rng.lognormal(0, spread, n)


def test_a_per_batch_outlier_back_at_the_next_point_is_only_a_note():
    loss = per_batch_loss(2000, seed=11)
    loss[1200] *= 8  # 8x its trend, back at the next point: one hard batch
    found = detect_loss_spike(frame(2000, loss=loss), S)
    assert [f.severity for f in found] in ([], ["info"])
    assert not [f for f in found if f.level >= 1]


def test_an_extreme_single_point_is_a_warning():
    loss = noisy(1500, 0.05, 0.05, seed=12)  # a PINN-like flat, quiet loss
    loss[900] = 125.0  # 2,500x: extreme against this series' own noise, even though it is back at once
    (f,) = detect_loss_spike(frame(1500, loss=loss), S)
    assert (f.severity, f.step) == ("warning", 901)
    assert "extreme" in f.why and f.details["sigmas"] >= S.spike_extreme_z


def test_a_spike_that_persists_is_a_warning_even_in_a_noisy_loss():
    loss = per_batch_loss(2000, seed=13, spread=0.25)
    loss[1500:1530] *= 1 + 4 * np.exp(-np.arange(30) / 10)  # x5, decaying back over ~30 points
    found = [f for f in detect_loss_spike(frame(2000, loss=loss), S) if f.level >= 1]
    assert len(found) == 1 and 1499 <= found[0].step <= 1503
    assert "persisted" in found[0].why


def test_a_loss_jump_with_a_grad_norm_jump_is_a_warning():
    loss = noisy(1000, 1.0, 0.03, seed=14)
    grad = noisy(1000, 1.0, 0.1, seed=15)
    loss[600] *= 2.0
    grad[600] *= 6.0
    (f,) = detect_loss_spike(frame(1000, loss=loss, grad_norm=grad), S)
    assert f.severity == "warning" and "grad norm jumped at the same step" in f.why
    (alone,) = detect_loss_spike(frame(1000, loss=loss, grad_norm=noisy(1000, 1.0, 0.1, seed=15)), S)
    assert alone.severity == "info"


def test_repeated_jumps_are_a_warning():
    loss = noisy(1000, 1.0, 0.03, seed=16)
    for at in (500, 506, 512):
        loss[at] *= 2.0
    found = [f for f in detect_loss_spike(frame(1000, loss=loss), S) if f.level >= 1]
    assert found and "repeats" in found[-1].why


def test_a_quantised_near_zero_loss_is_not_a_spike():
    # a memorised run: a Trainer rounds the loss to 4 decimals, so it sits on 0.0002 / 0.0003, with the odd 0.005
    rng = np.random.default_rng(17)
    early = np.round(np.geomspace(1.6, 2e-4, 300), 4)
    tail = np.round(rng.choice([2e-4, 2e-4, 3e-4], 700), 4)
    tail[[100, 101, 102, 400, 401, 402]] = [0.0054, 0.0051, 0.0049, 0.004, 0.0042, 0.0045]  # 20x, for 3 points
    found = detect_loss_spike(frame(1000, loss=np.concatenate([early, tail])), S)
    assert not [f for f in found if f.level >= 1]  # below spike_min_frac (1%) of the loss's highest level


def test_a_policy_gradient_objective_is_not_judged():
    rng = np.random.default_rng(18)
    loss = np.where(rng.random(500) < 0.15, rng.normal(0, 0.03, 500), 1e-5)  # GRPO: ~0, sometimes +/-0.03
    assert detect_loss_spike(frame(500, loss=loss), S) == []


def test_every_warning_says_why_with_the_numbers_and_thresholds():
    loss = decaying_loss(600, seed=3)
    loss[400:403] *= 3
    (f,) = detect_loss_spike(frame(600, loss=loss), S)
    assert f.message.endswith(f"Why: {f.why.rstrip('.')}.")
    assert "noise sigmas" in f.why and "threshold 8" in f.why
    assert f.details["thresholds"]["spike_z"] == S.spike_z and f.to_dict()["why"] == f.why


def test_a_lasting_shift_inside_per_batch_noise_spanning_a_decade_is_a_warning():
    # per-batch losses spread over a decade (log sigma 0.7): a x8 level for 25 points is 3 sigmas per point
    rng = np.random.default_rng(11)
    loss = 0.1 * rng.lognormal(0.0, 0.7, 600)
    assert [f.severity for f in detect_loss_spike(frame(600, loss=loss), S) if f.level >= 1] == []
    loss[400:425] *= 8
    (f,) = [f for f in detect_loss_spike(frame(600, loss=loss), S) if f.level >= 1]
    assert f.severity == "warning" and 401 <= f.step <= 405 and 420 <= f.end_step <= 430
    assert "the median of 15 points" in f.why or "the median of 9 points" in f.why
    assert "threshold 7 sigmas of that median" in f.why
