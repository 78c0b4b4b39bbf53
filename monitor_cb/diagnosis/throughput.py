"""``throughput_drop``: a lasting fall in training speed, judged by size x persistence in logged points.

The rate is the logged ``throughput`` (samples/s), else 1 / ``step_time`` (steps/s), else steps per
second between consecutive records' ``t`` (imported logs only have time stamps). Each point's deficit
is ``log(trend / rate)`` against the trailing robust trend of the log rate. A drop is confirmed when,
for some window of ``L`` points (``drop_min_points`` .. ``drop_window``), most of the window (and at
least ``drop_min_points`` of it) is below
the trend by at least ``max(drop_frac, drop_evidence / L, drop_z noise sigmas of an L-point median)``:
a large drop needs few points (an 85% fall: 3), a small one more (a halving: 4; -30%: 7), and a
single slow interval (an evaluation, a checkpoint) never counts. The trend is frozen at the onset to
find where the drop ends. One finding per drop (confirming windows that share an onset are one), and
its numbers agree with its threshold: the fall it reports (the trend at the onset against the median
of the confirming points) is at least the threshold it names, or there is no finding.

Record times are a rate only where they mean something: a file written in bursts (TensorBoard
event files flushed by a queue, a log copied line by line), time stamps coarser than a step, or
intervals no training step takes say nothing about speed. Then there is no throughput finding, only
one ``info`` note that says why (:func:`record_times_problem`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import Series, column, episodes, finite_series, majority, trailing_level, train_rows
from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_pct, fmt_seconds, fmt_step
from monitor_cb.diagnosis.noise import series_noise
from monitor_cb.diagnosis.pauses import paused_between
from monitor_cb.diagnosis.settings import DiagnosisSettings

_MAX_EPISODES = 50
_COMPARE_POINTS = 50  # points before / after the onset whose medians describe the change
_MEDIAN_SE = 1.2533
# Record times that are no rate: a share of consecutive records with the same time stamp; a typical
# (median) interval this many times shorter than the mean one (the longest 1% left out: an outage or a
# resume is no burst); the shortest plausible median time a step takes.
_SAME_STAMP_SHARE = 0.1
_BURST_RATIO = 20.0
_MIN_STEP_S = 1e-4
# The shortest plausible median time between two records a training wrote: a converter writing a finished
# run's log writes thousands of records a second, and its pauses (a flush, a collection) are no slowdown.
_MIN_RECORD_S = 2e-3


FROM_TIMES = "steps/s (from record times)"


def rate_series(frame: pd.DataFrame) -> tuple[Series | None, str]:
    """Throughput (samples/s) when logged, else steps/s from ``step_time`` or from ``t``; with its unit."""
    s = finite_series(frame, "throughput")
    unit = "samples/s"
    if s is None:
        s = finite_series(frame, "step_time")
        unit = "steps/s"
        if s is None:
            return _rate_from_t(frame), FROM_TIMES
        s = Series(s.rows, s.steps, np.where(s.values > 0, 1.0 / np.maximum(s.values, 1e-300), np.nan))
    keep = np.isfinite(s.values) & (s.values > 0)
    return Series(s.rows[keep], s.steps[keep], s.values[keep]), unit


def _intervals(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Consecutive train records with a time: (rows, steps, seconds between, steps between); None under 3."""
    t = column(frame, "t")
    if t is None:
        return None
    steps = frame["step"].to_numpy()
    rows = np.flatnonzero(train_rows(frame) & np.isfinite(t))
    if rows.size < 3:
        return None
    return rows, steps, np.diff(t[rows]), np.diff(steps[rows])


def _rate_from_t(frame: pd.DataFrame) -> Series | None:
    """Steps per second from the records' ``t``: at each train record, over its last :data:`TIMES_SPAN`
    intervals (None without usable times); an interval with an evaluation or a resume in it is left out
    (:mod:`monitor_cb.diagnosis.pauses`).

    Over two intervals, not one: a writer's wall times jitter (ML-Agents writes a summary every 2,000 steps
    but trains every other one, so its intervals alternate 1.3 s, 3.3 s, ...), and such an alternation is no
    change of speed. One slow interval makes two slow points, fewer than a drop needs (``drop_min_points``).
    """
    found = _intervals(frame)
    if found is None:
        return None
    rows, steps, dt, ds = found
    ok = (dt > 0) & (ds > 0) & ~paused_between(frame, rows[:-1], rows[1:])  # an evaluation, a resume: no rate
    if ok.sum() < 3:
        return None
    dt, ds, rows = dt[ok], ds[ok], rows[1:][ok]
    span = TIMES_SPAN if ok.sum() >= 8 * TIMES_SPAN else 1  # a short run keeps points enough to be judged
    seconds = np.convolve(dt, np.ones(span), "valid")  # each point: its interval and the one before
    counted = np.convolve(ds, np.ones(span), "valid")
    rows = rows[span - 1 :]
    return Series(rows, steps[rows], counted / seconds)


TIMES_SPAN = 2  # intervals a rate from record times is taken over


def record_times_problem(frame: pd.DataFrame) -> str | None:
    """Why the records' ``t`` says nothing about speed (None when it does, or there is none to judge).

    Judged on consecutive train records: the same time stamp for different steps (times coarser than
    a step, or stamped when a buffer was flushed), a median under :data:`_MIN_STEP_S` a step (no
    training step is that fast), or a median interval far shorter than the mean (records written in
    bursts: most come at once, then a long wait).
    """
    found = _intervals(frame)
    if found is None:
        return None
    _, _, dt, ds = found
    forward = ds > 0
    dt, ds = dt[forward], ds[forward]
    if dt.size < 3:
        return None
    same = float(np.mean(dt <= 0))
    if same >= _SAME_STAMP_SHARE:
        return (
            f"{fmt_pct(same)} of consecutive records share a time stamp, so their times are coarser than a step "
            "or were stamped when a buffer was written"
        )
    per_step = np.sort(np.maximum(dt, 0.0) / ds)
    typical = float(np.median(per_step))
    if typical < _MIN_STEP_S:
        return f"records are a median {fmt_seconds(typical)} apart per step, faster than any training step"
    mean = float(per_step[: per_step.size - per_step.size // 100].mean())
    if typical * _BURST_RATIO < mean:
        return (
            f"records are a median {fmt_seconds(typical)} apart per step but {fmt_seconds(mean)} on average: "
            "they were written in bursts"
        )
    record = float(np.median(dt))
    if record < _MIN_RECORD_S:
        return (
            f"records are a median {fmt_seconds(record)} apart, faster than a training writes them: they were "
            "written in a burst (a converted or copied log)"
        )
    return None


def _times_note(frame: pd.DataFrame, problem: str) -> Finding:
    what = f"throughput was not judged: no throughput or step_time was logged, and {problem}"
    advice = "log throughput or step_time (LiveMonitor does) to have drops in speed found"
    why = "record times are used as a rate only when their intervals look like steps"
    steps = frame["step"].to_numpy()
    details = {"variant": "not_judged", "reason": problem}
    return Finding("throughput_drop", "info", int(steps[0]), explain(what, advice, why), None, None, details, why)


def detect_throughput_drop(frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    """Stretches where the rate sits well below its trend for long enough given how far below it is."""
    s, unit = rate_series(frame)
    if s is None or len(s) < settings.min_baseline + settings.drop_min_points:
        return []
    if unit == FROM_TIMES:
        problem = record_times_problem(frame)
        if problem is not None:
            return [_times_note(frame, problem)]
    if not _could_drop(s.values, settings):
        return []  # not even drop_min_points slow points close together: the common case, in one pass
    noise = series_noise(s.values, settings.baseline_window, settings.min_baseline, log=True)
    deficit = noise.level - noise.x  # log(trend / rate): > 0 when slower
    confirmed = np.zeros(len(s), dtype=bool)  # the last point of a confirming window
    need_at = np.full(len(s), np.nan)
    for window in _windows(settings.drop_min_points, settings.drop_window):
        need = np.maximum(-np.log1p(-settings.drop_frac), settings.drop_evidence / window)
        need = np.maximum(need, settings.drop_z * noise.sigma * _MEDIAN_SE / np.sqrt(window))
        with np.errstate(invalid="ignore"):
            low = deficit >= need
        hit = majority(low, window, least=settings.drop_min_points)  # a short window: all of it
        fresh = hit & ~confirmed
        need_at[fresh] = need[fresh]
        confirmed |= hit
    findings: list[Finding] = []
    covered = -1
    for first, _last in episodes(confirmed):
        if first <= covered:
            continue
        lookback = max(0, first - settings.drop_window)
        low = deficit[lookback : first + 1] >= need_at[first]
        onset = lookback + (int(np.flatnonzero(low)[0]) if low.any() else first - lookback)
        if onset <= covered:
            continue  # another confirming window of the drop already reported
        level = float(np.exp(noise.level[onset]))
        if not np.isfinite(level):
            continue
        end = _episode_end(noise.x, onset, np.log(level) - float(need_at[first]), settings.drop_window)
        covered = max(end, first)
        found = _finding(frame, s, unit, onset, end, first, level, float(need_at[first]), settings)
        if found is None:
            continue  # its points were not, taken together, as far below the trend as the threshold
        findings.append(found)
        if len(findings) >= _MAX_EPISODES:
            break
    return findings


def _could_drop(values: np.ndarray, settings: DiagnosisSettings) -> bool:
    """A cheap necessary condition: ``drop_min_points`` points ``drop_frac`` below the trend within ``drop_window``."""
    x = np.log(values)
    level = trailing_level(x, settings.baseline_window, settings.min_baseline)
    with np.errstate(invalid="ignore"):
        slow = np.flatnonzero(level - x >= -np.log1p(-settings.drop_frac))
    k = settings.drop_min_points
    return slow.size >= k and bool(np.any(slow[k - 1 :] - slow[: slow.size - k + 1] < settings.drop_window))


def _windows(shortest: int, longest: int) -> list[int]:
    """Window lengths to try: every length up to 6, then about 25% apart (the cost stays ~8 passes)."""
    out, w = [], max(1, shortest)
    while w <= longest:
        out.append(w)
        w = w + 1 if w < 6 else max(w + 1, round(w * 1.25))
    if out and out[-1] != longest and longest >= shortest:
        out.append(longest)
    return out


def _episode_end(x: np.ndarray, onset: int, threshold: float, window: int) -> int:
    """Last point of the drop: where a majority of ``window`` points stops being under the frozen threshold."""
    spans = episodes(majority(x[onset:] < threshold, window), window)
    return onset + (spans[0][1] if spans else 0)


def _finding(
    frame: pd.DataFrame,
    s: Series,
    unit: str,
    onset: int,
    end: int,
    seen: int,
    level: float,
    need: float,
    settings: DiagnosisSettings,
) -> Finding | None:
    x = s.values
    # the confirming points against the trend at the onset: what the threshold was judged on
    now_level = float(np.median(x[onset : max(seen, onset) + 1]))
    fall = 1 - now_level / level
    # the fraction ``need`` (a log) stands for; never below drop_frac, which ``need`` is at least in exact
    # arithmetic: 1 - exp(log1p(-0.3)) is 0.29999999999999993 on some CPUs' exp/log
    threshold = max(settings.drop_frac, float(-np.expm1(-need)))
    if not fall >= threshold - 1e-9:
        return None
    ongoing = end >= len(s) - 1
    if ongoing:
        span = "and is still there"
    elif s.steps[end] > s.steps[onset]:
        span = f"until step {fmt_step(s.steps[end])}"
    else:
        span = "for one logged point"
    cause, details = _cause(frame, s, onset, end, settings)
    points = seen - onset + 1
    what = (
        f"throughput fell from {fmt_num(level)} to {fmt_num(now_level)} {unit} (-{fmt_pct(fall)}) "
        f"at step {fmt_step(s.steps[onset])} {span}"
    )
    why = (
        f"most of {points} logged points in a row were at least {fmt_pct(threshold)} below the trend "
        f"(threshold: -{fmt_pct(settings.drop_frac)}, and size x points >= drop_evidence = {settings.drop_evidence:g} "
        f"in log units, so a halving must last {int(np.ceil(settings.drop_evidence / np.log(2)))} points and "
        f"-{fmt_pct(settings.drop_frac)} {int(np.ceil(settings.drop_evidence / -np.log1p(-settings.drop_frac)))}; "
        f"and {settings.drop_z:g} noise sigmas of the rate)"
    )
    details |= {
        "before": level,
        "after": now_level,
        "fall": fall,
        "unit": unit,
        "ongoing": ongoing,
        "points_to_confirm": int(points),
        "threshold": threshold,
        "detected_step": int(s.steps[seen]),
    }
    message = explain(what, cause, why)
    return Finding("throughput_drop", "warning", int(s.steps[onset]), message, int(s.steps[end]), None, details, why)


def _cause(frame: pd.DataFrame, s: Series, onset: int, end: int, settings: DiagnosisSettings) -> tuple[str, dict]:
    """Did the data wait per step grow by enough of the step-time growth to explain the slowdown?"""
    row0, row1 = int(s.rows[onset]), int(s.rows[end]) + 1
    data, step = column(frame, "data_time"), column(frame, "step_time")
    if data is None:
        return (
            "data_time was not logged, so the cause cannot be told apart; log it to see whether the "
            "input pipeline is to blame"
        ), {"cause": "unknown"}
    d0, d1 = _median(data[max(0, row0 - _COMPARE_POINTS * 2) : row0]), _median(data[row0 : min(row1, row0 + 100)])
    if step is not None:
        t0, t1 = _median(step[max(0, row0 - _COMPARE_POINTS * 2) : row0]), _median(step[row0 : min(row1, row0 + 100)])
        grow = t1 - t0
    else:
        grow = float("nan")
    details = {"data_time_before": d0, "data_time_after": d1}
    if np.isfinite(grow) and grow > 0 and np.isfinite(d1 - d0) and d1 - d0 >= settings.drop_data_share * grow:
        text = (
            f"Waiting for data grew from {fmt_seconds(d0)} to {fmt_seconds(d1)} per step with it: the input pipeline "
            "is the bottleneck (more loader workers, prefetching, faster or local storage)"
        )
        return text, details | {"cause": "input"}
    text = (
        f"Waiting for data did not grow with it ({fmt_seconds(d0)} -> {fmt_seconds(d1)} per step), so the "
        "slowdown is in compute or communication: another job on the device, thermal throttling, a slow node or link"
    )
    return text, details | {"cause": "compute"}


def _median(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else float("nan")
