"""``layer_origin``: the parameter that left its baseline first is named; healthy runs stay quiet."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor_cb.diagnosis import DiagnosisSettings, diagnose
from monitor_cb.diagnosis.findings import Finding
from monitor_cb.diagnosis.layer_origin import detect_layer_origin
from monitor_cb.testing.corpus import corpus_dir, iter_runs
from monitor_cb.testing.synthetic_families import family_run

S = DiagnosisSettings()


def _origin(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.kind == "layer_origin"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("every", [1, 5])
def test_the_culprit_is_named_with_its_lead(seed, every):
    run = family_run(seed, blowup=True, every=every)
    findings = diagnose(run.frame, S, status="failed")
    (origin,) = _origin(findings)  # one episode, one finding (the spike and the NaN after it add none)
    assert origin.details["member"] == run.culprit
    assert origin.details["column"] == f"grad_norm/{run.culprit}"
    assert run.rise_step <= origin.step < run.blowup_step  # named before the global norm exploded
    assert origin.details["trigger_step"] >= run.blowup_step
    assert origin.details["steps_ahead"] > 0
    assert origin.severity == "error"  # the NaN after it makes the episode an error
    assert f"starting in {run.culprit} (grad_norm) at step {origin.step:,}" in origin.message
    assert "steps before the gradient explosion" in origin.message
    assert origin.details["factor"] >= 5


@pytest.mark.parametrize("seed", range(12))
def test_healthy_twin_is_quiet(seed):
    run = family_run(seed, every=1 + seed % 3)
    assert not _origin(diagnose(run.frame, S, status="finished"))


def test_mindformers_local_norm_family_is_read_too():
    run = family_run(3, blowup=True, prefix="local_norm", every=2)
    (origin,) = _origin(diagnose(run.frame, S, status="failed"))
    assert origin.details["family"] == "local_norm" and origin.details["member"] == run.culprit


def test_no_trigger_no_finding_and_disabled_is_off():
    run = family_run(1, blowup=True)
    assert detect_layer_origin(run.frame, S, triggers=[]) == []
    info = Finding("grad_explosion", "info", int(run.blowup_step), "a note")
    assert detect_layer_origin(run.frame, S, triggers=[info]) == []  # an uncorroborated note triggers nothing
    off = DiagnosisSettings(disabled=("layer_origin",))
    assert not _origin(diagnose(run.frame, off, status="failed"))


def test_logged_nan_member_counts_as_leaving(seed=2):
    run = family_run(seed, blowup=True)
    frame = run.frame.copy()
    column = "grad_norm/" + run.members[0]
    at = frame.index[frame["step"] == run.rise_step][0] - 1
    frame.loc[at:, column] = np.nan
    masks = {c: np.ones(len(frame), bool) for c in frame.columns if c.startswith("grad_norm/")}
    (origin,) = _origin(diagnose(frame, S, status="failed", logged=masks))
    assert origin.details["column"] == column and "NaN/Inf instead of its baseline" in origin.message


def test_text_in_a_member_column_is_not_fatal():
    run = family_run(4, blowup=True)
    frame = run.frame.astype({f"grad_norm/{run.members[1]}": object})
    frame.loc[5, f"grad_norm/{run.members[1]}"] = "oops"
    with_text = _origin(diagnose(frame, S, status="failed"))
    assert [f.details["member"] for f in with_text] == [run.culprit]


def test_several_ranks_each_named():
    run = family_run(5, blowup=True)
    a, b = run.frame.assign(rank=0), run.frame.assign(rank=1)
    merged = pd.concat([a, b]).sort_values(["step", "rank"], kind="stable").reset_index(drop=True)
    found = _origin(diagnose(merged, S, status="failed"))
    assert sorted(f.rank for f in found) == [0, 1]
    assert {f.details["member"] for f in found} == {run.culprit}


ROOT = corpus_dir()


@pytest.mark.skipif(ROOT is None, reason="the real-runs corpus (../shared/real_runs) is not here")
def test_real_runs_with_a_healthy_family_attached_are_quiet():
    """Real curves (their own loss, grad norm, spikes and labelled events) with a healthy family beside them."""
    rng = np.random.default_rng(11)
    quiet = 0
    for run in iter_runs(ROOT):
        if not run.healthy or "loss" not in run.frame.columns:
            continue
        frame = run.frame.copy()
        for i in range(8):
            frame[f"local_norm/model.layers.{i}.w"] = 10.0 ** rng.uniform(-2, 1) * np.exp(
                rng.normal(0, 0.1, len(frame))
            )
        found = _origin(diagnose(frame, S, status="finished", logged=run.logged))
        assert not found, (run.name, [f.message for f in found])
        quiet += 1
    assert quiet >= 50


def test_a_runs_own_metrics_grouped_by_prefix_are_no_layers():
    # Names as written group HF Trainer's train/loss, train/learning_rate, train/epoch and eval/* (and YOLO's
    # metrics/*) by prefix, but they are the run's own metrics: the loss turning NaN was named "a train jump
    # starting in loss (train)", the loss as the origin of itself.
    steps = np.arange(1, 301)
    loss = 2.0 * np.exp(-steps / 200)
    loss[249:] = np.nan
    frame = pd.DataFrame(
        {
            "step": steps,
            "train/loss": loss,
            "train/learning_rate": np.full(300, 1e-4),
            "train/epoch": steps / 100,
            "train/grad_norm": np.where(steps < 250, 1.0, np.inf),
            "eval/runtime": np.where(steps % 50 == 0, 30.0 + steps / 10, np.nan),
            "eval/samples_per_second": np.where(steps % 50 == 0, 300.0, np.nan),
            "metrics/mAP_0.5": np.where(steps % 50 == 0, steps / 300, np.nan),
            "metrics/recall": np.where(steps % 50 == 0, steps / 300, np.nan),
        }
    )
    findings = diagnose(frame, S, status="failed")
    assert any(f.kind == "nan" for f in findings), "the NaN itself is found"
    assert _origin(findings) == []
