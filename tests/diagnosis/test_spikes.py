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
    assert "peaking at" in found[0].message
    assert "went Inf" in found[0].message and "NaN" in found[0].message
    assert "gradient clipping" in found[0].message


def test_isolated_burst_is_a_warning():
    grad = noisy(400, 2.0, 0.2, seed=1)
    grad[250] *= 80
    (f,) = detect_grad_explosion(frame(400, grad_norm=grad, loss=decaying_loss(400)), S)
    assert (f.severity, f.step) == ("warning", 251)
    assert f.details["ratio"] > 50


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
    assert "recovered by step" in f.message
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
    assert "not recovered yet" in f.message


def test_noisy_healthy_loss_is_quiet():
    assert detect_loss_spike(frame(5000, loss=decaying_loss(5000, seed=6, rel=0.08)), S) == []
