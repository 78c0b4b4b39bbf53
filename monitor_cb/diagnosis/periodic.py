"""``sawtooth``: step time oscillating with a short, regular period.

For each window of ``sawtooth_window`` points (windows end at the last point and step back by
``sawtooth_hop``) and each period p (2 .. (window-1)/4, so at least four repeats), the window is folded
by p and the share of its variance explained by the per-phase means is computed (the R^2 of a
"periodic profile" fit). Noise gives about (p-1)/(window-1); a single slow step puts its weight in
one phase only (R^2 ~ 1/repeats); a real oscillation gives nearly 1. All sums come from strided
cumulative sums, so the cost is linear in the series length.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, episodes, finite_series
from monitor_cb.diagnosis.findings import Finding, explain, fmt_pct, fmt_seconds, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MAX_EPISODES = 50
_PREFER_SHORTER = 0.05  # R^2 a longer period must add to be preferred
_HYSTERESIS_R2 = 0.15  # an episode goes on while windows fit this much below sawtooth_power...
_HYSTERESIS_SWING = 0.75  # ...and swing at least this fraction of sawtooth_amplitude


def detect_sawtooth(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Stretches where ``sawtooth_windows`` consecutive windows show a strong, large periodic profile."""
    s, name = _timing_series(frame)
    w = settings.sawtooth_window
    if s is None or len(s) < w or max_period(w, settings.sawtooth_repeats) < 2:
        return []
    hop = settings.sawtooth_hop
    starts = np.arange((len(s) - w) % hop, len(s) - w + 1, hop)  # the last window ends at the last point
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
    for first_window, last in _episodes(persistent, r2, swing, settings)[:_MAX_EPISODES]:
        best = first_window + int(
            np.argmax(np.where(persistent[first_window : last + 1], r2[first_window : last + 1], 0))
        )
        start, end = int(starts[first_window]), int(starts[last] + w - 1)
        p = int(period[best])
        details = {"period_points": p, "swing": float(swing[best]), "r2": float(r2[best]), "metric": name}
        every = f"{p} logged points" if p > 1 else "point"
        step_gap = int(np.median(np.diff(s.steps))) if len(s) > 1 else 1
        if step_gap > 1:
            every += f" (~{fmt_step(p * step_gap)} steps)"
        what = (
            f"{name.replace('_', ' ')} oscillates with a period of {every}, swinging {fmt_pct(swing[best])} of its "
            f"median ({fmt_seconds(float(np.median(s.values[start : end + 1])))}) "
            f"from step {fmt_step(s.steps[start])}"
        )
        advice = (
            "In distributed runs this is usually communication or hardware: a straggler rank, a congested link, "
            "periodic host work (checkpointing, logging, garbage collection) or a throttling device"
        )
        why = (
            f"the per-phase means explain {fmt_pct(r2[best])} of the variation in windows of {w} points (threshold "
            f"sawtooth_power = {fmt_pct(settings.sawtooth_power)}) and swing {fmt_pct(swing[best])} (threshold "
            f"sawtooth_amplitude = {fmt_pct(settings.sawtooth_amplitude)}), with the same period in "
            f"{settings.sawtooth_windows} windows in a row"
        )
        message = explain(what, advice, why)
        findings.append(
            Finding("sawtooth", "warning", int(s.steps[start]), message, int(s.steps[end]), None, details, why)
        )
    return findings


def _episodes(
    persistent: np.ndarray, r2: np.ndarray, swing: np.ndarray, settings: DiagnosisSettings
) -> list[tuple[int, int]]:
    """Window spans of each oscillation: confirmed by a persistent window, extended with hysteresis.

    Once confirmed, an episode goes on while windows still fit a weaker bar, so one slow step (it
    breaks its window's fit) or a swing near the threshold does not split it into many findings.
    """
    weak = (r2 >= settings.sawtooth_power - _HYSTERESIS_R2) & (swing >= _HYSTERESIS_SWING * settings.sawtooth_amplitude)
    gap = max(settings.sawtooth_windows, settings.sawtooth_window // settings.sawtooth_hop)
    confirmed = np.concatenate(([0], np.cumsum(persistent)))
    spans = []
    for first, last in episodes(weak | persistent, gap):
        if confirmed[last + 1] > confirmed[first]:
            spans.append((first, last))
    return spans


def _timing_series(frame: pd.DataFrame) -> tuple[Series | None, str]:
    for name in ("step_time", "throughput"):
        s = finite_series(frame, name)
        if s is not None:
            keep = s.values > 0
            values = s.values[keep] if name == "step_time" else 1.0 / s.values[keep]
            return Series(s.rows[keep], s.steps[keep], values), "step_time"
    return None, "step_time"


def _periodic_fit(x: np.ndarray, starts: np.ndarray, w: int, repeats: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window: the best R^2 of a periodic profile, its peak-to-peak swing over the mean, and the period.

    ``starts`` is an arithmetic progression, so every per-window sum is a strided slice of a
    cumulative sum (no gathers).
    """
    centre = float(np.median(x))
    y = x - centre  # centred so the sums keep their precision
    m = starts.size
    at = _slicer(int(starts[0]), int(starts[1] - starts[0]) if m > 1 else 1, m)
    best_r2 = np.zeros(m)
    best_swing = np.zeros(m)
    best_p = np.zeros(m, dtype=np.int64)
    c1 = np.concatenate(([0.0], np.cumsum(y)))
    c2 = np.concatenate(([0.0], np.cumsum(y * y)))
    for p in range(2, max_period(w, repeats) + 1):
        reps = w // p
        length = reps * p
        s1 = at(c1, length) - at(c1, 0)
        mean = s1 / length
        total = at(c2, length) - at(c2, 0) - s1 * mean
        strided = np.concatenate((np.zeros(p), _strided_cumsum(y, p)))  # strided[i + p] sums y[i], y[i-p], ...
        between = np.zeros(m)
        hi = np.full(m, -np.inf)
        lo = np.full(m, np.inf)
        for phase in range(p):
            phase_mean = (at(strided, phase + length) - at(strided, phase)) / reps - mean
            between += phase_mean * phase_mean
            np.maximum(hi, phase_mean, out=hi)
            np.minimum(lo, phase_mean, out=lo)
        with np.errstate(divide="ignore", invalid="ignore"):
            r2 = np.where(total > 0, between * reps / total, 0.0)
            swing = (hi - lo) / np.abs(mean + centre)
        better = r2 > best_r2 + _PREFER_SHORTER  # a multiple of the period fits at least as well
        best_r2 = np.where(better, r2, best_r2)
        best_swing = np.where(better, swing, best_swing)
        best_p = np.where(better, p, best_p)
    return best_r2, np.nan_to_num(best_swing), best_p


def _slicer(first: int, hop: int, count: int) -> Callable[[np.ndarray, int], np.ndarray]:
    """``at(a, offset)`` = ``a[first + offset + hop * k]`` for k < count, as a view."""

    def at(a: np.ndarray, offset: int) -> np.ndarray:
        start = first + offset
        return a[start : start + hop * (count - 1) + 1 : hop]

    return at


def max_period(window: int, repeats: int) -> int:
    """The longest period a window can show ``repeats`` times."""
    return window // repeats


def _strided_cumsum(y: np.ndarray, p: int) -> np.ndarray:
    """``out[i] = y[i] + y[i-p] + y[i-2p] + ...``."""
    n = y.size
    rows = -(-n // p)
    padded = np.zeros(rows * p)
    padded[:n] = y
    return np.cumsum(padded.reshape(rows, p), axis=0).reshape(-1)[:n]
