"""The one scatter (line) trace every builder draws: SVG or WebGL by size, 32-bit arrays, gaps for what cannot be drawn.

```python
fig.add_trace(scatter(x, drawable(y, log=True), name="loss", line={"color": c}))
```
"""

from __future__ import annotations

from typing import Any

import numpy as np

from monitor_cb.charts.style import compact_array

# Traces with more points than this use WebGL; fewer stay SVG. Every downsampled budget the pages
# offer (up to 4,000 points per trace, plus the spikes and NaN downsampling always keeps) stays SVG:
# Streamlit mounts a new chart for every refresh (its element id hashes the figure), and a WebGL
# chart then creates a new WebGL context each time, about 1.4 s of a live refresh's 2.4 s from
# record to screen in headless Chromium on two cores without a GPU (bench_dashboard), and browsers
# cap live WebGL contexts at 16. SVG draws a few thousand points in tens of milliseconds.
GL_MIN_POINTS = 5000
GL_SLACK = 4


def scatter(x: np.ndarray, y: np.ndarray, **props: Any) -> dict[str, Any]:
    """A scatter trace as a plain dict with 32-bit arrays, WebGL above ``GL_MIN_POINTS + GL_SLACK`` points.

    A dict, not a ``go.Scatter``: figures built from dicts in one call skip plotly's per-property
    validation (about 1 ms per trace); ``fig.add_trace`` accepts it as well.
    """
    kind = "scattergl" if np.asarray(x).size > GL_MIN_POINTS + GL_SLACK else "scatter"
    return {"type": kind, "x": compact_array(x, is_x=True), "y": compact_array(y, is_x=False), **props}


def drawable(y: np.ndarray, log: bool) -> np.ndarray:
    """``y`` with non-finite values (and values <= 0 on a log axis) as NaN gaps."""
    out = np.where(np.isfinite(y), y, np.nan)
    if log:
        with np.errstate(invalid="ignore"):
            out[out <= 0] = np.nan
    return out


def nonfinite_label(value: float) -> str:
    """``NaN``, ``+inf`` or ``-inf`` for a hover text."""
    if np.isnan(value):
        return "NaN"
    return "+inf" if value > 0 else "-inf"


__all__ = ["GL_MIN_POINTS", "GL_SLACK", "drawable", "nonfinite_label", "scatter"]
