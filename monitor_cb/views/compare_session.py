"""What one compare-page refresh computes, without Streamlit (the benchmark times :func:`build_view`).

``CompareSettings`` is what the page's controls decided; ``load_run`` reads a run from a ``RunStore``
into :class:`~monitor_cb.compare.rundata.RunData`; ``build_view`` makes the overlay (or side-by-side)
figures (:mod:`monitor_cb.charts.overlay`) and the summary; ``report_html`` the HTML report of the
same view.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from monitor_cb.charts.group_traces import group_figures
from monitor_cb.charts.options import ChartOptions
from monitor_cb.charts.overlay import overlay_figures
from monitor_cb.charts.side import side_view
from monitor_cb.compare.align import Alignment, AlignmentInfo, align_runs
from monitor_cb.compare.colors import view_colors
from monitor_cb.compare.configdiff import config_diff, empty_diff_note, run_config
from monitor_cb.compare.grouping import group_label, group_runs
from monitor_cb.compare.rundata import RunData
from monitor_cb.compare.summary_table import summary_table

DEFAULT_POINTS = 1000  # grid bins per chart; each bin draws up to two points per run


@dataclass(frozen=True)
class CompareSettings:
    """What the compare page's controls decided."""

    metrics: tuple[str, ...] = ("loss",)
    alignment: str = "step"
    smoothing: float = 0.6
    log_y: bool = False
    n_points: int = DEFAULT_POINTS
    x_range: tuple[Any, Any] | None = None  # in the alignment's units (datetimes for wall time)
    hidden: frozenset[str] = frozenset()  # run ids the user hid with a legend click
    group_by: str | None = None  # a config key: one mean line and min-max band per value (overlay)
    shared_y: bool = True  # side by side: one y range per metric across the runs (where readable)
    shared_x: bool | None = None  # side by side: one x range for all panels; None = unless it blanks panels
    smoother: str = "ema"  # a key of monitor_cb.analysis.smoothing.SMOOTHERS
    log_x: bool = False  # a log x axis (step and samples alignments)
    fit_bulk: bool = True  # y axes fit the bulk of the points, outliers marked at the edge (charts.outliers)

    def chart_options(self, uirevision: Any = "compare") -> ChartOptions:
        """The chart options these settings give (``x`` is the alignment, ``n_out`` the grid points)."""
        return ChartOptions(
            x=self.alignment,
            smoothing=self.smoothing,
            log_y=self.log_y,
            n_out=self.n_points,
            x_range=self.x_range,
            uirevision=uirevision,
            smoother=self.smoother,
            log_x=self.log_x and self.alignment in ("step", "samples"),
            fit_bulk=self.fit_bulk,
        )


def load_run(store: Any, info: Any) -> RunData | None:
    """A run's frame and "was logged" masks from the store (``store.read``); None when its files vanished."""
    try:
        data = store.read(info.id)
    except (FileNotFoundError, KeyError):
        return None
    return RunData(
        info.id, str(info.name or info.id), data.frame, data.masks, dict(info.meta or {}), info.status, data.key
    )


def run_key(run: RunData) -> tuple[Any, ...]:
    """What a run's figures depend on: its data version (``RunFrame.key``) and status."""
    if run.version:
        return (run.id, run.version, run.status)
    frame = run.frame  # built by hand (tests, uploads): no data version, so the rows say it
    last = tuple(float(frame[c].iloc[-1]) for c in ("step", "t") if len(frame) and c in frame.columns)
    return (run.id, len(frame), tuple(frame.columns), last, run.status)


@dataclass(frozen=True)
class CompareView:
    """Everything one refresh of the compare page shows."""

    figures: dict[str, go.Figure]  # overlay: metric -> figure
    side: dict[str, list[go.Figure]]  # side by side: run id -> one panel per chosen metric
    aligned: AlignmentInfo  # (not the x values: a view is kept for every viewer of these runs)
    summary: pd.DataFrame
    x_bounds: tuple[Any, Any] | None = None
    colors: dict[str, str] = field(default_factory=dict)  # run id (and group label) -> colour
    side_shared_x: bool = True  # side by side: the panels share one x range
    side_unshared_y: tuple[str, ...] = ()  # side by side: metrics left unshared in y to keep curves readable
    key: tuple[Any, ...] = field(default=(), compare=False)


def x_bounds(aligned: Alignment) -> tuple[Any, Any] | None:
    """The union x range of the aligned runs in their own units (ints for steps, datetimes for wall time)."""
    lows, highs = [], []
    for a in aligned.x.values():
        values = a.numeric()
        finite = values[np.isfinite(values)]
        if finite.size:
            lows.append(finite.min())
            highs.append(finite.max())
    if not lows:
        return None
    lo, hi = float(min(lows)), float(max(highs))
    if aligned.is_datetime:
        return (pd.Timestamp(int(lo)).floor("us").to_pydatetime(), pd.Timestamp(int(hi)).ceil("us").to_pydatetime())
    if aligned.kind == "step":
        return (math.floor(lo), math.ceil(hi))
    return (lo, hi)


def build_view(
    runs: Sequence[RunData],
    settings: CompareSettings,
    side_by_side: bool = False,
    eval_metric: str | None = None,
    now: float | None = None,
    colors: Mapping[str, str] | None = None,
) -> CompareView:
    """The figures (overlay, grouped bands, or each run's panels side by side) and the summary table.

    ``colors`` are the colours the view gave before (run id or group label -> colour): every run
    (and group) keeps its colour; the ones given now are in ``CompareView.colors``.
    """
    now = time.time() if now is None else now
    options = settings.chart_options(uirevision=f"{settings.alignment}|{','.join(r.id for r in runs)}")
    aligned = align_runs(runs, settings.alignment)
    bounds = x_bounds(aligned)
    groups = _groups(runs, settings.group_by)
    given = view_colors([r.id for r in runs] + list(groups), colors)
    side: dict[str, list[go.Figure]] = {}
    figures: dict[str, go.Figure] = {}
    side_x, side_y = True, ()
    if side_by_side:
        panels = side_view(
            runs,
            aligned,
            settings.metrics,
            options,
            colors=given,
            shared_y=settings.shared_y,
            x_bounds=bounds,
            shared_x=settings.shared_x,
        )
        side, side_x, side_y = panels.panels, panels.shared_x, panels.unshared_y
    elif groups:
        figures = group_figures(runs, aligned, settings.metrics, options, groups, given)
    else:
        figures = overlay_figures(runs, aligned, settings.metrics, options, settings.hidden, colors=given)
    summary = summary_table(runs, eval_metric, now)
    return CompareView(figures, side, aligned.described(), summary, bounds, given, side_x, side_y)


def _groups(runs: Sequence[RunData], key: str | None) -> dict[str, tuple[str, ...]]:
    """Legend label -> run ids, for a group-by key (empty without one)."""
    if not key:
        return {}
    return {group_label(key, value, len(ids)): ids for value, ids in group_runs(runs, key).items()}


def diff_table(runs: Sequence[RunData], all_keys: bool = False) -> pd.DataFrame:
    """The config diff of the runs (columns titled with the run labels)."""
    return config_diff({r.id: run_config(r.meta) for r in runs}, [r.label for r in runs], all_keys)


def diff_note(runs: Sequence[RunData]) -> str:
    """What to say when :func:`diff_table` is empty (no config recorded, or none differs)."""
    return empty_diff_note({r.id: run_config(r.meta) for r in runs})


def report_html(
    runs: Sequence[RunData],
    settings: CompareSettings,
    all_keys: bool = False,
    colors: Mapping[str, str] | None = None,
) -> str:
    """The self-contained HTML report of this comparison (overlay charts, summary, config diff), in the
    page's colours (``colors``, as :func:`build_view` takes them)."""
    from monitor_cb.views.report import build_report
    from monitor_cb.views.summary_cells import durations_as_text

    view = build_view(runs, settings, side_by_side=False, colors=colors)
    notes = [
        f"Runs: {', '.join(r.label for r in runs)}",
        f"Aligned by {settings.alignment}; smoothing {settings.smoothing:g}; log y: {settings.log_y}.",
    ]
    if settings.group_by:
        notes.append(f"Grouped by {settings.group_by}: per value the mean line and the min-max band of its runs.")
    if view.aligned.skipped:
        reasons = "; ".join(f"{rid} ({view.aligned.why.get(rid, 'cannot be aligned')})" for rid in view.aligned.skipped)
        notes.append(f"Not drawn (cannot be aligned by {settings.alignment}): {reasons}")
    title = f"Comparison of {len(runs)} runs"
    return build_report(
        title,
        list(view.figures.values()),
        durations_as_text(view.summary),
        diff_table(runs, all_keys),
        notes,
        dt.datetime.now(dt.timezone.utc),
        empty_diff=diff_note(runs),
    )
