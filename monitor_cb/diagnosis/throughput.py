"""``throughput_drop``: a sustained fall in samples/s, and whether the input pipeline explains it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, column, episodes, finite_series, rolling_count
from monitor_cb.diagnosis._stats import trailing_baseline as baseline
from monitor_cb.diagnosis.findings import Finding, fmt_num, fmt_pct, fmt_seconds, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MAX_EPISODES = 50
_COMPARE_POINTS = 50  # points before / after the onset whose medians describe the change


def rate_series(frame: pd.DataFrame) -> tuple[Series | None, str]:
    """Throughput (samples/s) when logged, else steps/s from ``step_time``; with its unit."""
    s = finite_series(frame, "throughput")
    unit = "samples/s"
    if s is None:
        s = finite_series(frame, "step_time")
        if s is None:
            return None, unit
        s = Series(s.rows, s.steps, np.where(s.values > 0, 1.0 / np.maximum(s.values, 1e-300), np.nan))
        unit = "steps/s"
    keep = np.isfinite(s.values) & (s.values > 0)
    return Series(s.rows[keep], s.steps[keep], s.values[keep]), unit


def detect_throughput_drop(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Stretches where most of the last ``drop_window`` points sit ``drop_frac`` below the trailing baseline.

    A majority of a short window must be low for ``drop_min_points`` points in a row and for
    ``drop_min_seconds`` of wall time from the first low point, so one slow step (a hiccup, a
    checkpoint) or a burst of contention lasting a fraction of a second never counts. The baseline
    is frozen at the onset to find where the drop ends, since a trailing baseline would otherwise
    learn the new, lower level.
    """
    s, unit = rate_series(frame)
    if s is None or len(s) < settings.min_baseline + settings.drop_window:
        return []
    x = s.values
    t = column(frame, "t")
    t = t[s.rows] if t is not None and np.isfinite(t[s.rows]).all() else None
    med, _ = baseline(x, settings.baseline_window, settings.min_baseline, with_sigma=False)
    with np.errstate(invalid="ignore"):
        below = x < (1 - settings.drop_frac) * med
    majority = rolling_count(below, settings.drop_window) * 2 > settings.drop_window
    findings: list[Finding] = []
    covered = -1  # last point of the latest reported drop
    for first, last in episodes(majority):
        if first <= covered or last - first + 1 < settings.drop_min_points:
            continue
        lookback = max(0, first - settings.drop_window)
        onset = lookback + int(np.flatnonzero(below[lookback : first + 1])[0])
        level = float(med[onset])
        threshold = (1 - settings.drop_frac) * level
        # long enough, judged against the level before the onset (the trailing baseline would learn the
        # new level within about half a baseline window, sooner than drop_min_seconds on fast loggers)
        need = onset + settings.drop_window // 2 + settings.drop_min_points
        if t is not None:
            need = max(need, int(np.searchsorted(t, t[onset] + settings.drop_min_seconds)) + 1)
        if need > len(x) or _episode_end(x[:need], onset, threshold, settings.drop_window) < need - 1:
            continue
        end = _episode_end(x, onset, threshold, settings.drop_window)
        findings.append(_finding(frame, s, unit, onset, end, level, settings))
        covered = end
        if len(findings) >= _MAX_EPISODES:
            break
    return findings


def _episode_end(x: np.ndarray, onset: int, threshold: float, window: int) -> int:
    """Last point of the drop: where a majority of ``window`` points stops being under the frozen threshold."""
    low = rolling_count(x[onset:] < threshold, window) * 2 > window
    spans = episodes(low, window)
    return onset + (spans[0][1] if spans else 0)


def _finding(
    frame: pd.DataFrame, s: Series, unit: str, onset: int, end: int, level: float, settings: DiagnosisSettings
) -> Finding:
    x = s.values
    now_level = float(np.median(x[onset : min(end + 1, onset + _COMPARE_POINTS)]))
    fall = 1 - now_level / level
    ongoing = end >= len(s) - 1
    span = "and is still there" if ongoing else f"until step {fmt_step(s.steps[end])}"
    cause, details = _cause(frame, s, onset, end, settings)
    message = (
        f"throughput fell from {fmt_num(level)} to {fmt_num(now_level)} {unit} (-{fmt_pct(fall)}) "
        f"at step {fmt_step(s.steps[onset])} {span}. {cause}"
    )
    details |= {"before": level, "after": now_level, "fall": fall, "unit": unit, "ongoing": ongoing}
    return Finding("throughput_drop", "warning", int(s.steps[onset]), message, int(s.steps[end]), None, details)


def _cause(frame: pd.DataFrame, s: Series, onset: int, end: int, settings: DiagnosisSettings) -> tuple[str, dict]:
    """Did the data wait per step grow by enough of the step-time growth to explain the slowdown?"""
    row0, row1 = int(s.rows[onset]), int(s.rows[end]) + 1
    data, step = column(frame, "data_time"), column(frame, "step_time")
    if data is None:
        return (
            "data_time was not logged, so the cause cannot be told apart; log it to see whether the "
            "input pipeline is to blame."
        ), {"cause": "unknown"}
    d0, d1 = _median(data[max(0, row0 - _COMPARE_POINTS * 2) : row0]), _median(data[row0 : min(row1, row0 + 100)])
    if step is not None:
        t0, t1 = _median(step[max(0, row0 - _COMPARE_POINTS * 2) : row0]), _median(step[row0 : min(row1, row0 + 100)])
        grow = t1 - t0
    else:  # from the rate itself: seconds per sample before and after
        grow = float("nan")
    details = {"data_time_before": d0, "data_time_after": d1}
    if np.isfinite(grow) and grow > 0 and np.isfinite(d1 - d0) and d1 - d0 >= settings.drop_data_share * grow:
        text = (
            f"Waiting for data grew from {fmt_seconds(d0)} to {fmt_seconds(d1)} per step with it: the input pipeline "
            "is the bottleneck (more loader workers, prefetching, faster or local storage)."
        )
        return text, details | {"cause": "input"}
    text = (
        f"Waiting for data did not grow with it ({fmt_seconds(d0)} -> {fmt_seconds(d1)} per step), so the "
        "slowdown is in compute or communication: another job on the device, thermal throttling, a slow node or link."
    )
    return text, details | {"cause": "compute"}


def _median(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else float("nan")
