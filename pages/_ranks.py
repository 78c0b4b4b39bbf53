"""The live page's "Ranks and hardware" section: a distributed job shown as one thing.

For a run with several ranks: per metric the rank mean inside a min-max band, or one line per rank
on demand, and each rank's step time against the others (stragglers stand out). The band comes
from the store's aggregate across ranks (computed at ingest, extended with new steps only), the
lines per rank and the step times from each rank's rows read on demand: the server never holds a
merged ranks x steps frame. For any run with telemetry samples: utilisation and memory aligned to
steps. Figures are built only when the section is open, and reused while no record arrived.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from monitor_cb.charts.options import ChartData, ChartOptions
from monitor_cb.charts.rank_figures import (
    per_rank_figure,
    rank_band_figure,
    rank_step_time_figure,
    telemetry_columns,
    utilisation_figure,
)
from monitor_cb.ingest.runframe import RunFrame
from pages import _shared
from pages._chart import plotly_chart

CACHE = "ranks_figures"
RANK_METRICS = ("loss", "grad_norm", "throughput", "step_time", "data_time", "lr")
_TIME_X = ("step", "time", "elapsed_s", "elapsed_min", "elapsed_h")


def ranks_section(store: Any, run: Any, data: RunFrame, x: str, smoothing: float) -> None:
    """Draw the section under the charts when there is anything to show (several ranks or telemetry)."""
    frame = data.frame
    ranks = tuple(getattr(run, "ranks", ()) or ())
    telemetry = telemetry_columns(frame)
    if len(ranks) < 2 and not telemetry:
        return
    label = f"Ranks and hardware ({len(ranks)} ranks)" if len(ranks) > 1 else "Hardware"
    if not st.toggle(label, key="show_ranks", help="Per-rank views and utilisation; built only while shown."):
        return
    metric, per_rank = None, False
    if len(ranks) > 1:
        metrics = [m for m in RANK_METRICS if m in frame.columns]
        left, right = st.columns([3, 1])
        metric = left.selectbox("Metric across ranks", metrics, key="rank_metric") if metrics else None
        per_rank = right.toggle("One line per rank", key="rank_lines")
    bands = store.bands(run.id, metric) if metric is not None and len(ranks) > 1 else None
    key = (data.key, None if bands is None else id(bands), x, smoothing, metric, per_rank)
    cache = st.session_state.setdefault(CACHE, {})
    if cache.get("key") != key:
        figures = build_figures(store, run.id, data, x, smoothing, metric, per_rank, telemetry)
        cache.update(key=key, figures=figures)
    for name, fig in cache["figures"].items():
        plotly_chart(fig, f"ranks_{name}", _shared.PLOTLY_CONFIG)


def build_figures(
    store: Any,
    run_id: str,
    data: RunFrame,
    x: str,
    smoothing: float,
    metric: str | None,
    per_rank: bool,
    telemetry: list[str],
) -> dict[str, Any]:
    """The section's figures, keyed by a stable name (plain plotly; no Streamlit calls)."""
    frame = data.frame
    figures: dict[str, Any] = {}
    uirevision = f"{run_id}|ranks|{x}"
    options = ChartOptions(x=x, smoothing=smoothing, uirevision=uirevision)
    if metric is not None:
        if per_rank:
            parts = {r: ChartData(f, m) for r, (f, m) in store.rank_columns(run_id, metric).items()}
            figures["metric"] = per_rank_figure(parts, metric, options)
        else:
            x_bands = store.bands(run_id, x) if x not in _TIME_X and x in frame.columns else None
            figures["metric"] = rank_band_figure(store.bands(run_id, metric), metric, options, x_bands=x_bands)
        if "step_time" in frame.columns:
            matrix = store.rank_matrix(run_id, "step_time", last=1000)
            figures["step_time"] = rank_step_time_figure(matrix, options, last=1000)
    if telemetry:
        figures["hardware"] = utilisation_figure(frame, replace(options, smoothing=0.0))
    return figures
