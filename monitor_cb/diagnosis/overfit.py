"""``overfitting``: eval loss climbing over several evaluations while the train loss keeps falling."""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import episodes, finite_series
from monitor_cb.diagnosis.findings import Finding, fmt_num, fmt_pct, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

# median |second difference| of Gaussian noise is 0.6745 * sqrt(6) * sigma; it ignores a linear trend
_D2_TO_SIGMA = 1.0 / (0.6744897501960817 * np.sqrt(6.0))
_SMOOTH = 5
_MAX_EPISODES = 50


def detect_overfitting(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """The last ``overfit_evals`` eval losses all above the best earlier (5-point median) level.

    "Above" means by ``overfit_rel`` of it and ``overfit_z`` eval-noise sigmas (noise from second
    differences, so a falling curve does not inflate it). Not reported when the train loss rose too
    (that is divergence, which the spike and NaN detectors report).
    """
    e = finite_series(frame, "eval_loss")
    k = settings.overfit_evals
    if e is None or len(e) < k + _SMOOTH:
        return []
    x = e.values
    # The best level is the lowest 5-point median, not the lowest single eval: over hundreds of evals the
    # lowest single value is a noise outlier, and every later eval would look "risen" against it.
    smooth = x.copy()
    half = _SMOOTH // 2
    smooth[half:-half] = np.median(np.lib.stride_tricks.sliding_window_view(x, _SMOOTH), axis=1)
    sigma = float(np.median(np.abs(np.diff(x, 2)))) * _D2_TO_SIGMA
    m = x.size
    best_before = np.full(m, np.nan)  # best smoothed level among evals up to j-k
    best_before[k:] = np.minimum.accumulate(smooth)[: m - k]
    recent_low = np.min(np.lib.stride_tricks.sliding_window_view(x, k), axis=1)  # evals j-k+1..j
    margin = np.maximum(settings.overfit_rel * np.abs(best_before), settings.overfit_z * sigma)
    flagged = np.zeros(m, dtype=bool)
    with np.errstate(invalid="ignore"):
        flagged[k - 1 :] = recent_low >= best_before[k - 1 :] + margin[k - 1 :]
    train = finite_series(frame, "loss")
    # index of the best smoothed level so far, for each eval
    running_min = np.minimum.accumulate(smooth)
    best_so_far = np.maximum.accumulate(np.where(smooth <= running_min, np.arange(m), 0))
    findings = []
    for first, last in episodes(flagged, k)[:_MAX_EPISODES]:
        best = int(best_so_far[max(first - k, 0)])
        rise = x[last] / smooth[best] - 1 if smooth[best] else float("nan")
        train_note, train_change = _train_trend(train, e.steps[max(last - k + 1, best)], e.steps[last])
        if train_change is not None and train_change > settings.overfit_rel:
            continue  # the train loss rose too: divergence, not overfitting (other detectors report it)
        message = (
            f"eval loss has risen for {last - best} evaluations, from its best {fmt_num(smooth[best])} at step "
            f"{fmt_step(e.steps[best])} to {fmt_num(x[last])} at step {fmt_step(e.steps[last])} "
            f"(+{fmt_pct(rise)}), {train_note}: the model is overfitting. The checkpoint at step "
            f"{fmt_step(e.steps[best])} is the early-stopping point; add regularisation or data, or stop here."
        )
        details = {
            "best_step": int(e.steps[best]),
            "best": float(smooth[best]),
            "latest": float(x[last]),
            "rise": float(rise),
            "evals_rising": int(last - best),
            "train_change": train_change,
            "detected_step": int(e.steps[first]),
        }
        findings.append(
            Finding("overfitting", "warning", int(e.steps[best]), message, int(e.steps[last]), None, details)
        )
    return findings


def _train_trend(train, from_step: int, last_step: int) -> tuple[str, float | None]:
    """How the train loss moved while the eval loss was rising (from ``from_step`` to ``last_step``).

    The span of the latest few evaluations, not all the way back to the best one: a run whose data
    changed (a new dataset mixture) may have a higher train loss than at the best eval and still be
    falling, which is what matters for overfitting.
    """
    if train is None:
        return "train loss not logged", None
    i0, i1 = np.searchsorted(train.steps, [from_step, last_step], side="right")
    width = int(np.clip((i1 - i0) // 3, 5, 500))  # the points around the first eval of the span, and the latest
    before = train.values[max(0, i0 - width) : i0]
    after = train.values[max(i0, i1 - width) : i1]
    if before.size < 3 or after.size < 3:
        return "train loss too short to compare", None
    b, a = float(np.median(before)), float(np.median(after))
    change = a / b - 1 if b > 0 else 0.0
    if change <= 0:
        return f"while the train loss kept falling ({fmt_num(b)} -> {fmt_num(a)})", change
    return f"while the train loss stayed about level ({fmt_num(b)} -> {fmt_num(a)})", change
