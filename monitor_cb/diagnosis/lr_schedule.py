"""``lr_anomaly``: the learning rate doing what no schedule intends, and a warmup that ends in a rising loss.

What a schedule *does* intend is not reported: warmup, a decay that reaches zero at its last step,
a restart from zero (cosine/linear warm restarts, a new schedule after a resume), step decays. What is:

* ``zero``: the lr falls to ~0 in one step out of the middle of its schedule, or the schedule has
  ended (lr ~0) while training goes on for ``lr_frozen_points`` points;
* ``frozen``: the lr stops changing after decaying smoothly, well above its floor, or below it (under
  ``lr_frozen_min_frac`` of the peak) while still falling at its usual pace (a floor is eased into);
* ``jump``: a one-point change far larger than the schedule's usual change, or, in a step/constant
  schedule, the lr jumping back *up* after the warmup (a resume that lost the schedule's state);
* ``warmup_rise``: after the warmup the loss climbs clearly, and lastingly, above its late-warmup level.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, finite_series, run_lengths
from monitor_cb.diagnosis.findings import Finding, explain, fmt_exact, fmt_num, fmt_pct, fmt_ratio, fmt_step
from monitor_cb.diagnosis.noise import series_noise
from monitor_cb.diagnosis.settings import DiagnosisSettings

_SMOOTH_SHARE = 0.9  # a schedule is "smooth" when it changed at this share of recent points
_LOSS_MEDIAN = 9  # points in the short median that judges the loss after warmup
_WARMUP_TAIL = 1000  # at most this many points before (and twice after) the warmup's end are compared
_END_SLACK = 2.5  # a last decrement up to this many times the recent ones still follows the schedule
_RESTART_FROM = 0.05  # an lr rising again from below this share of its peak is a restart, not a jump
_FLOOR_APPROACH = 1 / 3  # a floor is reached with a last step under this share of the schedule's usual step


def detect_lr_anomaly(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Abrupt drops to zero, an lr left at zero, freezes, jumps, and a warmup followed by a rising loss."""
    s = finite_series(frame, "lr")
    if s is None or len(s) < 3:
        return []
    findings = _zero(s, settings)
    zero_at = {f.step for f in findings}
    changes = _changes(s.values)  # shared by the three checks below (one pass over a long series)
    jumps = [f for f in _jumps(s, settings, changes) + _jumps_up(s, settings, changes) if f.step not in zero_at]
    jumps = list({f.step: f for f in jumps}.values())
    # a jump followed by a constant lr is one event: the jump's message says it
    near_jump = {int(step) for f in jumps for step in s.steps[(s.steps >= f.step)][:3]}
    findings += [f for f in _frozen(s, settings, changes) if f.step not in near_jump] + jumps
    findings += _warmup_rise(frame, s, settings)
    return findings


def _finding(s: Series, at: int, end: int | None, what: str, advice: str, why: str, details: dict) -> Finding:
    end_step = None if end is None else int(s.steps[end])
    return Finding("lr_anomaly", "warning", int(s.steps[at]), explain(what, advice, why), end_step, None, details, why)


def _zero(s: Series, settings: DiagnosisSettings) -> list[Finding]:
    """The lr falling to ~0: abruptly (a warning), or as the schedule's end while training goes on."""
    lr = s.values
    peak = np.maximum.accumulate(lr)
    zero = (lr <= settings.lr_zero_frac * peak) & (peak > 0)
    entered = np.flatnonzero(zero[1:] & ~zero[:-1]) + 1  # the first point of each stretch at ~0
    findings = []
    for i in entered.tolist():
        later = np.flatnonzero(~zero[i:])
        end = i + int(later[0]) - 1 if later.size else len(s) - 1
        restarted = later.size > 0
        if lr[i - 1] <= 0.01 * peak[i] or _on_schedule(lr, i):  # it got there gradually: the schedule's end
            length = end - i + 1
            still_decaying = np.ptp(lr[i : end + 1]) > 1e-12 * peak[i]  # a cosine tail creeping towards 0
            if restarted or length < settings.lr_frozen_points or still_decaying:
                continue  # the schedule's intended end (or a restart): bookkeeping, nothing to report
            what = (
                f"the learning-rate schedule reached 0 at step {fmt_step(s.steps[i])} but training went on for "
                f"{length} more logged points at lr 0: those steps learn nothing"
            )
            advice = "Set the schedule's total steps to the run's length, or stop the run where the schedule ends"
            why = (
                f"lr {fmt_num(lr[i])} is below {settings.lr_zero_frac:g} of its peak {fmt_num(peak[i])} for {length} "
                f"points (threshold lr_frozen_points = {settings.lr_frozen_points}); reaching 0 at the end of a "
                "decay is intended, staying there is not"
            )
            details = {"variant": "zero", "before": float(lr[i - 1]), "after": float(lr[i]), "points": length}
            findings.append(_finding(s, i, end, what, advice, why, details))
            continue
        if restarted and end - i + 1 < 2:
            continue  # one point at zero between two schedules: a restart boundary
        what = (
            f"learning rate dropped from {fmt_num(lr[i - 1])} to {fmt_num(lr[i])} in one step at step "
            f"{fmt_step(s.steps[i])}"
        )
        advice = (
            "The model stops learning at lr 0: check the scheduler (total steps, a resumed run's step count) and "
            "the optimizer state"
        )
        why = (
            f"it fell below {settings.lr_zero_frac:g} of its peak ({fmt_num(peak[i])}) in one logged step, far off "
            f"the schedule's recent pace (a decrement over {_END_SLACK:g}x the recent ones)"
        )
        details = {"variant": "zero", "before": float(lr[i - 1]), "after": float(lr[i])}
        findings.append(_finding(s, i, end, what, advice, why, details))
        break  # after an abrupt drop the schedule is broken: later drops say nothing new
    return findings[:5]


def _on_schedule(lr: np.ndarray, i: int) -> bool:
    """Whether the fall to ~0 at point ``i`` continues the decay before it (the schedule's intended end)."""
    before = np.diff(lr[max(0, i - 6) : i])
    falling = before[before.size - int(run_lengths(before < 0)[-1]) :] if before.size else before
    if falling.size < 2:
        return False
    return lr[i - 1] - lr[i] <= _END_SLACK * float(np.median(-falling))


def _changes(lr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per transition i -> i+1: relative change, and whether it changed beyond float rounding."""
    prev = lr[:-1]
    delta = np.diff(lr)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(delta) / np.where(prev > 0, prev, np.nan)
    changed = np.abs(delta) > 1e-12 * np.maximum.accumulate(np.abs(lr))[1:]
    return rel, changed


def _frozen(s: Series, settings: DiagnosisSettings, changes: tuple[np.ndarray, np.ndarray]) -> list[Finding]:
    lr = s.values
    _, changed = changes
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
        if before.mean() < _SMOOTH_SHARE or lr[start] <= settings.lr_zero_frac * peak[start]:
            continue  # (an lr at ~0 is reported by _zero)
        low = lr[start] < settings.lr_frozen_min_frac * peak[start]
        if low and _eased_in(lr, start, smooth):
            continue  # a low freeze reached with ever smaller steps: the schedule's floor (cosine to min_lr)
        end = start + int(np.argmin(np.append(~changed[start:], False)))  # last unchanged transition
        what = (
            f"learning rate stopped changing at {fmt_exact(lr[start])} from step {fmt_step(s.steps[start + 1])} "
            f"({fmt_pct(lr[start] / peak[start])} of its peak) after decaying smoothly"
        )
        advice = (
            "The scheduler may have stopped: a resumed run that lost its schedule state, or a schedule shorter "
            "than the run"
        )
        floor_note = (
            f"below lr_frozen_min_frac = {fmt_pct(settings.lr_frozen_min_frac)}, but its last step was still "
            f"{fmt_pct(_last_step_share(lr, start, smooth))} of its usual step (a floor is approached with steps under "
            f"{fmt_pct(_FLOOR_APPROACH)} of it)"
            if low
            else f"a floor below lr_frozen_min_frac = {fmt_pct(settings.lr_frozen_min_frac)} would be intended"
        )
        why = (
            f"it decreased at {fmt_pct(before.mean())} of the {smooth} points before (threshold "
            f"{fmt_pct(_SMOOTH_SHARE)}), then did not change for {need} points (lr_frozen_points) at "
            f"{fmt_pct(lr[start] / peak[start])} of its peak ({floor_note})"
        )
        details = {"variant": "frozen", "value": float(lr[start])}
        findings.append(_finding(s, start + 1, end, what, advice, why, details))
    return findings


def _last_step_share(lr: np.ndarray, start: int, smooth: int) -> float:
    """The last decrement before point ``start`` as a share of the median decrement over ``smooth`` points before."""
    steps = -np.diff(lr[start - smooth : start + 1])
    typical = float(np.median(steps))
    return float(steps[-1] / typical) if typical > 0 else 0.0


def _eased_in(lr: np.ndarray, start: int, smooth: int) -> bool:
    """Whether the lr reached the value it froze at with ever smaller steps, as a schedule reaches its floor.

    A cosine to ``min_lr`` (or any schedule with a floor) flattens before it: its last steps are a small
    share of its usual step. A decay that stops cold at its usual pace did not reach a floor: its
    scheduler stopped (lost state on resume, a schedule shorter than the run).
    """
    return _last_step_share(lr, start, smooth) < _FLOOR_APPROACH


def _jumps(s: Series, settings: DiagnosisSettings, changes: tuple[np.ndarray, np.ndarray]) -> list[Finding]:
    """One-point changes far beyond the usual change of a smoothly changing schedule."""
    lr = s.values
    rel, changed = changes
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
        if lr[i] > lr[j] and lr[j] <= _RESTART_FROM * np.max(lr[: j + 1]):
            continue  # rising again from ~0: a warm restart
        findings.append(_jump_finding(s, j, i, "in a schedule that was changing smoothly", typical, settings))
    return findings


def _jumps_up(s: Series, settings: DiagnosisSettings, changes: tuple[np.ndarray, np.ndarray]) -> list[Finding]:
    """In a step or constant schedule, the lr jumping back up after its warmup (from above ~0)."""
    lr = s.values
    rel, changed = changes
    rising = np.diff(lr) > 0
    warm_end = _warmup_end(rising)
    findings = []
    for j in np.flatnonzero((np.diff(lr) > 0) & (rel >= 1.0)):  # at least doubled in one point
        if j < max(warm_end, 1) or j < settings.lr_smooth_points:
            continue
        if changed[j - settings.lr_smooth_points : j].mean() >= _SMOOTH_SHARE:
            continue  # a smooth schedule: judged by _jumps
        if lr[j] <= _RESTART_FROM * np.max(lr[: j + 1]):
            continue  # rising again from ~0: a restart of the schedule
        if np.any(rising[max(0, j - settings.lr_smooth_points) : j]):
            continue  # it rose shortly before too: a stepped warmup still climbing
        findings.append(
            _jump_finding(s, j, j + 1, "after its warmup, in a schedule that only steps down", None, settings)
        )
    return findings


def _warmup_end(rising: np.ndarray) -> int:
    """Index of the last rising transition of the first rising stretch (0 if the lr never rose)."""
    if rising.size == 0 or not rising[0]:
        return 0
    stop = np.flatnonzero(~rising)
    return int(stop[0]) if stop.size else rising.size


def _jump_finding(
    s: Series, j: int, i: int, context: str, typical: float | None, settings: DiagnosisSettings
) -> Finding:
    lr = s.values
    factor = lr[i] / lr[j]
    direction = "jumped up" if factor > 1 else "dropped"
    what = (
        f"learning rate {direction} {fmt_ratio(max(factor, 1 / factor))} in one step, from {fmt_num(lr[j])} to "
        f"{fmt_num(lr[i])} at step {fmt_step(s.steps[i])}, {context}"
    )
    advice = (
        "A scheduler restart, a resumed run with a wrong step count or lost schedule state, or an lr set by hand; "
        "if you use warm restarts, ignore this"
    )
    if typical is None:
        why = (
            f"a one-point rise of {fmt_ratio(factor)} (at least 2x) from {fmt_num(lr[j])}, above "
            f"{fmt_pct(_RESTART_FROM)} of the peak so a restart from ~0 is excluded"
        )
    else:
        why = (
            f"a one-point change of {fmt_pct(abs(factor - 1))} (threshold lr_jump_rel = "
            f"{fmt_pct(settings.lr_jump_rel)}) "
            f"that is {abs(factor - 1) / max(typical, 1e-300):,.0f}x the schedule's median change of "
            f"{fmt_pct(typical)} (threshold lr_jump_factor = {settings.lr_jump_factor:g}x)"
        )
    details = {"variant": "jump", "before": float(lr[j]), "after": float(lr[i]), "factor": float(factor)}
    return _finding(s, i, None, what, advice, why, details)


def _warmup_rise(frame: pd.DataFrame, s: Series, settings: DiagnosisSettings) -> list[Finding]:
    """After the lr stops rising, the loss climbing clearly and lastingly above its late-warmup level."""
    loss = finite_series(frame, "loss")
    lr = s.values
    if loss is None or len(loss) < 2 * _LOSS_MEDIAN or np.any(loss.values < 0):
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
    log = bool(np.all(loss.values > 0))
    x = np.log(loss.values) if log else loss.values
    warm = x[lo:hi]
    best = float(np.median(warm))  # the level over the warmup's second half (conservative: still falling)
    noise = series_noise(loss.values[:hi], len(warm), min(len(warm), settings.min_baseline), log=log)
    sigma = float(np.nanmedian(noise.sigma[lo:hi])) if np.isfinite(noise.sigma[lo:hi]).any() else 0.0
    horizon = hi + min(max(2 * length, 50), 2 * _WARMUP_TAIL)
    restart = np.flatnonzero(rising[end_t:])  # the lr rising again: a new schedule, judged on its own
    if restart.size:
        horizon = min(horizon, int(np.searchsorted(loss.steps, s.steps[end_t + int(restart[0])], side="right")))
    after = pd.Series(x[hi:horizon]).rolling(_LOSS_MEDIAN).median().to_numpy()
    rise = np.log1p(settings.lr_warmup_rise) if log else settings.lr_warmup_rise * abs(best)
    # the median of 9 points has sd ~1.25 sigma / 3; 6 of those keep the max over many windows below it
    limit = best + max(rise, settings.spike_z * 1.25 * sigma / np.sqrt(_LOSS_MEDIAN))
    high = np.nan_to_num(after, nan=-np.inf) >= limit
    lasting = run_lengths(high) >= settings.lr_warmup_min_points
    if not lasting.any():
        return []
    first_window = int(np.argmax(lasting)) - settings.lr_warmup_min_points + 1
    at = hi + max(first_window - (_LOSS_MEDIAN - 1), 0)  # where the rising window began
    shown = float(np.exp(after[first_window])) if log else float(after[first_window])
    best_raw = float(np.exp(best)) if log else best
    what = (
        f"loss rose to {fmt_num(shown)} (it was {fmt_num(best_raw)} late in the warmup) after the warmup ended at step "
        f"{fmt_step(peak_step)} with lr {fmt_num(lr[end_t])}"
    )
    advice = "The peak learning rate is probably too high: lower it or lengthen the warmup"
    why = (
        f"the median of {_LOSS_MEDIAN} points stayed above {fmt_num(float(np.exp(limit)) if log else limit)} for "
        f"{settings.lr_warmup_min_points} points (threshold: +{fmt_pct(settings.lr_warmup_rise)} and "
        f"{settings.spike_z:g} noise sigmas of that median over the late-warmup level)"
    )
    details = {"variant": "warmup_rise", "best": best_raw, "peak_lr": float(lr[end_t]), "warmup_end": int(peak_step)}
    return [Finding("lr_anomaly", "warning", int(loss.steps[at]), explain(what, advice, why), None, None, details, why)]
