"""Plateau notes on the real runs (``../shared/real_runs``; issue 36, item 10): what their labeller calls a
plateau is a loss flat near the level it started from, not a flat tail after convergence or a pause in a
slow noisy descent. Before: 78 notes on 23 of the 61 healthy runs. Skipped when the corpus is not there."""

from __future__ import annotations

import pandas as pd
import pytest

from monitor_cb.diagnosis import DiagnosisSettings, detect_plateau
from monitor_cb.diagnosis.findings import Finding
from monitor_cb.testing.corpus import corpus_dir, iter_runs

ROOT = corpus_dir()
pytestmark = pytest.mark.skipif(ROOT is None, reason="the real-runs corpus (../shared/real_runs) is not here")
S = DiagnosisSettings()


def notes(frame: pd.DataFrame) -> list[Finding]:
    return [f for f in detect_plateau(frame, S) if f.severity == "info"]


def test_healthy_runs_hardly_ever_get_a_plateau_note():
    healthy = {r.name: notes(r.frame) for r in iter_runs(ROOT) if r.healthy}
    assert len(healthy) == 61
    noted = {name: [(f.step, f.end_step) for f in found] for name, found in healthy.items() if found}
    assert len(noted) <= 2 and sum(len(v) for v in noted.values()) <= 2, noted  # was 23 runs, 78 notes


def test_a_labelled_plateau_long_enough_for_a_note_gets_one():
    # nbeats_alphalens: trendless noise around its first level for the whole run (labelled plateau_stuck);
    # of the other two, cibm_segmentation has 81 train points (under plateau_points) and fire_detect's train
    # loss fell before it went flat (its val loss shows the stall): the stuck warning's job, not this note's.
    (run,) = iter_runs(ROOT, ["nbeats_alphalens"])
    (found,) = notes(run.frame)
    assert found.step <= 398 <= found.end_step
