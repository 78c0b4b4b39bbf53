import warnings

import numpy as np
import pandas as pd
import pytest

from monitor_cb.diagnosis import DiagnosisSettings, diagnose, engine
from monitor_cb.testing.synthetic import healthy_run
from tests.diagnosis.helpers import decaying_loss, frame, noisy


def test_findings_come_sorted_with_the_run_as_a_whole():
    loss = decaying_loss(600)
    loss[200:202] *= 4
    loss[500:] = np.nan
    found = diagnose(frame(600, loss=loss, lr=1e-3))
    assert [(f.kind, f.step) for f in found] == [("loss_spike", 201), ("nan", 501)]
    assert all(f.rank is None for f in found)


def test_each_rank_is_judged_on_its_own():
    a = frame(300, loss=decaying_loss(300, seed=1))
    b = frame(300, loss=decaying_loss(300, seed=2))
    b.loc[250:, "loss"] = np.nan
    b["rank"] = 1
    merged = pd.concat([a, b]).sort_values(["step", "rank"], kind="stable").reset_index(drop=True)
    (f,) = diagnose(merged)
    assert (f.kind, f.step, f.rank) == ("nan", 251, 1)


def test_disabled_kinds_and_stalled_needs_a_status():
    loss = decaying_loss(300)
    loss[-1] = np.nan
    f = frame(300, loss=loss)
    assert diagnose(f, DiagnosisSettings(disabled=("nan", "plateau"))) == []
    late = float(f["t"].iloc[-1]) + 3600
    assert [x.kind for x in diagnose(f, status="running", now=late)] == ["nan", "stalled"]
    assert [x.kind for x in diagnose(f, now=late)] == ["nan"]


@pytest.mark.parametrize(
    "odd",
    [
        pd.DataFrame(),
        pd.DataFrame({"step": [1]}),
        frame(1, loss=np.nan, grad_norm=np.inf, lr=0.0, throughput=np.nan, eval_loss=np.nan),
        frame(3, loss=2.0, lr=1e-3, grad_norm=1.0, throughput=10.0, step_time=0.1, data_time=0.01, eval_loss=2.0),
        frame(500, loss=np.nan, lr=np.nan, grad_norm=np.nan, throughput=np.nan, step_time=np.nan, eval_loss=np.nan),
        frame(500, loss=1.0, lr=1e-3, grad_norm=1.0, throughput=100.0, step_time=0.1, data_time=0.0, eval_loss=1.0),
    ],
)
def test_odd_frames_never_raise(odd):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even a detector failure warning
        found = diagnose(odd, status="running", now=2e9)
    assert all(f.kind in ("nan", "plateau", "stalled") for f in found)


def test_object_columns_from_a_json_reader_are_read():
    f = frame(400, loss=decaying_loss(400))
    f["loss"] = f["loss"].astype(object)
    f["event"] = None
    f.loc[399, ["loss", "event"]] = [None, "guard_stop"]  # an event-only row: the loss was not logged there
    assert diagnose(f) == []
    f.loc[300, "loss"] = None  # a train row whose loss is missing: a logged NaN
    assert [x.step for x in diagnose(f)] == [301]


def test_a_failing_detector_is_skipped_with_a_warning(monkeypatch):
    def broken(frame, settings):
        raise RuntimeError("boom")

    monkeypatch.setitem(engine.SERIES_DETECTORS, "loss_spike", broken)
    with pytest.warns(RuntimeWarning, match="loss_spike.*boom"):
        assert diagnose(frame(100, loss=noisy(100))) == []


def test_healthy_synthetic_runs_are_quiet():
    for seed in (3, 4, 5):
        assert [f for f in diagnose(healthy_run(seed), status="finished") if f.level >= 1] == []


def test_a_metric_only_one_rank_logs_is_not_a_nan_on_the_others():
    a = frame(300, loss=decaying_loss(300), throughput=100.0)
    b = frame(300, loss=np.nan, throughput=100.0)  # rank 1 does not log the loss
    b["rank"] = 1
    merged = pd.concat([a, b]).sort_values(["step", "rank"], kind="stable").reset_index(drop=True)
    assert diagnose(merged) == []
