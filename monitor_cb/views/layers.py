"""The Layers page's plain logic (no Streamlit): a run's families, the heatmap of one, its top movers,
the selected parameter's curve under the loss and the global gradient norm, and the ``layer_origin``
findings as marks and links to their rows.

A family's :class:`~monitor_cb.analysis.family_matrix.FamilyMatrix` is kept per run, rank and family
in a small shared LRU (:class:`MatrixCache`), so every viewer and every refresh folds in only the
rows the run gained since the last read.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from monitor_cb.analysis.distributions import percentile_bands
from monitor_cb.analysis.downsample import downsample_indices
from monitor_cb.analysis.families import Family, find_families, natural_key
from monitor_cb.analysis.family_matrix import FamilyMatrix, HeatmapData, MatrixOptions, Mover, top_movers
from monitor_cb.analysis.roles import automatic
from monitor_cb.charts.distributions import distribution_figure, histogram_figure
from monitor_cb.charts.heatmap import HeatmapMark, family_heatmap, white_template
from monitor_cb.charts.prepared import PreparedFigure
from monitor_cb.charts.style import METRIC_COLORS, NONFINITE_COLOR, PALETTE, escape_html
from monitor_cb.charts.traces import typed_arrays
from monitor_cb.diagnosis.findings import Finding, fmt_step

QUERY_FAMILY, QUERY_PARAM = "family", "param"
MAX_CELLS = 200_000  # heatmap cells a figure holds at most (1,000 parameters: 200 step buckets)
MIN_BUCKETS, MAX_BUCKETS = 100, 400
CACHE_ENTRIES = 16
CURVE_POINTS = 2_000
MOVERS = 15


class MatrixCache:
    """Family matrices by (run, rank, family, columns, options), least recently used dropped first."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self._entries = entries
        self._items: OrderedDict[tuple[Any, ...], tuple[FamilyMatrix, threading.Lock]] = OrderedDict()
        self._lock = threading.Lock()

    def matrix(
        self, key: tuple[Any, ...], family: Family, options: MatrixOptions
    ) -> tuple[FamilyMatrix, threading.Lock]:
        full = (*key, family.name, family.columns, options)
        """The matrix and the lock to hold while updating and reading it (viewers share it)."""
        with self._lock:
            found = self._items.get(full)
            if found is None:
                found = self._items[full] = (FamilyMatrix(family.members, family.columns, options), threading.Lock())
            self._items.move_to_end(full)
            while len(self._items) > self._entries:
                self._items.popitem(last=False)
        return found

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class MoverRow:
    """One line of the top-movers list (plain text: the page shows it in a table, never as Markdown)."""

    parameter: str
    change: str
    step: int


@dataclass(frozen=True)
class LayersView:
    """Everything the page draws for one family of one run."""

    family: Family
    heatmap: PreparedFigure
    data: HeatmapData
    movers: tuple[Mover, ...]
    member: str | None
    curve: PreparedFigure | None
    findings: tuple[Finding, ...]  # layer_origin findings about this family

    def mover_rows(self) -> list[MoverRow]:
        return [MoverRow(m.member, change_text(m), m.step) for m in self.movers]


def bucket_budget(parameters: int) -> int:
    """Step buckets per row: 400 for a small family, fewer for a large one, so the figure stays small
    (the cells are drawn, hovered and sent to every viewer at each refresh)."""
    return int(min(MAX_BUCKETS, max(MIN_BUCKETS, MAX_CELLS // max(parameters, 1))))


def run_families(columns: Sequence[Any]) -> list[Family]:
    """The run's families, largest first (columns that are not text are no family's).

    Found once per set of columns: ordering 1,000 parameter names naturally cost 0.1 s on every
    draw and refresh, and a run's columns rarely change between refreshes.
    """
    return list(_families_of(tuple(c for c in columns if isinstance(c, str))))


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _families_of(columns: tuple[str, ...]) -> tuple[Family, ...]:
    return tuple(find_families(columns))


def pick_family(families: Sequence[Family], wanted: str | None, findings: Sequence[Finding] = ()) -> Family | None:
    """The family asked for (``?family=``), else the one a ``layer_origin`` finding names, else the largest."""
    by_name = {f.name: f for f in families}
    if wanted in by_name:
        return by_name[wanted]
    for finding in origin_findings(findings):
        if finding.details.get("family") in by_name:
            return by_name[str(finding.details["family"])]
    return families[0] if families else None


def pick_member(family: Family, wanted: str | None, findings: Sequence[Finding], movers: Sequence[Mover]) -> str:
    """The row asked for (``?param=``), else the one a finding names, else the top mover, else the first."""
    if wanted in family.members:
        return str(wanted)
    for finding in origin_findings(findings, family.name):
        if finding.details.get("member") in family.members:
            return str(finding.details["member"])
    return movers[0].member if movers else family.members[0]


def origin_findings(findings: Sequence[Finding], family: str | None = None) -> list[Finding]:
    """The ``layer_origin`` findings (about ``family`` when given)."""
    return [f for f in findings if f.kind == "layer_origin" and (family is None or f.details.get("family") == family)]


def change_text(mover: Mover) -> str:
    """``"30x its baseline"``, ``"fell to 0.1x"``, ``"NaN/Inf"``."""
    if not np.isfinite(mover.ratio):
        return "NaN/Inf"
    factor = mover.factor
    if factor >= 100:
        return f"{factor:,.0f}x its baseline"
    if factor >= 1:
        return f"{factor:.3g}x its baseline"
    return f"fell to {factor:.2g}x"


def layers_view(
    data: Any,
    family: Family,
    member: str | None,
    findings: Sequence[Finding],
    cache: MatrixCache,
    options: MatrixOptions | None = None,
) -> LayersView:
    """One family of one run read (``RunStore.read``: frame, masks, key): heatmap, movers, curve, marks."""
    options = options or MatrixOptions(buckets=bucket_budget(len(family)))
    matrix, lock = cache.matrix((data.run_id, data.rank), family, options)
    with lock:
        matrix.update(data.frame, data.masks)
        cells = matrix.data()
    movers = tuple(top_movers(cells, MOVERS))
    mine = tuple(origin_findings(findings, family.name))
    member = pick_member(family, member, mine, movers)
    marks = [HeatmapMark(str(f.details["member"]), f.step, _mark_label(f)) for f in mine]
    heat = family_heatmap(cells, f"{family.name}: {len(family)} parameters", marks, selected=member)
    curve = member_figure(data.frame, family, member, mine)
    return LayersView(family, heat, cells, movers, member, curve, mine)


def _mark_label(finding: Finding) -> str:
    return f"{finding.details.get('member')}: first to leave its baseline, step {fmt_step(finding.step)}"


def member_figure(frame: pd.DataFrame, family: Family, member: str, findings: Sequence[Finding] = ()) -> PreparedFigure:
    """The parameter's curve under the loss and the global gradient norm (shared step axis).

    Built as plotly's dict directly (a finished :class:`PreparedFigure`): ``make_subplots`` and plotly's
    validation of the template cost 0.2-0.3 s on every draw and refresh.
    """
    roles = automatic([c for c in frame.columns if isinstance(c, str)]).metrics  # "train/loss" is a run's loss too
    panels = [(roles[r][0], roles[r][0]) for r in ("loss", "grad_norm") if roles.get(r)]
    panels.append((family.column_of(member), f"{family.name}: {member}"))
    layout = _subplots_layout(len(panels))
    for note, (_, title) in zip(layout["annotations"], panels, strict=True):
        note["text"] = escape_html(title)
    traces: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    steps = pd.to_numeric(frame["step"], errors="coerce").to_numpy(np.float64)
    for row, (column, title) in enumerate(panels, start=1):
        axis = "" if row == 1 else str(row)
        y = pd.to_numeric(frame[column], errors="coerce").to_numpy(np.float64)
        present = np.flatnonzero(~np.isnan(y) & np.isfinite(steps))  # logged rows (Inf kept)
        x_all, y_all = steps[present], y[present]
        picks = downsample_indices(x_all, y_all, CURVE_POINTS, max_nonfinite=200) if x_all.size else present[:0]
        xs, ys = x_all[picks], y_all[picks]
        color = METRIC_COLORS.get(column, PALETTE[3])
        traces.append(
            {
                "type": "scatter",
                "x": xs.astype(np.float32) if xs.size else xs,
                "y": np.where(np.isfinite(ys), ys, np.nan).astype(np.float32),
                "mode": "lines",
                "line": {"color": color, "width": 1.4},
                "name": escape_html(title),
                "hovertemplate": "step %{x}<br>%{y:.4g}<extra></extra>",
                "connectgaps": True,
                "xaxis": f"x{axis}",
                "yaxis": f"y{axis}",
            }
        )
        bad = ~np.isfinite(ys) & ~np.isnan(ys)
        if bad.any():
            traces.append(
                {
                    "type": "scatter",
                    "x": xs[bad],
                    "y": np.zeros(int(bad.sum())),
                    "mode": "markers",
                    "marker": {"color": NONFINITE_COLOR, "symbol": "x"},
                    "name": "Inf",
                    "showlegend": False,
                    "xaxis": f"x{axis}",
                    "yaxis": f"y{axis}",
                }
            )
        if row > 1 and np.nanmin(np.where(ys > 0, ys, np.nan), initial=np.inf) < np.inf:
            layout[f"yaxis{axis}"]["type"] = "log"
    for finding in findings:
        trigger = finding.details.get("trigger_step")
        lines = [(finding.step, {"color": NONFINITE_COLOR, "dash": "dot", "width": 1})]
        if isinstance(trigger, int):
            lines.append((trigger, {"color": "#555555", "dash": "dash", "width": 1}))
        for x, line in lines:
            for row in range(1, len(panels) + 1):
                axis = "" if row == 1 else str(row)
                shapes.append(
                    {
                        "type": "line",
                        "x0": x,
                        "x1": x,
                        "xref": f"x{axis}",
                        "y0": 0,
                        "y1": 1,
                        "yref": f"y{axis} domain",
                        "line": line,
                    }
                )
    if shapes:
        layout["shapes"] = shapes
    layout.update(
        height=170 * len(panels) + 60,
        margin={"l": 10, "r": 10, "t": 30, "b": 30},
        showlegend=False,
        template=white_template(),
        uirevision=f"{family.name}/{member}",
    )
    layout[f"xaxis{len(panels) if len(panels) > 1 else ''}"]["title"] = {"text": "step"}
    return PreparedFigure.of({"data": typed_arrays(traces), "layout": layout})


@functools.cache
def _subplots_skeleton(rows: int) -> dict[str, Any]:
    """``make_subplots``' layout for ``rows`` panels over a shared step axis (axes, domains, title slots), once."""
    fig = make_subplots(
        rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.06, subplot_titles=[str(i) for i in range(rows)]
    )
    layout = fig.to_dict()["layout"]
    layout.pop("template", None)
    return layout


def _subplots_layout(rows: int) -> dict[str, Any]:
    """A fresh copy of the skeleton, for one figure to fill in."""
    return copy.deepcopy(_subplots_skeleton(rows))


def layers_link(finding: Finding, run_id: str) -> dict[str, str]:
    """The Layers page's query for a ``layer_origin`` finding: its run, family and row."""
    return {
        "run": run_id,
        QUERY_FAMILY: str(finding.details.get("family", "")),
        QUERY_PARAM: str(finding.details.get("member", "")),
    }


@dataclass(frozen=True)
class DistributionView:
    """One histogram tag: its bands over steps, the steps to pick from and the histogram at the picked one."""

    tag: str
    bands: go.Figure
    steps: tuple[int, ...]
    step: int
    histogram: go.Figure


def histogram_tags(histograms: Mapping[str, Any]) -> list[str]:
    """The run's histogram tags in the model's order (``layers.2`` before ``layers.10``)."""
    return sorted(histograms, key=natural_key)


def distribution_view(histograms: Mapping[str, Any], tag: str, step: int | None = None) -> DistributionView | None:
    """The distributions of ``tag`` (a ``HistogramSeries``), and its histogram at ``step`` (default the last)."""
    series = histograms.get(tag)
    if series is None or len(series.steps) == 0:
        return None
    bands = percentile_bands(series.steps, series.edges, series.counts)
    steps = tuple(int(s) for s in series.steps)
    at = steps.index(step) if step in steps else len(steps) - 1
    chosen = steps[at]
    hist = histogram_figure(series.edges[at], series.counts[at], f"{tag} at step {chosen:,}")
    return DistributionView(tag, distribution_figure(bands, f"{tag}: distribution over steps"), steps, chosen, hist)


def family_choices(families: Sequence[Family]) -> Mapping[str, str]:
    """Family name -> its label in the picker (``"local_norm (300 parameters)"``)."""
    return {f.name: f"{f.name} ({len(f)} parameters)" for f in families}
