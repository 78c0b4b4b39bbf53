"""Outlier scaling on the real runs of ``../shared/real_runs``: the runs whose first losses flatten the rest are
fitted (nyu_ssod_d2 starts at 156, pinn_em_nan reaches 2.9e12), and no run loses more than a few points to the edge."""

from __future__ import annotations

import numpy as np
import pytest

from monitor_cb.charts.figures import ChartData, dual_axis_figure
from monitor_cb.charts.options import ChartOptions
from monitor_cb.testing.corpus import corpus_dir, iter_runs

ROOT = corpus_dir()
pytestmark = pytest.mark.skipif(ROOT is None, reason="../shared/real_runs is not here")
SQUEEZED = {"nyu_ssod_d2": 156.0, "pinn_em_nan": 2.8e12, "pendulum_pinn": 125.0}  # a loss far above the rest


def fitted(run, log: bool = False):  # type: ignore[no-untyped-def]
    options = ChartOptions(fit_bulk=True, smoothing=0.6, log_y=log)
    fig = dual_axis_figure(ChartData(run.frame, run.logged), ["loss"], [], options)
    marks = [t for t in fig.data if (t.name or "").endswith("beyond the axis")]
    drawn = next((t for t in fig.data if t.name in ("loss (raw)", "loss")), None)
    return fig, marks, drawn


def test_every_real_run_keeps_nearly_all_its_points_on_the_axis() -> None:
    assert ROOT is not None
    seen = 0
    for run in iter_runs(ROOT):
        if "loss" not in run.frame.columns:
            continue
        seen += 1
        for log in (False, True):
            fig, marks, drawn = fitted(run, log)
            n = 0 if drawn is None else np.asarray(drawn.y).size
            marked = sum(len(m.x) for m in marks)
            assert marked <= max(5, 0.025 * n), (run.name, log, marked, n)
            if marked == 0:
                continue
            assert fig.layout.yaxis.autorange is False, run.name
    assert seen >= 70


@pytest.mark.parametrize("name", sorted(SQUEEZED))
def test_runs_whose_outliers_flatten_the_curve_are_fitted(name: str) -> None:
    assert ROOT is not None
    run = next(iter_runs(ROOT, [name]))
    fig, marks, _ = fitted(run)
    top = fig.layout.yaxis.range[1]
    assert marks and max(max(m.customdata) for m in marks) >= SQUEEZED[name] * 0.99
    assert top < SQUEEZED[name] / 5, "the axis fits the rest, not the outlier"
