"""View logic of the live dashboard, without Streamlit: log root, run labels, KPIs, zoom state.

The pages in ``pages/`` only read widgets and draw; every decision they show (which runs match a
filter, what the KPI row says, whether a run is stale, what a zoom event from the browser means,
which rows a zoomed chart re-reads) is a plain function here with its own unit tests, because
Streamlit's AppTest cannot drive a ``run_every`` refresh or a drag in a chart.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from monitor_cb.charts.options import ChartOptions
from monitor_cb.logroot import log_root, logdir_argument

# Sidebar refresh choices: label -> seconds (None = no automatic refresh).
REFRESH_CHOICES: dict[str, float | None] = {"off": None, "1 s": 1.0, "2 s": 2.0, "5 s": 5.0, "10 s": 10.0}
DEFAULT_REFRESH = "2 s"

ACTIVE_STATUSES = frozenset({"running", "stalled"})
# A running run whose last write is older than this many typical record intervals looks stale.
STALE_INTERVALS = 10.0
STALE_MIN_S = 60.0


class RunLike(Protocol):
    """The fields of ``monitor_cb.ingest.RunInfo`` this module reads."""

    id: str
    name: str
    status: str
    last_write: float
    last_step: int | None
    n_records: int
    meta: Mapping[str, Any]


# ----------------------------------------------------------------------------- log root
def resolve_logdir(argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> Path:
    """The dashboard's log root (:mod:`monitor_cb.logroot`: ``--logdir PATH`` after ``--`` in ``streamlit
    run``, else ``$MONITOR_LOGDIR``, else ``./logs``), absolute and resolved; it need not exist yet.

    An object-store URL (``s3://bucket/prefix``) is returned as a string, without any credentials it carried.
    """
    path = log_root(logdir_argument(argv), env)
    if isinstance(path, str):
        return path  # type: ignore[return-value]
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    return path.resolve()


def apply_endpoint_arg(argv: Sequence[str], env: Any) -> None:
    """``--endpoint-url URL`` (after ``--`` in ``streamlit run``) becomes ``$MONITOR_ENDPOINT_URL`` for this process."""
    from monitor_cb.storage.urls import ENV_ENDPOINT

    for i, arg in enumerate(argv):
        if arg == "--endpoint-url" and i + 1 < len(argv):
            env[ENV_ENDPOINT] = argv[i + 1]
        elif arg.startswith("--endpoint-url="):
            env[ENV_ENDPOINT] = arg.split("=", 1)[1]


def redact(text: object) -> str:
    """Text for the page with credentials removed (URL user info, the SDK's secret values)."""
    from monitor_cb.storage.urls import redact as _redact

    return _redact(text)


# ----------------------------------------------------------------------------- run list
def format_age(seconds: float | None) -> str:
    """A short human age: ``"4 s"``, ``"12 min"``, ``"3.5 h"``, ``"2 d"``; ``"–"`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} d"


def format_duration(seconds: float | None) -> str:
    """``"1:02:03"`` style (hours may exceed 24); ``"–"`` when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "–"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def run_label(run: RunLike, now: float) -> str:
    """One line for the run picker: id, status and, for a run that ended, when (plain text).

    No emoji (many Linux machines have no emoji font) and no age: a select box's labels are drawn
    once per page run, so "12 s ago" would go stale; a clock time does not. A running run's label
    changes only with its status, which makes the page redraw the picker.
    """
    if run.status in ACTIVE_STATUSES or not run.last_write:
        return f"{run.id} · {run.status}"
    return f"{run.id} · {run.status} · {format_clock(run.last_write, now)}"


def format_clock(t: float, now: float) -> str:
    """``"14:05"`` today, ``"Dec 02 14:05"`` this year, else ``"2024-12-02 14:05"`` (server local time)."""
    if not math.isfinite(t):
        return "–"
    when, today = time.localtime(t), time.localtime(now)
    if when[:3] == today[:3]:
        return time.strftime("%H:%M", when)
    if when.tm_year == today.tm_year:
        return time.strftime("%b %d %H:%M", when)
    return time.strftime("%Y-%m-%d %H:%M", when)


def filter_runs(runs: Iterable[RunLike], text: str) -> list[RunLike]:
    """Runs whose id, name or status contains every word of ``text`` (case-insensitive), order kept."""
    words = text.lower().split()
    if not words:
        return list(runs)
    return [r for r in runs if all(w in f"{r.id} {r.name} {r.status}".lower() for w in words)]


def pick_run(run_ids: Sequence[str], wanted: str | None) -> str | None:
    """The run to show: ``wanted`` (from the URL) when it still exists, else the newest (first) one."""
    if wanted is not None and wanted in run_ids:
        return wanted
    return run_ids[0] if run_ids else None


# ----------------------------------------------------------------------------- KPIs
@dataclass(frozen=True)
class Kpis:
    """What the KPI row shows; numbers are None when the run did not log them."""

    step: int | None = None
    total_steps: int | None = None
    eta_s: float | None = None
    epoch: int | None = None
    loss: float | None = None
    lr: float | None = None
    throughput: float | None = None
    grad_norm: float | None = None
    elapsed_s: float | None = None
    age_s: float | None = None
    stale: bool = False
    steps_per_s: float | None = None


def _last_value(df: pd.DataFrame, column: str) -> float | None:
    """The last non-missing value of ``column`` (NaN counts when it was logged as NaN and is last)."""
    if column not in df.columns or len(df) == 0:
        return None
    values = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=np.float64)
    # A NaN in a sparse column usually means "not logged here"; the last finite value is what the
    # tile should say, except that a non-finite tail (the run diverged) must show as such.
    finite = np.flatnonzero(np.isfinite(values))
    if finite.size == 0:
        return float(values[-1]) if np.isinf(values[-1]) else None
    last_finite = int(finite[-1])
    tail = values[last_finite + 1 :]
    if tail.size and np.isinf(tail).any():
        return float(tail[np.isinf(tail)][-1])
    return float(values[last_finite])


def steps_per_second(df: pd.DataFrame, window: int = 50) -> float | None:
    """Recent training speed from the last ``window`` records, None when it cannot be told."""
    if len(df) < 2 or "t" not in df.columns:
        return None
    tail = df.iloc[-window:]
    dt = float(tail["t"].iloc[-1] - tail["t"].iloc[0])
    ds = float(tail["step"].iloc[-1] - tail["step"].iloc[0])
    if dt <= 0 or ds <= 0:
        return None
    return ds / dt


def typical_interval(df: pd.DataFrame, window: int = 50) -> float | None:
    """Median seconds between the last ``window`` records, None with fewer than 2 records."""
    if len(df) < 2 or "t" not in df.columns:
        return None
    t = df["t"].to_numpy(dtype=np.float64)[-window:]
    gaps = np.diff(t)
    gaps = gaps[np.isfinite(gaps) & (gaps > 0)]
    return float(np.median(gaps)) if gaps.size else None


def is_stale(status: str, age_s: float | None, interval_s: float | None) -> bool:
    """A run that should be writing but has not for much longer than usual."""
    if status == "stalled":
        return True
    if status != "running" or age_s is None:
        return False
    limit = max(STALE_MIN_S, STALE_INTERVALS * (interval_s or 0.0))
    return age_s > limit


KPI_COLUMNS = ("epoch", "loss", "lr", "throughput", "grad_norm")


def _kpi_value(df: pd.DataFrame, column: str, logged: Mapping[str, np.ndarray] | None) -> float | None:
    """The value a tile shows: the last logged one (a NaN when NaN was logged last) given a mask."""
    if column not in df.columns:
        return None
    # Look at the newest rows first: on a 1M-row run the value is almost always among them.
    for start in (max(0, len(df) - _KPI_TAIL), 0):
        tail = df.iloc[start:]
        if logged is not None and column in logged:
            from monitor_cb.analysis.series import latest

            found = latest(tail, column, {column: np.asarray(logged[column])[start:]})
            value = None if found is None else found[1]
        else:
            value = _last_value(tail, column)
        if value is not None or start == 0:
            return value
    return None  # pragma: no cover - the loop returns at start == 0


_KPI_TAIL = 4096


def compute_kpis(df: pd.DataFrame, run: RunLike, now: float, logged: Mapping[str, np.ndarray] | None = None) -> Kpis:
    """The KPI row for a run frame (``step``, ``t``, metric columns) and its ``RunInfo``.

    ``logged`` holds "was logged" masks (``RunFrame.masks``) for :data:`KPI_COLUMNS`; with a
    mask a logged NaN shows as NaN, without one a trailing NaN is taken for "not logged here".
    """
    meta = run.meta or {}
    total = _as_int(meta.get("total_steps"))
    step = int(df["step"].iloc[-1]) if len(df) else run.last_step
    speed = steps_per_second(df)
    eta = None
    if total and step is not None and speed and run.status in ACTIVE_STATUSES and step < total:
        eta = (total - step) / speed
    epoch_value = _kpi_value(df, "epoch", logged)
    start = _as_float(meta.get("first_start_time")) or _as_float(meta.get("start_time"))
    if start is None and len(df) and "t" in df.columns:
        start = float(df["t"].iloc[0])
    end = now if run.status in ACTIVE_STATUSES else (_as_float(meta.get("end_time")) or run.last_write)
    elapsed = end - start if start is not None and end is not None else None
    age = now - run.last_write if run.last_write else None
    return Kpis(
        step=step,
        total_steps=total,
        eta_s=eta,
        epoch=int(epoch_value) if epoch_value is not None and math.isfinite(epoch_value) else None,
        loss=_kpi_value(df, "loss", logged),
        lr=_kpi_value(df, "lr", logged),
        throughput=_kpi_value(df, "throughput", logged),
        grad_norm=_kpi_value(df, "grad_norm", logged),
        elapsed_s=elapsed,
        age_s=age,
        stale=is_stale(run.status, age, typical_interval(df)),
        steps_per_s=speed,
    )


def format_value(value: float | None, digits: int = 4) -> str:
    """A KPI number: ``"–"`` when missing, ``"NaN"``/``"inf"`` as such, else ``digits`` significant digits.

    Short and whole: ``"0.5038"``, ``"3.25e-3"``, ``"4.11e-4"``, ``"12,346"`` (1,000 to a million:
    every digit of the whole part), ``"1.235e6"``. At most 10 characters, one style of exponent.
    """
    if value is None:
        return "–"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    rounded = float(f"{value:.{max(digits, 1)}g}")  # 0.0099999998 (a float32 0.01) is 0.01
    if rounded != 0 and (abs(rounded) < 1e-2 or abs(rounded) >= 1e6):
        mantissa, exponent = f"{rounded:.{max(digits - 1, 0)}e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"  # 4.39e-4: fits a KPI tile
    if abs(value) >= 1e3:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def format_count(value: int | None) -> str:
    """A step or epoch, every digit with thousands separators (``"1,000,000"``); ``"–"`` when unknown."""
    return "–" if value is None else f"{int(value):,}"


def nan_banner(first: tuple[int, float] | None, metric: str, now: float) -> str | None:
    """``"loss became NaN at step 412, 3 min ago"`` from ``series.first_nonfinite``'s ``(step, t)``."""
    if first is None:
        return None
    step, t = first
    when = f", {format_age(now - t)} ago" if t is not None and math.isfinite(t) else ""
    return f"{metric} became NaN/Inf at step {step:,}{when}"


# ----------------------------------------------------------------------------- charts
@dataclass(frozen=True)
class Panel:
    """One chart of the live page: a title, the builder preset and the columns it needs."""

    key: str
    title: str
    needs: tuple[str, ...]  # shown when the frame has any of these columns
    left: tuple[str, ...] = ()
    right: tuple[str, ...] = ()


PANELS: tuple[Panel, ...] = (
    Panel("loss_lr", "Loss and learning rate", ("loss", "lr"), ("loss",), ("lr",)),
    Panel("speed_grad", "Throughput and gradient norm", ("throughput", "grad_norm"), ("throughput",), ("grad_norm",)),
    Panel("eval", "Eval metrics against train loss", ("eval_*",)),
    Panel("components", "Component losses", ("loss_*",)),
    Panel("timing", "Data and step time", ("step_time", "data_time")),
    Panel("memory", "Memory", ("mem_device", "mem_device_peak", "mem_host_rss")),
    Panel("custom", "Custom: choose the metric on each axis", ()),
)
PANEL_KEYS = tuple(p.key for p in PANELS)
DEFAULT_PANELS = ("loss_lr", "speed_grad", "eval")


def _has(columns: Iterable[str], pattern: str) -> bool:
    if pattern.endswith("*"):
        prefix = pattern[:-1]
        return any(c.startswith(prefix) and c != prefix.rstrip("_") for c in columns)
    return pattern in columns


def panels_for(columns: Iterable[str]) -> list[Panel]:
    """The panels this run can fill (the custom panel always)."""
    cols = list(columns)
    cols = [c for c in cols if c != "loss_scale"]  # loss_scale is not a loss component
    return [p for p in PANELS if not p.needs or any(_has(cols, n) for n in p.needs)]


# ----------------------------------------------------------------------------- thresholds
_THRESHOLD_RE = re.compile(r"^\s*([A-Za-z_][\w.\-/]*)\s*(>|<)\s*([-+0-9.eE]+|inf|-inf)\s*$")


def parse_thresholds(text: str) -> tuple[dict[str, tuple[float | None, float | None]], list[str]]:
    """``"grad_norm > 10, loss < 0.01"`` -> ``{"grad_norm": (None, 10.0), "loss": (0.01, None)}``.

    Returns the thresholds (``(lower, upper)`` per metric; points beyond turn red) and the parts
    that could not be read, so the page can name them.
    """
    limits: dict[str, tuple[float | None, float | None]] = {}
    errors: list[str] = []
    for part in re.split(r"[,;\n]", text):
        if not part.strip():
            continue
        match = _THRESHOLD_RE.match(part)
        if match is None:
            errors.append(part.strip())
            continue
        name, op, number = match.groups()
        try:
            value = float(number)
        except ValueError:
            errors.append(part.strip())
            continue
        lower, upper = limits.get(name, (None, None))
        limits[name] = (lower, value) if op == ">" else (value, upper)
    return limits, errors


# ----------------------------------------------------------------------------- zoom
@dataclass
class ZoomState:
    """The user's x zoom, kept as a step range so it survives refreshes and x-axis changes.

    ``lo``/``hi`` are steps (None = open end). ``hidden`` maps chart key -> legend entries the user
    switched off, re-applied to each new figure because a redraw with new data forgets them.
    ``exact`` is ``(x kind, x0, x1)``: the range a drag set, drawn as it was (not snapped to the
    whole steps ``lo``/``hi`` hold) while the x axis is still of that kind.
    """

    lo: float | None = None
    hi: float | None = None
    hidden: dict[str, list[str]] = field(default_factory=dict)
    exact: tuple[str, Any, Any] | None = None

    @property
    def active(self) -> bool:
        return self.lo is not None or self.hi is not None

    def reset(self) -> None:
        self.lo = self.hi = None


def monotonic_x(values: np.ndarray) -> np.ndarray:
    """x values as float64 made non-decreasing (datetimes as ns), so steps and x map both ways."""
    arr = np.asarray(values)
    if np.issubdtype(arr.dtype, np.datetime64):
        arr = arr.astype("datetime64[ns]").astype(np.int64).astype(np.float64)
    arr = np.asarray(arr, dtype=np.float64)
    if arr.size == 0:
        return arr
    filled = np.where(np.isfinite(arr), arr, -np.inf)
    return np.maximum.accumulate(filled)


def x_to_step(x_value: float, xs: np.ndarray, steps: np.ndarray) -> float:
    """The step drawn at ``x_value`` on an x axis whose values per row are ``xs`` (non-decreasing)."""
    if xs.size == 0:
        return x_value
    if x_value <= xs[0]:
        return float(steps[0])
    if x_value >= xs[-1]:
        return float(steps[-1])
    i = int(np.searchsorted(xs, x_value, side="left"))
    x0, x1 = xs[i - 1], xs[i]
    s0, s1 = float(steps[i - 1]), float(steps[i])
    return s0 if x1 <= x0 else s0 + (s1 - s0) * (x_value - x0) / (x1 - x0)


def step_to_x(step: float, xs: np.ndarray, steps: np.ndarray) -> float:
    """Inverse of :func:`x_to_step`; beyond the last step the x axis is extrapolated linearly by step."""
    if xs.size == 0:
        return step
    s = steps.astype(np.float64)
    if xs.size == 1 or step <= s[-1]:
        return float(np.interp(step, s, xs))
    return float(xs[-1] + (step - s[-1]) / _steps_per_x(xs, steps))


def parse_x_value(value: Any, is_datetime: bool) -> float | None:
    """One end of a plotly x range from the browser (a number, or a date string) as float (ns for dates).

    The value comes from the browser, so anything else (objects, huge strings) is rejected as None.
    """
    if isinstance(value, bool):
        return None
    if is_datetime:
        if not isinstance(value, (str, int, float)) or (isinstance(value, str) and len(value) > 40):
            return None
        try:
            stamp = pd.Timestamp(value)
        except (ValueError, TypeError, OverflowError):
            return None
        if stamp is pd.NaT:
            return None
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC").tz_localize(None)
        return float(stamp.value)
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and len(value) <= 40:
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def apply_zoom_event(state: ZoomState, event: Any, xs: np.ndarray, steps: np.ndarray, is_datetime: bool) -> bool:
    """Update ``state`` from a browser relayout event; True when it changed.

    ``event`` is ``{"reset": true}`` (double-click: back to the whole run, following new points) or
    ``{"x0": a, "x1": b}`` in the chart's x units; ``xs``/``steps`` are the drawn frame's
    :func:`monotonic_x` values and steps, used to turn the x range into a step range.
    """
    if not isinstance(event, Mapping):
        return False
    if event.get("reset"):
        changed = state.active
        state.reset()
        return changed
    a = parse_x_value(event.get("x0"), is_datetime)
    b = parse_x_value(event.get("x1"), is_datetime)
    if a is None or b is None:
        return False
    lo_x, hi_x = min(a, b), max(a, b)
    lo, hi = x_to_step(lo_x, xs, steps), x_to_step(hi_x, xs, steps)
    if len(steps) and hi_x >= xs[-1]:
        # The user's range reaches past the newest point: keep the same width in steps beyond it.
        hi = float(steps[-1]) + (hi_x - xs[-1]) * _steps_per_x(xs, steps)
    new = (lo, hi)
    changed = new != (state.lo, state.hi)
    state.lo, state.hi = new
    return changed


def _steps_per_x(xs: np.ndarray, steps: np.ndarray) -> float:
    span = float(xs[-1] - xs[0]) if xs.size > 1 else 0.0
    return float(steps[-1] - steps[0]) / span if span > 0 else 1.0


def apply_legend_event(state: ZoomState, event: Any, known_charts: Iterable[str]) -> bool:
    """Record the legend entries a user switched off in one chart; True when it changed."""
    if not isinstance(event, Mapping):
        return False
    chart = event.get("chart")
    hidden = event.get("hidden")
    if chart not in set(known_charts) or not isinstance(hidden, list):
        return False
    names = sorted({h for h in hidden if isinstance(h, str) and len(h) <= 200})[:100]
    if state.hidden.get(chart, []) == names:
        return False
    state.hidden[chart] = names
    return True


def rows_in_steps(steps: np.ndarray, lo: float | None, hi: float | None) -> slice:
    """The rows to re-read for a zoomed step range: those inside it plus one neighbour each side.

    The neighbours make the lines run to the chart's edges instead of stopping short of them.
    """
    n = len(steps)
    start = 0 if lo is None else max(int(np.searchsorted(steps, lo, side="left")) - 1, 0)
    stop = n if hi is None else min(int(np.searchsorted(steps, hi, side="right")) + 1, n)
    return slice(start, max(stop, start))


def x_range_for(state: ZoomState, xs_raw: np.ndarray, xs: np.ndarray, steps: np.ndarray) -> tuple[Any, Any] | None:
    """The zoom as an x range in the chart's units (datetimes for a wall-time axis), None = autorange."""
    if not state.active or len(steps) == 0:
        return None
    lo = state.lo if state.lo is not None else float(steps[0])
    hi = state.hi if state.hi is not None else float(steps[-1])
    a, b = step_to_x(lo, xs, steps), step_to_x(hi, xs, steps)
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    if np.issubdtype(np.asarray(xs_raw).dtype, np.datetime64):
        return pd.Timestamp(int(a)).to_pydatetime(), pd.Timestamp(int(b)).to_pydatetime()
    return a, b


def _as_int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number > 0 else None


def _as_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # metadata is read from disk: anything can be there
        return None
    return number if math.isfinite(number) else None


# ----------------------------------------------------------------------------- figures
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
    n_out: int = 2000

    def __post_init__(self) -> None:
        pairs = self.thresholds.items() if isinstance(self.thresholds, Mapping) else self.thresholds
        object.__setattr__(self, "thresholds", tuple(sorted((str(k), tuple(v)) for k, v in pairs)))

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
        )


def zoomed_rows(df: pd.DataFrame, zoom: ZoomState, context: float = 1.0) -> slice | None:
    """Rows to draw for a zoomed view, None = all rows.

    The step range plus ``context`` times its width on each side, all at full resolution: a pan
    or a small zoom-out shows data at once, and new points just past a zoom at the run's end are
    drawn (and scroll in) while the view stays where the user put it.
    """
    if not zoom.active or len(df) == 0:
        return None
    steps = df["step"].to_numpy()
    lo, hi = zoom.lo, zoom.hi
    if lo is not None and hi is not None:
        margin = (hi - lo) * context
        lo, hi = lo - margin, hi + margin
    return rows_in_steps(steps, lo, hi)


def live_figures(
    df: pd.DataFrame,
    settings: ChartSettings,
    zoom: ZoomState,
    logged: Mapping[str, np.ndarray] | None = None,
    uirevision: Any = "live",
    cache_key: Any = None,
    other_ranks: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``go.Figure`` per shown panel (key -> figure), zoom re-applied and hidden legend entries kept hidden.

    ``df`` is the whole run frame; when zoomed, only the zoomed step range is drawn and downsampled,
    so a zoom into a 1M-step run shows every point of that range. ``cache_key`` (the run id) lets
    each refresh extend the cached smoothing and downsampling of the last one instead of redoing them.
    """
    from monitor_cb.analysis.series import x_axis
    from monitor_cb.charts import figures as charts

    x_range = None
    if zoom.active and zoom.exact is not None and zoom.exact[0] == settings.x:
        x_range = zoom.exact[1:]  # the dragged range itself: the chart does not jump at the next refresh
    elif zoom.active:  # monotonic_x scans the whole run: only for a zoom
        xa = x_axis(df, settings.x)
        x_range = x_range_for(zoom, xa.values, monotonic_x(xa.values), df["step"].to_numpy())
    options = settings.chart_options(x_range, uirevision)
    # full resolution inside the zoom; smoothing still sees the whole run
    data = charts.ChartData(df, logged or None, zoomed_rows(df, zoom), None, cache_key, other_ranks)
    figures: dict[str, Any] = {}
    for panel in panels_for(df.columns):
        if panel.key not in settings.panels:
            continue
        if panel.key in ("loss_lr", "speed_grad"):
            fig = charts.dual_axis_figure(data, panel.left, panel.right, options, title=panel.title)
        elif panel.key == "custom":
            fig = charts.dual_axis_figure(data, settings.custom_left, settings.custom_right, options, title=panel.title)
        elif panel.key == "eval":
            fig = charts.eval_figure(data, options)
        elif panel.key == "components":
            fig = charts.components_figure(data, options)
        elif panel.key == "timing":
            fig = charts.timing_figure(data, options)
        else:
            fig = charts.memory_figure(data, options)
        if panel.key not in ("loss_lr", "speed_grad", "custom"):
            fig.update_layout(title=panel.title)
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
    from monitor_cb.diagnosis.ranks import (
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
    """Keep legend entries the user switched off switched off in a freshly built figure."""
    hidden = set(names)
    if hidden:
        for trace in fig.data:
            if trace.name in hidden:
                trace.visible = "legendonly"


# ----------------------------------------------------------------------------- safe text
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=^])")


def escape_markdown(text: str) -> str:
    """User text for a Streamlit Markdown string: every formatting character escaped, newlines folded.

    Run names and metadata come from files anyone can write; shown raw they could add links,
    images or layout to the page. (The pages never render user text as HTML.)
    """
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def escape_code(text: str) -> str:
    """User text for an inline code span: backticks cannot end the span early."""
    return " ".join(str(text).replace("`", "'").split())
