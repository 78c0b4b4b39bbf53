"""``grad_explosion`` and ``loss_spike``: points far above their own trailing robust baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, column, episodes, finite_series, frame_steps, train_rows
from monitor_cb.diagnosis._stats import trailing_baseline as baseline
from monitor_cb.diagnosis.findings import Finding, fmt_num, fmt_ratio, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MERGE_GAP = 5  # flagged points this close belong to one episode
_RECOVERY_MEDIAN = 5  # points whose median must be back in the band to call a spike recovered


def detect_grad_explosion(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Episodes where the grad norm is ``grad_ratio`` x and ``grad_z`` sigmas above its trailing median.

    Judged on the log scale, where grad-norm noise is roughly symmetric. An episode is an error when
    non-finite values or a loss jump follow within ``grad_followup`` points, else a warning.
    """
    s = finite_series(frame, "grad_norm")
    if s is None:
        return []
    positive = s.values > 0
    s = Series(s.rows[positive], s.steps[positive], s.values[positive])
    if len(s) == 0:
        return []
    logs = np.log(s.values)
    med, sig = baseline(logs, settings.baseline_window, settings.min_baseline)
    with np.errstate(invalid="ignore"):
        excess = logs - med
        flagged = (excess >= np.log(settings.grad_ratio)) & (excess >= settings.grad_z * sig)
    findings = []
    found = episodes(flagged, _MERGE_GAP)
    context = _Context(frame) if found else None
    for first, last in found:
        peak = first + int(np.argmax(logs[first : last + 1]))
        ratio = float(np.exp(logs[peak] - med[first]))
        followup = _followup(context, s, first, last, settings)
        severity = "error" if followup["bad"] else "warning"
        details = {
            "ratio": ratio,
            "median": float(np.exp(med[first])),
            "peak": float(s.values[peak]),
            "peak_step": int(s.steps[peak]),
            **{k: v for k, v in followup.items() if k != "bad"},
        }
        jump = float(np.exp(logs[first] - med[first]))
        peak_note = ""
        if peak != first:
            peak_note = f", peaking at {fmt_ratio(ratio)} at step {fmt_step(s.steps[peak])}"
        message = (
            f"grad norm jumped {fmt_ratio(jump)} above its recent median ({fmt_num(details['median'])}) "
            f"at step {fmt_step(s.steps[first])}{peak_note}{followup['text']}. "
            "Lower the learning rate or enable gradient clipping; if it came with a bad batch, check the data."
        )
        findings.append(
            Finding("grad_explosion", severity, int(s.steps[first]), message, int(s.steps[last]), None, details)
        )
    return findings


class _Context:
    """Frame columns the follow-up check reads, converted once per call."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.n = len(frame)
        self.rows = train_rows(frame)
        self.steps = frame_steps(frame)
        self.columns = {name: column(frame, name) for name in ("grad_norm", "loss")}


def _followup(ctx: _Context, s: Series, first: int, last: int, settings: DiagnosisSettings) -> dict:
    """What happened in the ``grad_followup`` points after the episode began: non-finite values, a loss jump."""
    start_row = int(s.rows[first])
    stop_row = int(s.rows[min(last, first + settings.grad_followup, len(s) - 1)]) + 1
    stop_row = max(stop_row, min(start_row + settings.grad_followup + 1, ctx.n))
    rows = ctx.rows[start_row:stop_row]
    steps = ctx.steps[start_row:stop_row]
    events = []
    for name, label in (("grad_norm", "grad norm"), ("loss", "loss")):
        values = ctx.columns[name]
        if values is None:
            continue
        window = values[start_row:stop_row]
        for kind, mask in (("Inf", np.isinf(window) & rows), ("NaN", np.isnan(window) & rows)):
            hits = np.flatnonzero(mask)
            if hits.size:
                events.append((int(steps[hits[0]]), f"{label} went {kind} at step {fmt_step(steps[hits[0]])}"))
    loss_jump = _loss_jump(ctx.columns["loss"], start_row, stop_row)
    if loss_jump is not None and loss_jump >= 1 + settings.spike_rel:
        events.append((10**18, f"loss rose {fmt_ratio(loss_jump)}"))
    events.sort()
    text = "; then " + ", ".join(e[1] for e in events) if events else ""
    return {"bad": bool(events), "text": text, "followed_by": [e[1] for e in events]}


def _loss_jump(loss: np.ndarray | None, start_row: int, stop_row: int) -> float | None:
    """Largest finite loss in the episode window over the median of the points before it."""
    if loss is None:
        return None
    before = loss[max(0, start_row - 50) : start_row]
    before = before[np.isfinite(before)]
    after = loss[start_row:stop_row]
    after = after[np.isfinite(after)]
    if before.size < 5 or after.size == 0:
        return None
    level = float(np.median(before))
    return float(np.max(after) / level) if level > 0 else None


def detect_loss_spike(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Jumps of the loss ``spike_z`` robust sigmas and ``spike_rel`` above its trailing median.

    A spike that comes back down within ``spike_recovery`` points is a warning (a bad batch or an
    lr too close to the edge); one that stays up for that long is an error (divergence).
    """
    s = finite_series(frame, "loss")
    if s is None:
        return []
    med, sig = baseline(s.values, settings.baseline_window, settings.min_baseline)
    with np.errstate(invalid="ignore"):
        excess = s.values - med
        flagged = (excess >= settings.spike_z * sig) & (excess >= settings.spike_rel * np.abs(med))
    findings = []
    for first, last in episodes(flagged, _MERGE_GAP):
        level = float(med[first])
        peak = first + int(np.argmax(s.values[first : last + 1]))
        band = level + max(3.0 * float(sig[first]), 0.5 * settings.spike_rel * abs(level))
        recovered = _recovered_at(s.values, last, band, settings.spike_recovery)
        details = {
            "level": level,
            "peak": float(s.values[peak]),
            "peak_step": int(s.steps[peak]),
            "ratio": float(s.values[peak] / level) if level > 0 else None,
            "sigmas": float((s.values[peak] - level) / sig[first]),
            "recovered_step": None if recovered is None else int(s.steps[recovered]),
        }
        jump = (
            f"{fmt_ratio(details['ratio'])} its recent median" if details["ratio"] else f"{details['sigmas']:.0f} sigma"
        )
        head = (
            f"loss jumped to {fmt_num(details['peak'])} ({jump} of {fmt_num(level)}) at step {fmt_step(s.steps[first])}"
        )
        if recovered is not None:
            severity = "warning"
            text = (
                f"{head} and recovered by step {fmt_step(s.steps[recovered])}. An isolated spike usually means a "
                "bad batch or a learning rate near the edge of stability; if spikes repeat, lower the lr or clip "
                "gradients."
            )
        elif len(s) - 1 - last >= settings.spike_recovery:
            severity = "error"
            text = (
                f"{head} and has not come back in {settings.spike_recovery} logged points: training probably "
                "diverged. Resume from a checkpoint before it with a lower learning rate or gradient clipping."
            )
        else:
            severity = "warning"
            text = f"{head} and has not recovered yet. Watch it; if it stays up, lower the learning rate."
        findings.append(Finding("loss_spike", severity, int(s.steps[first]), text, int(s.steps[last]), None, details))
    return findings


def _recovered_at(values: np.ndarray, last: int, band: float, horizon: int) -> int | None:
    """First point after ``last`` (within ``horizon``) from which a short median is back under ``band``."""
    after = values[last + 1 : last + 1 + horizon + _RECOVERY_MEDIAN]
    if after.size < _RECOVERY_MEDIAN:
        return None
    windows = np.lib.stride_tricks.sliding_window_view(after, _RECOVERY_MEDIAN)
    ok = np.flatnonzero(np.median(windows, axis=1) <= band)
    ok = ok[ok < horizon]
    return None if ok.size == 0 else last + 1 + int(ok[0])
