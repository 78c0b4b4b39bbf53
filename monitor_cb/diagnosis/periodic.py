"""``sawtooth``: step time oscillating with a short, regular period.

For each window of ``sawtooth_window`` points (windows end at the last point and step back by
``sawtooth_hop``) and each period p (2 .. (window-1)/4, so at least four repeats), the window is folded
by p and the share of its variance explained by the per-phase means is computed (the R^2 of a
"periodic profile" fit). Noise gives about (p-1)/(window-1); a single slow step puts its weight in
one phase only (R^2 ~ 1/repeats); a real oscillation gives nearly 1. All sums come from strided
cumulative sums, so the cost is linear in the series length.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, episodes, finite_series
from monitor_cb.diagnosis.findings import Finding, fmt_pct, fmt_seconds, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MAX_EPISODES = 50
_PREFER_SHORTER = 0.05  # R^2 a longer period must add to be preferred


def detect_sawtooth(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Stretches where ``sawtooth_windows`` consecutive windows show a strong, large periodic profile."""
    s, name = _timing_series(frame)
    w = settings.sawtooth_window
    if s is None or len(s) < w or max_period(w, settings.sawtooth_repeats) < 2:
        return []
    starts = np.arange(len(s) - w, -1, -settings.sawtooth_hop)[::-1]  # the last window ends at the last point
    r2, swing, period = _periodic_fit(s.values, starts, w, settings.sawtooth_repeats)
    flagged = (r2 >= settings.sawtooth_power) & (swing >= settings.sawtooth_amplitude)
    persistent = np.zeros_like(flagged)
    k = settings.sawtooth_windows
    if flagged.size >= k:
        # k windows in a row, all with the same period: noise that fits one period by chance rarely
        # fits the same one in the next windows too
        same = np.all(np.lib.stride_tricks.sliding_window_view(period, k) == period[k - 1 :, None], axis=1)
        persistent[k - 1 :] = np.all(np.lib.stride_tricks.sliding_window_view(flagged, k), axis=1) & same
    findings = []
    for first, last in episodes(persistent, max(k, w // settings.sawtooth_hop))[:_MAX_EPISODES]:
        first_window = first - (k - 1)
        best = first_window + int(np.argmax(r2[first_window : last + 1]))
        start, end = int(starts[first_window]), int(starts[last] + w - 1)
        p = int(period[best])
        details = {"period_points": p, "swing": float(swing[best]), "r2": float(r2[best]), "metric": name}
        every = f"{p} logged points" if p > 1 else "point"
        step_gap = int(np.median(np.diff(s.steps))) if len(s) > 1 else 1
        if step_gap > 1:
            every += f" (~{fmt_step(p * step_gap)} steps)"
        message = (
            f"{name.replace('_', ' ')} oscillates with a period of {every}, swinging {fmt_pct(swing[best])} of its "
            f"median ({fmt_seconds(float(np.median(s.values[start : end + 1])))}) "
            f"from step {fmt_step(s.steps[start])}. "
            "In distributed runs this is usually communication or hardware: a straggler rank, a congested link, "
            "periodic host work (checkpointing, logging, garbage collection) or a throttling device."
        )
        findings.append(Finding("sawtooth", "warning", int(s.steps[start]), message, int(s.steps[end]), None, details))
    return findings


def _timing_series(frame: pd.DataFrame) -> tuple[Series | None, str]:
    for name in ("step_time", "throughput"):
        s = finite_series(frame, name)
        if s is not None:
            keep = s.values > 0
            values = s.values[keep] if name == "step_time" else 1.0 / s.values[keep]
            return Series(s.rows[keep], s.steps[keep], values), "step_time"
    return None, "step_time"


def _periodic_fit(x: np.ndarray, starts: np.ndarray, w: int, repeats: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window: the best R^2 of a periodic profile, its peak-to-peak swing over the mean, and the period."""
    centre = float(np.median(x))
    y = x - centre  # centred so the sums keep their precision
    best_r2 = np.zeros(starts.size)
    best_swing = np.zeros(starts.size)
    best_p = np.zeros(starts.size, dtype=np.int64)
    c1 = np.concatenate(([0.0], np.cumsum(y)))
    c2 = np.concatenate(([0.0], np.cumsum(y * y)))
    for p in range(2, max_period(w, repeats) + 1):
        reps = w // p
        r2, swing = _profile(y, c1, c2, starts, p, reps)
        with np.errstate(divide="ignore", invalid="ignore"):
            swing = swing / np.abs((c1[starts + reps * p] - c1[starts]) / (reps * p) + centre)
        better = r2 > best_r2 + _PREFER_SHORTER  # a multiple of the period fits at least as well
        best_r2 = np.where(better, r2, best_r2)
        best_swing = np.where(better, swing, best_swing)
        best_p = np.where(better, p, best_p)
    return best_r2, np.nan_to_num(best_swing), best_p


def max_period(window: int, repeats: int) -> int:
    """The longest period a window can show ``repeats`` times."""
    return window // repeats


def _profile(
    y: np.ndarray, c1: np.ndarray, c2: np.ndarray, starts: np.ndarray, p: int, reps: int
) -> tuple[np.ndarray, np.ndarray]:
    """For windows of ``reps * p`` points from ``starts``: R^2 of the per-phase means and their range.

    ``c1``, ``c2`` are the cumulative sums of ``y`` and ``y**2`` with a leading 0.
    """
    length = reps * p
    s1 = c1[starts + length] - c1[starts]
    total = c2[starts + length] - c2[starts] - s1 * s1 / length
    strided = _strided_cumsum(y, p)
    between = -s1 * s1 / length
    hi = np.full(starts.size, -np.inf)
    lo = np.full(starts.size, np.inf)
    for phase in range(p):
        last = starts + phase + (reps - 1) * p
        first = starts + phase - p
        phase_sum = strided[last] - np.where(first >= 0, strided[np.maximum(first, 0)], 0.0)
        between += phase_sum * phase_sum / reps
        hi = np.maximum(hi, phase_sum / reps)
        lo = np.minimum(lo, phase_sum / reps)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(total > 0, between / total, 0.0)
    return r2, hi - lo


def _strided_cumsum(y: np.ndarray, p: int) -> np.ndarray:
    """``out[i] = y[i] + y[i-p] + y[i-2p] + ...``."""
    n = y.size
    rows = -(-n // p)
    padded = np.zeros(rows * p)
    padded[:n] = y
    return np.cumsum(padded.reshape(rows, p), axis=0).reshape(-1)[:n]
