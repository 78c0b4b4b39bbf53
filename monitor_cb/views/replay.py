"""Replay one run: the cursor that grows the charts, and the "jump to" list of notable steps.

The list holds every diagnosis finding, the first NaN/±inf of the loss and the gradient norm and the
biggest loss spikes (ratio to the median of the preceding logged values) the findings do not already
report: one entry per event, each worded as a finding of its kind. Choosing one opens a window of
±50 logged steps around it, drawn at full resolution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.series import first_nonfinite, float_values, logged_rows, nonfinite_rows
from monitor_cb.charts.scatter import nonfinite_label
from monitor_cb.diagnosis.findings import fmt_ratio, fmt_step

WINDOW = 50  # logged steps each side of a notable step
SPIKE_BASELINE = 20  # preceding logged values whose median a spike is measured against
SPIKE_MIN_RATIO = 2.0
PLAY_TICKS = 100  # a replay at full speed takes about this many refreshes


@dataclass(frozen=True)
class Notable:
    """A step worth a look."""

    step: int
    kind: str  # a diagnosis kind ("nan", "loss_spike", ...), also for the steps the replay finds itself
    label: str  # plain text (the page escapes it)
    severity: str = "info"


def unique_steps(frame: pd.DataFrame) -> np.ndarray:
    """The run's distinct steps, sorted."""
    return np.unique(frame["step"].to_numpy()) if len(frame) else np.empty(0, dtype=np.int64)


def rows_until(frame: pd.DataFrame, step: int) -> slice:
    """Rows up to and including ``step`` (frames are sorted by step): the run as it was then."""
    return slice(0, int(np.searchsorted(frame["step"].to_numpy(), step, side="right")))


def window_rows(frame: pd.DataFrame, step: int, half: int = WINDOW) -> slice:
    """Rows of the ``half`` logged steps before ``step``, the step itself and the ``half`` after it."""
    steps = unique_steps(frame)
    if steps.size == 0:
        return slice(0, 0)
    i = int(np.clip(np.searchsorted(steps, step), 0, steps.size - 1))
    lo, hi = steps[max(i - half, 0)], steps[min(i + half, steps.size - 1)]
    column = frame["step"].to_numpy()
    return slice(int(np.searchsorted(column, lo, side="left")), int(np.searchsorted(column, hi, side="right")))


def next_cursor(steps: np.ndarray, cursor: int, ticks: int = PLAY_TICKS) -> int:
    """The step a play tick moves to: about ``1/ticks`` of the run further, at least one logged step."""
    if steps.size == 0:
        return cursor
    i = int(np.searchsorted(steps, cursor, side="right"))
    stride = max(steps.size // max(ticks, 1), 1)
    return int(steps[min(i + stride - 1, steps.size - 1)])


def loss_spikes(
    frame: pd.DataFrame, logged: Mapping[str, np.ndarray] | None, top: int = 5, column: str = "loss"
) -> list[tuple[int, float]]:
    """``(step, ratio)`` of the ``top`` biggest finite values of ``column`` relative to the median of the
    :data:`SPIKE_BASELINE` logged values before them (ratio at least :data:`SPIKE_MIN_RATIO`), biggest
    first, at least :data:`WINDOW` steps apart."""
    if column not in frame.columns or len(frame) < SPIKE_BASELINE + 1:
        return []
    values = float_values(frame[column])
    keep = logged_rows(frame, column, logged) & np.isfinite(values)
    y, steps = values[keep], frame["step"].to_numpy()[keep]
    if y.size <= SPIKE_BASELINE:
        return []
    baseline = pd.Series(y).shift(1).rolling(SPIKE_BASELINE, min_periods=SPIKE_BASELINE).median().to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(baseline > 0, y / baseline, np.nan)
    candidates = np.flatnonzero(np.isfinite(ratio) & (ratio >= SPIKE_MIN_RATIO))
    chosen: list[tuple[int, float]] = []
    for i in candidates[np.argsort(-ratio[candidates], kind="stable")]:
        if all(abs(int(steps[i]) - s) > WINDOW for s, _ in chosen):
            chosen.append((int(steps[i]), float(ratio[i])))
        if len(chosen) >= top:
            break
    return chosen


def confirmed(findings: Sequence[Any], frame: pd.DataFrame, logged: Mapping[str, np.ndarray] | None) -> list[Any]:
    """Diagnosis findings minus "nan" ones the logged masks contradict.

    ``diagnose`` reads a gap (a column no longer logged) as a NaN; a "nan" finding is kept only when
    its column really was logged as NaN/±inf at that step.
    """
    kept = []
    for finding in findings:
        if getattr(finding, "kind", None) == "nan":
            column = (getattr(finding, "details", None) or {}).get("column", "loss")
            first = first_nonfinite(frame, column, logged) if column in frame.columns else None
            if first is None:
                continue
        kept.append(finding)
    return kept


def notable_steps(
    frame: pd.DataFrame,
    logged: Mapping[str, np.ndarray] | None = None,
    findings: Sequence[Any] = (),
    spikes: int = 5,
) -> list[Notable]:
    """The "jump to" list, sorted by step: diagnosis findings, first non-finite values, biggest loss spikes.

    One entry per event, worded one way per kind (``kind: message``, as the findings are): a first NaN
    or a spike the diagnosis already reported is not listed again in other words, and a finding
    reported twice word for word is listed once.
    """
    found = confirmed(findings, frame, logged)
    out = [_finding_item(f) for f in found]
    nan_reported = _reported_nan(found)
    for column in ("loss", "grad_norm"):
        rows = nonfinite_rows(frame, column, logged) if column in frame.columns else np.empty(0)
        if rows.size:
            step, value = int(frame["step"].iloc[int(rows[0])]), float(frame[column].iloc[int(rows[0])])
            if step not in nan_reported:
                what = f"nan: {column} became {nonfinite_label(value)} at step {fmt_step(step)} (first non-finite)"
                out.append(Notable(step, "nan", what, "error"))
    spike_steps = _reported_spike_steps(found)
    for step, ratio in loss_spikes(frame, logged, spikes):
        if step not in spike_steps:
            what = f"loss_spike: loss at {fmt_ratio(ratio)} the median of the {SPIKE_BASELINE} logged values before it"
            out.append(Notable(step, "loss_spike", what, "warning"))
    unique = {(n.step, n.kind, n.label): n for n in out}  # the same finding twice (e.g. two sources) once
    return sorted(unique.values(), key=lambda n: (n.step, n.kind))


def _finding_item(finding: Any) -> Notable:
    where = f" (rank {finding.rank})" if getattr(finding, "rank", None) is not None else ""
    return Notable(int(finding.step), finding.kind, f"{finding.kind}{where}: {finding.message}", finding.severity)


def _reported_nan(found: Sequence[Any]) -> set[int]:
    """Steps of the NaN/±inf events the diagnosis's ``nan`` findings already report (a loss that became
    NaN with its grad norm at the same step is one event)."""
    out: set[int] = set()
    for f in found:
        if f.kind != "nan":
            continue
        out.add(int(f.step))
        first = (getattr(f, "details", None) or {}).get("first")
        if isinstance(first, Mapping):
            out.update(int(v) for v in first.values() if isinstance(v, (int, float)))
    return out


def _reported_spike_steps(found: Sequence[Any]) -> set[int]:
    """Steps a diagnosis ``loss_spike`` finding already covers: its start and end and the jumps it lists."""
    steps: set[int] = set()
    for f in found:
        if f.kind != "loss_spike":
            continue
        steps.add(int(f.step))
        if getattr(f, "end_step", None) is not None:
            steps.update(range(int(f.step), int(f.end_step) + 1) if f.end_step - f.step <= 10_000 else (f.end_step,))
        listed = (getattr(f, "details", None) or {}).get("steps") or ()
        steps.update(int(v) for v in listed if isinstance(v, (int, float)) and math.isfinite(v))
    return steps


def notable_label(item: Notable) -> str:
    """One line for the picker: ``step 1,234 · first non-finite loss``."""
    text = item.label if len(item.label) <= 140 else item.label[:139] + "…"
    return f"step {item.step:,} · {text}"


# ----------------------------------------------------------------------------- figures
REPLAY_PANELS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("Loss and learning rate", ("loss",), ("lr",)),
    ("Throughput and gradient norm", ("throughput",), ("grad_norm",)),
)


def replay_figures(
    frame: pd.DataFrame,
    logged: Mapping[str, np.ndarray] | None,
    rows: slice,
    *,
    smoothing: float = 0.6,
    x_range: tuple[Any, Any] | None = None,
    marker: Notable | None = None,
    n_out: int = 1000,
    uirevision: Any = "replay",
    fit_bulk: bool = True,
) -> list[Any]:
    """The replay's charts of ``rows`` (the run so far, or a window at full resolution).

    ``x_range`` fixes the axis (the whole run while it grows); ``marker`` draws a line at a notable step;
    ``fit_bulk``: y axes fit the bulk of the points (:mod:`monitor_cb.charts.outliers`).
    """
    from monitor_cb.charts.figures import ChartData, ChartOptions, dual_axis_figure, eval_figure

    data = ChartData(frame, dict(logged) if logged else None, rows)
    options = ChartOptions(
        smoothing=smoothing, n_out=n_out, x_range=x_range, uirevision=uirevision, height=320, fit_bulk=fit_bulk
    )
    figures = [
        dual_axis_figure(data, left, right, options, title=title)
        for title, left, right in REPLAY_PANELS
        if any(m in frame.columns for m in (*left, *right))
    ]
    if any(str(c).startswith("eval_") for c in frame.columns):
        figures.append(eval_figure(data, options, title="Eval metrics against train loss"))
    if marker is not None:
        for fig in figures:
            fig.add_vline(x=marker.step, line={"color": "#d62728", "width": 1, "dash": "dash"})
    return figures
