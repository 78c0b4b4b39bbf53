"""Compare charts of run groups: per group the mean line and a filled min-max band across its runs.

The numbers come from :func:`monitor_cb.compare.group_bands.group_band` on the shared x grid of the
chart (the alignment's x, ``options.n_out // 2`` bins, the zoom applied), each run smoothed first
with the chart's smoothing, so the band shows the spread of what the single-run lines show. A bin
where a run logged NaN/±inf gets a red X on the mean line (the value never enters the mean).

A band is two traces (upper edge, then lower edge filled to it) and the mean a third; all share
the group's legend entry, so a legend click hides the whole group. Labels are HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from monitor_cb.analysis.series import XAxis
from monitor_cb.charts.options import ChartOptions
from monitor_cb.charts.overlay import OVERLAY_HEIGHT, numeric_range, run_curve
from monitor_cb.charts.style import NONFINITE_COLOR, Labels, escape_html, layout_dict
from monitor_cb.compare.align import Alignment, reference_interval, smooth_run
from monitor_cb.compare.group_bands import Band, band_edges, group_band
from monitor_cb.compare.rundata import RunData

BAND_OPACITY = 0.18


def group_figures(
    runs: Sequence[RunData],
    aligned: Alignment,
    metrics: Sequence[str],
    options: ChartOptions,
    groups: Mapping[str, Sequence[str]],
    colors: Mapping[str, str],
) -> dict[str, go.Figure]:
    """One figure per metric with a mean line and min-max band per group.

    Args:
        groups: legend label -> run ids (see :func:`monitor_cb.compare.grouping.group_runs`).
        colors: legend label -> colour.
    """
    options = replace(options, height=options.height or OVERLAY_HEIGHT)
    by_id = {r.id: r for r in runs}
    lo_hi = numeric_range(options.x_range)
    xa = XAxis(aligned.kind, np.empty(0), aligned.title, aligned.is_datetime)
    figures: dict[str, go.Figure] = {}
    for metric in metrics:
        curves = {rid: _curve(by_id[rid], metric, aligned, lo_hi) for rid in by_id if rid in aligned.x}
        present = {rid: c for rid, c in curves.items() if c is not None}
        ref_dx = reference_interval([c[0] for c in present.values()])
        sparse = metric.startswith("eval_")
        smoothing = 0.0 if sparse else options.smoothing
        edges = band_edges([c[0] for c in present.values()], max(options.n_out // 2, 8)) if present else None
        traces: list[dict[str, Any]] = []
        for label, ids in groups.items():
            series = [present[r] for r in ids if r in present]
            if not series or edges is None:
                continue
            if smoothing > 0:
                series = [(x, smooth_run(x, y, smoothing, ref_dx, options.smoother)) for x, y in series]
            band = group_band(series, edges)
            traces += band_traces(band, escape_html(label), colors.get(label, "#1f77b4"), aligned.is_datetime, sparse)
        layout = layout_dict(xa, options, Labels(y=metric, title=metric))
        layout["legend"] = {**layout["legend"], "groupclick": "togglegroup"}
        figures[metric] = go.Figure({"data": traces, "layout": layout}, skip_invalid=True)
    return figures


def _curve(
    run: RunData, metric: str, aligned: Alignment, lo_hi: tuple[float, float] | None
) -> tuple[np.ndarray, np.ndarray] | None:
    if metric not in run.frame.columns:
        return None
    curve = run_curve(run, metric, aligned.x[run.id])
    if curve is None or lo_hi is None:
        return curve
    x, y = curve
    keep = (x >= lo_hi[0]) & (x <= lo_hi[1])
    return (x[keep], y[keep]) if keep.any() else None


def band_traces(band: Band, label: str, color: str, is_datetime: bool, markers: bool = False) -> list[dict[str, Any]]:
    """The upper edge, the lower edge filled up to it, the mean line and red X marks where runs logged NaN/±inf.

    The mean is solid where every run of the group has a value and dotted where fewer do (a run ended
    or started later), so the step where a member ends reads as such; the hover says "mean of k of N runs".

    ``label`` is already escaped; it names the legend entry (the mean line's).
    """
    has = band.n > 0
    x = _x(band.x, is_datetime)
    reached = band.n + band.nonfinite  # runs that logged anything in the bin (a NaN is marked, not a gap)
    members = int(reached.max()) if reached.size else 0
    full = reached == members
    # the dotted part overlaps the solid one by a bin each side, so the line stays joined
    partial = has & ~full
    partial = partial | (np.r_[partial[1:], False] & full) | (np.r_[False, partial[:-1]] & full)
    custom = np.stack([band.lo, band.hi, band.n], axis=-1)
    hover = (
        f"{label}: %{{y:.4g}} (min %{{customdata[0]:.4g}}, max %{{customdata[1]:.4g}}; "
        f"mean of %{{customdata[2]}} of {members} runs)<extra></extra>"
    )
    fill = _rgba(color, BAND_OPACITY)
    common = {"type": "scatter", "legendgroup": label, "hoverinfo": "skip", "showlegend": False}
    traces: list[dict[str, Any]] = [
        {**common, "x": x[has], "y": band.hi[has], "mode": "lines", "line": {"width": 0, "color": color}},
        {
            **common,
            "x": x[has],
            "y": band.lo[has],
            "mode": "lines",
            "line": {"width": 0, "color": color},
            "fill": "tonexty",
            "fillcolor": fill,
        },
        {
            "type": "scatter",
            "x": x,
            "y": np.where(full, band.mean, np.nan),
            "name": label,
            "legendgroup": label,
            "mode": "lines+markers" if markers else "lines",
            "line": {"color": color, "width": 2},
            "customdata": custom,
            "hovertemplate": hover,
        },
    ]
    if partial.any():  # where fewer of the group's runs reach: dotted, so a run's end is no jump of "the mean"
        traces.append(
            {
                "type": "scatter",
                "x": x,
                "y": np.where(partial, band.mean, np.nan),
                "name": f"{label} (fewer runs)",
                "legendgroup": label,
                "showlegend": False,
                "mode": "lines+markers" if markers else "lines",
                "line": {"color": color, "width": 1.5, "dash": "dot"},
                "customdata": custom,
                "hovertemplate": hover,
            }
        )
    bad = np.flatnonzero(band.nonfinite > 0)
    if bad.size:
        good = np.flatnonzero(has)
        before = np.searchsorted(good, bad, side="right") - 1
        anchor = np.where(before >= 0, band.mean[good[np.maximum(before, 0)]] if good.size else 0.0, np.nan)
        if good.size:
            anchor = np.where(np.isfinite(anchor), anchor, band.mean[good[0]])
        traces.append(
            {
                "type": "scatter",
                "x": x[bad],
                "y": anchor,
                "mode": "markers",
                "legendgroup": label,
                "showlegend": False,
                "marker": {"symbol": "x", "size": 10, "color": NONFINITE_COLOR},
                "text": [f"{label}: {int(k)} run(s) logged NaN/inf here" for k in band.nonfinite[bad]],
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    return traces


def _x(x: np.ndarray, is_datetime: bool) -> Any:
    if not is_datetime:
        return x
    return pd.to_datetime(np.round(x).astype("int64"), unit="ns").to_numpy()


def _rgba(color: str, alpha: float) -> str:
    text = color.lstrip("#")
    if len(text) != 6:
        return color
    r, g, b = (int(text[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"
