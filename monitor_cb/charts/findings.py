"""Diagnosis findings drawn on a training-curve figure: a line (or a band) per finding, a few labels.

```python
from monitor_cb.charts.findings import add_findings, step_mapper

fig = dual_axis_figure(frame, x="time", ...)
add_findings(fig, findings, step_mapper(frame, "time"))
```

Every finding gets a shape coloured by its severity: a dashed vertical line at ``step``, or a
shaded band from ``step`` to ``end_step``. Only the ``max_labels`` most severe (then newest)
findings also get a small label (the kind) whose hover text is the message, so a run with
hundreds of findings still shows every position without a wall of text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from monitor_cb.analysis.live_series import LiveSeries
from monitor_cb.charts.style import NONFINITE_COLOR

SEVERITY_COLORS: dict[str, str] = {"info": "#17becf", "warning": "#f0a202", "error": NONFINITE_COLOR}
# Long info bands (plateaus) stay faint; an error band stands out.
BAND_OPACITY: dict[str, float] = {"info": 0.06, "warning": 0.1, "error": 0.14}
LINE_OPACITY = 0.8
MAX_LABELS = 6
MAX_SHAPES = 500
MAX_HOVER_CHARS = 300
FINDING_SHAPE_PREFIX = "finding:"  # shape names start with it, so tests and callers can tell them apart

StepToX = Callable[[int], Any]


@dataclass(frozen=True)
class FindingMarks:
    """The marks of some findings as plotly layout dicts: a line or band each, and a few labels."""

    shapes: tuple[dict[str, Any], ...] = ()
    labels: tuple[dict[str, Any], ...] = ()


def finding_marks(
    findings: Sequence[Any],
    x_of_step: StepToX | None = None,
    *,
    max_labels: int = MAX_LABELS,
    max_shapes: int = MAX_SHAPES,
    kinds: Collection[str] | None = None,
) -> FindingMarks:
    """The marks of ``findings`` as plain dicts (see :func:`add_findings` for the arguments).

    They depend on the findings and the x axis, not on the figure: the live page computes them once
    per refresh for every chart, and appends them to the charts' dicts without plotly's validation
    (which took about 12 ms per chart for 56 findings).
    """
    placed = []
    for finding in findings:
        if kinds is not None and finding.kind not in kinds:
            continue
        x0 = _x(finding.step, x_of_step)
        if x0 is None:
            continue
        end = finding.end_step
        x1 = _x(end, x_of_step) if end is not None and end != finding.step else None
        placed.append((finding, x0, x1))
    ranked = sorted(placed, key=lambda p: (-_level(p[0].severity), -p[0].step))
    kept = ranked[: max(0, max_shapes)]
    shapes = tuple(_shape(finding, x0, x1) for finding, x0, x1 in _joined(sorted(kept, key=lambda p: p[0].step)))
    labels = tuple(_label(finding, x0) for finding, x0, _x1 in ranked[: max(0, max_labels)])
    return FindingMarks(shapes, labels)


def _joined(placed: list[tuple[Any, Any, Any]]) -> list[tuple[Any, Any, Any]]:
    """Bands in step order, those of one kind and severity that touch or overlap drawn as one.

    A long run on a slow decay gives dozens of plateau episodes end to end (1-575, 576-3375, ...);
    drawn as one band they look the same (a band has no border) and cost one shape, not dozens
    (about 200 bytes each, on every chart, at every refresh). Each finding keeps its label and row.
    """
    out: list[tuple[Any, Any, Any]] = []
    last_end: dict[int, int] = {}  # index in out -> last step of the band there
    for finding, x0, x1 in placed:
        if x1 is not None and out:
            i = len(out) - 1
            prev, prev_x0, prev_x1 = out[i]
            same = prev_x1 is not None and (prev.kind, prev.severity) == (finding.kind, finding.severity)
            if same and finding.step <= last_end[i] + 1:
                if finding.end_step > last_end[i]:
                    out[i], last_end[i] = (prev, prev_x0, x1), finding.end_step
                continue
        out.append((finding, x0, x1))
        if x1 is not None:
            last_end[len(out) - 1] = finding.end_step
    return out


def add_findings(
    fig: go.Figure,
    findings: Sequence[Any],
    x_of_step: StepToX | None = None,
    *,
    max_labels: int = MAX_LABELS,
    max_shapes: int = MAX_SHAPES,
    kinds: Collection[str] | None = None,
) -> go.Figure:
    """Mark each finding on ``fig`` and return it (changed in place).

    Marks drawn by an earlier call are replaced, so calling it again on the same (cached) figure
    with newer findings does not pile marks up. The shapes are set in one layout update: adding
    200 findings one ``add_shape`` at a time would take seconds.

    Args:
        fig: any figure with an ``x`` axis (``dual_axis_figure`` and friends).
        findings: :class:`monitor_cb.diagnosis.Finding` objects (anything with ``kind``, ``severity``,
            ``step``, ``end_step``, ``rank`` and ``message``).
        x_of_step: maps a step to the chart's x value when the x axis is not the step (wall time,
            samples): see :func:`step_mapper`. A finding it maps to None or NaN is skipped.
        max_labels: at most this many findings get a label (most severe first, then newest); every
            finding keeps its line or band.
        max_shapes: a bound on the lines and bands (most severe, then newest, kept) so that a
            pathological run cannot stall the browser; far above what a page shows in practice.
        kinds: only findings of these kinds (None = all), e.g. the loss chart shows ``loss_spike``.
    """
    marks = finding_marks(findings, x_of_step, max_labels=max_labels, max_shapes=max_shapes, kinds=kinds)
    # assignment replaces the tuples (update_layout would merge them element by element, slowly)
    fig.layout.shapes = [*_others(fig.layout.shapes), *marks.shapes]
    fig.layout.annotations = [*_others(fig.layout.annotations), *marks.labels]
    return fig


def with_marks(spec: dict[str, Any], marks: FindingMarks) -> dict[str, Any]:
    """A figure's dict (``fig.to_dict()``) with ``marks`` in place of any finding marks it had."""
    layout = dict(spec.get("layout") or {})
    for key, new in (("shapes", marks.shapes), ("annotations", marks.labels)):
        kept = [item for item in layout.get(key) or () if not _is_mark(item)]
        if kept or new:
            layout[key] = [*kept, *new]
        else:
            layout.pop(key, None)
    return {**spec, "layout": layout}


def _is_mark(item: Any) -> bool:
    return str((item or {}).get("name") or "").startswith(FINDING_SHAPE_PREFIX)


def _others(items: Sequence[Any]) -> list[Any]:
    """Layout items not drawn by :func:`add_findings`."""
    return [item for item in items or () if not (item.name or "").startswith(FINDING_SHAPE_PREFIX)]


def step_mapper(frame: pd.DataFrame | LiveSeries, x_kind: str = "step") -> StepToX | None:
    """A step -> x function for a chart of ``frame`` drawn against ``x_kind``; None for the step axis.

    A step is placed at the first logged row at or after it (the last row for a later step), so a
    finding lands on the point it is about, on datetime and numeric axes alike.
    """
    if x_kind == "step":
        return None
    series = LiveSeries.of(frame)
    xa = series.x_axis(x_kind)
    steps = series.steps()
    values = xa.values
    ok = ~pd.isna(values) if xa.is_datetime else np.isfinite(np.asarray(values, dtype=float))
    steps, values = steps[ok], values[ok]
    if len(steps) == 0:
        return lambda step: None
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]

    def x_of_step(step: int) -> Any:
        i = min(int(np.searchsorted(steps, step, side="left")), len(steps) - 1)
        value = values[i]
        return pd.Timestamp(value).round("ms") if xa.is_datetime else float(value)

    return x_of_step


def _x(step: int, x_of_step: StepToX | None) -> Any:
    value = step if x_of_step is None else x_of_step(step)
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return None
    if isinstance(value, np.datetime64):
        return pd.Timestamp(value).round("ms")
    if isinstance(value, np.generic):
        return value.item()
    return value


def _level(severity: str) -> int:
    return {"info": 0, "warning": 1, "error": 2}.get(severity, 0)


def _shape(finding: Any, x0: Any, x1: Any | None) -> dict[str, Any]:
    color = SEVERITY_COLORS.get(finding.severity, SEVERITY_COLORS["info"])
    common = {"name": f"{FINDING_SHAPE_PREFIX}{finding.kind}", "xref": "x", "yref": "paper", "y0": 0, "y1": 1}
    if x1 is None:
        line = {"color": color, "width": 1, "dash": "dash"}
        return {**common, "type": "line", "x0": x0, "x1": x0, "opacity": LINE_OPACITY, "line": line}
    return {
        **common,
        "type": "rect",
        "x0": x0,
        "x1": x1,
        "fillcolor": color,
        "opacity": BAND_OPACITY.get(finding.severity, 0.1),
        "line": {"width": 0},
        "layer": "below",
    }


def _label(finding: Any, x0: Any) -> dict[str, Any]:
    color = SEVERITY_COLORS.get(finding.severity, SEVERITY_COLORS["info"])
    return {
        "name": f"{FINDING_SHAPE_PREFIX}{finding.kind}",
        "x": x0,
        "xref": "x",
        "y": 1,
        "yref": "paper",
        "yanchor": "top",
        "xanchor": "center",
        "textangle": -90,
        "text": _plain(finding.kind),
        "hovertext": hover_text(finding),
        "showarrow": False,
        "font": {"color": color, "size": 10},
        "bgcolor": "rgba(255,255,255,0.7)",
    }


def hover_text(finding: Any) -> str:
    """``ERROR nan @ step 412 (rank 3)<br>message``: the finding's text escaped (plotly reads a subset of HTML)."""
    where = f"step {finding.step:,}"
    if finding.end_step is not None and finding.end_step != finding.step:
        where += f"–{finding.end_step:,}"
    if finding.rank is not None:
        where += f" (rank {finding.rank})"
    message = str(finding.message)
    if len(message) > MAX_HOVER_CHARS:
        message = message[: MAX_HOVER_CHARS - 1] + "…"
    return f"{_plain(finding.severity.upper())} {_plain(finding.kind)} @ {where}<br>{_plain(message)}"


def _plain(text: str) -> str:
    # plotly.js renders <b>, <a href>, <br> ... in text: escape so run content stays text.
    return html.escape(" ".join(str(text).split()), quote=False)


__all__ = [
    "MAX_LABELS",
    "MAX_SHAPES",
    "SEVERITY_COLORS",
    "FindingMarks",
    "add_findings",
    "finding_marks",
    "hover_text",
    "step_mapper",
    "with_marks",
]
