"""``divergence``: the loss's trend climbing well above the best it reached, and staying there.

A spike is a jump that comes back; divergence is the running level itself getting worse (a
preference objective drifting the wrong way, an lr that is slowly too high). The loss is cut into
blocks of ``diverge_block`` points; the level is the median of three consecutive block medians
(about ``3 x divergence_block`` points), compared with the lowest such level before it that starts
after the first ``min_baseline`` points: an objective that climbs from its very first values (an RL
critic whose targets grow with the returns, a preference loss leaving ln 2) has no established level
to diverge from yet. It diverges when the level sits ``diverge_rise`` (relative) and ``diverge_z``
noise sigmas of that difference above the best for ``diverge_persist`` blocks in a row (three: a
ten-point bump of a noisy RL objective is not a trend). A loss that
goes below zero (policy-gradient objectives) is not judged. When an eval loss is logged and is
still at its best over the same steps, the rise is only an info: the model is not getting worse
where it counts. A run-away (:mod:`monitor_cb.diagnosis.runaway`: several points in a row above every
earlier point, far above the trend) is divergence too, for a per-batch loss so noisy that its level
climbs inside the noise of these medians.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, episodes, finite_series, row_median
from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_pct, fmt_step
from monitor_cb.diagnosis.noise import Noise, frame_noise
from monitor_cb.diagnosis.runaway import find_runaways, runaway_finding
from monitor_cb.diagnosis.settings import DiagnosisSettings

_LEVEL_BLOCKS = 3
_MEDIAN_SE = 1.2533
_MAX_EPISODES = 10


@dataclass(frozen=True)
class _Levels:
    """The loss's block levels as judged: each level, the settled candidates for "best", the best before
    each level, and the rise each level needs to count."""

    frame: pd.DataFrame
    series: Series
    log: bool
    level: np.ndarray
    candidates: np.ndarray
    before: np.ndarray
    need: np.ndarray
    block: int


def detect_divergence(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Episodes where the loss level stays far above its best level (see the module docstring)."""
    s = finite_series(frame, "loss")
    if s is None:
        return []
    b = settings.diverge_block
    if np.any(s.values < 0) or len(s) < b * (_LEVEL_BLOCKS + settings.diverge_persist):
        return []
    noise = frame_noise(frame, "loss", s, settings.baseline_window, settings.min_baseline)
    log, x = noise.log, noise.x
    nb = len(s) // b
    blocks = row_median(x[: nb * b].reshape(nb, b)) if b % 2 else np.median(x[: nb * b].reshape(nb, b), axis=1)
    level = row_median(np.lib.stride_tricks.sliding_window_view(blocks, _LEVEL_BLOCKS))  # level k: blocks k..k+2
    sigma = noise.sigma
    sig_points = np.nan_to_num(sigma[(np.arange(level.size) + _LEVEL_BLOCKS) * b - 1], nan=np.inf)
    # a level is a median of medians of ~3b points; the difference of two such has sqrt(2) x its noise
    sig_diff = np.sqrt(2.0) * _MEDIAN_SE * sig_points / np.sqrt(_LEVEL_BLOCKS * b)
    # a level counts as "the best" only once min_baseline points came before it: an objective that rises from its
    # very first values (an RL critic whose targets grow with the returns) has no established level to diverge from
    settled = np.arange(level.size) * b >= settings.min_baseline
    candidates = np.where(settled, level, np.inf)
    best = np.minimum.accumulate(candidates)
    before = np.full(level.size, np.inf)  # the best of the earlier levels that share no block with this one
    before[_LEVEL_BLOCKS:] = best[: level.size - _LEVEL_BLOCKS]
    raw = np.exp(level) if log else level  # progress is counted in the loss's own units (nats), not ratios
    raw_before = np.exp(before) if log else before
    highest = np.maximum.accumulate(raw)  # the worst level so far (the start, for a loss that fell)
    rel = np.log1p(settings.diverge_rise) if log else settings.diverge_rise * np.abs(before)
    need = np.maximum(rel, settings.diverge_z * sig_diff)
    with np.errstate(invalid="ignore"):
        # and it gave back a good share of the progress made: 0.02 nats after a fall from 10 is not divergence
        given_back = (raw - raw_before) >= settings.diverge_giveback * (highest - raw_before)
        up = (level - before >= need) & given_back & np.isfinite(before)
    spans = [(a, z) for a, z in episodes(up) if z - a + 1 >= settings.diverge_persist]
    merged: list[tuple[int, int]] = []
    for a, z in spans:  # rises above the same best level are one condition, however often it dips
        if merged and before[a] == before[merged[-1][0]]:
            merged[-1] = (merged[-1][0], z)
        else:
            merged.append((a, z))
    levels = _Levels(frame, s, log, level, candidates, before, need, b)
    found = [_finding(levels, a, z, settings) for a, z in merged[:_MAX_EPISODES]]
    return found + _runaways(frame, s, noise, found, settings)


def _runaways(
    frame: pd.DataFrame, s: Series, noise: Noise, found: list[Finding], settings: DiagnosisSettings
) -> list[Finding]:
    """Run-aways (:mod:`monitor_cb.diagnosis.runaway`) that no level episode above covers (or confirms within the
    ``3 x diverge_block`` points after them: the same climb, told once)."""
    out: list[Finding] = []
    margin = _LEVEL_BLOCKS * settings.diverge_block
    for run in find_runaways(s.values, noise, settings):
        first, last = int(s.steps[run.first]), int(s.steps[run.last])
        near = int(s.steps[min(run.last + margin, len(s) - 1)])
        if any(f.step <= near and first <= (f.end_step or f.step) for f in found):
            continue
        out.append(runaway_finding(s.steps, run, settings, _eval_still_best(frame, first, last, settings)))
    return out


def _finding(levels: _Levels, first: int, last: int, settings: DiagnosisSettings) -> Finding:
    frame, s, log, level = levels.frame, levels.series, levels.log, levels.level
    candidates, before, need, b = levels.candidates, levels.before, levels.need, levels.block
    best_level = float(before[first])
    best_k = int(np.argmin(candidates[: max(first - _LEVEL_BLOCKS + 1, 1)]))
    start = (first + _LEVEL_BLOCKS - 1) * b  # the last block of the first risen level
    end_point = min((last + _LEVEL_BLOCKS) * b - 1, len(s) - 1)
    if last == level.size - 1:
        end_point = len(s) - 1
    now = float(np.max(level[first : last + 1]))
    worst = float(np.max(level[: last + 1]))
    to_raw = np.exp if log else (lambda v: v)
    rise = float(to_raw(now - best_level)) - 1 if log else now - best_level
    rise_text = f"+{fmt_pct(rise)}" if log else f"+{fmt_num(rise)}"
    best_step = int(s.steps[min(best_k * b + (_LEVEL_BLOCKS * b) // 2, len(s) - 1)])
    what = (
        f"the loss trend has climbed from {fmt_num(float(to_raw(best_level)))} (its best, around step "
        f"{fmt_step(best_step)}) to {fmt_num(float(to_raw(now)))} by step {fmt_step(s.steps[end_point])} ({rise_text}) "
        f"and stayed up: training is diverging"
    )
    advice = (
        "Lower the learning rate (or resume from a checkpoint near the best level with a lower one); for a "
        "preference or RL objective, check the reward and the reference model"
    )
    back = (to_raw(now) - to_raw(best_level)) / (to_raw(worst) - to_raw(best_level)) if worst > best_level else 1.0
    why = (
        f"the median level of {_LEVEL_BLOCKS * b} points sat at least {_need_text(log, float(need[first]))} above the "
        f"best earlier level for {last - first + 1} blocks in a row, giving back {fmt_pct(back)} of the distance "
        f"between its best and worst levels (thresholds: +{fmt_pct(settings.diverge_rise)}, {settings.diverge_z:g} "
        f"noise sigmas of the difference, {settings.diverge_persist} blocks, {fmt_pct(settings.diverge_giveback)} "
        "given back)"
    )
    severity = "warning"
    eval_note = _eval_still_best(frame, int(s.steps[start]), int(s.steps[end_point]), settings)
    if eval_note:
        severity = "info"
        what = what.replace(": training is diverging", "")
        advice = f"{eval_note}, so the model is not getting worse where it counts; keep an eye on it"
    details = {
        "best": float(to_raw(best_level)),
        "level": float(to_raw(now)),
        "rise": rise,
        "blocks": int(last - first + 1),
        "block_points": b,
        "log_scale": log,
        "detected_step": int(s.steps[min(start + settings.diverge_persist * b - 1, len(s) - 1)]),
    }
    message = explain(what, advice, why)
    return Finding("divergence", severity, int(s.steps[start]), message, int(s.steps[end_point]), None, details, why)


def _need_text(log: bool, need: float) -> str:
    return f"+{fmt_pct(float(np.expm1(need)))}" if log else f"+{fmt_num(need)}"


def _eval_still_best(frame: pd.DataFrame, start: int, end: int, settings: DiagnosisSettings) -> str:
    """A note when the eval loss is logged and still at (or near) its best over the risen span, else ''."""
    e = finite_series(frame, "eval_loss")
    if e is None:
        return ""
    inside = (e.steps >= start) & (e.steps <= end)
    earlier = e.steps < start
    if inside.sum() < 2 or not earlier.any():
        return ""
    best = float(np.min(e.values[earlier]))
    latest = float(e.values[inside][-1])
    if best > 0 and latest <= best * (1 + settings.overfit_rel):
        return f"The eval loss is still at its best ({fmt_num(latest)} against {fmt_num(best)} before)"
    return ""
