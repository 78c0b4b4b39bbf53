"""The live page's figures: chart settings, the rows a zoomed chart re-reads, the other ranks' cells."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.live_series import LiveSeries
from monitor_cb.analysis.roles import Casting, cast
from monitor_cb.charts.options import ChartOptions
from monitor_cb.charts.prepared import PreparedFigure
from monitor_cb.views.panels import DEFAULT_PANELS, panel_metrics, panels_for
from monitor_cb.views.zoom import ZoomState, monotonic_x, rows_in_steps, x_range_for


@dataclass(frozen=True)
class ChartSettings:
    """The chart controls of the live page (plain, hashable data, so a refresh can rebuild every figure).

    ``thresholds`` may be given as a mapping (``parse_thresholds``); it is kept as sorted pairs.
    """

    panels: tuple[str, ...] = DEFAULT_PANELS
    x: str = "step"
    smoothing: float = 0.6
    log_y: bool = False
    thresholds: tuple[tuple[str, tuple[float | None, float | None]], ...] | Mapping[str, Any] = ()
    custom_left: tuple[str, ...] = ("loss",)
    custom_right: tuple[str, ...] = ()
    # Points per raw trace: 1,000 (a chart about 1,000 px wide) keeps a live refresh of the three default
    # charts near 60 kB of websocket traffic; 2,000 sent about 110 kB. More can be chosen on the page.
    n_out: int = 1000
    smoother: str = "ema"  # a key of monitor_cb.analysis.smoothing.SMOOTHERS
    log_x: bool = False
    fit_bulk: bool = True  # y axes fit the bulk of the points, outliers marked at the edge (charts.outliers)
    # Roles set by hand: (role, metric names, where it was set: "set in the URL", "set in Settings").
    roles: tuple[tuple[str, tuple[str, ...], str], ...] = ()

    def __post_init__(self) -> None:
        pairs = self.thresholds.items() if isinstance(self.thresholds, Mapping) else self.thresholds
        object.__setattr__(self, "thresholds", tuple(sorted((str(k), tuple(v)) for k, v in pairs)))
        object.__setattr__(self, "roles", tuple((str(r), tuple(n), str(w)) for r, n, w in self.roles))

    def casting(self, columns: Sequence[str]) -> Casting:
        """Which metrics of a run with ``columns`` play which role: by name, then the roles set by hand."""
        return cast(list(columns), {r: n for r, n, _ in self.roles}, {r: w for r, _, w in self.roles})

    def chart_options(self, x_range: tuple[Any, Any] | None = None, uirevision: Any = "live") -> ChartOptions:
        """The chart options these settings give, with the zoom's x range and the page's ``uirevision``."""
        return ChartOptions(
            x=self.x,
            smoothing=self.smoothing,
            log_y=self.log_y,
            thresholds=self.thresholds,
            n_out=self.n_out,
            x_range=x_range,
            uirevision=uirevision,
            smoother=self.smoother,
            log_x=self.log_x,
            fit_bulk=self.fit_bulk,
        )


def zoomed_rows(df: pd.DataFrame | LiveSeries, zoom: ZoomState, context: float = 1.0) -> slice | None:
    """Rows to draw for a zoomed view, None = all rows.

    The step range plus ``context`` times its width on each side, all at full resolution: a pan
    or a small zoom-out shows data at once, and new points just past a zoom at the run's end are
    drawn (and scroll in) while the view stays where the user put it.
    """
    if not zoom.active or len(df) == 0:
        return None
    steps = LiveSeries.of(df).steps()
    lo, hi = zoom.lo, zoom.hi
    if lo is not None and hi is not None:
        margin = (hi - lo) * context
        lo, hi = lo - margin, hi + margin
    return rows_in_steps(steps, lo, hi)


def live_figures(
    df: pd.DataFrame | LiveSeries,
    settings: ChartSettings,
    zoom: ZoomState,
    logged: Mapping[str, np.ndarray] | None = None,
    uirevision: Any = "live",
    cache_key: Any = None,
    other_ranks: Mapping[str, Any] | None = None,
    prepared: bool = False,
) -> dict[str, Any]:
    """One ``go.Figure`` per shown panel (key -> figure), zoom re-applied and hidden legend entries kept hidden.

    ``prepared``: each figure a finished :class:`~monitor_cb.charts.prepared.PreparedFigure` (its dict
    built directly; what a live refresh draws and never changes).

    ``df`` is the whole run frame; when zoomed, only the zoomed step range is drawn and downsampled,
    so a zoom into a 1M-step run shows every point of that range. ``cache_key`` (the run id) lets
    each refresh extend the cached smoothing and downsampling of the last one instead of redoing them.
    ``df`` may be the refresh's :class:`~monitor_cb.analysis.live_series.LiveSeries` (its masks then
    stand for ``logged``): every figure reads its arrays, each extracted once.
    """
    from monitor_cb.charts import figures as charts

    series = df if isinstance(df, LiveSeries) else LiveSeries(df, logged or None)
    x_range = None
    if zoom.active and zoom.exact is not None and zoom.exact[0] == settings.x:
        x_range = zoom.exact[1:]  # the dragged range itself: the chart does not jump at the next refresh
    elif zoom.active:  # monotonic_x scans the whole run: only for a zoom
        xa = series.x_axis(settings.x)
        x_range = x_range_for(zoom, xa.values, monotonic_x(xa.values), series.steps())
    options = settings.chart_options(x_range, uirevision)
    # full resolution inside the zoom; smoothing still sees the whole run
    rows = zoomed_rows(series, zoom)
    data = charts.ChartData(
        series.frame, series.masks or None, rows, None, cache_key, other_ranks, series, prepared=prepared
    )
    figures: dict[str, Any] = {}
    casting = settings.casting(series.columns)
    for panel in panels_for(series.columns, casting):
        if panel.key not in settings.panels:
            continue
        if panel.key in ("loss_lr", "speed_grad"):
            left, right = panel_metrics(panel, casting)
            fig = charts.dual_axis_figure(data, left, right, options, title=panel.title)
        elif panel.key == "custom":
            fig = charts.dual_axis_figure(data, settings.custom_left, settings.custom_right, options, title=panel.title)
        elif panel.key == "eval":
            evals, eval_losses = [*casting.of("eval_loss"), *casting.of("eval_metric")], casting.of("eval_loss")
            fig = charts.eval_figure(
                data, options, train=casting.of("loss"), evals=evals, eval_losses=eval_losses, title=panel.title
            )
        elif panel.key == "components":
            fig = charts.components_figure(data, options, title=panel.title)
        elif panel.key == "timing":
            fig = charts.timing_figure(
                data, options, title=panel.title, step_time=casting.of("step_time"), throughput=casting.of("throughput")
            )
        else:
            fig = charts.memory_figure(data, options, title=panel.title)
        hide_traces(fig, zoom.hidden.get(CHART_PREFIX + panel.key, ()))
        figures[panel.key] = fig
    return figures


def drawn_rank(ranks: Sequence[int]) -> int | None:
    """The rank the live charts draw: the lowest of several (None: the run has one, read it whole)."""
    return min(ranks) if len(ranks) > 1 else None


def other_rank_cells(store: Any, run_id: str, data: Any) -> dict[str, Any]:
    """For one rank drawn of a multi-rank run: metric -> the other ranks' logged NaN/±inf cells
    (aggregated at ingest, extended with new steps only), so the drawn curves still mark them."""
    from monitor_cb.analysis.series import metric_columns

    if data is None or data.rank is None:
        return {}
    cells = {}
    for metric in metric_columns(data.frame):
        found = store.nonfinite(run_id, metric).excluding(data.rank)
        if len(found):
            cells[metric] = found
    return cells


RANKS_RECENT = 20_000  # steps of every rank the divergence check reads (the straggler check reads the bands)


def ranks_version(store: Any, run_id: str) -> tuple[Any, ...]:
    """Changes when any rank of the run got new rows (what the rank findings read)."""
    info = store.run_info(run_id)
    return (info.n_records, info.last_step, info.ranks)


def rank_findings(store: Any, run_id: str, rank: int, findings: list[Any], settings: Any) -> list[Any]:
    """Findings of one drawn rank (``findings``, from ``diagnose`` on its frame) plus the ranks side by side:
    stragglers from the bands across ranks, divergence from the last :data:`RANKS_RECENT` steps of every rank."""
    from dataclasses import replace

    from monitor_cb.diagnosis.findings import sort_findings
    from monitor_cb.diagnosis.stragglers import (
        DIVERGENCE_METRICS,
        detect_rank_divergence,
        detect_straggler_bands,
        read_rank_places,
    )

    out = [f if f.rank is not None else replace(f, rank=rank) for f in findings if f.kind != "stalled"]
    out += [f for f in findings if f.kind == "stalled"]
    places = read_rank_places(store.run_info(run_id).path)
    if settings.enabled("straggler"):
        step, data = store.bands(run_id, "step_time"), store.bands(run_id, "data_time")
        out += detect_straggler_bands(step if len(step) else None, data if len(data) else None, settings, places=places)
    if settings.enabled("rank_divergence"):
        matrices = {m: store.rank_matrix(run_id, m, last=RANKS_RECENT) for m in DIVERGENCE_METRICS}
        matrices = {m: (x if x.values.size and x.logged.any() else None) for m, x in matrices.items()}
        out += detect_rank_divergence(None, settings, places=places, matrices=matrices)  # type: ignore[arg-type]
    return sort_findings(out)


# Points per trace a user can choose; a chart about 1,000 px wide shows at most ~2 per pixel column.
N_OUT_CHOICES = (500, 1000, 2000, 4000)
CHART_PREFIX = "chart_"


def figures_key(data: Any, settings: ChartSettings, zoom: ZoomState) -> tuple[Any, ...]:
    """What the figures of a refresh depend on: the data read (``RunFrame.key``), the settings and the zoom.

    Equal keys mean the last figures can be shown again.
    """
    hidden = tuple(sorted((k, tuple(v)) for k, v in zoom.hidden.items()))
    return (data.key, settings, zoom.lo, zoom.hi, hidden, zoom.exact)


def hide_traces(fig: Any, names: Iterable[str]) -> None:
    """Keep legend entries the user switched off switched off in a freshly built figure (a prepared one too:
    its dict is changed before anyone else sees it)."""
    hidden = set(names)
    if not hidden:
        return
    if isinstance(fig, PreparedFigure):
        for trace in fig.to_dict()["data"]:
            if trace.get("name") in hidden:
                trace["visible"] = "legendonly"
        return
    for trace in fig.data:
        if trace.name in hidden:
            trace.visible = "legendonly"
