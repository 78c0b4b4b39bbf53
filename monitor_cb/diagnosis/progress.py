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


# A flat stretch after the loss made more than this share of its descent so far is convergence, or a pause
# in a descent: 78 such notes on 23 of 61 healthy real runs (slow noisy tails, epoch staircases, a smooth
# curve falling 2 -> 0.75), none of which their labeller called a plateau. Flat near the start level is.
_LEARNED_SHARE = 0.25
_LEARNED_TOL = 3.0  # ... and a descent within this many plateau_rel tolerances is no learning at all


def _flat_stretches(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Stretches of ``plateau_points`` or more where the block-median loss never beat its best by ``plateau_rel``,
    while the loss sits near the level it started from (before it had made a quarter of its descent so far)."""
    s = finite_series(frame, "loss")
    block = settings.plateau_smooth
    if s is None or len(s) < settings.plateau_points:
        return []
    nb = len(s) // block
    if nb < 2:
        return []
    level = row_median(s.values[: nb * block].reshape(nb, block))
    running_best = np.minimum.accumulate(level)
    running_top = np.maximum.accumulate(level)
    noise = _block_noise(level)
    need = -(-settings.plateau_points // block)  # blocks
    findings: list[Finding] = []
    anchor = 0
    while anchor < nb and len(findings) < _MAX_EPISODES:
        tol = settings.plateau_rel * abs(level[anchor])
        nxt = anchor + int(np.searchsorted(-running_best[anchor:], -(level[anchor] - tol), side="right"))
        if nxt - anchor >= need and not _learned_before(level, running_top, running_best, anchor, max(tol, noise)):
            findings.append(_plateau_finding(s, anchor, min(nxt, nb) - 1, block, level[anchor], nxt >= nb, settings))
        anchor = max(nxt, anchor + 1)
    return findings


def _block_noise(level: np.ndarray) -> float:
    """The block medians' own noise (a robust sigma from their successive differences)."""
    d = np.diff(level)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0)) if d.size else 0.0


def _learned_before(level: np.ndarray, top: np.ndarray, best: np.ndarray, anchor: int, tol: float) -> bool:
    """Whether the loss had already fallen clearly from its top before ``anchor`` (by more than
    :data:`_LEARNED_TOL` x ``tol``, the larger of ``plateau_rel`` and the block noise, and more than
    :data:`_LEARNED_SHARE` of its whole descent so far): then a flat stretch is convergence, not a plateau."""
    learned = float(top[anchor] - level[anchor])
    return learned > _LEARNED_TOL * tol and learned > _LEARNED_SHARE * float(top[-1] - best[-1])


def _plateau_finding(
    s: Series, first_block: int, last_block: int, block: int, best: float, ongoing: bool, settings: DiagnosisSettings
) -> Finding:
    start = first_block * block
    end = len(s) - 1 if ongoing else (last_block + 1) * block - 1
    span = f"for {fmt_step(s.steps[end] - s.steps[start])} steps"
    what = (
        f"loss has not improved by {fmt_pct(settings.plateau_rel)} since step {fmt_step(s.steps[start])} "
        f"({span}, level {fmt_num(best)}), near the level it started from"
    )
    advice = (
        "The model may not be learning yet: if the learning rate is still warming up this can pass; otherwise "
        "check the learning rate (too low to make progress, or too high to settle) and the data"
    )
    why = (
        f"the median of each {block} points (plateau_smooth) stayed above {fmt_pct(1 - settings.plateau_rel)} of "
        f"{fmt_num(best)} for {end - start + 1} points (threshold plateau_points = {settings.plateau_points}), "
        f"before the loss had made {fmt_pct(_LEARNED_SHARE)} of its descent (a flat stretch after that is "
        "convergence and gets no note)"
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
    rows = _in_step_order(frame, rows, t[rows])
    # Steps, not the clock, say which record came before: a clock set back an hour is no hour of silence
    # between the last step before it and step 1 (a negative interval is no gap at all).
    gaps = np.maximum(np.diff(t[rows]), 0.0)
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


def _in_step_order(frame: pd.DataFrame, rows: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``rows`` ordered by step, then by time within a step (several ranks' rows of one step)."""
    steps = frame_steps(frame)[rows]
    if np.all(np.diff(steps) >= 0) and not np.any((np.diff(steps) == 0) & (np.diff(times) < 0)):
        return rows  # already in order: the usual case
    return rows[np.lexsort((times, steps))]


def _silent_now(
    frame: pd.DataFrame, settings: DiagnosisSettings, *, status: str | None, now: float | None, last_write: float | None
) -> list[Finding]:
    t = column(frame, "t")
    if t is None or not np.isfinite(t).any():
        return []
    now = time.time() if now is None else now
    rows = np.flatnonzero(np.isfinite(t))
    latest = int(_in_step_order(frame, rows, t[rows])[-1])  # the last record is the highest step's, whatever its time
    last = float(t[latest]) if last_write is None else float(last_write)
    silence = now - last
    threshold = stall_threshold(t, settings)
    if silence < threshold and status != "stalled":
        return []
    step = int(frame_steps(frame)[latest])
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
