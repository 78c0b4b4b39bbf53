"""The labelled generator end to end: each injected failure is flagged soon after its onset."""

import pytest

from monitor_cb.testing.synthetic import FAILURE_KINDS, labelled_run, score

# delay budget in logged points (the goal is 20); overfitting is judged in evaluations and
# plateau needs plateau_points by definition, stalled in seconds of silence. A weak sawtooth can need
# a few windows more than 20 points (see bench/bench_diagnosis.py), so it gets three windows.
BUDGET = {"overfitting": None, "plateau": None, "stalled": None, "sawtooth": 3 * 16}


@pytest.mark.parametrize("kind", FAILURE_KINDS)
def test_injected_failures_are_flagged(kind):
    for seed in (11, 12):
        run = labelled_run(kind, seed, n_points=1500)
        result = score(run)
        assert result.detected, (kind, seed, run.variant)
        assert result.early == (), (kind, seed, result.early)
        budget = BUDGET.get(kind, 20)
        if budget is not None:
            assert result.delay <= budget, (kind, seed, run.variant, result.delay)


def test_healthy_runs_of_several_lengths_are_quiet():
    for seed, n in ((21, 300), (22, 3000), (23, 8000)):
        assert score(labelled_run(None, seed, n_points=n)).early == ()


def test_labels_are_reproducible():
    a, b = labelled_run("loss_spike", 5), labelled_run("loss_spike", 5)
    assert a.onset_step == b.onset_step and a.frame.equals(b.frame)
    with pytest.raises(ValueError, match="unknown failure kind"):
        labelled_run("meltdown", 1)
