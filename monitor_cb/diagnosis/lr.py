"""``lr_anomaly``: the learning rate doing what no schedule should, and a warmup that ends in a rising loss."""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, finite_series, run_lengths
from monitor_cb.diagnosis.findings import Finding, fmt_num, fmt_pct, fmt_ratio, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

_SMOOTH_SHARE = 0.9  # a schedule is "smooth" when it changed at this share of recent points
_LOSS_MEDIAN = 9  # points in the short median that judges the loss after warmup
_WARMUP_TAIL = 1000  # at most this many points before (and twice after) the warmup's end are compared


def detect_lr_anomaly(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Drops to zero, freezes after a smooth decay, jumps inside a smooth schedule, warmup then rising loss."""
    s = finite_series(frame, "lr")
    if s is None or len(s) < 3:
        return []
    findings = _zero(s, settings)
    zero_at = {f.step for f in findings}
    jumps = [f for f in _jumps(s, settings) if f.step not in zero_at]
    # a jump followed by a constant lr is one event: the jump's message says it
    near_jump = {int(step) for f in jumps for step in s.steps[(s.steps >= f.step)][:3]}
    findings += [f for f in _frozen(s, settings) if f.step not in near_jump] + jumps
    findings += _warmup_rise(frame, s, settings)
    return findings


def _zero(s: Series, settings: DiagnosisSettings) -> list[Finding]:
    lr = s.values
    peak = np.maximum.accumulate(lr)
    prev_ok = np.concatenate(([False], lr[:-1] > 0.01 * peak[:-1]))
    hits = np.flatnonzero(prev_ok & (lr <= settings.lr_zero_frac * peak) & (peak > 0))
    if hits.size == 0:
        return []
    i = int(hits[0])
    later = np.flatnonzero(lr[i:] > settings.lr_zero_frac * peak[i])
    end = i + int(later[0]) - 1 if later.size else len(s) - 1
    message = (
        f"learning rate dropped from {fmt_num(lr[i - 1])} to {fmt_num(lr[i])} at step {fmt_step(s.steps[i])}: "
        "the model has stopped learning. Check the scheduler (total steps, a resumed run's step count) "
        "and the optimizer state."
    )
    details = {"variant": "zero", "before": float(lr[i - 1]), "after": float(lr[i])}
    return [Finding("lr_anomaly", "warning", int(s.steps[i]), message, int(s.steps[end]), None, details)]


def _changes(lr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per transition i -> i+1: relative change, and whether it changed beyond float rounding."""
    prev = lr[:-1]
    delta = np.diff(lr)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(delta) / np.where(prev > 0, prev, np.nan)
    changed = np.abs(delta) > 1e-12 * np.maximum.accumulate(np.abs(lr))[1:]
    return rel, changed


def _frozen(s: Series, settings: DiagnosisSettings) -> list[Finding]:
    lr = s.values
    _, changed = _changes(lr)
    decreasing = np.diff(lr) < 0
    runs = run_lengths(~changed)
    need, smooth = settings.lr_frozen_points, settings.lr_smooth_points
    peak = np.maximum.accumulate(lr)
    findings = []
    for j in np.flatnonzero(runs == need):
        start = int(j - need + 1)  # first unchanged transition: point start+1 repeats point start
        if start < smooth:
            continue
        before = decreasing[start - smooth : start]
        if before.mean() < _SMOOTH_SHARE or lr[start] < settings.lr_frozen_min_frac * peak[start]:
            continue
        end = start + int(np.argmin(np.append(~changed[start:], False)))  # last unchanged transition
        message = (
            f"learning rate stopped changing at {fmt_num(lr[start])} from step {fmt_step(s.steps[start + 1])} "
            f"({fmt_pct(lr[start] / peak[start])} of its peak) after decaying smoothly: the scheduler may have "
            "stopped (a resumed run that lost its schedule state, or a schedule shorter than the run)."
        )
        details = {"variant": "frozen", "value": float(lr[start])}
        findings.append(
            Finding("lr_anomaly", "warning", int(s.steps[start + 1]), message, int(s.steps[end]), None, details)
        )
    return findings


def _jumps(s: Series, settings: DiagnosisSettings) -> list[Finding]:
    lr = s.values
    rel, changed = _changes(lr)
    smooth = settings.lr_smooth_points
    findings = []
    for j in np.flatnonzero(rel >= settings.lr_jump_rel):
        if j < smooth:
            continue
        window_changed = changed[j - smooth : j]
        if window_changed.mean() < _SMOOTH_SHARE:
            continue  # a step schedule: constant between deliberate drops
        typical = float(np.median(rel[j - smooth : j]))
        if not rel[j] >= settings.lr_jump_factor * typical:
            continue
        i = int(j + 1)
        if lr[i] <= 0:
            continue  # a drop to zero: reported by _zero
        factor = lr[i] / lr[j]
        direction = "jumped up" if factor > 1 else "dropped"
        message = (
            f"learning rate {direction} {fmt_ratio(max(factor, 1 / factor))} in one step, from {fmt_num(lr[j])} to "
            f"{fmt_num(lr[i])} at step {fmt_step(s.steps[i])}, in a schedule that was changing smoothly: a scheduler "
            "restart, a resumed run with a wrong step count, or an lr set by hand. If you use warm restarts, "
            "ignore this."
        )
        details = {"variant": "jump", "before": float(lr[j]), "after": float(lr[i]), "factor": float(factor)}
        findings.append(Finding("lr_anomaly", "warning", int(s.steps[i]), message, None, None, details))
    return findings


def _warmup_rise(frame: pd.DataFrame, s: Series, settings: DiagnosisSettings) -> list[Finding]:
    """After the lr stops rising, the loss climbing clearly above the best it reached during warmup."""
    loss = finite_series(frame, "loss")
    lr = s.values
    if loss is None or len(loss) < 2 * _LOSS_MEDIAN:
        return []
    rising = np.diff(lr) > 0
    runs = run_lengths(rising)
    if runs.size == 0 or runs.max() < settings.lr_warmup_min_points:
        return []
    end_t = int(np.argmax(runs >= settings.lr_warmup_min_points))  # first warmup reaching the length
    end_t += int(np.argmin(np.append(rising[end_t:], False)))  # ... followed to its end
    peak_step, start_step = s.steps[min(end_t, len(s) - 1)], s.steps[max(end_t - int(runs[end_t - 1]), 0)]
    if end_t >= len(s) - 1:
        return []  # still warming up
    length = int(np.searchsorted(loss.steps, peak_step) - np.searchsorted(loss.steps, start_step))
    hi = int(np.searchsorted(loss.steps, peak_step, side="right"))
    lo = max(int(np.searchsorted(loss.steps, start_step)) + length // 2, hi - _WARMUP_TAIL)
    if hi - lo < _LOSS_MEDIAN:
        return []
    warm = loss.values[lo:hi]
    best = float(np.median(warm))  # the level over the warmup's second half (conservative: still falling)
    noise = float(np.median(np.abs(np.diff(warm)))) * 1.05  # robust sigma from first differences
    horizon = hi + min(max(2 * length, 50), 2 * _WARMUP_TAIL)
    after = pd.Series(loss.values[hi:horizon]).rolling(_LOSS_MEDIAN).median().to_numpy()
    # the median of 9 points has sd ~1.25 sigma / 3; 4 of those keep the max over many windows below it
    limit = best + max(settings.lr_warmup_rise * abs(best), 4.0 * 1.25 * noise / np.sqrt(_LOSS_MEDIAN))
    over = np.flatnonzero(after >= limit)
    if over.size == 0:
        return []
    at = hi + max(int(over[0]) - (_LOSS_MEDIAN - 1), 0)  # where the rising window began
    message = (
        f"loss rose to {fmt_num(after[over[0]])} (it was {fmt_num(best)} late in the warmup) after the warmup "
        f"ended at step {fmt_step(peak_step)} with lr {fmt_num(lr[end_t])}: the peak learning rate is probably "
        "too high. Lower it or lengthen the warmup."
    )
    details = {"variant": "warmup_rise", "best": best, "peak_lr": float(lr[end_t]), "warmup_end": int(peak_step)}
    return [Finding("lr_anomaly", "warning", int(loss.steps[at]), message, None, None, details)]
