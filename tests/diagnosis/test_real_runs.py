"""The detectors on real training runs written by other people (``../shared/real_runs``, see its README).

Skipped when the corpus is not there. The goals are the issue's (issue 12): healthy runs hardly ever
warn (as the finished run is diagnosed, and as the watcher would have seen them live), ``diagnose``
never exits 1 on one, and the labelled events are found with the right kind near their step. The
one labelled event these rules miss is named: its noise (per-batch losses from 0.05 to 5) leaves a
rise from ~1.3 to ~3 within about 3 noise sigmas of the difference, below what the divergence rule
asks of every run (bench/bench_diagnosis.py prints the details).
"""

from __future__ import annotations

import pytest

from monitor_cb.diagnosis import DiagnosisSettings, diagnose
from monitor_cb.diagnosis.corpus import corpus_dir, iter_runs, live_alarms, score_event
from monitor_cb.diagnosis.inject import inject, score_injected

ROOT = corpus_dir()
pytestmark = pytest.mark.skipif(ROOT is None, reason="the real-runs corpus (../shared/real_runs) is not here")
S = DiagnosisSettings()
KNOWN_MISSES = {"tcn_intraday_diverge:divergence"}


@pytest.fixture(scope="module")
def runs():
    return list(iter_runs(ROOT))


def test_the_corpus_is_the_one_described(runs):
    assert len(runs) == 79
    assert sum(r.healthy for r in runs) == 61
    assert sum(len(r.events) for r in runs) == 20


def test_healthy_runs_hardly_ever_warn(runs):
    healthy = [r for r in runs if r.healthy]
    finished = [f for r in healthy for f in diagnose(r.frame, S, status="finished", logged=r.logged) if f.level >= 1]
    live = [(r.name, f.kind) for r in healthy for f in live_alarms(r, S)]
    # goal: at most 1 warning or error per 20 healthy runs; seen live it is 4 in 61 (1 in 15), see the report
    assert len(finished) <= len(healthy) / 20, finished
    assert len(live) <= 4, live
    assert not [f for f in finished if f.severity == "error"]  # diagnose never exits 1 on a healthy run


def test_labelled_events_are_found_with_the_right_kind(runs):
    results = [score_event(r, e, S) for r in runs for e in r.events]
    missed = {f"{x.run}:{x.event.kind}" for x in results if not x.found}
    assert missed <= KNOWN_MISSES, missed
    assert sum(x.found for x in results) >= len(results) - len(KNOWN_MISSES)


def test_benign_oddities_from_the_notes_are_not_alerts(runs):
    by_name = {r.name: r for r in runs}
    for name in ("fin_timeseries", "gpt_lab_diffusion", "t5_finetune_log"):  # per-batch outliers, back at once
        found = diagnose(by_name[name].frame, S, status="finished", logged=by_name[name].logged)
        assert not [f for f in found if f.kind == "loss_spike" and f.level >= 1], name
    for name in ("tech_challenge_ft", "rpg_game_llm"):  # fp16 loss-scale skipped steps: a note, not a NaN error
        found = diagnose(by_name[name].frame, S, status="finished", logged=by_name[name].logged)
        assert [f.severity for f in found if f.kind == "nan"] == ["info"], name
    for name in ("vendor_slm", "vit_lora_demo", "aichatbot_29aitch"):  # decay to 0, restarts, 4-decimal rounding
        found = diagnose(by_name[name].frame, S, status="finished", logged=by_name[name].logged)
        assert not [f for f in found if f.level >= 1], name


@pytest.mark.parametrize("fault", ["nan", "spike", "throughput_drop", "lr_break"])
def test_faults_injected_into_real_curves_are_found_within_20_points(runs, fault):
    cases = [inject(r, fault, seed=i) for i, r in enumerate(r for r in runs if r.healthy and r.split == "B")]
    results = [score_injected(c, S) for c in cases if c is not None][:12]
    assert len(results) >= 4
    found = sum(x.within_goal for x in results)
    assert found >= 0.75 * len(results), [(x.injected.base, x.injected.variant, x.delay) for x in results]
    # any warning before the onset is one the healthy run already has (counted in the test above), not the fault's
    by_name = {r.name: r for r in runs}
    for x in results:
        if x.early:
            own = {f"{f.kind}:{f.severity}" for f in live_alarms(by_name[x.injected.base], S)}
            assert set(x.early) <= own, (x.injected.base, x.early)
