"""Figure builders for multi-rank runs and telemetry: plotly only, each returns a ``go.Figure``.

* :func:`rank_band_figure`: per step the mean across ranks as a line in a shaded min-max band; a
  NaN/±inf on any rank is a red X on the mean (the hover names the ranks), never averaged away.
* :func:`per_rank_figure`: one trace per rank, each rank always in the same colour (:func:`rank_color`).
* :func:`rank_step_time_figure`: step time per rank side by side (boxes) and each rank's step time
  relative to the other ranks' median over the run, so a straggler stands out.
* :func:`utilisation_figure`: device / CPU utilisation (%) left and memory (GiB) right, against steps.

Budgets: a trace holds at most about ``n_out`` points. For long runs the band is cut into ``n_out``
buckets of steps, each keeping its extreme min and max (a one-step spike on one rank survives); the
mean line is downsampled with the spike-keeping MinMaxLTTB of :mod:`monitor_cb.analysis.downsample`.
Takes the frame of ``RunStore.read(run_id).frame`` (ranks merged, a ``rank`` column).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from monitor_cb.analysis.downsample import downsample_indices
from monitor_cb.analysis.rank_matrix import RankMatrix, frame_ranks, leave_one_out_median, rank_matrix
from monitor_cb.analysis.series import XAxis, float_values, x_axis
from monitor_cb.analysis.smoothing import ema_debiased
from monitor_cb.charts.axes import pin_constant_axes
from monitor_cb.charts.figures import DEFAULT_OPTIONS, GIB, dual_axis_figure, empty_figure
from monitor_cb.charts.options import ChartData, ChartOptions
from monitor_cb.charts.scatter import drawable, nonfinite_label, scatter
from monitor_cb.charts.style import NONFINITE_COLOR, PALETTE, RAW_OPACITY, THRESHOLD_COLOR, Labels, apply_layout
from monitor_cb.charts.traces import MetricPlot, Ranks, RowFilter, add_first_nonfinite_line, add_metric
from monitor_cb.ingest.rank_bands import RankBands, RankColumn, rank_bands

UTILISATION_COLUMNS: tuple[str, ...] = ("gpu_util", "npu_util", "sys_cpu_percent")
MEMORY_BYTES_COLUMNS: tuple[str, ...] = ("mem_device", "mem_device_peak", "mem_device_reserved", "gpu_mem_used")
HOST_MEMORY_COLUMNS: tuple[str, ...] = ("mem_host_rss",)
MEMORY_PERCENT_COLUMNS: tuple[str, ...] = ("npu_mem_util", "sys_mem_percent")
NPU_MEM = "npu_mem"  # derived: npu_mem_util% x npu_mem_total_mb, in GiB


def rank_color(rank: int) -> str:
    """The colour of ``rank`` on every multi-rank chart (the palette, cycled)."""
    return PALETTE[int(rank) % len(PALETTE)]


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


# --------------------------------------------------------------------------- band
def rank_band_figure(
    data: ChartData | pd.DataFrame | RankBands,
    metric: str,
    options: ChartOptions = DEFAULT_OPTIONS,
    *,
    title: str | None = None,
    x_bands: RankBands | None = None,
) -> go.Figure:
    """Per step, the mean of ``metric`` across ranks in a shaded min-max band.

    Args:
        data: the bands computed at ingest (``RunStore.bands(run_id, metric)``: what a server keeps
            of a many-rank run), or a merged multi-rank frame (one rank works too: the band is then
            the line) with its "was logged" masks (without them every NaN is a logged NaN).
        metric: the column to draw.
        options: ``x`` is ``step`` or another x kind of :func:`monitor_cb.analysis.series.x_axis`
            (a step's x is the latest x among its ranks: the step is done when the last rank is);
            ``smoothing`` is the EMA on the mean (the raw mean stays, faint; the band is raw);
            ``n_out`` the points per trace (buckets of the band); with ``log_y`` values <= 0 leave
            the line and the band (from precomputed bands: steps whose min, max or mean is <= 0).
        x_bands: with precomputed bands and an x that is a column (``samples``), that column's bands
            (the latest x of a step is its ``hi``).

    Returns:
        Traces ``<metric> min`` (hidden from the legend), ``<metric> min–max across ranks`` (the band,
        filled to the min), ``<metric> mean (raw)`` (only with smoothing), ``<metric> mean``, and
        ``<metric> non-finite`` (red X per step with a NaN/±inf on some rank; the hover names them).
    """
    ema_debiased([], options.smoothing)  # validate the weight before any work
    if isinstance(data, RankBands):
        bands, xa = data, _bands_x(data, options.x, x_bands)
    else:
        found = _frame_bands(ChartData.of(data), metric, options)
        if found is None:
            return empty_figure(f"no {metric} logged yet", options.height)
        bands, xa = found
    keep = np.isfinite(xa.values.view(np.int64).astype(np.float64)) if xa.is_datetime else np.isfinite(xa.values)
    if xa.is_datetime:
        keep &= ~np.isnat(xa.values)
    if not keep.any():
        return empty_figure(f"no {metric} logged yet", options.height)
    step_x = xa.values[keep]
    lo, hi, mean = bands.lo[keep], bands.hi[keep], bands.mean[keep]
    if options.log_y:
        with np.errstate(invalid="ignore"):
            lo, hi, mean = (np.where(v > 0, v, np.nan) for v in (lo, hi, mean))
    color = PALETTE[0]
    fig = go.Figure()
    _add_band(fig, metric, step_x, lo, hi, bands.lo_rank[keep], bands.hi_rank[keep], color, options.n_out)
    _add_mean(fig, metric, step_x, mean, options.smoothing, options.log_y, color, options.n_out)
    first_bad = _add_nonfinite(fig, metric, bands, bands.steps[keep], step_x, mean, options.n_out)
    if first_bad is not None:
        add_first_nonfinite_line(fig, first_bad, [metric], _x_of(xa, step_x))
    apply_layout(fig, xa, options, Labels(y=metric, title=title))
    return fig


def _frame_bands(data: ChartData, metric: str, options: ChartOptions) -> tuple[RankBands, XAxis] | None:
    """The bands of a merged frame, through the same aggregation the store runs at ingest; x per step
    is the latest x among the ranks that logged it."""
    frame = data.frame
    m = rank_matrix(frame, metric, data.logged)
    if m is None or not m.logged.any():
        return None
    xa = x_axis(frame, options.x)
    raw = xa.values.view(np.int64).astype(np.float64) if xa.is_datetime else xa.values.astype(np.float64)
    if xa.is_datetime:
        raw[np.isnat(xa.values)] = np.nan
    values, logged = m.values, m.logged
    if options.log_y:  # values <= 0 cannot be drawn: they leave the band and the mean, as not logged
        with np.errstate(invalid="ignore"):
            logged = logged & ~(np.isfinite(values) & (values <= 0))
    columns = []
    for j, rank in enumerate(m.ranks.tolist()):
        present = m.rows[:, j] >= 0
        rows = m.rows[present, j]
        columns.append(RankColumn(rank, m.steps[present], values[present, j], logged[present, j], raw[rows]))
    bands = rank_bands(metric, columns)
    x = bands.t
    if xa.is_datetime:
        x = np.where(np.isfinite(x), x, 0).astype(np.int64).view("datetime64[ns]")
        x = np.where(np.isfinite(bands.t), x, np.datetime64("NaT"))
    elif options.x == "step":
        x = bands.steps
    return bands, XAxis(xa.kind, x, xa.title, xa.is_datetime)


def _bands_x(bands: RankBands, kind: str, x_bands: RankBands | None) -> XAxis:
    """The x of each step of precomputed bands: the step, its latest ``t``, or the latest value of an x column."""
    from monitor_cb.analysis.series import _ELAPSED_DIVISOR, X_TIME, X_TITLES, unix_to_datetime64

    if kind == X_TIME:
        return XAxis(kind, unix_to_datetime64(bands.t), X_TITLES[kind], True)
    if kind in _ELAPSED_DIVISOR:
        start = np.nanmin(bands.t) if np.isfinite(bands.t).any() else 0.0
        return XAxis(kind, (bands.t - start) / _ELAPSED_DIVISOR[kind], X_TITLES[kind], False)
    if kind != "step" and x_bands is not None:
        at = np.searchsorted(x_bands.steps, bands.steps)
        found = at < x_bands.steps.size
        found[found] = x_bands.steps[at[found]] == bands.steps[found]
        x = np.full(bands.steps.size, np.nan)
        x[found] = x_bands.hi[at[found]]
        return XAxis(kind, x, X_TITLES.get(kind, kind), False)
    return XAxis("step", bands.steps, X_TITLES["step"], False)


def _x_of(xa: XAxis, values: np.ndarray) -> XAxis:
    return XAxis(xa.kind, values, xa.title, xa.is_datetime)


def _buckets(n: int, n_out: int) -> np.ndarray:
    """Start positions of at most ``n_out`` equal buckets over ``n`` points."""
    return np.unique(np.linspace(0, n, min(n, n_out), endpoint=False).astype(np.int64))


def _add_band(
    fig: go.Figure,
    metric: str,
    step_x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    lo_rank: np.ndarray,
    hi_rank: np.ndarray,
    color: str,
    n_out: int,
) -> None:
    """Min and max across ranks (of each bucket), with the rank that holds each in the hover."""
    n = lo.size
    shape = "linear"
    if n > n_out:  # per bucket: its lowest min and highest max, drawn as steps over the bucket
        starts = _buckets(n, n_out - 1)  # plus the closing point: n_out in all
        lo, lo_rank = _bucket_extreme(lo, lo_rank, starts, np.fmin)
        hi, hi_rank = _bucket_extreme(hi, hi_rank, starts, np.fmax)
        # the last bucket's level also at the last step, so the band reaches the end of the run
        lo, hi = np.append(lo, lo[-1]), np.append(hi, hi[-1])
        lo_rank, hi_rank = np.append(lo_rank, lo_rank[-1]), np.append(hi_rank, hi_rank[-1])
        step_x = np.append(step_x[starts], step_x[-1:])
        shape = "hv"
    common = {"mode": "lines", "line": {"width": 0, "shape": shape}, "legendgroup": f"{metric} band"}
    fig.add_trace(
        go.Scatter(
            x=step_x,
            y=lo,
            name=f"{metric} min",
            showlegend=False,
            customdata=lo_rank,
            hovertemplate="min %{y:.4g} (rank %{customdata})<extra></extra>",
            **common,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=step_x,
            y=hi,
            name=f"{metric} min–max across ranks",
            fill="tonexty",
            fillcolor=_rgba(color, 0.2),
            customdata=hi_rank,
            hovertemplate="max %{y:.4g} (rank %{customdata})<extra></extra>",
            **common,
        )
    )


def _bucket_extreme(
    values: np.ndarray, owner: np.ndarray, starts: np.ndarray, ufunc: np.ufunc
) -> tuple[np.ndarray, np.ndarray]:
    """Per bucket the extreme of ``values`` (NaN-ignoring) and the ``owner`` of its first occurrence."""
    extreme = ufunc.reduceat(values, starts)
    sizes = np.diff(np.append(starts, values.size))
    at = np.where(values == np.repeat(extreme, sizes), np.arange(values.size), values.size)
    first = np.minimum.reduceat(at, starts)
    owner_ext = np.append(owner, -1)[first]
    return extreme, owner_ext


def _add_mean(
    fig: go.Figure,
    metric: str,
    step_x: np.ndarray,
    mean: np.ndarray,
    smoothing: float,
    log: bool,
    color: str,
    n_out: int,
) -> None:
    picked = downsample_indices(step_x, mean, n_out, max_nonfinite=n_out)
    x_drawn = step_x[picked]
    if smoothing > 0:
        smooth = ema_debiased(mean, smoothing)[picked]
        fig.add_trace(
            scatter(
                x_drawn,
                drawable(mean[picked], log),
                mode="lines",
                name=f"{metric} mean (raw)",
                line={"color": color, "width": 1},
                opacity=RAW_OPACITY,
                showlegend=False,
                legendgroup=metric,
                hovertemplate="mean raw: %{y:.4g}<extra></extra>",
            )
        )
        drawn = smooth
    else:
        drawn = mean[picked]
    fig.add_trace(
        scatter(
            x_drawn,
            drawable(drawn, log),
            mode="lines",
            name=f"{metric} mean",
            line={"color": color, "width": 2 if smoothing > 0 else 1.5},
            legendgroup=metric,
            hovertemplate="mean: %{y:.4g}<extra></extra>",
        )
    )


def _add_nonfinite(
    fig: go.Figure,
    metric: str,
    bands: RankBands,
    steps: np.ndarray,
    step_x: np.ndarray,
    mean: np.ndarray,
    cap: int,
) -> Any:
    """A red X per step where some rank logged NaN/±inf, at the mean (else the last finite mean); first x."""
    if bands.bad_steps.size == 0:
        return None
    bad_steps, first_cell = np.unique(bands.bad_steps, return_index=True)
    rows = np.searchsorted(steps, bad_steps)
    drawn = (rows < steps.size) & (steps[np.minimum(rows, steps.size - 1)] == bad_steps)
    rows, first_cell = rows[drawn], first_cell[drawn]
    if rows.size == 0:
        return None
    if rows.size > cap:  # keep the first one, then evenly spaced
        pick = np.unique(np.linspace(0, rows.size - 1, cap).round().astype(np.int64))
        rows, first_cell = rows[pick], first_cell[pick]
    good = np.flatnonzero(np.isfinite(mean))
    if good.size:
        before = np.searchsorted(good, rows, side="right") - 1
        anchor = mean[good[np.maximum(before, 0)]]
    else:
        anchor = np.zeros(rows.size)
    ends = np.searchsorted(bands.bad_steps, steps[rows], side="right")
    text = [
        _nonfinite_text(metric, int(steps[i]), bands.bad_values[a:b], bands.bad_ranks[a:b])
        for i, a, b in zip(rows, first_cell, ends, strict=True)
    ]
    fig.add_trace(
        go.Scatter(
            x=step_x[rows],
            y=anchor,
            name=f"{metric} non-finite",
            mode="markers",
            marker={"symbol": "x", "size": 10, "color": NONFINITE_COLOR, "line": {"width": 1}},
            legendgroup=metric,
            showlegend=False,
            text=text,
            hovertemplate="%{text}<extra></extra>",
        )
    )
    return step_x[rows[0]]


def _nonfinite_text(metric: str, step: int, values: np.ndarray, ranks: np.ndarray) -> str:
    groups: dict[str, list[str]] = {}
    for value, rank in zip(values, ranks, strict=True):
        label = nonfinite_label(value)
        groups.setdefault(label, []).append(str(int(rank)))
    parts = [f"{label} on rank{'s' if len(r) > 1 else ''} {', '.join(r)}" for label, r in groups.items()]
    return f"{metric} = {'; '.join(parts)} at step {step}"


# --------------------------------------------------------------------------- per rank
def per_rank_figure(
    data: ChartData | pd.DataFrame | Mapping[int, ChartData],
    metric: str,
    options: ChartOptions = DEFAULT_OPTIONS,
    *,
    ranks: Sequence[int] | None = None,
    title: str | None = None,
) -> go.Figure:
    """One trace ``rank <r>`` per rank (all by default), each in :func:`rank_color`, NaN/±inf as red X markers.

    ``data`` is a merged multi-rank frame, or rank -> that rank's rows (``RunStore.rank_columns``: per-rank
    detail read on demand, no merged frame). With smoothing each rank also gets a faint ``rank <r> (raw)``
    trace, as :func:`dual_axis_figure` draws; each trace holds at most about ``options.n_out`` points.
    """
    ema_debiased([], options.smoothing)
    parts = _rank_parts(data, metric, ranks)
    if not parts:
        return empty_figure(f"no {metric} logged yet", options.height)
    start = _first_t(parts)  # elapsed time starts at the run's first record
    fig = go.Figure()
    first_bad: Any = None
    xa: XAxis | None = None
    for rank, part, masks in parts:
        label = f"rank {rank}"
        xa = _part_x(part, options.x, start)
        plot = MetricPlot(label, "y", rank_color(rank), options.smoothing, options.log_y, None, False)
        filters = RowFilter(masks, None, Ranks(None, None))
        bad_x = add_metric(fig, part, xa, plot, filters, options.n_out)
        if bad_x is not None and (first_bad is None or bad_x < first_bad):
            first_bad = bad_x
    assert xa is not None
    if first_bad is not None:
        add_first_nonfinite_line(fig, first_bad, [metric], xa)
    apply_layout(fig, xa, options, Labels(y=metric, title=title))
    return fig


def _rank_parts(
    data: ChartData | pd.DataFrame | Mapping[int, ChartData], metric: str, ranks: Sequence[int] | None
) -> list[tuple[int, pd.DataFrame, dict[str, np.ndarray] | None]]:
    """Per rank: a frame with ``step``, ``t`` and ``rank <r>`` (the metric), and its "was logged" mask."""
    out = []
    if isinstance(data, Mapping):
        chosen = sorted(data) if ranks is None else [r for r in ranks if r in data]
        for rank in chosen:
            part = ChartData.of(data[rank])
            if metric not in part.frame.columns or len(part.frame) == 0:
                continue
            columns = [c for c in ("step", "t") if c in part.frame.columns]
            frame = part.frame[columns].copy()
            frame[f"rank {rank}"] = float_values(part.frame[metric])
            mask = None if part.logged is None or metric not in part.logged else np.asarray(part.logged[metric])
            out.append((int(rank), frame, None if mask is None else {f"rank {rank}": mask}))
        return out
    data = ChartData.of(data)
    frame, logged = data.frame, data.logged
    if metric not in frame.columns or len(frame) == 0:
        return []
    rank_col = float_values(frame["rank"]) if "rank" in frame.columns else np.zeros(len(frame))
    chosen_ranks = frame_ranks(frame) if ranks is None else np.asarray(list(ranks), dtype=np.int64)
    mask = None if logged is None or metric not in logged else np.asarray(logged[metric], dtype=bool)
    columns = [c for c in ("step", "t") if c in frame.columns]
    values = float_values(frame[metric])
    for rank in chosen_ranks.tolist():
        rows = np.flatnonzero(rank_col == rank)
        if rows.size == 0:
            continue
        label = f"rank {rank}"
        part = frame.iloc[rows][columns].reset_index(drop=True)
        part[label] = values[rows]
        out.append((int(rank), part, None if mask is None else {label: mask[rows]}))
    return out


def _first_t(parts: list[tuple[int, pd.DataFrame, Any]]) -> float | None:
    firsts = [np.nanmin(p["t"].to_numpy(np.float64)) for _, p, _ in parts if "t" in p.columns and p["t"].notna().any()]
    return float(min(firsts)) if firsts else None


def _part_x(part: pd.DataFrame, kind: str, start: float | None) -> XAxis:
    """x of one rank's rows; elapsed time counted from ``start`` (the run's first record on any rank)."""
    from monitor_cb.analysis.series import _ELAPSED_DIVISOR, X_TITLES

    if kind in _ELAPSED_DIVISOR and start is not None and "t" in part.columns:
        t = part["t"].to_numpy(np.float64)
        return XAxis(kind, (t - start) / _ELAPSED_DIVISOR[kind], X_TITLES[kind], False)
    return x_axis(part, kind)


# --------------------------------------------------------------------------- step time
def rank_step_time_figure(
    data: ChartData | pd.DataFrame | RankMatrix,
    options: ChartOptions = DEFAULT_OPTIONS,
    *,
    metric: str = "step_time",
    last: int | None = None,
    ratio_line: float | None = 1.3,
    title: str | None = None,
) -> go.Figure:
    """Step time per rank side by side (left) and relative to the other ranks' median per step (right).

    Args:
        data: a merged multi-rank frame, or the metric's ranks side by side (``RunStore.rank_matrix``).
        options: ``n_out`` is the points per relative-time line; longer runs are cut into buckets
            drawn at their median (single-step hiccups do not clutter the view; the boxes show the
            spread); ``uirevision`` and ``height`` as usual. The x axis is always the step.
        metric: the per-rank time column (``step_time``; ``data_time`` works too).
        last: only the last ``last`` steps (a recent straggler is not drowned by a long healthy past).
        ratio_line: a dashed line at this ratio (1.3 = 30% slower than the others), None = none.
            The right panel's y range holds 99.5% of the points and this line (hiccups beyond it are
            one double-click away).

    Returns:
        A two-panel figure: per rank a box ``rank <r>`` (median, quartiles, whiskers at the 1st and
        99th percentile; the boxes are computed here, not sent as raw points) and a line
        ``rank <r> · <median ratio>×`` on the right.
    """
    m = data if isinstance(data, RankMatrix) else rank_matrix(ChartData.of(data).frame, metric)
    if m is None or not np.isfinite(m.values).any():
        return empty_figure(f"no {metric} logged yet", options.height)
    values = np.where(np.isfinite(m.values) & (m.values > 0), m.values, np.nan)
    steps = m.steps
    if last is not None:
        values, steps = values[-int(last) :], steps[-int(last) :]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = values / leave_one_out_median(values)
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.3, 0.7],
        horizontal_spacing=0.08,
        subplot_titles=(f"{metric} per rank" + (f" (last {len(steps):,} steps)" if last else ""), "vs other ranks"),
    )
    bucket_x, bucket_ratio = _bucket_medians(steps, ratio, options.n_out)
    for j, rank in enumerate(m.ranks.tolist()):
        column = values[:, j][np.isfinite(values[:, j])]
        if column.size == 0:
            continue
        color = rank_color(rank)
        p1, q1, med, q3, p99 = np.percentile(column, [1, 25, 50, 75, 99])
        fig.add_trace(
            go.Box(
                x=[f"rank {rank}"],
                q1=[q1],
                median=[med],
                q3=[q3],
                lowerfence=[p1],
                upperfence=[p99],
                mean=[float(column.mean())],
                name=f"rank {rank}",
                marker={"color": color},
                legendgroup=f"rank {rank}",
                showlegend=False,
            ),
            row=1,
            col=1,
        )
        finite_ratio = ratio[:, j][np.isfinite(ratio[:, j])]
        typical = float(np.median(finite_ratio)) if finite_ratio.size else float("nan")
        fig.add_trace(
            scatter(
                bucket_x,
                bucket_ratio[:, j],
                mode="lines",
                name=f"rank {rank} · {typical:.2f}×",
                line={"color": color, "width": 1.5},
                legendgroup=f"rank {rank}",
                hovertemplate=f"rank {rank}: %{{y:.2f}}× the others' median<extra></extra>",
            ),
            row=1,
            col=2,
        )
    for level, dash, tint in ((1.0, "dot", "#7f7f7f"), (ratio_line, "dash", THRESHOLD_COLOR)):
        if level is not None:
            fig.add_hline(y=level, line={"color": tint, "width": 1, "dash": dash}, opacity=0.6, row=1, col=2)
    fig.update_yaxes(title_text="seconds per step", row=1, col=1)
    fig.update_yaxes(
        title_text="step time / others' median", range=_ratio_range(bucket_ratio, ratio_line), row=1, col=2
    )
    fig.update_xaxes(title_text="step", row=1, col=2)
    fig.update_layout(
        title=title,
        height=options.height,
        margin={"l": 55, "r": 15, "t": 60, "b": 40},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.08, "x": 0},
        hovermode="x",
        uirevision=options.uirevision,
    )
    return pin_constant_axes(fig)


def _ratio_range(ratio: np.ndarray, ratio_line: float | None) -> list[float] | None:
    """A y range holding 99.5% of the drawn ratios and the threshold: one-step hiccups (5x) would
    otherwise squash a 1.4x straggler into the baseline. Double-click (autorange) shows them all."""
    finite = ratio[np.isfinite(ratio)]
    if finite.size == 0:
        return None
    lo, hi = np.quantile(finite, [0.0025, 0.9975])
    hi = max(hi, ratio_line or 1.0, 1.0)
    lo = min(lo, 1.0)
    pad = 0.08 * (hi - lo)
    return [float(max(lo - pad, 0.0)), float(hi + pad)]


def _bucket_medians(steps: np.ndarray, ratio: np.ndarray, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, ratio)``: all points when they fit, else the median of each of ``n_out`` equal buckets (at its middle)."""
    n, k = ratio.shape
    if n <= n_out:
        return steps, ratio
    size = -(-n // n_out)
    nb = -(-n // size)
    padded = np.full((nb * size, k), np.nan)
    padded[:n] = ratio
    ordered = np.sort(padded.reshape(nb, size, k), axis=1)  # NaN last
    count = np.isfinite(ordered).sum(axis=1)
    lo = np.maximum((count - 1) // 2, 0)[:, None, :]
    hi = np.maximum(count // 2, 0)[:, None, :]
    med = (np.take_along_axis(ordered, lo, axis=1) + np.take_along_axis(ordered, hi, axis=1))[:, 0, :] / 2
    med[count == 0] = np.nan
    middle = np.minimum(np.arange(nb) * size + size // 2, n - 1)
    return steps[middle], med


# --------------------------------------------------------------------------- telemetry
def telemetry_columns(frame: pd.DataFrame) -> list[str]:
    """The utilisation and memory columns this frame has values in (empty: no telemetry chart)."""
    names = (*UTILISATION_COLUMNS, *MEMORY_BYTES_COLUMNS, *HOST_MEMORY_COLUMNS, *MEMORY_PERCENT_COLUMNS)
    return [c for c in names if c in frame.columns and frame[c].notna().any()]


def utilisation_figure(
    data: ChartData | pd.DataFrame, options: ChartOptions = DEFAULT_OPTIONS, *, title: str | None = None
) -> go.Figure:
    """Utilisation (``gpu_util``, ``npu_util``, ``sys_cpu_percent``, %) left and memory right, against ``x``.

    Memory is in GiB (``mem_device``, ``mem_device_peak``, ``mem_device_reserved``, ``gpu_mem_used``,
    ``npu_mem`` from ``npu_mem_util`` x ``npu_mem_total_mb``, ``mem_host_rss``); without any of those,
    ``npu_mem_util`` / ``sys_mem_percent`` in % share the left axis. Absent columns are skipped. The
    telemetry sampler joins a sample to the last logged step's row about once a second, so a NaN here
    means "not sampled at this step" and is never marked. ``data.rank``: which rank of a merged frame
    (default the lowest); the log scale and thresholds of ``options`` do not apply.
    """
    source = ChartData.of(data)
    frame = source.frame
    util = [c for c in UTILISATION_COLUMNS if _has(frame, c)]
    columns = [c for c in ("step", "t", "rank", "samples") if c in frame.columns] + _x_column(frame, options.x)
    data = frame[columns].copy()
    memory: list[str] = []
    for column in MEMORY_BYTES_COLUMNS + HOST_MEMORY_COLUMNS:
        if _has(frame, column):
            data[column] = float_values(frame[column]) / GIB
            memory.append(column)
    if _has(frame, "npu_mem_util") and _has(frame, "npu_mem_total_mb"):
        used = float_values(frame["npu_mem_util"]) / 100 * float_values(frame["npu_mem_total_mb"]) * 2**20
        data[NPU_MEM] = used / GIB
        memory.insert(len([c for c in memory if c in MEMORY_BYTES_COLUMNS]), NPU_MEM)
    percent = [c for c in MEMORY_PERCENT_COLUMNS if _has(frame, c)] if not memory else []
    for column in util + percent:
        data[column] = float_values(frame[column])
    if not util and not memory and not percent:
        return empty_figure("no utilisation or memory telemetry logged", options.height)
    masks: Mapping[str, np.ndarray] = {c: data[c].notna().to_numpy() for c in (*util, *percent, *memory)}
    left = util + percent
    return dual_axis_figure(
        ChartData(data, masks, source.rows, source.rank, source.cache_key),
        left,
        memory,
        replace(options, log_y=False, thresholds=()),
        title=title,
        y_title="utilisation %" if left else None,
        y2_title="GiB" if memory else None,
    )


def _has(frame: pd.DataFrame, column: str) -> bool:
    return column in frame.columns and bool(frame[column].notna().any())


def _x_column(frame: pd.DataFrame, x: str) -> list[str]:
    return [x] if x in frame.columns and x not in ("step", "t", "rank", "samples") else []


__all__ = [
    "HOST_MEMORY_COLUMNS",
    "MEMORY_BYTES_COLUMNS",
    "MEMORY_PERCENT_COLUMNS",
    "UTILISATION_COLUMNS",
    "per_rank_figure",
    "rank_band_figure",
    "rank_color",
    "rank_step_time_figure",
    "telemetry_columns",
    "utilisation_figure",
]
