"""The live page's tiles (KPIs): last values, speed, ETA, staleness, and how a value is written."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.dashboard.runlist import ACTIVE_STATUSES, RunLike, format_age

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
