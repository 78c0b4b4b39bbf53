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
    assert "train loss kept falling" in f.message and "gap between them grew" in f.message
    # watched live: flagged within 6 evaluations of the rise's start (+3% per evaluation)
    frame_ = run()
    seen = next(r for r in range(1000, 2000, 50) if detect_overfitting(frame_.iloc[:r], S))
    assert seen <= 1000 + 6 * 50


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


def few_evals(values: list[float], n: int = 500, train_falls: bool = True):
    """A short run with len(values) evaluations spread over it and a (falling) train loss."""
    train = np.geomspace(2.0, 0.5, n) if train_falls else np.full(n, 1.0)
    f = frame(n, loss=train * np.random.default_rng(5).lognormal(0, 0.02, n), eval_loss=np.nan)
    rows = np.linspace(n // len(values), n - 1, len(values)).astype(int)
    f.loc[rows, "eval_loss"] = values
    return f


def test_overfitting_is_judged_from_four_evaluations():
    # issue 12: a run whose 5 evals rise at every one (+31%) was never examined (8 needed)
    run5 = few_evals([1.00, 1.08, 1.16, 1.24, 1.31])
    (f,) = detect_overfitting(run5, S)
    first_eval = int(run5["step"][run5["eval_loss"].notna()].iloc[0])
    assert f.step == f.details["best_step"] == first_eval and f.details["rise"] > 0.2
    assert detect_overfitting(few_evals([1.00, 1.12, 1.2, 1.28]), S)  # four are enough
    assert detect_overfitting(few_evals([1.00, 1.15, 1.3]), S) == []  # three are not


def test_flat_evals_with_a_growing_gap_are_not_overfitting():
    # the train loss falls and the eval loss stays at its best: a gap that grows is not enough
    assert detect_overfitting(few_evals([1.0, 0.97, 0.96, 0.965, 0.962, 0.966, 0.961, 0.964]), S) == []


def test_the_message_states_the_generalisation_gap_and_why():
    (f,) = detect_overfitting(few_evals([1.00, 1.08, 1.16, 1.24, 1.31]), S)
    assert "gap between them grew" in f.message and "Why:" in f.message
    assert "eval-noise sigmas" in f.why and "+10%" in f.why


def test_a_per_batch_train_loss_wandering_10_percent_does_not_hide_a_rising_eval():
    # per-batch train noise (log sigma 0.4): the median of the 20 points around an evaluation wanders by 10% and
    # more, which is not the train loss rising with the eval loss (divergence); the eval rises 10% per evaluation
    for seed in (3, 8, 10):
        rng = np.random.default_rng(seed)
        n, every = 400, 20
        f = frame(n, loss=0.45 * rng.lognormal(0, 0.4, n), eval_loss=np.nan)
        rows = np.arange(every - 1, n, every)
        ev = 0.42 * rng.lognormal(0, 0.02, rows.size)
        ev[8:] *= 1 + 0.1 * np.arange(1, rows.size - 7)
        f.loc[rows, "eval_loss"] = ev
        seen = [len(detect_overfitting(f.iloc[: r + 1], S)) for r in rows[10:]]
        assert seen == [1] * len(seen), (seed, seen)  # from the 3rd rising evaluation on, and never lost again
