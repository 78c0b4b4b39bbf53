import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_overfitting
from tests.diagnosis.helpers import decaying_loss, frame

S = DiagnosisSettings()


def run(n: int = 2000, every: int = 50, rise_from: int | None = 1000, rise: float = 0.03, train_rises: bool = False):
    loss = decaying_loss(n, seed=1)
    f = frame(n, loss=loss, eval_loss=np.nan)
    rows = np.arange(every - 1, n, every)
    clean = 1.5 + 6.0 * (1 + (rows + 1) / 50) ** -0.6
    ev = clean * 1.05 * np.random.default_rng(2).lognormal(0, 0.005, rows.size)
    if rise_from is not None:
        k = np.clip((rows - rise_from) / every, 0, None)
        ev = np.where(rows >= rise_from, ev[np.searchsorted(rows, rise_from)] * (1 + rise * k), ev)
    f.loc[rows, "eval_loss"] = ev
    if train_rises:
        f.loc[rise_from:, "loss"] *= np.linspace(1, 1.5, n - rise_from)
    return f


def test_rising_eval_with_falling_train_names_the_early_stopping_point():
    (f,) = detect_overfitting(run(), S)
    assert (f.kind, f.severity) == ("overfitting", "warning")
    assert f.step == 1000 == f.details["best_step"]  # the best eval was at step 1,000 (row 999)
    assert f.end_step == 2000
    assert "early-stopping point" in f.message and "step 1,000" in f.message
    assert "train loss kept falling" in f.message
    assert f.details["detected_step"] <= 1000 + 6 * 50


def test_healthy_eval_is_quiet():
    assert detect_overfitting(run(rise_from=None), S) == []


def test_train_loss_rising_too_is_not_overfitting():
    assert detect_overfitting(run(train_rises=True), S) == []


def test_no_eval_few_evals_or_no_train():
    assert detect_overfitting(frame(100, loss=1.0), S) == []
    f = frame(100, loss=1.0, eval_loss=np.nan)
    f.loc[[9, 19, 29], "eval_loss"] = [1.0, 1.5, 2.0]
    assert detect_overfitting(f, S) == []
    found = detect_overfitting(run().drop(columns=["loss"]), S)
    assert found and "train loss not logged" in found[0].message


def test_train_loss_jumping_then_falling_while_eval_rises_is_overfitting():
    f = run(rise_from=1000, rise=0.05)
    f.loc[1000:, "loss"] = np.geomspace(5.0, 1.0, 1000)  # new data memorised: high, then falling
    (found,) = detect_overfitting(f, S)
    assert found.details["train_change"] < 0
