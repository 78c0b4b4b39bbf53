import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_plateau
from tests.diagnosis.helpers import decaying_loss, frame, noisy

S = DiagnosisSettings()


def warnings_of(found):
    return [f for f in found if f.severity == "warning"]


def with_evals(loss: np.ndarray, evals: list[float]):
    f = frame(loss.size, loss=loss, eval_loss=np.nan)
    rows = np.linspace(loss.size // len(evals), loss.size - 1, len(evals)).astype(int)
    f.loc[rows, "eval_loss"] = evals
    return f


def test_no_training_signal_is_a_warning():
    # a LoRA run whose labels were all masked: loss and grad norm exactly 0 from the first step
    (f,) = warnings_of(detect_plateau(frame(100, loss=0.0, grad_norm=0.0), S))
    assert f.details["variant"] == "no_signal" and f.step == 1 and "no training signal" in f.message


def test_a_model_stuck_at_a_trivial_predictor_is_a_warning():
    # N-BEATS-like: train loss trendless around 1.34 from the first log, eval loss flat to 0.1%
    loss = noisy(220, 1.34, 0.015, seed=1)
    evals = list(1.3748 + 0.0005 * np.random.default_rng(2).standard_normal(8))
    (f,) = warnings_of(detect_plateau(with_evals(loss, evals), S))
    assert f.details["variant"] == "stuck" and "not learning" in f.message and "stuck_rel" in f.why


def test_a_run_that_learned_then_converged_is_not_stuck():
    loss = decaying_loss(600, seed=3)
    evals = [*np.geomspace(6.0, 2.0, 12), 1.99, 2.0, 1.98, 2.0]  # fell by two thirds, then flat
    assert warnings_of(detect_plateau(with_evals(loss, evals), S)) == []


def test_a_flat_loss_still_in_warmup_is_not_stuck():
    loss = noisy(300, 2.0, 0.02, seed=4)
    f = with_evals(loss, list(2.05 + 0.001 * np.random.default_rng(5).standard_normal(10)))
    f["lr"] = np.linspace(1e-7, 2e-7, 300)  # a 5,000-step warmup, 300 steps in
    assert warnings_of(detect_plateau(f, S)) == []


def test_a_constant_loss_is_quoted_as_logged():
    # "exactly 3.2e-03" for a loss of 0.00325 named a value the run never logged
    for value, shown in ((0.00325, "3.25e-03"), (4.11e-4, "4.11e-04"), (1.23456, "1.23456"), (2.0, "2")):
        (f,) = warnings_of(detect_plateau(frame(60, loss=value), S))
        assert f"exactly {shown} at every one" in f.message, f.message
