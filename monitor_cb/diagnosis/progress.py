"""``plateau``: the loss not improving for a long stretch, and ``stalled``: a run gone silent, now or in its past."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, column, finite_series, frame_steps, row_median, trailing_baseline
from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_pct, fmt_step
from monitor_cb.diagnosis.pauses import explained_pause
from monitor_cb.diagnosis.settings import DiagnosisSettings
from monitor_cb.ingest.status import ACTIVE

_MAX_EPISODES = 50
LIVE_STATUSES = ACTIVE


def detect_plateau(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """A run not learning at all (warnings, :mod:`monitor_cb.diagnosis.stuck`), and long flat stretches (info)."""
    from monitor_cb.diagnosis.stuck import detect_no_signal, detect_stuck

    return detect_no_signal(frame, settings) + detect_stuck(frame, settings) + _flat_stretches(frame, settings)


def _flat_stretches(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Stretches of ``plateau_points`` or more where the block-median loss never beat its best by ``plateau_rel``."""
    s = finite_series(frame, "loss")
    block = settings.plateau_smooth
    if s is None or len(s) < settings.plateau_points:
        return []
    nb = len(s) // block
    if nb < 2:
        return []
    level = row_median(s.values[: nb * block].reshape(nb, block))
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


def _plateau_finding(
    s: Series, first_block: int, last_block: int, block: int, best: float, ongoing: bool, settings: DiagnosisSettings
) -> Finding:
    start = first_block * block
    end = len(s) - 1 if ongoing else (last_block + 1) * block - 1
    span = f"for {fmt_step(s.steps[end] - s.steps[start])} steps"
    what = (
        f"loss has not improved by {fmt_pct(settings.plateau_rel)} since step {fmt_step(s.steps[start])} "
        f"({span}, level {fmt_num(best)})"
    )
    advice = (
        "If the learning rate is still high it may be too high to settle, or too low to make progress; if it has "
        "already decayed, training may have converged"
    )
    why = (
        f"the median of each {block} points (plateau_smooth) stayed above {fmt_pct(1 - settings.plateau_rel)} of "
        f"{fmt_num(best)} for {end - start + 1} points (threshold plateau_points = {settings.plateau_points})"
    )
    details = {"variant": "flat", "level": float(best), "points": int(end - start + 1), "ongoing": bool(ongoing)}
    message = explain(what, advice, why)
    return Finding("plateau", "info", int(s.steps[start]), message, int(s.steps[end]), None, details, why)


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
    """Silences: past gaps between records (any run), and a running run that has gone quiet.

    A past gap counts when it is at least ``stall_gap_seconds``, ``stall_factor`` x the usual interval
    before it and 1.5 x the longest interval before it (so a periodic evaluation or checkpoint pause,
    once seen, is not a stall the next time), less what the run explains itself
    (:mod:`monitor_cb.diagnosis.pauses`: the time of an evaluation it logged, a resume into a new
    segment). A running run is judged by :func:`stall_threshold`.

    Args:
        status: the run's status (``RunInfo.status``); only ``running`` and ``stalled`` are judged live.
        now: the current Unix time (default: ``time.time()``).
        last_write: when the run last wrote (``RunInfo.last_write``); default the frame's latest ``t``.
    """
    if len(frame) == 0:
        return []
    findings = _past_gaps(frame, settings)
    if status in LIVE_STATUSES:
        findings += _silent_now(frame, settings, status=status, now=now, last_write=last_write)
    return findings


_MAX_GAPS = 20


def _past_gaps(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    t = column(frame, "t")
    if t is None:
        return []
    rows = np.flatnonzero(np.isfinite(t))
    if rows.size < settings.min_baseline:
        return []
    times = t[rows]
    if np.any(np.diff(times) < 0):
        order = np.argsort(times, kind="stable")
        rows, times = rows[order], times[order]
    gaps = np.diff(times)
    if not np.any(gaps >= settings.stall_gap_seconds):
        return []  # nothing long enough in absolute terms: the common case, decided in one pass
    usual, _ = trailing_baseline(gaps, 201, 5, with_sigma=False)
    longest = np.concatenate(([np.inf], np.maximum.accumulate(gaps)[:-1]))  # the longest interval before each
    # what the run explains itself: an evaluation it logged (its logged runtime, else all of it), a resume
    unexplained = gaps - explained_pause(frame, rows[:-1], rows[1:], gaps)
    with np.errstate(invalid="ignore"):
        need = np.maximum(np.maximum(settings.stall_gap_seconds, settings.stall_factor * usual), 1.5 * longest)
        hits = np.flatnonzero((unexplained >= need) & np.isfinite(usual))
    steps = frame_steps(frame)
    findings = []
    for i in hits[:_MAX_GAPS].tolist():
        before, after = int(steps[rows[i]]), int(steps[rows[i + 1]])
        what = (
            f"no record for {fmt_duration(gaps[i])} between step {fmt_step(before)} and step {fmt_step(after)} "
            f"(the run usually logs every {fmt_duration(usual[i])}): the job was stopped, hung or waiting for "
            "resources, then went on"
        )
        advice = "Check the job's history for a crash and restart, a preemption or a hang; that time was lost"
        why = (
            f"the gap is at least {fmt_duration(settings.stall_gap_seconds)} (stall_gap_seconds), "
            f"{gaps[i] / usual[i]:,.0f}x the usual interval (threshold stall_factor = {settings.stall_factor:g}) and "
            f"{gaps[i] / longest[i]:,.1f}x the longest interval before it (threshold 1.5x, so repeated evaluation "
            "pauses do not count)"
        )
        details = {
            "variant": "gap",
            "gap_s": float(gaps[i]),
            "usual_interval_s": float(usual[i]),
            "threshold_s": float(need[i]),
        }
        findings.append(Finding("stalled", "warning", after, explain(what, advice, why), None, None, details, why))
    return findings


def _silent_now(
    frame: pd.DataFrame, settings: DiagnosisSettings, *, status: str | None, now: float | None, last_write: float | None
) -> list[Finding]:
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
    what = (
        f"no new records for {fmt_duration(silence)} (last at step {fmt_step(step)}, {when}); this run usually logs "
        f"every {fmt_duration(usual)}"
    )
    advice = (
        "The process may be hung (a deadlock in collective communication, a stuck data loader, a full disk) or "
        "killed without recording it: check the job"
    )
    why = (
        f"the silence passed {fmt_duration(threshold)}: the largest of {fmt_duration(settings.stall_min_seconds)} "
        f"(stall_min_seconds), {settings.stall_factor:g}x the usual interval (stall_factor) and 1.5x the longest "
        f"gap seen; an error past {settings.stall_error_factor:g}x that"
    )
    details = {"silence_s": silence, "threshold_s": threshold, "usual_interval_s": usual, "last_write": last}
    return [Finding("stalled", severity, step, explain(what, advice, why), None, None, details, why)]


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
