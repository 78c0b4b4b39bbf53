"""The straggler check on the aggregate across ranks finds what the full ranks x steps matrix finds."""

from __future__ import annotations

import pytest

from monitor_cb.analysis.rank_matrix import frame_bands
from monitor_cb.diagnosis import DiagnosisSettings
from monitor_cb.diagnosis.stragglers import detect_straggler, detect_straggler_bands
from monitor_cb.testing.synthetic_ranks import healthy_ranks_run, labelled_ranks_run


def aggregated(frame, settings):
    return detect_straggler_bands(frame_bands(frame, "step_time"), frame_bands(frame, "data_time"), settings)


@pytest.mark.parametrize("seed", range(12))
def test_a_straggler_is_named_from_the_bands_as_from_the_matrix(seed: int) -> None:
    settings = DiagnosisSettings()
    run = labelled_ranks_run("straggler", 9100 + seed)
    full = detect_straggler(run.frame, settings)
    bands = aggregated(run.frame, settings)
    assert {f.rank for f in bands} == {f.rank for f in full}, (run.variant, run.size)
    if full:
        first_full = min(f.step for f in full if f.rank == run.rank)
        first_bands = min(f.step for f in bands if f.rank == run.rank)
        assert abs(first_bands - first_full) <= 2 * settings.rank_window
        if run.variant != "input":  # a slow input pipeline slows both step time and data wait: either is right
            assert next(f for f in bands if f.rank == run.rank).details["by"] == full[0].details["by"]


@pytest.mark.parametrize("seed", range(6))
def test_healthy_ranks_raise_nothing_from_the_bands(seed: int) -> None:
    frame = healthy_ranks_run(9300 + seed)
    assert aggregated(frame, DiagnosisSettings()) == []


def test_one_rank_or_no_step_time_is_nothing() -> None:
    frame = healthy_ranks_run(1, world=1)
    assert aggregated(frame, DiagnosisSettings()) == []
    assert detect_straggler_bands(None, None, DiagnosisSettings()) == []
