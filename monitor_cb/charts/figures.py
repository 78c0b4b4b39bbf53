"""Figure builders for training curves: plotly only, every builder returns a ``go.Figure``.

One core (:func:`dual_axis_figure`) draws metrics on a left and a right y axis: per metric a
faint raw trace behind the solid smoothed one (TensorBoard's EMA), downsampled to about
``n_out`` points with spikes kept, logged NaN/±inf drawn as red X markers (at the last finite
value, the real value in the hover text) with a dotted line at the first one, and points beyond
a threshold drawn red. The other builders are thin presets over it for one page panel each.

Common keyword arguments of every builder:
    x: an x-axis kind from :data:`monitor_cb.analysis.series.X_KINDS` (``step``, ``time``,
        ``elapsed_min``, ``samples``, ...) or any frame column.
    smoothing: TensorBoard smoothing weight in ``[0, 1)``; 0 draws only the raw trace.
    x_range: ``(lo, hi)`` to re-apply a user's zoom (datetimes for ``x="time"``), None = autorange.
    uirevision: kept constant across refreshes so zoom and legend clicks survive; change it
        (e.g. to the run id) to reset them.
    logged: per-column "was logged" masks (``RunStore.logged_mask``); without one, every NaN in a
        column is drawn as a logged NaN. Pass it for sparse columns such as ``eval_*``.
    n_out: point budget per trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from numpy.typing import ArrayLike

from monitor_cb.analysis.downsample import DEFAULT_N_OUT

# A threshold is an upper bound, or (lower, upper) with None for "no bound on that side".
Threshold = float | tuple[float | None, float | None]
XRange = tuple[Any, Any] | None
Masks = Mapping[str, ArrayLike] | None

DEFAULT_UIREVISION = "monitor"
NONFINITE_COLOR = "#d62728"
THRESHOLD_COLOR = "#d62728"


def dual_axis_figure(
    df: pd.DataFrame,
    x: str = "step",
    left: Sequence[str] = ("loss",),
    right: Sequence[str] = (),
    smoothing: float = 0.0,
    log_y: bool = False,
    thresholds: Mapping[str, Threshold] | None = None,
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    log_y2: bool = False,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
    title: str | None = None,
    y_title: str | None = None,
    y2_title: str | None = None,
    height: int | None = None,
    markers: Sequence[str] = (),
) -> go.Figure:
    """Metrics ``left`` on the left y axis and ``right`` on the right one, against ``x``.

    Args:
        df: a run frame (``step``, ``t``, metric columns), sorted by step.
        left: metrics for the left axis; columns missing from ``df`` are skipped.
        right: metrics for the right axis (``yaxis2``); empty = no right axis.
        log_y: log scale on the left axis; values <= 0 are left out of the drawn line.
        thresholds: per metric an upper bound or ``(lower, upper)``; drawn points beyond it are
            red markers and the bound is a dashed line.
        log_y2: log scale on the right axis.
        title, y_title, y2_title: labels; axis titles default to the metric names.
        height: figure height in px (None = plotly's default).
        markers: metrics drawn as lines with markers (sparse series such as ``eval_loss``).

    Returns:
        The figure. Trace names: ``<metric>`` (smoothed, or raw when smoothing is 0),
        ``<metric> (raw)`` and ``<metric> non-finite`` / ``<metric> > threshold`` marker traces.
    """
    raise NotImplementedError


def eval_figure(
    df: pd.DataFrame,
    x: str = "step",
    train: str = "loss",
    evals: Sequence[str] | None = None,
    smoothing: float = 0.0,
    log_y: bool = False,
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
) -> go.Figure:
    """Train loss against eval metrics: ``*loss*`` evals share the left axis, others (accuracy) go right.

    ``evals`` defaults to every ``eval_*`` column. Eval points are drawn with markers since they are sparse.
    """
    raise NotImplementedError


def components_figure(
    df: pd.DataFrame,
    x: str = "step",
    total: str = "loss",
    components: Sequence[str] | None = None,
    smoothing: float = 0.0,
    log_y: bool = False,
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
) -> go.Figure:
    """The total loss with its components (``loss_<name>`` columns by default) on one axis."""
    raise NotImplementedError


def timing_figure(
    df: pd.DataFrame,
    x: str = "step",
    smoothing: float = 0.0,
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
) -> go.Figure:
    """``step_time`` and ``data_time`` (s) left, ``throughput`` right: shows whether input is the bottleneck."""
    raise NotImplementedError


def memory_figure(
    df: pd.DataFrame,
    x: str = "step",
    x_range: XRange = None,
    uirevision: Any = DEFAULT_UIREVISION,
    *,
    logged: Masks = None,
    n_out: int = DEFAULT_N_OUT,
) -> go.Figure:
    """Device memory (allocated, peak) and host RSS in GiB, unsmoothed, on one axis."""
    raise NotImplementedError


def empty_figure(message: str, height: int | None = None) -> go.Figure:
    """A blank figure carrying ``message`` in its middle, for a panel with nothing to draw yet."""
    raise NotImplementedError
