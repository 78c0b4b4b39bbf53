"""The live page's tiles (KPIs): last values, speed, ETA, staleness, and how a value is written."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.live_series import LiveSeries
from monitor_cb.analysis.roles import Casting, automatic
from monitor_cb.ingest.meta_values import finite_float
from monitor_cb.ingest.status import is_epoch, run_span, time_bounds
from monitor_cb.views.runlist import ACTIVE_STATUSES, RunLike, format_age

# A running run whose last write is older than this many typical record intervals looks stale.
STALE_INTERVALS = 10.0
STALE_MIN_S = 60.0


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
    # role -> the metric its tile shows, when that is not our own key (``("loss", "train/loss")``)
    shown_metrics: tuple[tuple[str, str], ...] = ()

    def metric_of(self, role: str) -> str | None:
        """The metric a tile shows for ``role`` when it is not the format's own key, else None."""
        return dict(self.shown_metrics).get(role)


def steps_per_second(df: pd.DataFrame | LiveSeries, window: int = 50) -> float | None:
    """Recent training speed from the last ``window`` records, None when it cannot be told."""
    series = LiveSeries.of(df)
    if len(series) < 2 or not series.has("t"):
        return None
    t, steps = series.values("t")[-window:], series.steps()[-window:]
    dt = float(t[-1] - t[0])
    ds = float(steps[-1] - steps[0])
    if dt <= 0 or ds <= 0:
        return None
    return ds / dt


def typical_interval(df: pd.DataFrame | LiveSeries, window: int = 50) -> float | None:
    """Median seconds between the last ``window`` records, None with fewer than 2 records."""
    series = LiveSeries.of(df)
    if len(series) < 2 or not series.has("t"):
        return None
    t = series.values("t")[-window:]
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


def update_age(
    active: bool, last_write: float | None, meta_end: float | None, t_last: float | None, now: float
) -> float | None:
    """Seconds since the run last logged ("Since update").

    A running run writes its file, so the file's time is its last update. An ended run's file time may be
    when it was copied or synced here, not when it logged: its own end time or last record's date counts,
    and a run with neither (``t`` counting from 0, or none) has no age to show.
    """
    if active:
        return now - last_write if last_write else None
    for when in (meta_end, t_last):
        if is_epoch(when):
            return max(now - float(when), 0.0)  # type: ignore[arg-type]
    return None


KPI_COLUMNS = ("epoch", "loss", "lr", "throughput", "grad_norm")


def compute_kpis(
    df: pd.DataFrame | LiveSeries,
    run: RunLike,
    now: float,
    logged: Mapping[str, np.ndarray] | None = None,
    casting: Casting | None = None,
) -> Kpis:
    """The KPI row for a run frame (``step``, ``t``, metric columns), or its refresh's
    :class:`~monitor_cb.analysis.live_series.LiveSeries`, and its ``RunInfo``.

    ``logged`` holds "was logged" masks (``RunFrame.masks``) for :data:`KPI_COLUMNS` (a series has its
    own); with a mask a logged NaN shows as NaN, without one a trailing NaN is taken for "not logged here".
    ``casting``: which metrics play the loss, lr, throughput and grad norm (default: by their names); a
    tile shows the first metric of its role.
    """
    series = df if isinstance(df, LiveSeries) else LiveSeries(df, logged)
    casting = casting if casting is not None else automatic(list(series.columns))
    played = {role: casting.first(role) for role in ("loss", "lr", "throughput", "grad_norm")}

    def last(role: str) -> float | None:
        name = played[role]
        return series.last_value(name) if name is not None and series.has(name) else None

    meta = run.meta or {}
    total = _as_int(meta.get("total_steps"))
    step = int(series.steps()[-1]) if len(series) else run.last_step
    speed = steps_per_second(series)
    eta = None
    if total and step is not None and speed and run.status in ACTIVE_STATUSES and step < total:
        eta = (total - step) / speed
    epoch_value = series.last_value("epoch")
    start = finite_float(meta.get("first_start_time")) or finite_float(meta.get("start_time"))
    t_first, t_last = time_bounds(series.values("t")) if len(series) and series.has("t") else (None, None)
    active = run.status in ACTIVE_STATUSES
    end = finite_float(meta.get("end_time")) or (run.last_write if start is not None and t_last is None else None)
    elapsed = run_span(start, end, t_first, t_last, active, now, finite_float(meta.get("log_end_time")))
    age = update_age(active, run.last_write, finite_float(meta.get("end_time")), t_last, now)
    return Kpis(
        step=step,
        total_steps=total,
        eta_s=eta,
        epoch=int(epoch_value) if epoch_value is not None and math.isfinite(epoch_value) else None,
        loss=last("loss"),
        lr=last("lr"),
        throughput=last("throughput"),
        grad_norm=last("grad_norm"),
        elapsed_s=elapsed,
        age_s=age,
        stale=is_stale(run.status, age, typical_interval(series)),
        steps_per_s=speed,
        shown_metrics=tuple((role, name) for role, name in played.items() if name is not None and name != role),
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


def _as_int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number > 0 else None
