"""``plateau`` warnings: a run that is not learning at all, as opposed to one that has converged.

A flat loss after a long descent is convergence (an info note from
:func:`monitor_cb.diagnosis.progress.detect_plateau`).
What deserves a warning is flatness at a *trivial* level:

* ``no_signal``: the loss has the very same value at every logged step from the first one, or the
  grad norm is exactly 0 for ``stuck_points`` points in a row: nothing reaches the weights (every label
  masked, a frozen model, a detached loss);
* ``stuck`` (after the warmup, when an lr is logged): both the train loss and the eval loss are
  within ``stuck_rel`` of where they started, the train loss is not falling significantly, and the
  eval loss has not improved (beyond 3 eval-noise sigmas, and beyond 40% of what it gained before)
  over the last half of its evaluations (at least ``stuck_evals``): the model sits at a trivial
  solution. Without an eval loss a flat train loss is not enough (an RL objective, a GAN, a run
  continued from a checkpoint look the same), so it needs one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import episodes, finite_series, range_min, run_lengths
from monitor_cb.diagnosis.findings import Finding, explain, fmt_exact, fmt_num, fmt_pct, fmt_step
from monitor_cb.diagnosis.noise import Noise, frame_noise
from monitor_cb.diagnosis.settings import DiagnosisSettings

_D2_TO_SIGMA = 1.0 / (0.6744897501960817 * np.sqrt(6.0))
_START_POINTS = 5  # the train loss "at the start" is the median of this many first points
_TRAIN_POINTS = 10  # points averaged at each end of a flat stretch to see whether the train loss still falls
_MAX_EPISODES = 10  # zero-grad stretches reported
_FLAT_Z = 3.0  # an improvement of this many eval-noise sigmas is progress
_SLOWER = 0.4  # ... and so is one at more than 40% of the improvement made before the stretch


def detect_no_signal(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """A loss identical at every logged step, or a grad norm exactly 0 for ``stuck_points`` points in a row."""
    s = finite_series(frame, "loss")
    need = settings.stuck_points
    findings = []
    if s is not None and len(s) >= need and np.all(s.values == s.values[0]):
        what = (
            f"the loss has been exactly {fmt_exact(float(s.values[0]))} at every one of {len(s)} logged steps "
            f"since step {fmt_step(s.steps[0])}: there is no training signal"
        )
        why = f"{len(s)} identical values from the first one (threshold stuck_points = {need})"
        findings.append(_finding(s.steps[0], s.steps[-1], what, why, "no_signal"))
    g = finite_series(frame, "grad_norm")
    if g is not None and len(g) >= need and not findings:  # one warning for one cause
        runs = run_lengths(g.values == 0)
        for first, last in episodes(runs >= need)[:_MAX_EPISODES]:
            start = first - need + 1
            what = (
                f"the grad norm has been exactly 0 for {int(runs[last])} logged steps from step "
                f"{fmt_step(g.steps[start])}: nothing reaches the weights"
            )
            why = f"{int(runs[last])} zero grad norms in a row (threshold stuck_points = {need})"
            findings.append(_finding(g.steps[start], g.steps[last], what, why, "no_signal"))
            break
    return findings


def _train_improving(noise: Noise, steps: np.ndarray, start_steps: np.ndarray, end_steps: np.ndarray) -> np.ndarray:
    """Whether the train loss fell significantly over each stretch (the mean of its first and last points).

    Means of up to ``_TRAIN_POINTS`` points at each end of the stretch, compared in noise sigmas
    (``_FLAT_Z``): a loss still going down slowly (a sum-reduced loss dropping 0.3%) is learning.
    """
    x = noise.x
    csum = np.concatenate(([0.0], np.cumsum(x)))
    a = np.searchsorted(steps, start_steps)
    b = np.searchsorted(steps, end_steps, side="right")
    k = np.clip((b - a) // 2, 0, _TRAIN_POINTS)
    ok = k >= 2
    k1 = np.maximum(k, 1)
    first = (csum[np.minimum(a + k1, x.size)] - csum[a]) / k1
    last = (csum[b] - csum[np.maximum(b - k1, 0)]) / k1
    sigma = noise.sigma[np.clip(b - 1, 0, x.size - 1)]
    if np.isnan(sigma).any():  # too early for a trailing noise scale: first differences of what there is
        diffs = np.abs(np.diff(x))
        fallback = float(np.median(diffs)) / (0.6745 * np.sqrt(2.0)) if diffs.size else np.inf
        sigma = np.where(np.isnan(sigma), max(fallback, 1e-12), sigma)
    return ok & (first - last >= _FLAT_Z * np.sqrt(2.0) * sigma / np.sqrt(k1))


def _warmup_end(frame: pd.DataFrame) -> int:
    """The step where the lr first reached its peak (-1 without an lr): before it, flat losses are expected."""
    lr = finite_series(frame, "lr")
    if lr is None or len(lr) < 2:
        return -1
    return int(lr.steps[int(np.argmax(lr.values))]) if lr.values[-1] < lr.values.max() else int(lr.steps[-1])


def _finding(step: int, end: int | None, what: str, why: str, variant: str, details: dict | None = None) -> Finding:
    advice = (
        "Check that the loss reaches the trainable weights: labels all masked (e.g. -100), a frozen or detached "
        "model, a learning rate of 0, an empty dataset"
        if variant == "no_signal"
        else "Check the learning rate (too low, or so high the model collapsed), the labels and the data pipeline, "
        "and the initialisation; compare with a run that learns"
    )
    details = {"variant": variant, **(details or {})}
    return Finding("plateau", "warning", int(step), explain(what, advice, why), int(end), None, details, why)


def detect_stuck(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Evaluations where neither train nor eval loss has moved ``stuck_rel`` from its start and eval is flat.

    "Flat" is judged over the last half of the evaluations so far (at least ``stuck_evals``): a slow,
    steady improvement (a sum-reduced loss moving 0.2% per eval) becomes clear over that span.
    """
    e, s = finite_series(frame, "eval_loss"), finite_series(frame, "loss")
    p = settings.stuck_evals
    if e is None or s is None or len(e) <= p or len(s) < max(_START_POINTS, settings.min_baseline):
        return []
    x, m = e.values, len(e)
    d2 = np.abs(np.diff(x, 2))
    sigma = float(np.median(d2)) * _D2_TO_SIGMA if d2.size else 0.0
    j = np.arange(p, m)  # judged at each evaluation j (the flat stretch starts after the first)
    span = np.maximum(p, (j + 1) // 2)
    first = j - span + 1  # the flat stretch: evaluations first..j
    keep = e.steps[first] > _warmup_end(frame)  # a loss that has not moved during warmup is not stuck
    if not keep.any():
        return []
    j, span, first = j[keep], span[keep], first[keep]
    best_before = np.minimum.accumulate(x)[first - 1]
    gained = np.maximum(best_before - range_min(x, first, j), 0.0)  # improvement within the stretch
    # flat: no improvement beyond the noise, and far slower than before it (a slow steady descent is progress)
    before = np.maximum(x[0] - best_before, 0.0)  # what it gained before the stretch (none: stuck from the start)
    flat = (gained <= _FLAT_Z * sigma) & ((gained <= _SLOWER * before) | (before <= _FLAT_Z * sigma))
    recent = np.median(np.lib.stride_tricks.sliding_window_view(x, p), axis=1)[j - p + 1]
    near_first = np.abs(recent - x[0]) <= settings.stuck_rel * abs(x[0])
    noise = frame_noise(frame, "loss", s, settings.baseline_window, settings.min_baseline)
    level = noise.level_raw
    start = float(np.median(s.values[:_START_POINTS]))
    at = np.clip(np.searchsorted(s.steps, e.steps[j], side="right") - 1, 0, len(s) - 1)
    train_now = np.where(np.isfinite(level[at]), level[at], s.values[at])
    train_flat = np.abs(train_now - start) <= settings.stuck_rel * abs(start)
    train_flat &= ~_train_improving(noise, s.steps, e.steps[first], e.steps[j])
    stuck = flat & near_first & train_flat
    spans = episodes(stuck)
    if not spans:
        return []
    a, b = spans[0][0], spans[-1][1]  # one condition, "since the start": its first and latest stretch
    first_eval, last_eval = int(first[a]), int(j[b])
    what = (
        f"the model is not learning: from step {fmt_step(e.steps[first_eval])} to {fmt_step(e.steps[last_eval])} the "
        f"eval loss sat at {fmt_num(float(recent[b]))} (its first evaluation: {fmt_num(float(x[0]))}) and the "
        f"train loss at {fmt_num(float(train_now[b]))} (it started at {fmt_num(start)})"
    )
    why = (
        f"both are within {fmt_pct(settings.stuck_rel)} of where they started (stuck_rel) and the eval loss did not "
        f"improve by more than {_FLAT_Z:g} eval-noise sigmas ({fmt_num(sigma)}) or 40% of its earlier gain "
        f"over the last {last_eval - first_eval + 1} evaluations (half of them so far, at least stuck_evals = {p})"
    )
    details = {"eval_level": float(recent[b]), "first_eval": float(x[0]), "train_level": float(train_now[b])}
    # anchored at the first evaluation ("since the start"), so the finding keeps its identity as it grows
    return [_finding(e.steps[0], e.steps[last_eval], what, why, "stuck", details)]
