"""Pauses a run explains itself (a logged evaluation, a resume) are neither a stall nor a slowdown."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from monitor_cb.diagnosis import diagnose
from monitor_cb.diagnosis.pauses import evaluation_rows, explained_pause
from monitor_cb.diagnosis.progress import detect_stalled
from monitor_cb.diagnosis.settings import DiagnosisSettings
from monitor_cb.diagnosis.throughput import detect_throughput_drop
from monitor_cb.ingest import RunStore
from monitor_cb.testing.framework_runs import hf_trainer, lightning, ml_agents, resumed, write_run

SETTINGS = DiagnosisSettings()


def _run(n: int = 300, gap_at: int = 150, gap_s: float = 3600.0, **extra: dict[int, float]) -> pd.DataFrame:
    """A steady run logging every 2 s, one long gap after row ``gap_at``; ``extra``: column -> {row: value}."""
    t = 1_700_000_000.0 + 2.0 * np.arange(n)
    t[gap_at + 1 :] += gap_s
    frame = pd.DataFrame({"step": np.arange(1, n + 1), "t": t, "loss": np.linspace(2, 1, n), "seg": 1})
    for name, cells in extra.items():
        column = np.full(n, np.nan)
        for row, value in cells.items():
            column[row] = value
        frame[name] = column
    return frame


def _stalls(frame: pd.DataFrame) -> list:
    return [f for f in detect_stalled(frame, SETTINGS, status="finished") if f.severity != "info"]


def test_a_silent_hour_is_a_stall() -> None:
    assert len(_stalls(_run())) == 1


def test_an_evaluation_whose_runtime_is_logged_explains_its_gap() -> None:
    hf = _run(eval_runtime={150: 3595.0}, eval_loss={150: 1.2})  # HF: the eval merges into the row before it
    assert _stalls(hf) == []


def test_an_hour_left_after_the_logged_evaluation_time_is_still_a_stall() -> None:
    hung = _run(gap_s=7200.0, **{"eval/runtime": {150: 600.0}, "eval/loss": {150: 1.2}})
    (finding,) = _stalls(hung)
    assert finding.step == 152


def test_an_evaluation_without_a_runtime_explains_its_gap() -> None:
    ppo = _run(gap_s=660.0, test100rew={151: 72.1})  # a test of 100 episodes, its result after the gap
    assert _stalls(ppo) == []
    assert evaluation_rows(ppo).sum() == 1


def test_a_metric_evaluated_at_every_point_explains_nothing() -> None:
    every = _run(val_acc={i: 0.5 for i in range(300)})
    assert evaluation_rows(every).sum() == 0 and len(_stalls(every)) == 1


def test_a_resume_into_a_new_segment_is_no_stall() -> None:
    frame = _run()
    frame.loc[151:, "seg"] = 2
    assert _stalls(frame) == []
    before, after = np.array([150]), np.array([151])
    assert explained_pause(frame, before, after, np.array([3600.0])).tolist() == [3600.0]


def _steady_with_evaluations(n: int = 400) -> pd.DataFrame:
    """A step every 2 s (a little jitter); every 50 logged points an evaluation adds 40 s to the two intervals
    around the row that logs its result."""
    dt = np.full(n - 1, 2.0) * np.exp(np.random.default_rng(0).normal(0, 0.02, n - 1))
    evals = np.arange(50, n - 2, 50)
    dt[evals - 1] += 40.0
    dt[evals] += 40.0
    frame = pd.DataFrame({"step": np.arange(1, n + 1), "t": np.r_[0.0, np.cumsum(dt)] + 1.7e9, "loss": 1.0})
    frame["eval_loss"] = np.where(np.isin(np.arange(n), evals), 1.1, np.nan)
    return frame


def test_the_rate_from_record_times_leaves_evaluations_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor_cb.diagnosis import throughput

    frame = _steady_with_evaluations()
    rate, unit = throughput.rate_series(frame)
    assert unit == throughput.FROM_TIMES and rate is not None
    assert np.all(np.abs(rate.values / 0.5 - 1) < 0.1), "every point is a step's speed, none an evaluation's"
    monkeypatch.setattr(throughput, "paused_between", lambda f, a, b: np.zeros(len(a), bool))
    rate, _ = throughput.rate_series(frame)
    assert rate is not None and np.sum(rate.values < 0.25) >= 7, "counted as step time, each evaluation is slow"


def test_alternating_intervals_are_one_speed() -> None:
    """ML-Agents' summaries: 1.3 s, 3.3 s, 1.3 s, ... apart (it trains every other summary): one speed, no drop."""
    from monitor_cb.diagnosis import throughput

    n = 300
    dt = np.where(np.arange(n - 1) % 2 == 0, 1.3, 3.3) * np.exp(np.random.default_rng(1).normal(0, 0.05, n - 1))
    frame = pd.DataFrame({"step": 2000 * np.arange(1, n + 1), "t": np.r_[0.0, np.cumsum(dt)] + 1.7e9, "loss": 1.0})
    rate, _ = throughput.rate_series(frame)
    assert rate is not None and np.ptp(np.log(rate.values)) < 0.4  # within about +-20% of one speed
    assert [f for f in detect_throughput_drop(frame, SETTINGS) if f.severity != "info"] == []


@pytest.fixture
def tb() -> None:
    pytest.importorskip("tensorboard")


def _diagnosed(root: Path) -> list:
    store = RunStore(root, rescan_interval_s=0, cache=False)
    (info,) = store.list_runs()
    data = store.read(info.id)
    return [f for f in diagnose(data.frame, status="finished", logged=data.masks) if f.severity != "info"]


@pytest.mark.usefixtures("tb")
def test_an_hf_run_with_hour_long_evaluations_raises_nothing(tmp_path: Path) -> None:
    write_run(tmp_path, hf_trainer(seed=3, eval_runtime_s=3255.0))
    assert _diagnosed(tmp_path) == []


@pytest.mark.usefixtures("tb")
@pytest.mark.parametrize("recipe", [lightning, ml_agents])
def test_a_resumed_run_in_two_event_files_raises_nothing_at_the_resume(tmp_path: Path, recipe: object) -> None:
    run = resumed(recipe(seed=4))  # type: ignore[operator]
    assert len(write_run(tmp_path, run)) == 2
    assert _diagnosed(tmp_path) == []


@pytest.mark.usefixtures("tb")
def test_ml_agents_wall_time_jitter_is_no_throughput_drop(tmp_path: Path) -> None:
    for seed in range(5):
        write_run(tmp_path / str(seed), ml_agents(seed=seed))
        assert [f for f in _diagnosed(tmp_path / str(seed)) if f.kind == "throughput_drop"] == []


def test_a_run_converted_in_a_burst_is_not_judged_on_its_record_times() -> None:
    """A converter wrote 20,000 records at ~3,300 a second, with its own flush pauses: a note, no drop."""
    rng = np.random.default_rng(0)
    n = 20_000
    dt = rng.lognormal(np.log(3e-4), 0.3, n - 1)
    dt[rng.integers(0, n - 1, 40)] += 0.02
    frame = pd.DataFrame({"step": np.arange(1, n + 1), "t": 1.7e9 + np.r_[0.0, np.cumsum(dt)], "loss": 1.0})
    (note,) = detect_throughput_drop(frame, SETTINGS)
    assert note.severity == "info" and "written in a burst" in note.message
