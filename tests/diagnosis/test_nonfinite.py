import math

import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_nan
from tests.diagnosis.helpers import frame

S = DiagnosisSettings()


def test_first_nonfinite_loss_is_an_error_with_the_step():
    loss = np.linspace(3, 2, 50)
    loss[30:] = np.nan
    grad = np.ones(50)
    grad[29] = np.inf
    (f,) = detect_nan(frame(50, loss=loss, grad_norm=grad, lr=1e-3), S)
    assert (f.kind, f.severity, f.step) == ("nan", "error", 30)  # grad norm went Inf first (row 29 = step 30)
    assert f.details["first"] == {"loss": 31, "grad_norm": 30}
    assert "grad norm became Inf at step 30" in f.message
    assert "lower the learning rate" in f.message


def test_nan_at_step_one():
    loss = np.full(5, 2.0)
    loss[0] = math.nan
    (f,) = detect_nan(frame(5, loss=loss), S)
    assert f.step == 1
    assert "first logged step" in f.message


def test_finite_run_and_missing_columns_give_nothing():
    assert detect_nan(frame(20, loss=np.linspace(2, 1, 20)), S) == []
    assert detect_nan(frame(20, lr=1e-3), S) == []
    assert detect_nan(frame(0), S) == []


def test_eval_only_rows_are_not_logged_nans():
    f = frame(10, loss=np.linspace(2, 1, 10), lr=1e-3, eval_loss=np.nan)
    f.loc[4, ["loss", "lr"]] = np.nan  # an eval record merged onto a step without a train record
    f.loc[4, "eval_loss"] = 1.7
    assert detect_nan(f, S) == []


def test_overflow_steps_are_loss_scaling_not_divergence():
    grad = np.ones(10)
    grad[3] = np.inf
    f = frame(10, loss=np.linspace(2, 1, 10), grad_norm=grad)
    f["overflow"] = [False, False, False, True] + [False] * 6
    (note,) = detect_nan(f, S)  # loss scaling did its job: counted in an info note, not an error
    assert (note.severity, note.details["count"]) == ("info", 1)
    f.loc[5, "loss"] = np.nan
    assert detect_nan(f, S)[0].step == 6 and detect_nan(f, S)[0].severity == "error"


def test_all_nan_column_is_flagged_once():
    (f,) = detect_nan(frame(10, loss=np.nan), S)
    assert f.step == 1


def test_fp16_skipped_steps_are_an_info_with_their_count_not_a_nan_error():
    # a mixed-precision run: the scaler skips a step now and then; the grad norm logged there is NaN, the loss finite
    grad = np.full(400, 0.5)
    grad[[57, 58, 201, 333]] = np.nan
    (f,) = detect_nan(frame(400, loss=np.linspace(2, 1, 400), grad_norm=grad, lr=1e-4), S)
    assert (f.kind, f.severity, f.step, f.details["count"]) == ("nan", "info", 58, 4)
    assert "skipped" in f.message and "Why:" in f.message


def test_skipped_steps_that_persist_are_a_warning():
    grad = np.full(400, 0.5)
    grad[300 : 300 + S.nan_skip_persist + 2] = np.inf  # every update skipped for 7 logged steps
    (f,) = detect_nan(frame(400, loss=np.linspace(2, 1, 400), grad_norm=grad), S)
    assert (f.severity, f.step, f.details["variant"]) == ("warning", 301, "skipping")


def test_a_nan_loss_is_still_an_error_from_the_start_or_later():
    loss = np.linspace(3, 1, 100)
    loss[60:] = np.nan
    (f,) = detect_nan(frame(100, loss=loss, grad_norm=1.0), S)
    assert (f.severity, f.step) == ("error", 61)
    (g,) = detect_nan(frame(100, loss=np.nan), S)
    assert g.severity == "error" and "first logged step" in g.message
