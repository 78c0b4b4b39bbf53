"""Distribution bands and one histogram as figures: bands outer first, the median a line, tags escaped."""

from __future__ import annotations

import numpy as np

from monitor_cb.analysis.distributions import percentile_bands
from monitor_cb.charts.distributions import distribution_figure, histogram_figure


def test_bands_and_histogram():
    edges = [np.linspace(-s, s, 11) for s in (1.0, 2.0, 3.0)]
    counts = [np.full(10, 5) for _ in edges]
    fig = distribution_figure(percentile_bands(np.array([1, 2, 3]), edges, counts), "<b>w</b>")
    assert fig.layout.title.text == "&lt;b&gt;w&lt;/b&gt;"
    fills = [t for t in fig.data if t.fill == "tonexty"]
    assert len(fills) == 4 and fig.data[-1].name == "median"
    assert list(fig.data[-1].y) == [0.0, 0.0, 0.0]
    hist = histogram_figure(edges[0], counts[0], "w at step 1")
    (bar,) = hist.data
    assert np.allclose(bar.width, 0.2) and list(bar.y) == [5] * 10
