"""Faults injected into real training curves, and how many logged points ``diagnose`` needs to flag them.

A healthy run from the real corpus (:mod:`monitor_cb.testing.corpus`) keeps everything before the
onset as it was logged, so any warning before the onset is a false alarm on a real curve, and the
fault after it sits on real noise, real schedules and real logging intervals:

* ``nan``: loss (and grad norm) NaN from the onset on;
* ``spike``: the loss jumps x3..x10, stays there for the ``GOAL_POINTS`` points it must be found in,
  then decays back over 5..40 points (positive losses only);
* ``eval_rise``: eval loss rising 5..15% of its level per evaluation from the onset (9+ evals);
* ``throughput_drop``: every interval between records longer, throughput down to 30..70% (runs with ``t``);
* ``lr_break``: the lr dropping to 0, freezing mid-schedule, or jumping x3..x10 (runs with ``lr``);
* ``slow_rank``: 8 ranks built from the run's loss and timing, one of them slowed (its data wait,
  which the others wait for, or its own step time) so the job loses 20..50% of its time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import column, train_rows
from monitor_cb.testing.corpus import RealRun, eval_rows

FAULTS: dict[str, str] = {  # fault -> the finding kind that must flag it
    "nan": "nan",
    "spike": "loss_spike",
    "eval_rise": "overfitting",
    "throughput_drop": "throughput_drop",
    "lr_break": "lr_anomaly",
    "slow_rank": "straggler",
}
GOAL_POINTS = 20
GOAL_EVALS = 6
MIN_POINTS = 60  # a run shorter than this takes no fault
WORLD = 8


@dataclass(frozen=True)
class Injected:
    """A real run with one fault: the frame, where the fault starts, and what must flag it."""

    base: str
    fault: str
    variant: str
    frame: pd.DataFrame
    onset_row: int
    onset_step: int
    kind: str
    points: np.ndarray  # row positions of the logged points (evaluations for eval_rise), ascending
    logged: dict[str, np.ndarray] | None = None  # per column, where it was logged (as RunStore says)
    rank: int | None = None


@dataclass(frozen=True)
class InjectedResult:
    """``delay``: logged points (evaluations for ``eval_rise``) after the onset until flagged; None = missed.

    ``early``: warnings/errors of any kind before the onset (false alarms on the real curve).
    """

    injected: Injected
    delay: int | None
    early: tuple[str, ...]
    finding: object | None

    @property
    def within_goal(self) -> bool:
        goal = GOAL_EVALS if self.injected.fault == "eval_rise" else GOAL_POINTS
        return self.delay is not None and self.delay <= goal


def inject(run: RealRun, fault: str, seed: int) -> Injected | None:
    """``run`` with ``fault`` injected at a random onset; None when the run cannot carry that fault."""
    loss = _col(run.frame, "loss")
    logged = run.logged.get("loss")
    rows = np.flatnonzero(train_rows(run.frame) if logged is None else logged)
    if rows.size < MIN_POINTS or not np.isfinite(loss[rows]).all():
        return None
    rng = np.random.default_rng(seed)
    return _INJECTORS[fault](run, rows, rng)


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    values = column(frame, name)
    return np.full(len(frame), np.nan) if values is None else values


def _onset(rows: np.ndarray, rng: np.random.Generator, after: int = 0) -> int | None:
    """A train-row index (into ``rows``) between 35% and the last ``GOAL_POINTS`` points, not before ``after``."""
    lo = max(int(0.35 * rows.size), 30, after)
    hi = rows.size - GOAL_POINTS - 1
    return None if hi <= lo else int(rng.integers(lo, hi))


def _made(
    run: RealRun, fault: str, variant: str, frame: pd.DataFrame, row: int, points: np.ndarray, rank: int | None = None
) -> Injected:
    step = int(frame["step"].iloc[row])
    logged = None if rank is not None else run.logged
    frame = frame.reset_index(drop=True)
    return Injected(run.name, fault, variant, frame, row, step, FAULTS[fault], points, logged, rank)


def _nan(run: RealRun, rows: np.ndarray, rng: np.random.Generator) -> Injected | None:
    i = _onset(rows, rng)
    if i is None:
        return None
    frame = run.frame.copy()
    after = rows[i:]
    frame.loc[after, "loss"] = np.nan
    if "grad_norm" in frame.columns:
        frame.loc[after, "grad_norm"] = np.nan
    return _made(run, "nan", "nan", frame, int(rows[i]), rows)


def _spike(run: RealRun, rows: np.ndarray, rng: np.random.Generator) -> Injected | None:
    loss = _col(run.frame, "loss")[rows]
    i = _onset(rows, rng)
    if i is None or not (loss > 0).all():
        return None
    factor, tau = float(rng.uniform(3, 10)), float(rng.uniform(5, 40))
    # the fault is a spike "that persists": it holds for the window it must be found in (a x3 spike
    # decaying over 5 points was back to x1.3 after 10 of them), then comes back
    k = np.maximum(np.arange(rows.size - i) - GOAL_POINTS, 0)
    frame = run.frame.copy()
    frame.loc[rows[i:], "loss"] = loss[i:] * (1 + (factor - 1) * np.exp(-k / tau))
    return _made(run, "spike", f"x{factor:.0f}/tau{tau:.0f}", frame, int(rows[i]), rows)


def _eval_rise(run: RealRun, rows: np.ndarray, rng: np.random.Generator) -> Injected | None:
    ev = eval_rows(run.frame)
    values = _col(run.frame, "eval_loss")[ev]
    ok = np.isfinite(values) & (values > 0)
    ev, values = ev[ok], values[ok]
    m = values.size
    lo = max(3, int(0.3 * m))
    if m - GOAL_EVALS < lo:
        return None
    j0 = int(rng.integers(lo, m - GOAL_EVALS + 1))
    rate = float(rng.uniform(0.05, 0.15))
    trend = pd.Series(values).rolling(3, center=True, min_periods=1).median().to_numpy()
    # the rise starts where the eval loss is: its smoothed level just before the onset (the median of the 3
    # evaluations before it sat well above a still-falling curve, a jump the detector was then asked to read)
    level = float(trend[j0 - 1])
    k = np.arange(1, m - j0 + 1)
    new = level * (1 + rate * k) * values[j0:] / trend[j0:]  # the run's own eval noise on a rising line
    frame = run.frame.copy()
    frame.loc[ev[j0:], "eval_loss"] = new
    return _made(run, "eval_rise", f"+{rate * 100:.0f}%/eval", frame, int(ev[j0]), ev)


def _throughput_drop(run: RealRun, rows: np.ndarray, rng: np.random.Generator) -> Injected | None:
    t = _col(run.frame, "t")[rows]
    if not np.isfinite(t).all() or np.any(np.diff(t) < 0):
        return None
    i = _onset(rows, rng)
    if i is None:
        return None
    share = float(rng.uniform(0.3, 0.7))
    dt = np.diff(t)
    dt[i - 1 :] /= share  # the interval ending at the onset point is the first slow one
    frame = run.frame.copy()
    frame.loc[rows, "t"] = t[0] + np.concatenate(([0.0], np.cumsum(dt)))
    return _made(run, "throughput_drop", f"to {share * 100:.0f}%", frame, int(rows[i]), rows)


def _lr_break(run: RealRun, rows: np.ndarray, rng: np.random.Generator) -> Injected | None:
    lr = _col(run.frame, "lr")[rows]
    if not np.isfinite(lr).all() or lr.max() <= 0:
        return None
    peak = int(np.argmax(lr))
    moving = np.abs(np.diff(lr)) > 1e-9 * lr.max()
    for _ in range(20):
        i = _onset(rows, rng, after=peak + 5)
        if i is None:
            return None
        if lr[i - 1] > 0.05 * lr.max():
            break
    else:
        return None
    variants = ["zero", "jump"] + (["frozen"] if moving[i - 20 : i].mean() > 0.9 else [])
    variant = str(rng.choice(variants))
    new = lr.copy()
    if variant == "zero":
        new[i:] = 0.0
    elif variant == "frozen":
        new[i:] = lr[i - 1]
    else:
        factor = float(rng.uniform(3, 10))
        new[i:] = lr[i:] * factor
        variant = f"jump x{factor:.0f}"
    frame = run.frame.copy()
    frame.loc[rows, "lr"] = new
    return _made(run, "lr_break", variant, frame, int(rows[i]), rows)


def _slow_rank(run: RealRun, rows: np.ndarray, rng: np.random.Generator) -> Injected | None:
    t = _col(run.frame, "t")[rows]
    steps = run.frame["step"].to_numpy()[rows]
    if not np.isfinite(t).all() or np.any(np.diff(t) <= 0) or np.any(np.diff(steps) <= 0):
        return None
    i = _onset(rows, rng)
    if i is None:
        return None
    n = rows.size
    per_step = np.diff(t) / np.diff(steps)
    step_time = np.concatenate(([per_step[0]], per_step))[:, None] * rng.lognormal(0, 0.03, (n, WORLD))
    data_time = step_time * rng.uniform(0.01, 0.08) * rng.lognormal(0, 0.2, (n, WORLD))
    loss = _col(run.frame, "loss")[rows][:, None] * rng.lognormal(0, 0.02, (n, WORLD))
    rank = int(rng.integers(0, WORLD))
    cost = float(rng.uniform(0.2, 0.5))
    variant = str(rng.choice(["input", "compute"]))
    extra = step_time[i:, rank] * cost / (1 - cost)
    if variant == "input":  # the rank waits for data; the others wait for it in the all-reduce
        data_time[i:, rank] += extra
        step_time[i:] += extra[:, None]
    else:
        step_time[i:, rank] += extra
    gap = np.diff(steps, prepend=steps[0] - 1)[:, None]
    t_rank = t[0] + np.cumsum(np.max(step_time, axis=1, keepdims=True) * gap, axis=0) + 1e-3 * np.arange(WORLD)
    frame = pd.DataFrame(
        {
            "step": np.repeat(steps, WORLD).astype(np.int64),
            "t": t_rank.ravel(),
            "rank": np.tile(np.arange(WORLD), n).astype(np.int64),
            "seg": np.ones(n * WORLD, dtype=np.int64),
            "loss": loss.ravel(),
            "step_time": step_time.ravel(),
            "data_time": data_time.ravel(),
        }
    )
    return _made(run, "slow_rank", f"{variant} cost {cost * 100:.0f}%", frame, i * WORLD, np.arange(n) * WORLD, rank)


_INJECTORS: dict[str, Callable[[RealRun, np.ndarray, np.random.Generator], Injected | None]] = {
    "nan": _nan,
    "spike": _spike,
    "eval_rise": _eval_rise,
    "throughput_drop": _throughput_drop,
    "lr_break": _lr_break,
    "slow_rank": _slow_rank,
}


# --------------------------------------------------------------------------- scoring
def score_injected(inj: Injected, settings=None) -> InjectedResult:
    """Smallest number of logged points (evaluations) past the onset after which ``diagnose`` flags the fault."""
    from monitor_cb.diagnosis.engine import diagnose

    frame = inj.frame
    steps = frame["step"].to_numpy()

    def run_on(rows: int) -> list:
        logged = None if inj.logged is None else {k: v[:rows] for k, v in inj.logged.items()}
        return diagnose(frame.iloc[:rows], settings, status="finished", logged=logged)

    early = tuple(sorted(f"{f.kind}:{f.severity}" for f in run_on(inj.onset_row) if f.level >= 1))
    marks = steps[inj.points]
    marks = marks[marks >= inj.onset_step]
    if marks.size == 0:
        return InjectedResult(inj, None, early, None)

    def hit(k: int):
        end = int(np.searchsorted(steps, marks[min(k, marks.size - 1)], side="right"))
        for f in run_on(end):
            span_end = f.end_step if f.end_step is not None else f.step
            same_rank = inj.rank is None or f.rank == inj.rank
            if f.kind == inj.kind and f.level >= 1 and span_end >= inj.onset_step and same_rank:
                return f
        return None

    # The watcher alerts when a finding first appears, even if a later prefix no longer holds it (as the live
    # view of the healthy runs counts false alarms), so the goal window is scanned prefix by prefix when the
    # prefix at its end holds no hit; a binary search (assuming a finding stays once found) finds the delay.
    goal = min(GOAL_EVALS if inj.fault == "eval_rise" else GOAL_POINTS, marks.size - 1)
    if hit(goal) is None:
        for k in range(goal):
            found = hit(k)
            if found is not None:
                return InjectedResult(inj, k, early, found)
        lo, hi = goal, marks.size - 1  # a miss at lo; a hit at hi, if any
    else:
        lo, hi = -1, goal  # a miss at lo (nothing before the onset), a hit at hi
    if hit(hi) is None:
        return InjectedResult(inj, None, early, None)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if hit(mid) is not None else (mid, hi)
    return InjectedResult(inj, hi, early, hit(hi))


__all__ = ["FAULTS", "GOAL_EVALS", "GOAL_POINTS", "Injected", "InjectedResult", "inject", "score_injected"]
