"""``throughput_drop``: a lasting fall in training speed, judged by size x persistence in logged points.

The rate is the logged ``throughput`` (samples/s), else 1 / ``step_time`` (steps/s), else steps per
second between consecutive records' ``t`` (imported logs only have time stamps). Each point's deficit
is ``log(trend / rate)`` against the trailing robust trend of the log rate. A drop is confirmed when,
for some window of ``L`` points (``drop_min_points`` .. ``drop_window``), most of the window (and at
least ``drop_min_points`` of it) is below
the trend by at least ``max(drop_frac, drop_evidence / L, drop_z noise sigmas of an L-point median)``:
a large drop needs few points (an 85% fall: 3), a small one more (a halving: 4; -30%: 7), and a
single slow interval (an evaluation, a checkpoint) never counts. The trend is frozen at the onset to
find where the drop ends.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, column, episodes, finite_series, majority, trailing_level, train_rows
from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_pct, fmt_seconds, fmt_step
from monitor_cb.diagnosis.noise import series_noise
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MAX_EPISODES = 50
_COMPARE_POINTS = 50  # points before / after the onset whose medians describe the change
_MEDIAN_SE = 1.2533


def rate_series(frame: pd.DataFrame) -> tuple[Series | None, str]:
    """Throughput (samples/s) when logged, else steps/s from ``step_time`` or from ``t``; with its unit."""
    s = finite_series(frame, "throughput")
    unit = "samples/s"
    if s is None:
        s = finite_series(frame, "step_time")
        unit = "steps/s"
        if s is None:
            return _rate_from_t(frame), "steps/s (from record times)"
        s = Series(s.rows, s.steps, np.where(s.values > 0, 1.0 / np.maximum(s.values, 1e-300), np.nan))
    keep = np.isfinite(s.values) & (s.values > 0)
    return Series(s.rows[keep], s.steps[keep], s.values[keep]), unit


def _rate_from_t(frame: pd.DataFrame) -> Series | None:
    """Steps per second between consecutive train records, from their ``t`` (None without usable times)."""
    t = column(frame, "t")
    if t is None:
        return None
    steps = frame["step"].to_numpy()
    rows = np.flatnonzero(train_rows(frame) & np.isfinite(t))
    if rows.size < 3:
        return None
    dt, ds = np.diff(t[rows]), np.diff(steps[rows])
    ok = (dt > 0) & (ds > 0)
    if ok.sum() < 3:
        return None
    rows = rows[1:][ok]
    return Series(rows, steps[rows], ds[ok] / dt[ok])


def detect_throughput_drop(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Stretches where the rate sits well below its trend for long enough given how far below it is."""
    s, unit = rate_series(frame)
    if s is None or len(s) < settings.min_baseline + settings.drop_min_points:
        return []
    if not _could_drop(s.values, settings):
        return []  # not even drop_min_points slow points close together: the common case, in one pass
    noise = series_noise(s.values, settings.baseline_window, settings.min_baseline, log=True)
    deficit = noise.level - noise.x  # log(trend / rate): > 0 when slower
    confirmed = np.zeros(len(s), dtype=bool)  # the last point of a confirming window
    need_at = np.full(len(s), np.nan)
    for window in _windows(settings.drop_min_points, settings.drop_window):
        need = np.maximum(-np.log1p(-settings.drop_frac), settings.drop_evidence / window)
        need = np.maximum(need, settings.drop_z * noise.sigma * _MEDIAN_SE / np.sqrt(window))
        with np.errstate(invalid="ignore"):
            low = deficit >= need
        hit = majority(low, window, least=settings.drop_min_points)  # a short window: all of it
        fresh = hit & ~confirmed
        need_at[fresh] = need[fresh]
        confirmed |= hit
    findings: list[Finding] = []
    covered = -1
    for first, _last in episodes(confirmed):
        if first <= covered:
            continue
        lookback = max(0, first - settings.drop_window)
        low = deficit[lookback : first + 1] >= need_at[first]
        onset = lookback + (int(np.flatnonzero(low)[0]) if low.any() else first - lookback)
        level = float(np.exp(noise.level[onset]))
        if not np.isfinite(level):
            continue
        end = _episode_end(noise.x, onset, np.log(level) - float(need_at[first]), settings.drop_window)
        findings.append(_finding(frame, s, unit, onset, end, first, level, float(need_at[first]), settings))
        covered = end
        if len(findings) >= _MAX_EPISODES:
            break
    return findings


def _could_drop(values: np.ndarray, settings: DiagnosisSettings) -> bool:
    """A cheap necessary condition: ``drop_min_points`` points ``drop_frac`` below the trend within ``drop_window``."""
    x = np.log(values)
    level = trailing_level(x, settings.baseline_window, settings.min_baseline)
    with np.errstate(invalid="ignore"):
        slow = np.flatnonzero(level - x >= -np.log1p(-settings.drop_frac))
    k = settings.drop_min_points
    return slow.size >= k and bool(np.any(slow[k - 1 :] - slow[: slow.size - k + 1] < settings.drop_window))


def _windows(shortest: int, longest: int) -> list[int]:
    """Window lengths to try: every length up to 6, then about 25% apart (the cost stays ~8 passes)."""
    out, w = [], max(1, shortest)
    while w <= longest:
        out.append(w)
        w = w + 1 if w < 6 else max(w + 1, round(w * 1.25))
    if out and out[-1] != longest and longest >= shortest:
        out.append(longest)
    return out


def _episode_end(x: np.ndarray, onset: int, threshold: float, window: int) -> int:
    """Last point of the drop: where a majority of ``window`` points stops being under the frozen threshold."""
    spans = episodes(majority(x[onset:] < threshold, window), window)
    return onset + (spans[0][1] if spans else 0)


def _finding(
    frame: pd.DataFrame, s: Series, unit: str, onset: int, end: int, seen: int, level: float, need: float, settings
) -> Finding:
    x = s.values
    now_level = float(np.median(x[onset : min(end + 1, onset + _COMPARE_POINTS)]))
    fall = 1 - now_level / level
    ongoing = end >= len(s) - 1
    span = "and is still there" if ongoing else f"until step {fmt_step(s.steps[end])}"
    cause, details = _cause(frame, s, onset, end, settings)
    points = seen - onset + 1
    what = (
        f"throughput fell from {fmt_num(level)} to {fmt_num(now_level)} {unit} (-{fmt_pct(fall)}) "
        f"at step {fmt_step(s.steps[onset])} {span}"
    )
    why = (
        f"most of {points} logged points in a row were at least {fmt_pct(1 - np.exp(-need))} below the trend "
        f"(threshold: -{fmt_pct(settings.drop_frac)}, and size x points >= drop_evidence = {settings.drop_evidence:g} "
        f"in log units, so a halving must last {int(np.ceil(settings.drop_evidence / np.log(2)))} points and "
        f"-{fmt_pct(settings.drop_frac)} {int(np.ceil(settings.drop_evidence / -np.log1p(-settings.drop_frac)))}; "
        f"and {settings.drop_z:g} noise sigmas of the rate)"
    )
    details |= {
        "before": level,
        "after": now_level,
        "fall": fall,
        "unit": unit,
        "ongoing": ongoing,
        "points_to_confirm": int(points),
        "detected_step": int(s.steps[seen]),
    }
    message = explain(what, cause, why)
    return Finding("throughput_drop", "warning", int(s.steps[onset]), message, int(s.steps[end]), None, details, why)


def _cause(frame: pd.DataFrame, s: Series, onset: int, end: int, settings: DiagnosisSettings) -> tuple[str, dict]:
    """Did the data wait per step grow by enough of the step-time growth to explain the slowdown?"""
    row0, row1 = int(s.rows[onset]), int(s.rows[end]) + 1
    data, step = column(frame, "data_time"), column(frame, "step_time")
    if data is None:
        return (
            "data_time was not logged, so the cause cannot be told apart; log it to see whether the "
            "input pipeline is to blame"
        ), {"cause": "unknown"}
    d0, d1 = _median(data[max(0, row0 - _COMPARE_POINTS * 2) : row0]), _median(data[row0 : min(row1, row0 + 100)])
    if step is not None:
        t0, t1 = _median(step[max(0, row0 - _COMPARE_POINTS * 2) : row0]), _median(step[row0 : min(row1, row0 + 100)])
        grow = t1 - t0
    else:
        grow = float("nan")
    details = {"data_time_before": d0, "data_time_after": d1}
    if np.isfinite(grow) and grow > 0 and np.isfinite(d1 - d0) and d1 - d0 >= settings.drop_data_share * grow:
        text = (
            f"Waiting for data grew from {fmt_seconds(d0)} to {fmt_seconds(d1)} per step with it: the input pipeline "
            "is the bottleneck (more loader workers, prefetching, faster or local storage)"
        )
        return text, details | {"cause": "input"}
    text = (
        f"Waiting for data did not grow with it ({fmt_seconds(d0)} -> {fmt_seconds(d1)} per step), so the "
        "slowdown is in compute or communication: another job on the device, thermal throttling, a slow node or link"
    )
    return text, details | {"cause": "compute"}


def _median(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else float("nan")
