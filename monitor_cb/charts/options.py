"""What every chart builder takes: how to draw (:class:`ChartOptions`) and what to draw from (:class:`ChartData`).

The live page's settings and the compare page's settings both produce a :class:`ChartOptions`
(``ChartSettings.chart_options()``, ``CompareSettings.chart_options()``), so a builder has one
object for the knobs a user turns and one for the rows it reads, instead of a long parameter list.

```python
options = ChartOptions(x="time", smoothing=0.6, log_y=True, thresholds={"grad_norm": 10.0})
fig = dual_axis_figure(ChartData(data.frame, logged=data.masks), ["loss"], ["lr"], options)
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from numpy.typing import ArrayLike

from monitor_cb.analysis.downsample import DEFAULT_N_OUT
from monitor_cb.analysis.live_series import LiveSeries

# A threshold is an upper bound, or (lower, upper) with None for "no bound on that side".
Threshold = float | tuple[float | None, float | None]
Masks = Mapping[str, ArrayLike] | None
Rows = ArrayLike | slice | None
XRange = tuple[Any, Any] | None
DEFAULT_UIREVISION = "monitor"


@dataclass(frozen=True)
class ChartOptions:
    """How a chart is drawn; frozen and hashable, so it is part of a cache key as it is.

    Attributes:
        x: an x-axis kind from :data:`monitor_cb.analysis.series.X_KINDS` (``step``, ``time``,
            ``elapsed_min``, ``samples``, ...) or any frame column.
        smoothing: TensorBoard smoothing weight in ``[0, 1)``; 0 draws only the raw trace.
        log_y: log scale on the left axis; values <= 0 are left out of the drawn line.
        thresholds: per metric an upper bound or ``(lower, upper)``; drawn points beyond it are
            red markers and the bound is a dashed line. A mapping is accepted and kept as sorted
            ``(metric, threshold)`` pairs.
        n_out: point budget per trace.
        x_range: ``(lo, hi)`` to re-apply a user's zoom (datetimes for ``x="time"``), None = autorange.
        uirevision: kept constant across refreshes so zoom and legend clicks survive; change it
            (e.g. to the run id) to reset them.
        height: figure height in px (None = plotly's default).
        smoother: how ``smoothing`` smooths: ``ema`` (TensorBoard's), ``mean`` (running average) or
            ``gaussian`` (:data:`monitor_cb.analysis.smoothing.SMOOTHERS`); the raw line stays, faint.
        log_x: log scale on a numeric x axis (steps, samples); x <= 0 is not drawn there.
        fit_bulk: y axes fit the bulk of the drawn points; points far outside are triangles at the axis
            edge, the true value in their hover (:mod:`monitor_cb.charts.outliers`). The pages turn it on.
    """

    x: str = "step"
    smoothing: float = 0.0
    log_y: bool = False
    thresholds: tuple[tuple[str, Threshold], ...] | Mapping[str, Threshold] = ()
    n_out: int = DEFAULT_N_OUT
    x_range: XRange = None
    uirevision: Any = DEFAULT_UIREVISION
    height: int | None = None
    smoother: str = "ema"
    log_x: bool = False
    fit_bulk: bool = False

    def __post_init__(self) -> None:
        pairs = self.thresholds.items() if isinstance(self.thresholds, Mapping) else self.thresholds
        object.__setattr__(self, "thresholds", tuple(sorted((str(k), _frozen(v)) for k, v in pairs)))
        if self.x_range is not None:
            object.__setattr__(self, "x_range", tuple(self.x_range))

    def threshold(self, metric: str) -> Threshold | None:
        """The threshold set for ``metric``, None when there is none."""
        return dict(self.thresholds).get(metric)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ChartData:
    """The rows a chart reads: a run frame and which of its rows count.

    Attributes:
        frame: a run frame (``step``, ``t``, metric columns), sorted by step.
        logged: per-column "was logged" masks (``RunFrame.masks``); without one, every NaN in a
            column is drawn as a logged NaN. Pass it for sparse columns such as ``eval_*``.
        rows: row positions (``iloc``: a slice or an index array) to draw, e.g. a zoomed step range
            at full resolution. Smoothing and the ``elapsed_*`` origin still use the whole frame, so
            a zoomed curve is the same curve, not one restarted at the zoom's left edge. None = all.
        rank: for a frame merging several ranks, the rank drawn (default the lowest); NaN/±inf of
            the other ranks are still marked.
        cache_key: e.g. the run id, for a chart rebuilt on every live refresh: smoothing and
            downsampling are cached per series and extended with the new rows only (a long series
            is then downsampled in fixed blocks: same spikes and NaN points, a few different picks).
        other_ranks: for one rank's frame of a multi-rank run, metric -> the other ranks' logged
            NaN/±inf cells (``RunStore.nonfinite(run_id, metric).excluding(rank)``): marked on the drawn
            curve at their step, as a merged frame's other ranks are.
        series: the frame's column arrays (:class:`~monitor_cb.analysis.live_series.LiveSeries`), each
            built once and shared by every figure of a refresh; made from ``frame`` and ``logged`` when
            not given (then shared by the traces of this one figure).
        prepared: build each figure as a finished
            :class:`~monitor_cb.charts.prepared.PreparedFigure` (its dict made directly, no plotly
            objects): for a chart rebuilt at every live refresh and drawn as it is.
    """

    frame: pd.DataFrame
    logged: Masks = field(default=None, repr=False)
    rows: Rows = None
    rank: int | None = None
    cache_key: Any = None
    other_ranks: Mapping[str, Any] | None = field(default=None, repr=False)
    series: LiveSeries = field(default=None, repr=False, compare=False)  # type: ignore[assignment]
    prepared: bool = False

    def __post_init__(self) -> None:
        if self.series is None:
            object.__setattr__(self, "series", LiveSeries(self.frame, self.logged))

    @classmethod
    def of(cls, data: ChartData | pd.DataFrame) -> ChartData:
        """``data`` as :class:`ChartData` (a bare frame: every row, every NaN taken as logged)."""
        return data if isinstance(data, ChartData) else cls(data)

    def with_frame(self, frame: pd.DataFrame, logged: Masks = None) -> ChartData:
        """The same selection over another frame with the same rows (e.g. values converted to GiB)."""
        logged = logged if logged is not None else self.logged
        return ChartData(frame, logged, self.rows, self.rank, self.cache_key, self.other_ranks, prepared=self.prepared)


def _frozen(threshold: Any) -> Threshold:
    if isinstance(threshold, (tuple, list)):
        lower, upper = threshold
        return (lower, upper)
    return float(threshold)


__all__ = ["DEFAULT_UIREVISION", "ChartData", "ChartOptions", "Masks", "Rows", "Threshold", "XRange"]
