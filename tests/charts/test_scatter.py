"""scatter: SVG for every downsampled budget the pages offer, WebGL only for traces far beyond it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.charts.figures import ChartOptions, dual_axis_figure
from monitor_cb.charts.scatter import GL_MIN_POINTS, GL_SLACK, scatter
from monitor_cb.views.live import N_OUT_CHOICES


def test_svg_up_to_the_largest_budget_with_its_kept_spikes() -> None:
    budget = max(N_OUT_CHOICES)
    assert scatter(np.arange(budget + 13), np.zeros(budget + 13))["type"] == "scatter"
    big = GL_MIN_POINTS + GL_SLACK + 1
    assert scatter(np.arange(big), np.zeros(big))["type"] == "scattergl"


def test_a_long_spiky_run_downsampled_for_the_live_page_is_drawn_in_svg() -> None:
    # 200k steps with NaN steps and spikes: downsampling keeps each NaN on top of the 1,000-point budget
    # (1,005 and 1,013 points on the 1M-step benchmark run, which then switched to WebGL: a new
    # WebGL context on every live refresh, 1.4 s of the 2.4 s from record to screen).
    n = 200_000
    rng = np.random.default_rng(0)
    loss = 1.0 + 0.05 * rng.standard_normal(n)
    loss[rng.choice(n, 40, replace=False)] *= 20
    loss[rng.choice(n, 30, replace=False)] = np.nan
    df = pd.DataFrame({"step": np.arange(1, n + 1), "loss": loss, "grad_norm": 1 + 0.2 * rng.standard_normal(n)})
    fig = dual_axis_figure(df, ["loss"], ["grad_norm"], ChartOptions(smoothing=0.6, n_out=1000))
    sizes = {t.name: len(t.x) for t in fig.data}
    assert sizes["loss (raw)"] > 1000 + GL_SLACK, sizes  # the case that used to go WebGL
    assert {t.type for t in fig.data} == {"scatter"}
