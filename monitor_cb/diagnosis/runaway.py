"""A loss running away: several points in a row above every earlier point, far above its trend.

The level rule of :mod:`monitor_cb.diagnosis.divergence` compares medians of ~15 points with the best
level and needs the rise to stand out from the noise of such medians, so a per-batch loss whose
values span two decades can climb a long way inside that noise. What an engineer on call reads as
"the run is going away" is simpler: the loss sets a new all-time high and holds it. A run-away is
``diverge_runaway_points`` points in a row, each above the highest loss of all the points before them
(the start included, so a loss that fell must climb back above where it began), each at least
``diverge_runaway_factor`` x the loss's trend just before them, after at least
``diverge_runaway_history`` earlier points (past the first values and warm-up). On real runs one or
two new highs in a row are per-batch noise (a batch at 70x the trend, back at the next point);
three, above everything before, are not. A run-away the loss has come back from (the median of the
points after it back under that line) was a bump: a spike reports it, if anything, not divergence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_step
from monitor_cb.diagnosis.noise import Noise
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MAX_EPISODES = 10


@dataclass(frozen=True)
class RunAway:
    """One run-away episode: point indices of the loss series and the numbers it was judged on.

    ``first``..``last``: the points that stayed above every earlier point (windows that overlap, touch,
    or keep beating the episode's own highs are one episode); ``detected``: the point at which the rule
    first held; ``earlier_max``: the highest loss before ``first``; ``low``: the lowest of the first
    run-away window; ``trend``: the loss's trend just before ``first``.
    """

    first: int
    last: int
    detected: int
    earlier_max: float
    low: float
    trend: float


def find_runaways(values: np.ndarray, noise: Noise, settings: DiagnosisSettings) -> list[RunAway]:
    """Run-away episodes of a non-negative loss (see the module docstring); causal, so a prefix sees the same."""
    k = settings.diverge_runaway_points
    n = values.size
    history = settings.diverge_runaway_history
    if n < history + k:
        return []
    m = n - k + 1  # windows a..a+k-1, a < m
    low = values[:m].copy()
    for j in range(1, k):
        np.minimum(low, values[j : j + m], out=low)
    highest = np.maximum.accumulate(values[: m - 1])  # highest[a - 1]: the highest of everything before a
    cand = history + np.flatnonzero(low[history:] > highest[history - 1 :])  # above every earlier point (rare)
    if cand.size == 0:
        return []
    level = noise.level[cand]
    trend = np.exp(level) if noise.log else level
    with np.errstate(invalid="ignore"):
        cand = cand[(trend > 0) & (low[cand] >= settings.diverge_runaway_factor * trend)]
    out: list[RunAway] = []
    top = -np.inf  # the highest point of the current episode so far (its slices add up to one pass)
    for a in cand.tolist():
        if out:
            prev = out[-1]
            if a > prev.last + 1:
                top = max(top, float(values[prev.last + 1 : a].max()))
            # windows that overlap or touch, or that beat a high the episode itself set, are the same climb
            if a <= prev.last + 1 or top >= highest[a - 1]:
                out[-1] = RunAway(prev.first, a + k - 1, prev.detected, prev.earlier_max, prev.low, prev.trend)
                top = max(top, float(values[a : a + k].max()))
                continue
            if len(out) == _MAX_EPISODES:
                break
        level_a = float(noise.level[a])
        trend_a = float(np.exp(level_a)) if noise.log else level_a
        out.append(RunAway(a, a + k - 1, a + k - 1, float(highest[a - 1]), float(low[a]), trend_a))
        top = float(values[a : a + k].max())
    return [r for r in out if not _came_back(values, r, k, settings.diverge_runaway_factor)]


def _came_back(values: np.ndarray, run: RunAway, k: int, factor: float) -> bool:
    """Whether the loss came back after the episode: at least ``k`` points after it, with their median under the
    run-away line (``factor`` x the trend before it). That was a bump, a spike's business; divergence stays up."""
    after = values[run.last + 1 :]
    return after.size >= k and float(np.median(after)) < factor * run.trend


def runaway_finding(steps: np.ndarray, run: RunAway, settings: DiagnosisSettings, eval_note: str = "") -> Finding:
    """The ``divergence`` finding of one run-away, with the numbers it compared and the thresholds."""
    k = settings.diverge_runaway_points
    first, last = run.first, run.last
    what = (
        f"the loss ran away: from step {fmt_step(steps[first])} it stayed above {fmt_num(run.earlier_max)}, the "
        f"highest it had been at any earlier point, for {last - first + 1} points in a row (to step "
        f"{fmt_step(steps[last])}), at {fmt_num(run.low / run.trend)}x its trend of {fmt_num(run.trend)}: "
        "training is diverging"
    )
    advice = (
        "Lower the learning rate (or resume from an earlier checkpoint with a lower one) and check the data of "
        "the last steps; gradient clipping helps against a few bad batches"
    )
    why = (
        f"{k} points in a row, the lowest {fmt_num(run.low)}, were all above every one of the {first} points before "
        f"them (highest {fmt_num(run.earlier_max)}) and {fmt_num(run.low / run.trend)}x the trend before them, "
        f"{fmt_num(run.trend)} (thresholds: {k} points in a row, after at least {settings.diverge_runaway_history} "
        f"points, at least {settings.diverge_runaway_factor:g}x the trend)"
    )
    severity = "warning"
    if eval_note:
        severity = "info"
        what = what.replace(": training is diverging", "")
        advice = f"{eval_note}, so the model is not getting worse where it counts; keep an eye on it"
    details = {
        "rule": "runaway",
        "earlier_max": run.earlier_max,
        "low": run.low,
        "trend": run.trend,
        "factor": run.low / run.trend,
        "points": int(last - first + 1),
        "history": int(first),
        "detected_step": int(steps[run.detected]),
    }
    message = explain(what, advice, why)
    return Finding("divergence", severity, int(steps[first]), message, int(steps[last]), None, details, why)


__all__ = ["RunAway", "find_runaways", "runaway_finding"]
