"""``overfitting``: the generalisation gap opening: eval loss rising above its best while the train loss falls.

Judged from ``overfit_min_evals`` (4) evaluations on. The recent eval level is the median of the last
``w`` evaluations (``w`` = an eighth of them, between ``overfit_evals`` and 5, so one noisy eval never
decides and a long series needs a lasting rise); the best level is the lowest 3-point median before
them (the raw lowest eval with fewer than 7). The rise must be ``overfit_rel`` of the best level and
``overfit_z`` eval-noise sigmas (noise from second differences, so a falling curve does not inflate
it), the latest eval must still be up, and the generalisation gap (eval minus the train loss
smoothed around the same steps) must have grown by as much: eval up with train down or flat is the gap
opening; eval up with the train loss up too (by ``overfit_rel``, or as much) is divergence,
reported elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, episodes, finite_series, quantum
from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_pct, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

# median |second difference| of Gaussian noise is 0.6745 * sqrt(6) * sigma; it ignores a linear trend
_D2_TO_SIGMA = 1.0 / (0.6744897501960817 * np.sqrt(6.0))
_SMOOTH_FROM = 7  # evaluations from which the best level is a 3-point median
_MAX_WINDOW = 5
_WINDOW_SHARE = 8  # the recent window is about an eighth of the evaluations
_RECENT_NOISE = 12  # evaluations whose noise is also measured on its own
_MAX_EPISODES = 50


@dataclass(frozen=True)
class _EvalCurve:
    """The eval loss as judged: raw values, the smoothed level (in raw units), the scale and its noise."""

    series: Series
    raw: np.ndarray
    level: np.ndarray
    log: bool


@dataclass(frozen=True)
class _Episode:
    """One flagged stretch: the best evaluation before it, its first and last evaluations, the window."""

    best: int
    first: int
    last: int
    window: int
    margin: float
    sigma: float


TrainTrend = tuple[float, float, float, float]  # train loss then, now, relative change, noise of the log ratio


def detect_overfitting(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Episodes where the recent eval level sits ``overfit_rel`` and ``overfit_z`` sigmas above its best."""
    e = finite_series(frame, "eval_loss")
    if e is None or len(e) < max(settings.overfit_min_evals, settings.overfit_evals + 1):
        return []
    x = e.values
    m = x.size
    w = int(np.clip(round(m / _WINDOW_SHARE), settings.overfit_evals, _MAX_WINDOW))
    log = bool(np.all(x > 0))  # eval noise is multiplicative when the loss spans decades
    y = np.log(x) if log else x
    smooth = y.copy()
    if m >= _SMOOTH_FROM:
        smooth[1:-1] = np.median(np.lib.stride_tricks.sliding_window_view(y, 3), axis=1)
    sigma = _noise(y)
    q = quantum(x)
    if q:  # an eval rounded to a few digits moves by its rounding
        sigma = np.maximum(sigma, q / np.abs(x) if log else q)
    recent = np.full(m, np.nan)
    recent[w - 1 :] = np.median(np.lib.stride_tricks.sliding_window_view(y, w), axis=1)
    best = np.full(m, np.nan)  # best smoothed level before the window ending at j
    best[w:] = np.minimum.accumulate(smooth)[: m - w]
    rel = np.log1p(settings.overfit_rel) if log else settings.overfit_rel * np.abs(best)
    margin = np.broadcast_to(np.maximum(rel, settings.overfit_z * sigma), (m,))
    with np.errstate(invalid="ignore"):
        flagged = (recent >= best + margin) & (y >= best + 0.5 * margin)
    train = finite_series(frame, "loss")
    running_min = np.minimum.accumulate(smooth)
    best_index = np.maximum.accumulate(np.where(smooth <= running_min, np.arange(m), 0))
    findings: list[Finding] = []
    for first, last in episodes(flagged, w)[:_MAX_EPISODES]:
        b = int(best_index[first - w])
        trend = _train_trend(train, e.steps, b, last, w)
        if trend is not None and (
            _train_rose(trend, settings) or not _gap_grew(trend, y, smooth, b, last, w, float(margin[first]), log)
        ):
            continue  # the train loss rose too (by overfit_rel, or as much): divergence, reported elsewhere
        curve = _EvalCurve(e, x, np.exp(smooth) if log else smooth, log)
        episode = _Episode(b, first, last, w, float(margin[first]), float(sigma[first]))
        findings.append(_finding(curve, episode, trend, settings))
    return findings


def _finding(curve: _EvalCurve, episode: _Episode, trend: TrainTrend | None, settings: DiagnosisSettings) -> Finding:
    e, x, log = curve.series, curve.raw, curve.log
    b, first, last, w = episode.best, episode.first, episode.last, episode.window
    margin, sigma = episode.margin, episode.sigma
    best = float(curve.level[b])
    latest = float(np.median(x[last - w + 1 : last + 1]))
    rise = latest / best - 1 if best else float("nan")
    if trend is None:
        train_note, gap_note = "train loss not logged", ""
    else:
        t_best, t_now, change, _ = trend
        verb = "kept falling" if change < -0.02 else ("rose less" if change > 0.02 else "stayed about level")
        train_note = f"while the train loss {verb} ({fmt_num(t_best)} -> {fmt_num(t_now)})"
        gap_note = f": the gap between them grew from {fmt_num(best - t_best)} to {fmt_num(latest - t_now)}"
    what = (
        f"eval loss has risen for {last - b} evaluations, from its best {fmt_num(best)} at step {fmt_step(e.steps[b])} "
        f"to {fmt_num(float(x[last]))} at step {fmt_step(e.steps[last])} (+{fmt_pct(rise)} over the last {w}), "
        f"{train_note}{gap_note}. The model is overfitting"
    )
    advice = (
        f"The checkpoint at step {fmt_step(e.steps[b])} is the early-stopping point; add regularisation or data, or "
        "stop here"
    )
    need = f"+{fmt_pct(np.expm1(margin))}" if log else f"+{fmt_num(margin)}"
    noise = f"{fmt_pct(sigma)} (log scale)" if log else fmt_num(sigma)
    why = (
        f"the median of the last {w} evaluations is {fmt_pct(rise)} above the best (threshold: +"
        f"{fmt_pct(settings.overfit_rel)} and {settings.overfit_z:g} eval-noise sigmas of {noise}, i.e. {need}), "
        "and the gap to the train loss grew by at least as much"
    )
    details = {
        "best_step": int(e.steps[b]),
        "best": best,
        "latest": float(x[last]),
        "rise": float(rise),
        "evals_rising": int(last - b),
        "window": w,
        "margin": margin,
        "eval_sigma": sigma,
        "train_change": None if trend is None else trend[2],
        "detected_step": int(e.steps[first]),
    }
    message = explain(what, advice, why)
    return Finding("overfitting", "warning", int(e.steps[b]), message, int(e.steps[last]), None, details, why)


def _gap_grew(
    trend: TrainTrend, y: np.ndarray, smooth: np.ndarray, b: int, last: int, w: int, margin: float, log: bool
) -> bool:
    """Whether eval minus train (the generalisation gap) grew by ``margin`` since the best eval."""
    t_best, t_now, _, _ = trend
    if log and (t_best <= 0 or t_now <= 0):
        return True
    train_move = np.log(t_now / t_best) if log else t_now - t_best
    eval_move = float(np.median(y[last - w + 1 : last + 1]) - smooth[b])
    return eval_move - train_move >= margin


_TRAIN_RISE_Z = 3.0  # a train-loss rise counts when it is this many noise sigmas of the difference of medians


def _train_rose(trend: TrainTrend, settings: DiagnosisSettings) -> bool:
    """Whether the train loss rose by ``overfit_rel`` and beyond its own noise (a per-batch median wanders by 10%)."""
    t_then, t_now, change, noise = trend
    if change <= settings.overfit_rel:
        return False
    if t_then <= 0 or t_now <= 0 or not np.isfinite(noise):
        return True
    return float(np.log(t_now / t_then)) >= _TRAIN_RISE_Z * noise


def _noise(y: np.ndarray) -> np.ndarray:
    """Eval noise at each evaluation, from second differences (blind to a linear trend).

    The larger of the whole series' and the last ``_RECENT_NOISE`` evaluations', so a smooth early
    descent does not hide the noise of the plateau after it.
    """
    m = y.size
    if m < 3:
        return np.zeros(m)
    d2 = np.abs(np.diff(y, 2))
    whole = float(np.median(d2))
    local = np.full(m, whole)
    k = _RECENT_NOISE - 2
    if d2.size >= k:
        local[k + 1 :] = np.median(np.lib.stride_tricks.sliding_window_view(d2, k), axis=1)
    return np.maximum(whole, local) * _D2_TO_SIGMA


def _train_trend(train: Series | None, steps: np.ndarray, b: int, last: int, w: int) -> TrainTrend | None:
    """The train loss smoothed over the same stretches as the eval levels compared, and its relative change.

    "Then": the train points logged since the evaluation before the best one (at least the last 5
    up to it); "now": those logged over the last ``w`` evaluations, the stretch the recent eval level
    is the median of. The fourth value is the noise of the log of their ratio (from the spread of each
    stretch; NaN when a stretch has fewer than 3 positive points). None when the train loss is not
    logged there.
    """
    if train is None:
        return None
    then_lo = steps[b - 1] if b > 0 else -np.inf
    i0, i1 = np.searchsorted(train.steps, [then_lo, steps[b]], side="right")
    i0 = min(i0, max(i1 - 5, 0))
    n0, n1 = np.searchsorted(train.steps, [steps[last - w], steps[last]], side="right")
    if i1 <= i0 or n1 <= n0:
        return None
    then, now = train.values[i0:i1], train.values[n0:n1]
    t_then, t_now = float(np.median(then)), float(np.median(now))
    return t_then, t_now, (t_now / t_then - 1) if t_then > 0 else 0.0, _median_ratio_noise(then, now)


def _median_ratio_noise(a: np.ndarray, b: np.ndarray) -> float:
    """Noise of log(median(b) / median(a)): 1.2533 x the robust spread of each, over the square root of its size."""
    if a.size < 3 or b.size < 3 or np.any(a <= 0) or np.any(b <= 0):
        return float("nan")
    var = 0.0
    for part in (np.log(a), np.log(b)):
        sigma = 1.4826 * float(np.median(np.abs(part - np.median(part))))
        var += (1.2533 * sigma) ** 2 / part.size
    return float(np.sqrt(var))
