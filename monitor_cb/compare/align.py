"""Put several runs on one x axis, then downsample and smooth them on one grid.

Alignments: ``step``; ``samples`` (samples seen by all ranks: the logged ``samples`` times the world
size, else step × batch size × world size from the metadata); ``wall`` (UTC wall clock); ``relative``
(time since each run's first record, in one unit chosen for the longest run).

Runs logged every step and runs logged every 10 steps must look alike: the grid is a set of bin edges
shared by every run (each bin keeps its lowest and highest value, so spikes survive, and every
NaN/±inf), and smoothing is TensorBoard's debiased EMA with its weight stated per reference interval
(the finest logging interval among the runs), so a run logged ten times less often is smoothed over
the same stretch of x, not over ten times as many steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.series import X_TITLES, XAxis, float_values, x_axis
from monitor_cb.ingest.meta_values import finite_float

if TYPE_CHECKING:
    from monitor_cb.compare.rundata import RunData

ALIGNMENTS: dict[str, str] = {
    "step": "step",
    "samples": "samples seen",
    "wall": "wall time (UTC)",
    "relative": "time since start",
}
DEFAULT_ALIGNMENT = "step"
# (unit kind, seconds): the relative axis uses the first unit in which the longest run is under 3 units' limit
_RELATIVE_UNITS = (("elapsed_s", 1.0, 600.0), ("elapsed_min", 60.0, 3 * 3600.0), ("elapsed_h", 3600.0, math.inf))


@dataclass(frozen=True)
class Aligned:
    """One run's x values on the chosen alignment (one per frame row; NaN/NaT where unknown)."""

    values: np.ndarray
    title: str
    is_datetime: bool

    def numeric(self) -> np.ndarray:
        """x as float64 (datetimes as ns since the epoch, NaT as NaN), for grids and ranges."""
        return as_numeric(self.values)


@dataclass(frozen=True)
class Alignment:
    """Every run's x values on the chosen alignment, and the runs that cannot be drawn on it (``why``:
    run id -> the reason, in words)."""

    kind: str
    x: dict[str, Aligned]
    skipped: tuple[str, ...]
    title: str
    is_datetime: bool
    why: Mapping[str, str] = field(default_factory=dict, compare=False)

    def described(self) -> AlignmentInfo:
        """What a page reads of the alignment once the figures are made, without the runs' x values."""
        return AlignmentInfo(self.kind, tuple(self.x), self.skipped, self.title, self.is_datetime, dict(self.why))


@dataclass(frozen=True)
class AlignmentInfo:
    """An :class:`Alignment` without its x values (a view kept for every viewer holds no per-row arrays):
    the runs drawn, the runs skipped and why, and the axis' title and kind."""

    kind: str
    drawn: tuple[str, ...]
    skipped: tuple[str, ...]
    title: str
    is_datetime: bool
    why: Mapping[str, str] = field(default_factory=dict, compare=False)


# Wall time needs dates: a ``t`` below this (1 Jan 2000 UTC) counts seconds from the run's start
# (LLaMA-Factory's elapsed_time, a script's own timer), and on a date axis it would sit in January 1970.
WALL_MIN_T = 946_684_800.0


def align_runs(runs: Sequence[RunData], alignment: str) -> Alignment:
    """x values for every run (one relative-time unit for all); runs lacking what the alignment needs are skipped."""
    relative = relative_kind([duration_s(r.frame) for r in runs]) if alignment == "relative" else None
    xs: dict[str, Aligned] = {}
    why: dict[str, str] = {}
    for run in runs:
        if alignment == "wall" and relative_t(run.frame):
            why[run.id] = "its t counts seconds from the run's start, not dates"
            continue
        aligned = align(run.frame, alignment, run.meta, relative) if len(run.frame) else None
        if aligned is None:
            why[run.id] = _missing(alignment)
        else:
            xs[run.id] = aligned
    first = next(iter(xs.values()), None)
    title = first.title if first is not None else alignment
    return Alignment(alignment, xs, tuple(why), title, bool(first and first.is_datetime), why)


def _missing(alignment: str) -> str:
    if alignment == "samples":
        return "it logged no samples count and its metadata has no batch size"
    if alignment in ("wall", "relative"):
        return "it logged no timestamps (t)"
    return "it logged no rows"


def relative_t(frame: pd.DataFrame) -> bool:
    """True when the run's ``t`` is elapsed seconds rather than a date (all finite values below
    :data:`WALL_MIN_T`), so it has no place on a wall-time axis."""
    if "t" not in frame.columns or len(frame) == 0:
        return False
    t = float_values(frame["t"])
    t = t[np.isfinite(t)]
    return bool(t.size) and float(t.max()) < WALL_MIN_T


def as_numeric(values: np.ndarray) -> np.ndarray:
    """Numbers as float64, datetimes as float ns (NaT -> NaN)."""
    arr = np.asarray(values)
    if np.issubdtype(arr.dtype, np.datetime64):
        ns = arr.astype("datetime64[ns]")
        out = ns.view(np.int64).astype(np.float64)
        out[np.isnat(ns)] = np.nan
        return out
    return arr.astype(np.float64, copy=False)


def relative_kind(durations_s: Sequence[float]) -> str:
    """The elapsed-time kind (``elapsed_s``/``_min``/``_h``) that suits the longest of ``durations_s``."""
    longest = max((d for d in durations_s if math.isfinite(d)), default=0.0)
    for kind, _, limit in _RELATIVE_UNITS:
        if longest < limit:
            return kind
    return _RELATIVE_UNITS[-1][0]  # pragma: no cover - the last limit is infinite


def duration_s(frame: pd.DataFrame) -> float:
    """Seconds between a frame's first and last record (0 without times)."""
    if "t" not in frame.columns or len(frame) == 0:
        return 0.0
    t = float_values(frame["t"])
    t = t[np.isfinite(t)]
    return float(t.max() - t.min()) if t.size else 0.0


def align(
    frame: pd.DataFrame, alignment: str, meta: Mapping[str, Any] | None = None, relative: str | None = None
) -> Aligned | None:
    """x values of one run for ``alignment`` (a key of :data:`ALIGNMENTS`); None when the run lacks them.

    Args:
        frame: the run's frame (``step``, ``t``, metric columns).
        alignment: ``step``, ``samples``, ``wall`` or ``relative``.
        meta: the run's metadata (``world_size``, ``batch_size`` for ``samples``).
        relative: the elapsed kind for ``relative`` (see :func:`relative_kind`); default from this run.

    Raises:
        ValueError: an unknown alignment.
    """
    if alignment not in ALIGNMENTS:
        raise ValueError(f"unknown alignment {alignment!r}; choose one of {sorted(ALIGNMENTS)}")
    meta = meta or {}
    if alignment == "step":
        return _from(x_axis(frame, "step"))
    if alignment in ("wall", "relative"):
        if "t" not in frame.columns or not np.isfinite(float_values(frame["t"])).any():
            return None
        kind = "time" if alignment == "wall" else (relative or relative_kind([duration_s(frame)]))
        return _from(x_axis(frame, kind))
    samples = samples_seen(frame, meta)
    return None if samples is None else Aligned(samples, X_TITLES["samples"] + " (all ranks)", False)


def samples_seen(frame: pd.DataFrame, meta: Mapping[str, Any]) -> np.ndarray | None:
    """Samples seen by all ranks at each row: logged ``samples`` × world size, interpolated over rows
    that did not log it; else step × ``batch_size`` × world size; None when neither is known."""
    world = _positive(meta.get("world_size")) or 1.0
    steps = float_values(frame["step"])
    if "samples" in frame.columns:
        samples = float_values(frame["samples"])
        ok = np.isfinite(samples)
        if ok.sum() >= 2:
            return np.interp(steps, steps[ok], samples[ok]) * world
        if ok.sum() == 1:
            return steps * (samples[ok][0] / max(steps[ok][0], 1.0)) * world
    config = meta.get("config")
    configured = config.get("batch_size") if isinstance(config, Mapping) else None
    batch = _positive(meta.get("batch_size")) or _positive(configured)
    if batch is None:
        return None
    return steps * batch * world


def _positive(value: Any) -> float | None:
    number = finite_float(value)
    return number if number is not None and number > 0 else None


def _from(xa: XAxis) -> Aligned:
    return Aligned(xa.values, xa.title, xa.is_datetime)


# ----------------------------------------------------------------------------- the common grid
def grid_edges(xs: Sequence[np.ndarray], n_bins: int) -> np.ndarray | None:
    """``n_bins + 1`` equal bin edges over the union of the runs' finite x values (numeric, see
    :func:`as_numeric`); None when no run has any."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    lows, highs = [], []
    for x in xs:
        finite = x[np.isfinite(x)]
        if finite.size:
            lows.append(finite.min())
            highs.append(finite.max())
    if not lows:
        return None
    lo, hi = min(lows), max(highs)
    if hi <= lo:
        hi = lo + 1.0
    return np.linspace(lo, hi, n_bins + 1)


def grid_indices(x: np.ndarray, y: np.ndarray, edges: np.ndarray | None, max_nonfinite: int = 1000) -> np.ndarray:
    """Rows to draw of one run on the shared grid: per bin the rows of the lowest and the highest
    finite value, every NaN/±inf (at most ``max_nonfinite``, the first always), and the first and last row.

    ``x`` is numeric and non-decreasing where finite; rows with a NaN x are never drawn.
    """
    n = y.size
    valid = np.isfinite(x)
    if edges is None or n <= 2 * (edges.size - 1) + 2:
        return np.flatnonzero(valid)
    rows = np.flatnonzero(valid)
    if rows.size == 0:
        return rows
    finite = rows[np.isfinite(y[rows])]
    parts = [rows[:1], rows[-1:], _thin(rows[~np.isfinite(y[rows])], max_nonfinite)]
    if finite.size:
        bins = np.clip(np.searchsorted(edges, x[finite], side="right") - 1, 0, edges.size - 2)
        parts += list(_bin_extremes(finite, y[finite], bins))
    return np.unique(np.concatenate(parts)).astype(np.int64)


def _bin_extremes(rows: np.ndarray, y: np.ndarray, bins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per bin, the row of the lowest and of the highest ``y`` (first one on ties); O(n) when the
    bins are non-decreasing (x sorted), else a sort."""
    if bins.size > 1 and np.any(bins[1:] < bins[:-1]):
        order = np.lexsort((y, bins))
        sorted_bins = bins[order]
        starts = np.flatnonzero(np.r_[True, sorted_bins[1:] != sorted_bins[:-1]])
        ends = np.r_[starts[1:], sorted_bins.size] - 1
        return rows[order[starts]], rows[order[ends]]
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    lengths = np.diff(np.r_[starts, bins.size])
    out = []
    for reduce in (np.minimum, np.maximum):
        extreme = np.repeat(reduce.reduceat(y, starts), lengths)
        hits = np.flatnonzero(y == extreme)
        first = hits[np.searchsorted(hits, starts)]  # every segment holds its own extreme
        out.append(rows[first])
    return out[0], out[1]


def _thin(bad: np.ndarray, cap: int) -> np.ndarray:
    if bad.size <= cap:
        return bad
    keep = np.unique(np.linspace(0, bad.size - 1, max(cap, 1)).round().astype(np.int64))
    return bad[keep]


# ----------------------------------------------------------------------------- smoothing
def reference_interval(xs: Sequence[np.ndarray]) -> float | None:
    """The finest typical logging interval among the runs: the smallest median positive gap of x."""
    gaps = []
    for x in xs:
        finite = x[np.isfinite(x)]
        if finite.size > 1:
            d = np.diff(finite)
            d = d[d > 0]
            if d.size:
                gaps.append(float(np.median(d)))
    return min(gaps) if gaps else None


def smooth_on_grid(x: np.ndarray, y: np.ndarray, weight: float, ref_dx: float | None) -> np.ndarray:
    """TensorBoard's debiased EMA where ``weight`` applies per ``ref_dx`` of x, not per point.

    A point ``k`` reference intervals after the previous one decays the past by ``weight ** k``, so
    runs logged at different intervals are smoothed over the same x span. With points exactly
    ``ref_dx`` apart this is :func:`monitor_cb.analysis.smoothing.ema_debiased`. Non-finite values
    (and rows with a NaN x) pass through unchanged and do not enter the average.
    """
    from monitor_cb.analysis.smoothing import ema_debiased

    weight = float(weight)
    ema_debiased([], weight)  # validates the weight
    out = np.array(y, dtype=np.float64, copy=True)
    use = np.isfinite(out) & np.isfinite(x)
    if weight == 0.0 or use.sum() < 2:
        return out
    if ref_dx is None or ref_dx <= 0:
        out[use] = ema_debiased(out[use], weight)
        return out
    xs = x[use]
    if np.any(np.diff(xs) < 0):
        out[use] = ema_debiased(out[use], weight)  # wall time that went back: per point, as the live page
        return out
    gaps = np.diff(xs)
    if gaps.size and np.all(np.abs(gaps - gaps[0]) <= 1e-9 * max(abs(gaps[0]), 1.0)) and gaps[0] > 0:
        # evenly logged (the usual case): one weight per point, TensorBoard's EMA (pandas' plain EWM)
        out[use] = ema_debiased(out[use], min(weight ** (gaps[0] / ref_dx), 0.999999))
        return out
    # pandas' time-aware EWM: weight of a point = 0.5 ** (age / halflife), debiased (adjust=True).
    halflife = ref_dx * math.log(0.5) / math.log(weight)
    scale = 1e6 / halflife  # halflife = 1 ms on a nanosecond clock: exact enough, far from int64 limits
    if (xs[-1] - xs[0]) * scale > 1e18:  # pragma: no cover - a span of 10^12 half-lives: nothing to smooth
        return out
    times = pd.to_datetime(np.round((xs - xs[0]) * scale).astype(np.int64), unit="ns")
    series = pd.Series(out[use])
    out[use] = series.ewm(halflife=pd.Timedelta(milliseconds=1), times=times).mean().to_numpy()
    return out


def smooth_run(x: np.ndarray, y: np.ndarray, weight: float, ref_dx: float | None, smoother: str = "ema") -> np.ndarray:
    """One run's curve smoothed for a compare chart: ``ema`` is :func:`smooth_on_grid` (interval-aware);
    ``mean`` and ``gaussian`` (:data:`monitor_cb.analysis.smoothing.SMOOTHERS`) work per logged point,
    over the window the weight stands for, as the live page's do."""
    if smoother == "ema":
        return smooth_on_grid(x, y, weight, ref_dx)
    from monitor_cb.analysis.smoothing import smooth

    out = np.array(y, dtype=np.float64, copy=True)
    use = np.isfinite(x)
    out[use] = smooth(out[use], weight, smoother)
    return out
