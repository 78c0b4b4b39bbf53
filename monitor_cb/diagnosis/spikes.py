"""``loss_spike`` and ``grad_explosion``: jumps judged against the series' own noise, and corroborated.

Per-batch losses are right-skewed: a batch at 8x the trend that is back at the next point is
ordinary on a per-batch log, and so is a grad-norm blip that the loss ignores. So a jump is a
candidate when it is ``spike_z`` noise sigmas and ``spike_rel`` above the trend (and, for the loss,
``spike_min_frac`` of the highest loss level seen, so a near-zero rounded loss does not count), and
it is a warning only when something corroborates it:

* it **persists**: the median of ``spike_persist`` points from the jump is itself that far above
  the trend and above the points just before (a step, not a drift);
* it comes with the **other signal**: a loss jump with a grad-norm jump at the same point, or a
  grad-norm jump followed by a loss jump or a NaN;
* it **repeats**: ``spike_repeats`` jumps within ``spike_repeat_points`` points;
* it is **extreme** against the series' own noise: ``spike_extreme_z`` sigmas.

Jumps without corroboration are summed up in one info note per series.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import (
    Series,
    block_size,
    column,
    episodes,
    finite_series,
    frame_steps,
    row_median,
    train_rows,
)
from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_ratio, fmt_step
from monitor_cb.diagnosis.noise import Noise, frame_noise
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MERGE_GAP = 2  # candidate points this close belong to one episode
_RECOVERY_MEDIAN = 5  # points whose median must be back in the band to call a spike recovered
_MAX_EPISODES = 50
_GRAD_CORROBORATES = 3.0  # a grad norm this many times its trend (and spike_z sigmas) backs a loss jump


@dataclass(frozen=True)
class _Jumps:
    """Candidate jumps of one series: where, how far (sigmas, ratio) and which ones persist."""

    s: Series
    noise: Noise
    single: np.ndarray  # bool per point: the point itself is far above the trend
    persist: np.ndarray  # bool per point: the median of the points from here stays far above
    z: np.ndarray  # the point's excess in noise sigmas
    need: np.ndarray  # the excess (comparison scale) a single point needs
    need_p: np.ndarray  # the excess the median of spike_persist points needs
    width: np.ndarray  # per point: the window (points) whose median persisted from there, 0 where none


def _jumps(frame: pd.DataFrame, s: Series, settings: DiagnosisSettings, *, rel: float, min_frac: float) -> _Jumps:
    noise = frame_noise(frame, "loss", s, settings.baseline_window, settings.min_baseline)
    lev, sig = noise.level, noise.sigma
    rel_need = noise.rel_excess(rel)
    n = len(s)
    with np.errstate(invalid="ignore", divide="ignore"):
        peak = np.fmax.accumulate(np.abs(noise.level_raw))
        floor = min_frac * peak
        need = np.maximum(rel_need, settings.spike_z * sig)
        z = (noise.x - lev) / sig
        single = (noise.x - lev >= need) & (_raw_excess(noise, noise.x) >= floor)
        persist = np.zeros(n, dtype=bool)
        need_p = np.full(n, np.inf)
        width = np.zeros(n, dtype=np.int64)
        block = block_size(settings.baseline_window)
        for p in _persist_widths(settings.spike_persist, block):  # longer windows: smaller jumps, more points
            need_w = np.broadcast_to(np.maximum(rel_need, _persist_z(p, settings) * noise.median_sigma(p)), (n,))
            # the median of x[i:i+p] can only clear lev + need if half the points do: a cheap count first
            at = np.flatnonzero(_half_above(noise.x, lev + need_w, p, block))
            at = at[(at >= p) & (at + p <= n)]
            if at.size == 0:
                continue
            post = np.median(noise.x[at[:, None] + np.arange(p)], axis=1)
            pre = np.median(noise.x[at[:, None] - p + np.arange(p)], axis=1)
            base = np.fmax(lev[at], pre)  # a step up from the points just before, not a slow drift
            ok = (post - base >= need_w[at]) & (post - lev[at] >= need_w[at])
            ok &= _raw_excess(noise, post, at) >= floor[at]
            persist[at[ok]] = True
            width[at[ok]] = np.where(width[at[ok]] > 0, width[at[ok]], p)  # the shortest window that persisted
            need_p[at[ok]] = np.fmin(need_p[at[ok]], need_w[at[ok]])
        fallback = np.maximum(rel_need, settings.spike_z * noise.median_sigma(settings.spike_persist))
        need_p = np.where(np.isfinite(need_p), need_p, fallback)
    ok = np.isfinite(lev)
    return _Jumps(s, noise, single & ok, persist & ok, z, need, need_p, np.where(ok, width, 0))


def _half_above(x: np.ndarray, threshold: np.ndarray, width: int, block: int) -> np.ndarray:
    """Per i: at least half of ``x[i : i + width]`` reach ``threshold[i]`` (constant within blocks of ``block``).

    Exact for ``width <= block``: a window spans its own block and at most the next, whose points are
    compared with the threshold of the block before theirs. Only windows that hold a point above the
    lower of the two thresholds can qualify, so when such points are rare only those are counted.
    """
    n = x.size
    prev = np.full(n, np.nan)
    prev[block:] = threshold[:-block]
    with np.errstate(invalid="ignore"):
        own_hit, next_hit = x >= threshold, x >= prev
    out = np.zeros(n, dtype=bool)
    seeds = np.flatnonzero(own_hit | next_hit)
    if seeds.size == 0 or n < width:
        return out
    if seeds.size * width > n // 4:
        starts = np.arange(n - width + 1)
    else:
        starts = np.unique((seeds[:, None] - np.arange(width)[None, :]).ravel())
        starts = starts[(starts >= 0) & (starts <= n - width)]
    own = np.concatenate(([0], np.cumsum(own_hit[:n])))
    nxt = np.concatenate(([0], np.cumsum(next_hit[:n])))
    end = starts + width
    mid = np.minimum(end, (starts // block + 1) * block)
    count = own[mid] - own[starts] + nxt[end] - nxt[mid]
    out[starts[count * 2 >= width + 1]] = True
    return out


def _persist_widths(p: int, block: int) -> tuple[int, ...]:
    """Window lengths for "it persisted": ``spike_persist`` points, and about 2x, 3x and 5x as many (odd).

    At most a trend block long (the cheap count in :func:`_half_above` is exact up to that).
    """
    widths = {p, (2 * p - 1) | 1, (3 * p) | 1, (5 * p) | 1}
    return tuple(sorted(w for w in widths if w <= max(block, p)))


def _persist_z(width: int, settings: DiagnosisSettings) -> float:
    """Noise sigmas the median of ``width`` points must clear.

    ``spike_z`` for a few points; ``spike_shift_z`` from about 3x ``spike_persist`` points on: the median
    of that many points is close to normal even on a skewed per-batch loss, so its nominal noise can
    be trusted with a lower bar (a lasting x3 shift inside per-batch noise spanning a decade).
    """
    return settings.spike_shift_z if width >= 3 * settings.spike_persist else settings.spike_z


def _first_high(excess: np.ndarray, need: np.ndarray) -> int:
    """Index of the first point of an episode that is itself above the bar a persistent median needs."""
    with np.errstate(invalid="ignore"):
        high = np.flatnonzero(excess >= need)
    return int(high[0]) if high.size else 0


def _start(j: _Jumps, first: int, last: int) -> int:
    """Where the jump began, for the message: the first point whose median with the next two clears the bar.

    A long window (15 points) can persist from a few points before the shift, when most of it lies after.
    """
    x = j.noise.x[first : last + 3]
    if x.size < 3:
        return first
    ahead = np.median(np.lib.stride_tricks.sliding_window_view(x, 3), axis=1)[: last - first + 1]
    size = ahead.size
    return first + _first_high(ahead - j.noise.level[first : first + size], j.need_p[first : first + size])


def _raw_excess(noise: Noise, x: np.ndarray, at: np.ndarray | None = None) -> np.ndarray:
    """How far ``x`` (comparison scale) is above the trend, in the series' own units."""
    raw = np.exp(x) if noise.log else x
    level = noise.level_raw if at is None else noise.level_raw[at]
    return raw - level


def detect_loss_spike(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Loss jumps far above the loss's own noise: warnings when corroborated, else one info note.

    A corroborated spike that comes back within ``spike_recovery`` points is a warning (a bad batch,
    an lr near the edge of stability); one that stays up that long is an error (training diverged).
    A loss that goes below zero (a policy-gradient or GRPO objective) has no floor to spike from and
    is not judged.
    """
    s = finite_series(frame, "loss")
    if s is None or len(s) <= settings.min_baseline or np.any(s.values < 0):
        return []
    j = _jumps(frame, s, settings, rel=settings.spike_rel, min_frac=settings.spike_min_frac)
    grad = _GradCheck(frame, settings)
    findings, notes = [], []
    for first, last in episodes(j.single | j.persist, _MERGE_GAP)[: _MAX_EPISODES * 4]:
        first = (
            _first_high(j.noise.x[first : last + 1] - j.noise.level[first : last + 1], j.need_p[first : last + 1])
            + first
        )
        reasons = _corroboration(j, first, last, settings, grad)
        if reasons:
            findings.append(_spike_finding(j, _start(j, first, last), last, reasons, settings))
        else:
            notes.append((first, last))
        if len(findings) >= _MAX_EPISODES:
            break
    if notes:
        findings.append(_spike_note(j, notes, settings))
    return findings


def _corroboration(j: _Jumps, first: int, last: int, settings: DiagnosisSettings, grad: _GradCheck) -> list[str]:
    """Why this episode is more than per-batch noise (empty: it is not)."""
    reasons = []
    span = slice(first, last + 1)
    peak = first + int(np.nanargmax(np.where(j.single[span], j.z[span], -np.inf))) if j.single[span].any() else first
    if j.persist[span].any():
        at = first + int(np.argmax(j.persist[span]))
        w = int(j.width[at]) or settings.spike_persist
        reasons.append(
            f"it persisted: the median of {w} points from step {fmt_step(j.s.steps[at])} "
            f"stayed {_size(j, at, w)} "
            f"(threshold {_persist_z(w, settings):g} sigmas of that median and +{settings.spike_rel:.0%})"
        )
    if j.single[span].any() and j.z[peak] >= settings.spike_extreme_z:
        reasons.append(
            f"it is extreme for this series: {j.z[peak]:.0f} noise sigmas (threshold {settings.spike_extreme_z:g})"
        )
    steps = j.s.steps[span]
    if grad.jumped_near(steps):
        reasons.append(f"the grad norm jumped at the same step (at least {_GRAD_CORROBORATES:g}x its trend)")
    lo = first - settings.spike_repeat_points
    recent = np.flatnonzero(j.single[max(lo, 0) : first])
    if recent.size:
        count = 1 + len(episodes(np.isin(np.arange(max(lo, 0), first), max(lo, 0) + recent), _MERGE_GAP))
        if count >= settings.spike_repeats:
            reasons.append(
                f"it repeats: {count} jumps within {settings.spike_repeat_points} points "
                f"(threshold {settings.spike_repeats})"
            )
    return reasons


def _size(j: _Jumps, at: int, points: int) -> str:
    m = float(np.median(j.noise.x[at : at + points]))
    if j.noise.log:
        return f"at {fmt_ratio(float(np.exp(m - j.noise.level[at])))} the trend"
    return f"{fmt_num(float(m - j.noise.level[at]))} above the trend"


def _spike_finding(j: _Jumps, first: int, last: int, reasons: list[str], settings: DiagnosisSettings) -> Finding:
    s, noise = j.s, j.noise
    level = float(noise.level_raw[first])
    top = first + int(np.argmax(s.values[first : last + 1]))
    # back when the median of _RECOVERY_MEDIAN points is within 3 of its own noise sigmas of the trend
    band = noise.level[first] + np.maximum(
        3.0 * noise.median_sigma(_RECOVERY_MEDIAN)[first], 0.5 * _scalar(noise.rel_excess(settings.spike_rel))
    )
    recovered = _recovered_at(noise.x, last, band, settings.spike_recovery)
    end = (recovered - 1) if recovered is not None else len(s) - 1
    ratio = float(s.values[top] / level) if level > 0 else None
    details = {
        "level": level,
        "peak": float(s.values[top]),
        "peak_step": int(s.steps[top]),
        "ratio": ratio,
        "sigmas": float(j.z[top]),
        "noise_sigma": float(noise.sigma[first]),
        "log_scale": noise.log,
        "recovered_step": None if recovered is None else int(s.steps[recovered]),
        "corroborated_by": reasons,
        "thresholds": {
            "spike_z": settings.spike_z,
            "spike_rel": settings.spike_rel,
            "spike_persist": settings.spike_persist,
            "spike_extreme_z": settings.spike_extreme_z,
        },
    }
    jump = (
        f"{fmt_ratio(ratio)} its trend of {fmt_num(level)}" if ratio else f"{j.z[top]:.0f} sigmas over {fmt_num(level)}"
    )
    what = f"loss jumped to {fmt_num(details['peak'])} ({jump}) at step {fmt_step(s.steps[first])}"
    scale = "log" if noise.log else "linear"
    why = (
        f"the jump is {j.z[top]:.0f} noise sigmas over the trend (noise {fmt_num(float(noise.sigma[first]))} on the "
        f"{scale} scale, threshold {settings.spike_z:g}), and " + "; ".join(reasons)
    )
    if recovered is not None:
        severity = "warning"
        what += f" and came back by step {fmt_step(s.steps[recovered])}"
        advice = (
            "A spike that persists usually means a bad batch or a learning rate near the edge of stability; "
            "if spikes repeat, lower the lr or clip gradients"
        )
    elif len(s) - 1 - last >= settings.spike_recovery:
        severity = "error"
        what += f" and has not come back in {settings.spike_recovery} logged points: training probably diverged"
        advice = "Resume from a checkpoint before it with a lower learning rate or gradient clipping"
    else:
        severity = "warning"
        what += " and has not come back yet"
        advice = "Watch it; if it stays up, lower the learning rate or resume from a checkpoint before it"
    message = explain(what, advice, why)
    return Finding("loss_spike", severity, int(s.steps[first]), message, int(s.steps[end]), None, details, why)


def _spike_note(j: _Jumps, notes: list[tuple[int, int]], settings: DiagnosisSettings) -> Finding:
    """One info finding for every uncorroborated jump: per-batch noise, worth knowing, not an alert."""
    s = j.s
    tops = [a + int(np.argmax(s.values[a : b + 1])) for a, b in notes]
    biggest = max(tops, key=lambda i: j.z[i])
    level = float(j.noise.level_raw[biggest])
    ratio = float(s.values[biggest] / level) if level > 0 else None
    size = f"{fmt_ratio(ratio)} its trend" if ratio else f"{j.z[biggest]:.0f} sigmas"
    count = len(notes)
    what = (
        f"{count} single-point loss jump{'s' if count > 1 else ''} that came straight back "
        f"(largest: {fmt_num(float(s.values[biggest]))}, {size}, at step {fmt_step(s.steps[biggest])})"
    )
    why = (
        f"each is over {settings.spike_z:g} noise sigmas and +{settings.spike_rel:.0%} above the trend, but none "
        f"persisted for {settings.spike_persist} points, came with a grad-norm jump, repeated "
        f"{settings.spike_repeats} times within {settings.spike_repeat_points} points or reached "
        f"{settings.spike_extreme_z:g} sigmas (largest {j.z[biggest]:.0f}): per-batch noise, not instability"
    )
    details = {
        "count": count,
        "steps": [int(s.steps[i]) for i in tops[:50]],
        "largest_sigmas": float(j.z[biggest]),
        "largest_ratio": ratio,
    }
    message = explain(what, "Nothing to do unless they become frequent", why)
    first, last = int(s.steps[notes[0][0]]), int(s.steps[notes[-1][1]])
    return Finding("loss_spike", "info", first, message, last, None, details, why)


def _scalar(value: float | np.ndarray) -> float:
    return float(np.nanmedian(value)) if np.ndim(value) else float(value)


def _recovered_at(x: np.ndarray, last: int, band: float, horizon: int) -> int | None:
    """First point after ``last`` (within ``horizon``) from which a short median is back under ``band``."""
    after = x[last + 1 : last + 1 + horizon + _RECOVERY_MEDIAN]
    if after.size < _RECOVERY_MEDIAN:
        return None
    windows = np.lib.stride_tricks.sliding_window_view(after, _RECOVERY_MEDIAN)
    ok = np.flatnonzero(np.median(windows, axis=1) <= band)
    ok = ok[ok < horizon]
    return None if ok.size == 0 else last + 1 + int(ok[0])


class _GradCheck:
    """Did the grad norm jump (``_GRAD_CORROBORATES`` x and ``spike_z`` sigmas) at these steps, or one point off?

    Asked for a handful of loss jumps only, so each is judged against the grad norm's own recent
    window (median and spread of its logs over ``baseline_window`` points before it) instead of a
    trend-and-noise pass over the whole series.
    """

    def __init__(self, frame: pd.DataFrame, settings: DiagnosisSettings) -> None:
        self.s = _positive_grad(frame)
        self.settings = settings

    def jumped_near(self, steps: np.ndarray) -> bool:
        """Whether the grad norm jumped at one of ``steps`` (the loss jump's points) or one logged point off."""
        s = self.s
        if s is None or len(s) <= self.settings.min_baseline:
            return False
        at = np.searchsorted(s.steps, steps)
        near = np.unique(np.clip(np.concatenate((at - 1, at, at + 1)), 0, len(s) - 1))
        window = self.settings.baseline_window
        for i in near.tolist():
            before = np.log(s.values[max(0, i - window) : i])
            if before.size < self.settings.min_baseline:
                continue
            level = float(np.median(before))
            sigma = max(1.4826 * float(np.median(np.abs(before - level))), 1e-6)
            excess = float(np.log(s.values[i])) - level
            if excess >= np.log(_GRAD_CORROBORATES) and excess >= self.settings.spike_z * sigma:
                return True
        return False


def _positive_grad(frame: pd.DataFrame) -> Series | None:
    s = finite_series(frame, "grad_norm")
    if s is None:
        return None
    keep = s.values > 0
    return Series(s.rows[keep], s.steps[keep], s.values[keep]) if keep.any() else None


# --------------------------------------------------------------------------- grad norm
def detect_grad_explosion(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Grad-norm jumps ``grad_ratio`` x and ``grad_z`` sigmas (log scale) over the trend, corroborated.

    An error when non-finite values or a loss jump follow within ``grad_followup`` points; a warning
    when it persists (``spike_persist`` points), is extreme (``spike_extreme_z`` sigmas) or repeats; an
    isolated jump the loss ignores (gradient clipping absorbs it) is only counted in an info note.
    """
    s = _positive_grad(frame)
    if s is None or len(s) <= settings.min_baseline:
        return []
    if not _could_jump(s, settings):
        return []  # no point is grad_ratio x above even the lowest recent level: the common case
    noise = frame_noise(frame, "grad_norm", s, settings.baseline_window, settings.min_baseline, log=True)
    lev, sig = noise.level, noise.sigma
    p = settings.spike_persist
    with np.errstate(invalid="ignore", divide="ignore"):
        need = np.maximum(np.log(settings.grad_ratio), settings.grad_z * sig)
        single = (noise.x - lev >= need) & np.isfinite(lev)
        need_p = np.maximum(np.log(settings.grad_ratio), settings.grad_z * noise.median_sigma(p))
        persist = _half_above(noise.x, lev + need_p, p, block_size(settings.baseline_window)) & np.isfinite(lev)
        z = (noise.x - lev) / sig
    found = episodes(single | persist, _MERGE_GAP)
    if not found:
        return []
    context = _Context(frame)
    findings, notes = [], []
    for first, last in found[: _MAX_EPISODES * 4]:
        first += _first_high(noise.x[first : last + 1] - lev[first : last + 1], need_p[first : last + 1])
        span = slice(first, last + 1)
        peak = first + int(np.argmax(noise.x[span]))
        followup = _followup(context, s, first, last, settings)
        reasons = []
        if persist[span].any():
            reasons.append(f"it persisted for {p} points")
        if z[peak] >= settings.spike_extreme_z:
            reasons.append(
                f"it is extreme for this series ({z[peak]:.0f} sigmas, threshold {settings.spike_extreme_z:g})"
            )
        if followup["loss_jump"]:
            reasons.append("the loss jumped with it")
        if not (followup["bad"] or reasons):
            notes.append((first, peak))
            continue
        findings.append(_grad_finding(s, noise, first, last, peak, followup, reasons, settings))
        if len(findings) >= _MAX_EPISODES:
            break
    if notes:
        findings.append(_grad_note(s, noise, z, notes, settings))
    return findings


def _could_jump(s: Series, settings: DiagnosisSettings) -> bool:
    """A cheap necessary condition for a grad-norm jump, checked before the full trend-and-noise pass.

    A point's trend is a median of earlier block medians, so it is never below the lowest block median
    so far; a block whose largest value is not ``grad_ratio`` x that holds no jump (and no persistent
    one: half of its points would have to be that high).
    """
    block = block_size(settings.baseline_window)
    nb = len(s) // block
    if nb < 2:
        return False
    blocks = s.values[: nb * block].reshape(nb, block)
    lowest = np.minimum.accumulate(row_median(blocks))[:-1]  # lowest trend possible in blocks 1..nb-1
    tops = blocks.max(axis=1)[1:]
    if s.values.size > nb * block:  # the unfinished block at the end
        lowest = np.append(lowest, lowest[-1] if lowest.size else np.inf)
        tops = np.append(tops, s.values[nb * block :].max())
    return bool(np.any(tops >= settings.grad_ratio * lowest))


def _grad_finding(
    s: Series,
    noise: Noise,
    first: int,
    last: int,
    peak: int,
    followup: dict,
    reasons: list[str],
    settings: DiagnosisSettings,
) -> Finding:
    level = float(np.exp(noise.level[first]))
    ratio = float(s.values[peak] / level)
    sigmas = float((noise.x[peak] - noise.level[first]) / noise.sigma[first])
    details = {
        "ratio": ratio,
        "median": level,
        "peak": float(s.values[peak]),
        "peak_step": int(s.steps[peak]),
        "sigmas": sigmas,
        "thresholds": {"grad_ratio": settings.grad_ratio, "grad_z": settings.grad_z},
        **{k: v for k, v in followup.items() if k not in ("bad", "text")},
    }
    peak_note = f" (peak at step {fmt_step(s.steps[peak])})" if peak != first else ""
    what = (
        f"grad norm jumped to {fmt_num(float(s.values[peak]))}, {fmt_ratio(ratio)} its trend of {fmt_num(level)}, "
        f"at step {fmt_step(s.steps[first])}{peak_note}{followup['text']}"
    )
    because = reasons + ([f"then {', '.join(followup['followed_by'])}"] if followup["bad"] else [])
    because = because or ["it was followed by trouble"]
    why = (
        f"{fmt_ratio(ratio)} and {sigmas:.0f} noise sigmas over the trend (thresholds {settings.grad_ratio:g}x and "
        f"{settings.grad_z:g} sigmas, log scale), and " + "; ".join(because)
    )
    severity = "error" if followup["bad"] else "warning"
    advice = "Lower the learning rate or enable gradient clipping; if it came with a bad batch, check the data"
    message = explain(what, advice, why)
    return Finding("grad_explosion", severity, int(s.steps[first]), message, int(s.steps[last]), None, details, why)


def _grad_note(
    s: Series, noise: Noise, z: np.ndarray, notes: list[tuple[int, int]], settings: DiagnosisSettings
) -> Finding:
    peaks = [p for _, p in notes]
    biggest = max(peaks, key=lambda i: z[i])
    ratio = float(np.exp(noise.x[biggest] - noise.level[biggest]))
    count = len(notes)
    what = (
        f"{count} isolated grad-norm jump{'s' if count > 1 else ''} the loss did not react to "
        f"(largest {fmt_ratio(ratio)} its trend at step {fmt_step(s.steps[biggest])})"
    )
    why = (
        f"each is over {settings.grad_ratio:g}x and {settings.grad_z:g} noise sigmas above the trend, but none "
        f"persisted for {settings.spike_persist} points, reached {settings.spike_extreme_z:g} sigmas (largest "
        f"{z[biggest]:.0f}) or was followed by a loss jump or NaN within {settings.grad_followup} points"
    )
    details = {"count": count, "steps": [int(s.steps[i]) for i in peaks[:50]], "largest_ratio": ratio}
    message = explain(what, "Gradient clipping usually absorbs these; nothing to do unless the loss reacts", why)
    first, last = int(s.steps[notes[0][0]]), int(s.steps[notes[-1][1]])
    return Finding("grad_explosion", "info", first, message, last, None, details, why)


class _Context:
    """Frame columns the follow-up check reads, converted once per call."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.n = len(frame)
        self.rows = train_rows(frame)
        self.steps = frame_steps(frame)
        self.columns = {name: column(frame, name) for name in ("grad_norm", "loss")}
        self.frame = frame
        self._loss: tuple[Series, _Jumps] | bool | None = False

    def loss_jumps(self, settings: DiagnosisSettings) -> tuple[Series, _Jumps] | None:
        """The loss's candidate jumps, computed once per call of the detector."""
        if self._loss is False:
            s = finite_series(self.frame, "loss")
            ok = s is not None and len(s) > settings.min_baseline and not np.any(s.values < 0)
            jumps = (
                _jumps(self.frame, s, settings, rel=settings.spike_rel, min_frac=settings.spike_min_frac)
                if ok
                else None
            )
            self._loss = (s, jumps) if ok else None
        return self._loss


def _followup(ctx: _Context, s: Series, first: int, last: int, settings: DiagnosisSettings) -> dict:
    """What happened in the ``grad_followup`` points after the episode began: non-finite values, a loss jump."""
    start_row = int(s.rows[first])
    stop_row = int(s.rows[min(last, first + settings.grad_followup, len(s) - 1)]) + 1
    stop_row = max(stop_row, min(start_row + settings.grad_followup + 1, ctx.n))
    rows = ctx.rows[start_row:stop_row]
    steps = ctx.steps[start_row:stop_row]
    events = []
    loss = ctx.columns["loss"]
    if loss is not None:
        window = loss[start_row:stop_row]
        for kind, mask in (("Inf", np.isinf(window) & rows), ("NaN", np.isnan(window) & rows)):
            hits = np.flatnonzero(mask)
            if hits.size:
                events.append((int(steps[hits[0]]), f"loss went {kind} at step {fmt_step(steps[hits[0]])}"))
    grad = ctx.columns["grad_norm"]
    if grad is not None:
        window = grad[start_row:stop_row]
        bad = np.flatnonzero(~np.isfinite(window) & rows)
        if bad.size >= 2 or (bad.size and bad[-1] == stop_row - start_row - 1):  # more than one skipped step
            kind = "Inf" if np.isinf(window[bad[0]]) else "NaN"
            events.append((int(steps[bad[0]]), f"grad norm went {kind} at step {fmt_step(steps[bad[0]])}"))
    bad = bool(events)
    jump = _loss_spike_after(ctx, start_row, stop_row, settings)
    if jump is not None:
        events.append((jump[0], f"the loss jumped {fmt_ratio(jump[1])} at step {fmt_step(jump[0])}"))
    events.sort()
    text = "; then " + ", ".join(e[1] for e in events) if events else ""
    return {"bad": bad, "loss_jump": jump is not None, "text": text, "followed_by": [e[1] for e in events]}


def _loss_spike_after(
    ctx: _Context, start_row: int, stop_row: int, settings: DiagnosisSettings
) -> tuple[int, float] | None:
    """A loss jump (``spike_rel`` and ``spike_z`` sigmas over its trend) between the two rows, if any."""
    found = ctx.loss_jumps(settings)
    if found is None:
        return None
    s, j = found
    lo, hi = np.searchsorted(s.rows, [start_row, stop_row])
    hits = np.flatnonzero(j.single[lo:hi] | j.persist[lo:hi])
    if hits.size == 0:
        return None
    i = lo + int(hits[0])
    top = i + int(np.argmax(s.values[i:hi]))
    level = float(j.noise.level_raw[i])
    return int(s.steps[top]), float(s.values[top] / level) if level > 0 else float("inf")
