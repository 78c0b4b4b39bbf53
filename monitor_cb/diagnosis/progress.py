"""``plateau`` (info): the loss not improving for a long stretch, and ``stalled``: a running run gone silent."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import column, finite_series, frame_steps
from monitor_cb.diagnosis.findings import Finding, fmt_num, fmt_pct, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MAX_EPISODES = 50
LIVE_STATUSES = frozenset({"running", "stalled"})


def detect_plateau(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Stretches of ``plateau_points`` or more where the block-median loss never beat its best by ``plateau_rel``."""
    s = finite_series(frame, "loss")
    block = settings.plateau_smooth
    if s is None or len(s) < settings.plateau_points:
        return []
    nb = len(s) // block
    if nb < 2:
        return []
    level = np.median(s.values[: nb * block].reshape(nb, block), axis=1)
    running_best = np.minimum.accumulate(level)
    need = -(-settings.plateau_points // block)  # blocks
    findings: list[Finding] = []
    anchor = 0
    while anchor < nb and len(findings) < _MAX_EPISODES:
        target = level[anchor] - settings.plateau_rel * abs(level[anchor])
        nxt = anchor + int(np.searchsorted(-running_best[anchor:], -target, side="right"))  # first block below
        if nxt - anchor >= need:
            findings.append(_plateau_finding(s, anchor, min(nxt, nb) - 1, block, level[anchor], nxt >= nb, settings))
        anchor = nxt
    return findings


def _plateau_finding(s, first_block: int, last_block: int, block: int, best: float, ongoing: bool, settings) -> Finding:
    start = first_block * block
    end = len(s) - 1 if ongoing else (last_block + 1) * block - 1
    span = f"for {fmt_step(s.steps[end] - s.steps[start])} steps"
    message = (
        f"loss has not improved by {fmt_pct(settings.plateau_rel)} since step {fmt_step(s.steps[start])} "
        f"({span}, level {fmt_num(best)}). If the learning rate is still high it may be too high to settle, "
        "or too low to make progress; if it has already decayed, training may have converged."
    )
    details = {"level": float(best), "points": int(end - start + 1), "ongoing": bool(ongoing)}
    return Finding("plateau", "info", int(s.steps[start]), message, int(s.steps[end]), None, details)


def stall_threshold(t: np.ndarray, settings: DiagnosisSettings) -> float:
    """Seconds of silence that count as stalled for a run with write times ``t``."""
    gaps = np.diff(t[np.isfinite(t)])
    gaps = gaps[gaps > 0]
    if gaps.size == 0:
        return settings.stall_min_seconds
    recent = gaps[-200:]
    return float(
        max(settings.stall_min_seconds, settings.stall_factor * np.median(recent), 1.5 * np.quantile(gaps, 0.99))
    )


def detect_stalled(
    frame: pd.DataFrame,
    settings: DiagnosisSettings,
    *,
    status: str | None,
    now: float | None = None,
    last_write: float | None = None,
) -> list[Finding]:
    """A run whose status says it is running but has not written for longer than :func:`stall_threshold`.

    Args:
        status: the run's status (``RunInfo.status``); only ``running`` and ``stalled`` are judged.
        now: the current Unix time (default: ``time.time()``).
        last_write: when the run last wrote (``RunInfo.last_write``); default the frame's latest ``t``.
    """
    if status not in LIVE_STATUSES or len(frame) == 0:
        return []
    t = column(frame, "t")
    if t is None or not np.isfinite(t).any():
        return []
    now = time.time() if now is None else now
    last = float(np.nanmax(t)) if last_write is None else float(last_write)
    silence = now - last
    threshold = stall_threshold(t, settings)
    if silence < threshold and status != "stalled":
        return []
    steps = frame_steps(frame)
    step = int(steps[int(np.nanargmax(t))])
    usual = float(np.median(np.diff(t[np.isfinite(t)])[-200:])) if np.isfinite(t).sum() > 1 else float("nan")
    severity = "error" if silence >= settings.stall_error_factor * threshold else "warning"
    when = datetime.fromtimestamp(last, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    message = (
        f"no new records for {fmt_duration(silence)} (last at step {fmt_step(step)}, {when}); this run usually logs "
        f"every {fmt_duration(usual)}. The process may be hung (a deadlock in collective communication, a stuck "
        "data loader, a full disk) or killed without recording it: check the job."
    )
    details = {"silence_s": silence, "threshold_s": threshold, "usual_interval_s": usual, "last_write": last}
    return [Finding("stalled", severity, step, message, None, None, details)]


def fmt_duration(seconds: float) -> str:
    """``95`` -> ``"1 min 35 s"``, ``0.25`` -> ``"0.25 s"``, ``7300`` -> ``"2 h 2 min"``."""
    if not np.isfinite(seconds):
        return "?"
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
