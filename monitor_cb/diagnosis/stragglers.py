"""``straggler`` and ``rank_divergence``: one rank of a multi-rank run that is slower than, or apart from, the rest.

Both look at all ranks together, step by step (:func:`monitor_cb.analysis.rank_matrix.rank_matrix`), and
compare each rank with the median of the *other* ranks at the same step, so anything common to
every rank (a slow checkpoint step, the loss curve itself, lr warmup) cancels out. A single odd
step is noise (a hiccup, one hard batch); a rank is flagged when it is off on at least
``rank_persist`` of its last ``rank_window`` aligned steps.

* ``straggler``: judged by what the rank costs the job: the time the job loses to it per step (its
  step time beyond the others' median, or its data wait beyond theirs, which the others spend
  waiting for it in the collective) as a share of the job's step time (the slowest rank's). At least
  ``straggler_cost`` (0.15: per-rank step-time noise is a few percent, so 15% on most of 20 steps
  never happens by chance, while a rank that costs the job a sixth of its time is worth a look).
* ``rank_divergence`` (3+ ranks, so "the rest" has a median to depart from): the loss or the local
  grad norm (log scale) ``divergence_z`` cross-rank sigmas from the others' median and at least
  ``divergence_rel`` from it. The sigma is the typical spread between ranks, 1.4826 x the
  per-step MAD across ranks, median over ``baseline_window`` steps: in data parallel ranks differ by
  batch noise, and that is the yardstick.

``places`` (rank -> ``"host h, device d"``, from :func:`rank_places`) lets the messages say where
the rank runs.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.rank_matrix import RankMatrix, leave_one_out_median, rank_matrix, row_mad
from monitor_cb.diagnosis._stats import episodes, rolling_count
from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_pct, fmt_ratio, fmt_seconds, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings
from monitor_cb.rootfile import META_CAP, read_json

DIVERGENCE_METRICS: tuple[str, ...] = ("loss", "grad_norm")
_MAD_TO_SIGMA = 1.4826
_MAX_EPISODES = 20  # per rank and metric
_LOG_METRICS = frozenset({"grad_norm"})  # compared on a log scale (multiplicative noise)


def detect_straggler(
    frame: pd.DataFrame, settings: DiagnosisSettings, *, places: Mapping[int, str] | None = None
) -> list[Finding]:
    """Ranks that persistently cost the job ``straggler_cost`` of its step time (2+ ranks).

    A rank costs the job its step time beyond the other ranks' median (they wait for it at the next
    collective), or its data wait beyond theirs: in synchronous data parallel the fast ranks wait for
    the slow one inside the collective, so step times come out equal and only the data wait shows who
    held the job up. The cost is a share of the job's step, the slowest rank's step time.
    """
    m = rank_matrix(frame, "step_time")
    if m is None or m.ranks.size < 2:
        return []
    with np.errstate(invalid="ignore", divide="ignore"):
        clean = np.where(m.values > 0, m.values, np.nan)
        others = leave_one_out_median(clean)
        ratio = clean / others
        job = np.fmax.reduce(clean, axis=1)[:, None]  # the job moves at its slowest rank's pace
        data = _aligned(rank_matrix(frame, "data_time"), m)
        extra_wait = data - leave_one_out_median(data)  # seconds per step beyond the others' wait
        cost_step = (clean - others) / job
        cost_wait = extra_wait / job
        cost = np.fmax(cost_step, cost_wait)
        slow_step = cost_step >= settings.straggler_cost
        slow_wait = cost_wait >= settings.straggler_cost
    slow = slow_step | slow_wait
    findings: list[Finding] = []
    for j, rank in enumerate(m.ranks.tolist()):
        for idx, first, last, ongoing in _persistent(cost[:, j], slow[:, j], settings):
            span = idx[first : last + 1]
            waits = extra_wait[span, j][np.isfinite(extra_wait[span, j])]
            details = {
                "cost": float(np.median(cost[span, j])),
                "slowdown": float(np.median(ratio[span, j])),
                "step_time": float(np.median(clean[span, j])),
                "others_step_time": float(np.median(others[span, j])),
                "job_step_time": float(np.median(job[span, 0])),
                "extra_wait": float(np.median(waits)) if waits.size else None,  # seconds per step
                "share_slow": float(np.mean(slow[span, j])),
                "points": int(span.size),
                "ongoing": ongoing,
                "by": "step_time" if np.mean(slow_step[span, j]) >= np.mean(slow_wait[span, j]) else "data_time",
                "threshold": settings.straggler_cost,
            }
            details["data_share"] = _data_share(details)
            findings.append(_straggler_finding(m, rank, span, details, places, settings))
    return findings


def detect_straggler_bands(
    step: Any, data: Any | None, settings: DiagnosisSettings, *, places: Mapping[int, str] | None = None
) -> list[Finding]:
    """:func:`detect_straggler` from the aggregate across ranks (``RunStore.bands``): what a server keeps of a
    run with many ranks, instead of every rank's rows.

    Per step only the slowest rank (``hi_rank``) can cost the job step time beyond the others' median
    (``others_median``), and only the rank waiting longest for data (the data bands' ``hi_rank``) can
    cost it data wait beyond theirs; each as a share of the job's step (the slowest step time). One
    straggler is found as from the full matrix; of two ranks slow at the same steps, each is named
    where it is the slower one.

    Args:
        step: the bands of ``step_time``; data: those of ``data_time`` (None: step time only).
    """
    if step is None or len(step.ranks) < 2 or len(step) == 0:
        return []
    steps = step.steps
    with np.errstate(invalid="ignore", divide="ignore"):
        job = np.where(step.hi > 0, step.hi, np.nan)  # the job moves at its slowest rank's pace
        others = np.where(step.others_median > 0, step.others_median, np.nan)
        cost_step = (job - others) / job
        extra_wait = np.full(steps.size, np.nan)
        wait_rank = np.full(steps.size, -1)
        if data is not None and len(data):
            at = np.searchsorted(data.steps, steps)
            found = at < data.steps.size
            found[found] = data.steps[at[found]] == steps[found]
            rows = at[found]
            extra_wait[found] = data.hi[rows] - data.others_median[rows]
            wait_rank[found] = data.hi_rank[rows]
        cost_wait = extra_wait / job
        slow_step = cost_step >= settings.straggler_cost
        slow_wait = cost_wait >= settings.straggler_cost
    judged = np.where(np.isfinite(cost_step), cost_step, cost_wait)  # steps where any rank could be judged
    findings: list[Finding] = []
    for rank in step.ranks:
        mine_step = step.hi_rank == rank
        mine_wait = wait_rank == rank
        flagged = (slow_step & mine_step) | (slow_wait & mine_wait)
        cost = np.fmax(np.where(mine_step, cost_step, np.nan), np.where(mine_wait, cost_wait, np.nan))
        for idx, first, last, ongoing in _persistent(judged, flagged, settings):
            span = idx[first : last + 1]
            as_slowest = span[mine_step[span] & np.isfinite(cost_step[span])]
            waits = span[mine_wait[span] & np.isfinite(extra_wait[span])]
            costs = cost[span][np.isfinite(cost[span])]
            details = {
                "cost": float(np.median(costs)) if costs.size else 0.0,
                "slowdown": float(np.median(job[as_slowest] / others[as_slowest])) if as_slowest.size else 1.0,
                "step_time": float(np.median(job[as_slowest]))
                if as_slowest.size
                else float(np.median(step.median[span])),
                "others_step_time": float(np.median(others[as_slowest]))
                if as_slowest.size
                else float(np.median(step.median[span])),
                "job_step_time": float(np.median(job[span])),
                "extra_wait": float(np.median(extra_wait[waits])) if waits.size else None,
                "share_slow": float(np.mean(flagged[span])),
                "points": int(span.size),
                "ongoing": ongoing,
                "by": "step_time"
                if np.mean(slow_step[span] & mine_step[span]) >= np.mean(slow_wait[span] & mine_wait[span])
                else "data_time",
                "threshold": settings.straggler_cost,
                "aggregated": True,
            }
            details["data_share"] = _data_share(details)
            findings.append(_straggler_finding(step, rank, span, details, places, settings))
    return findings


def _aligned(other: RankMatrix | None, m: RankMatrix) -> np.ndarray:
    """``other``'s values on ``m``'s steps and ranks (NaN where it has none)."""
    out = np.full(m.values.shape, np.nan)
    if other is None:
        return out
    at = np.searchsorted(other.steps, m.steps)
    found = at < other.steps.size
    found[found] = other.steps[at[found]] == m.steps[found]
    cols = np.searchsorted(other.ranks, m.ranks)
    has = cols < other.ranks.size
    has[has] = other.ranks[cols[has]] == m.ranks[has]
    block = other.values[at[found]][:, cols[has]]
    out[np.ix_(np.flatnonzero(found), np.flatnonzero(has))] = block
    return out


def detect_rank_divergence(
    frame: pd.DataFrame,
    settings: DiagnosisSettings,
    *,
    places: Mapping[int, str] | None = None,
    metrics: Iterable[str] = DIVERGENCE_METRICS,
    matrices: Mapping[str, RankMatrix | None] | None = None,
) -> list[Finding]:
    """Ranks whose loss or local grad norm stays apart from the other ranks' median (3+ ranks).

    ``matrices`` (metric -> ranks side by side, ``RunStore.rank_matrix``) replace the frame: a run with
    many ranks is judged without a merged frame.
    """
    findings: list[Finding] = []
    for metric in metrics:
        m = matrices.get(metric) if matrices is not None else rank_matrix(frame, metric)
        if m is None or m.ranks.size < 3:
            continue
        findings += _divergence(m, metric, settings, places)
    return findings


def _divergence(
    m: RankMatrix, metric: str, settings: DiagnosisSettings, places: Mapping[int, str] | None
) -> list[Finding]:
    values = np.where(np.isfinite(m.values), m.values, np.nan)
    log = metric in _LOG_METRICS and bool(np.all(values[np.isfinite(values)] > 0))
    space = np.log(values) if log else values
    enough = (np.isfinite(space).sum(axis=1) >= 3)[:, None]
    center = leave_one_out_median(space)
    spread = _typical_spread(row_mad(space), settings)[:, None]
    center_raw = np.exp(center) if log else center
    with np.errstate(invalid="ignore", divide="ignore"):
        # a metric reduced across ranks is identical everywhere: any difference then is the signal,
        # and the relative floor below keeps float round-off out
        z = (space - center) / np.maximum(spread, 1e-12 * np.abs(center) + 1e-300)
        rel = np.abs(values - center_raw) / np.abs(center_raw)
        off = (np.abs(z) >= settings.divergence_z) & (rel >= settings.divergence_rel) & enough
    z = np.where(enough, z, np.nan)
    findings: list[Finding] = []
    for j, rank in enumerate(m.ranks.tolist()):
        for idx, first, last, ongoing in _persistent(z[:, j], off[:, j], settings):
            span = idx[first : last + 1]
            details = {
                "metric": metric,
                "value": float(np.median(values[span, j])),
                "others": float(np.median(center_raw[span, j])),
                "z": float(np.median(z[span, j])),
                "share_off": float(np.mean(off[span, j])),
                "points": int(span.size),
                "ongoing": ongoing,
                "log_scale": log,
            }
            findings.append(_divergence_finding(m, rank, span, details, places, settings))
    return findings


def _typical_spread(mad: np.ndarray, settings: DiagnosisSettings) -> np.ndarray:
    """1.4826 x the median per-step MAD over the last ``baseline_window`` steps (this one included)."""
    window = settings.baseline_window
    least = min(settings.rank_window, window)
    typical = pd.Series(mad).rolling(window, min_periods=least).median().to_numpy()
    return _MAD_TO_SIGMA * typical


def _persistent(
    stat: np.ndarray, flagged: np.ndarray, settings: DiagnosisSettings
) -> list[tuple[np.ndarray, int, int, bool]]:
    """Episodes of one rank where ``rank_persist`` of the last ``rank_window`` judged points were flagged.

    Returns ``(judged steps' positions, first, last, ongoing)`` per episode; ``first``/``last`` index the
    positions and are the first and last flagged point of the episode.
    """
    idx = np.flatnonzero(np.isfinite(stat))
    window = settings.rank_window
    need = max(1, math.ceil(settings.rank_persist * window - 1e-9))
    if idx.size < need:
        return []
    hits = flagged[idx]
    sustained = rolling_count(hits, window) >= need
    out = []
    for a, b in episodes(sustained, max_gap=window)[:_MAX_EPISODES]:
        lo = max(0, a - window + 1)
        first = lo + int(np.argmax(hits[lo : a + 1]))
        last = b - int(np.argmax(hits[: b + 1][::-1]))
        out.append((idx, first, last, bool(b == idx.size - 1)))
    return out


def _data_share(details: dict[str, Any]) -> float | None:
    """How much of the rank's extra step time its extra data wait explains (None without one)."""
    extra_step = details["step_time"] - details["others_step_time"]
    if details["extra_wait"] is None:
        return None
    if details["by"] == "data_time" or extra_step <= 0:
        return 1.0
    return float(np.clip(details["extra_wait"] / extra_step, 0.0, 1.0))


def _when(start: int, end: int, ongoing: bool) -> str:
    return f"since step {fmt_step(start)}" if ongoing else f"from step {fmt_step(start)} to {fmt_step(end)}"


def _straggler_finding(
    m: RankMatrix,
    rank: int,
    span: np.ndarray,
    details: dict[str, Any],
    places: Mapping[int, str] | None,
    settings: DiagnosisSettings,
) -> Finding:
    start, end = int(m.steps[span[0]]), int(m.steps[span[-1]])
    where = _where(rank, places)
    when = _when(start, end, details["ongoing"])
    share = details["data_share"]
    pipeline = (
        "the input pipeline on that host is the likely cause (slow disk or network storage, too few loader "
        "workers, CPU contention)"
    )
    if details["by"] == "data_time":
        cause = pipeline[0].upper() + pipeline[1:]
        what = (
            f"rank {rank}{where} waits {fmt_seconds(details['extra_wait'])} longer per step for data than the other "
            f"ranks {when}, and they wait for it inside the collective: it costs the job {fmt_pct(details['cost'])} of "
            f"its step time ({fmt_seconds(details['job_step_time'])} per step). Step times look alike while the whole "
            "job runs at its pace"
        )
    else:
        cause = (
            f"Its wait for data explains {fmt_pct(share)} of the gap: {pipeline}"
            if share is not None and share >= settings.drop_data_share
            else "Check the input pipeline on that host (data_time), thermal throttling or lowered clocks on the "
            "device (nvidia-smi / npu-smi), and its link to the others (a degraded NIC, HCCS or NVLink lane)"
        )
        what = (
            f"rank {rank}{where} is {fmt_ratio(details['slowdown'])} slower than the other ranks {when} "
            f"({fmt_seconds(details['step_time'])} vs {fmt_seconds(details['others_step_time'])} per step): in "
            "synchronous data parallel every rank waits for the slowest, so it costs the job "
            f"{fmt_pct(details['cost'])} of its step time"
        )
    why = (
        f"it cost the job at least {fmt_pct(settings.straggler_cost)} of its step time (straggler_cost) on "
        f"{fmt_pct(details['share_slow'])} of {details['points']} aligned steps (threshold rank_persist = "
        f"{fmt_pct(settings.rank_persist)} of rank_window = {settings.rank_window} steps)"
    )
    return Finding("straggler", "warning", start, explain(what, cause, why), end, rank, details, why)


def _divergence_finding(
    m: RankMatrix,
    rank: int,
    span: np.ndarray,
    details: dict[str, Any],
    places: Mapping[int, str] | None,
    settings: DiagnosisSettings,
) -> Finding:
    start, end = int(m.steps[span[0]]), int(m.steps[span[-1]])
    metric = details["metric"]
    name = "local grad norm" if metric == "grad_norm" else metric
    when = _when(start, end, details["ongoing"])
    direction = "above" if details["value"] > details["others"] else "below"
    what = (
        f"rank {rank}{_where(rank, places)}: {name} departs from the other ranks {when}: {fmt_num(details['value'])} "
        f"against their median {fmt_num(details['others'])} ({abs(details['z']):.0f} cross-rank sigmas {direction}, "
        f"on {fmt_pct(details['share_off'])} of {details['points']} aligned steps). Data-parallel ranks train the same "
        "model on different batches, so they differ only by batch noise; a rank that stays apart reads different "
        "data (a corrupt or mis-sharded shard, other preprocessing on that host), holds a replica out of sync, or "
        "computes wrong values on a faulty device"
    )
    why = (
        f"at least {settings.divergence_z:g} cross-rank sigmas and {fmt_pct(settings.divergence_rel)} from the other "
        f"ranks' median (divergence_z, divergence_rel) on {fmt_pct(details['share_off'])} of the aligned steps "
        f"(threshold rank_persist = {fmt_pct(settings.rank_persist)} of rank_window = {settings.rank_window})"
    )
    message = explain(what, "Check that rank's data shard and the device's health", why)
    return Finding("rank_divergence", "warning", start, message, end, rank, details, why)


def _where(rank: int, places: Mapping[int, str] | None) -> str:
    place = (places or {}).get(rank)
    return f" ({place})" if place else ""


def rank_places(metas: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """rank -> ``"host h, device d"`` from per-rank metadata dicts (``<stem>.meta.json``); unknown parts left out."""
    places: dict[int, str] = {}
    for meta in metas:
        rank = meta.get("rank")
        if isinstance(rank, bool) or not isinstance(rank, int):
            continue
        parts = []
        if meta.get("host"):
            parts.append(f"host {meta['host']}")
        if meta.get("device_id") is not None:
            parts.append(f"device {meta['device_id']}")
        if parts:
            places[rank] = ", ".join(parts)
    return places


def read_rank_places(run_dir: str | Path) -> dict[int, str]:
    """:func:`rank_places` of the ``*.meta.json`` files directly in ``run_dir`` (unreadable ones skipped)."""
    remote = sys.modules.get("monitor_cb.ingest.remote")  # loaded whenever a run on object storage was read
    if remote is not None and isinstance(run_dir, remote.RemotePath):
        return rank_places(remote.remote_metas(run_dir))
    metas = []
    for path in sorted(Path(run_dir).glob("*.meta.json")):
        try:
            data = read_json(path, META_CAP, root=run_dir)  # a FIFO, a device, a link out: skipped
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            metas.append(data)
    return rank_places(metas)


__all__ = [
    "DIVERGENCE_METRICS",
    "detect_rank_divergence",
    "detect_straggler",
    "detect_straggler_bands",
    "rank_places",
    "read_rank_places",
]
