"""Labelled synthetic runs for evaluating the detectors: healthy curves and one injected failure.

The curves follow the recipe of :mod:`monitor_cb.demo.curves` (which ``monitor_cb.demo.samples`` uses too), built
here as frames in memory, in the shape ``RunStore.read(run_id).frame`` returns, so the evaluation can
make hundreds in seconds. A healthy run has warmup + cosine lr, a noisy power-law loss whose noise grows with the lr,
grad-norm bumps, noisy step time with the odd input-pipeline hiccup and a slow first (compiling)
step, and an eval every N logged points. :func:`inject` adds one failure at a given row and returns
its onset, so a benchmark can measure how many logged points a detector needs to flag it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor_cb.demo.curves import bumps, hiccups, random_loss, random_schedule

FAILURE_KINDS: tuple[str, ...] = (
    "nan",
    "grad_explosion",
    "loss_spike",
    "lr_anomaly",
    "throughput_drop",
    "overfitting",
    "sawtooth",
    "stalled",
    "plateau",
)


@dataclass(frozen=True)
class Labelled:
    """A synthetic run and what was injected into it.

    ``onset_row`` is the frame row where the failure begins (None for a healthy run); ``status``,
    ``now`` are what :func:`monitor_cb.diagnosis.diagnose` should be given.
    """

    frame: pd.DataFrame
    kind: str | None
    variant: str
    onset_row: int | None
    onset_step: int | None
    status: str
    now: float
    seed: int


def healthy_run(seed: int, n_points: int | None = None) -> pd.DataFrame:
    """A healthy run of ``n_points`` logged points (random 300..20,000, log-uniform, when None)."""
    rng = np.random.default_rng(seed)
    schedule = random_schedule(rng, n_points, 20_000, floors=(0.0, 0.01, 0.1))
    steps, log_every, peak_lr, lr = schedule.steps, schedule.log_every, schedule.peak, schedule.lr
    n = steps.size

    curve = random_loss(rng, lr)
    clean, floor_loss, scale = curve.clean, curve.floor, curve.scale
    noise = rng.uniform(0.015, 0.06) * (1 + 2 * lr / peak_lr) / np.sqrt(log_every) ** 0.5
    loss = clean * np.exp(noise * rng.standard_normal(n))

    grad = (0.3 + 2.0 * (clean - floor_loss) / scale) * rng.lognormal(0, rng.uniform(0.08, 0.25), n)
    bump = np.zeros(n)
    for at, profile in bumps(rng, n):  # natural bumps: up to 5x, decaying
        bump[at : at + profile.size] += profile
    grad *= 1 + bump

    base_step = rng.uniform(0.05, 0.6)
    step_time = base_step * rng.lognormal(0, rng.uniform(0.02, 0.08), n)
    data_time = base_step * rng.uniform(0.01, 0.08) * rng.lognormal(0, 0.2, n)
    extra = hiccups(rng, n, base_step)  # an input-pipeline hiccup: one slow step
    data_time, step_time = data_time + extra, step_time + extra
    step_time[0] *= rng.uniform(5, 30)  # graph compilation
    batch = int(rng.choice([16, 32, 64, 256]))
    throughput = batch / step_time

    eval_every = int(rng.choice([10, 20, 50, 100, 200]))
    eval_every = max(5, min(eval_every, n // 20))  # at least 20 evaluations
    is_eval = (np.arange(1, n + 1) % eval_every) == 0
    eval_loss = np.where(is_eval, clean * 1.04 * np.exp(rng.uniform(0.003, 0.012) * rng.standard_normal(n)), np.nan)
    eval_acc = np.where(is_eval, np.clip(1.0 - eval_loss / (floor_loss + scale), 0, 1), np.nan)
    eval_pause = np.where(is_eval, base_step * log_every * rng.uniform(2, 20), 0.0)
    t = 1.76e9 + rng.uniform(0, 1e7) + np.cumsum(step_time * log_every) + np.cumsum(np.roll(eval_pause, 1))
    return pd.DataFrame(
        {
            "step": steps.astype(np.int64),
            "t": t,
            "rank": np.zeros(n, dtype=np.int64),
            "seg": np.ones(n, dtype=np.int64),
            "loss": loss,
            "lr": lr,
            "grad_norm": grad,
            "throughput": throughput,
            "step_time": step_time,
            "data_time": data_time,
            "eval_loss": eval_loss,
            "eval_accuracy": eval_acc,
        }
    )


def labelled_run(kind: str | None, seed: int, n_points: int | None = None) -> Labelled:
    """A healthy run (``kind=None``) or one with failure ``kind`` injected at a random row."""
    frame = healthy_run(seed, n_points)
    rng = np.random.default_rng(seed + 7919)
    now = float(frame["t"].iloc[-1]) + float(np.median(np.diff(frame["t"].to_numpy()[-50:])))
    if kind is None:
        return Labelled(frame, None, "healthy", None, None, "finished", now, seed)
    if kind not in _INJECTORS:
        raise ValueError(f"unknown failure kind {kind!r}; expected one of {FAILURE_KINDS}")
    frame = frame.copy()
    onset, variant, status, now = _INJECTORS[kind](frame, rng, now)
    end = frame.attrs.pop("_end", len(frame))
    frame = frame.iloc[:end].reset_index(drop=True)
    return Labelled(frame, kind, variant, onset, int(frame["step"].iloc[onset]), status, now, seed)


# --------------------------------------------------------------------------- injectors
# Each changes ``frame`` in place from a random onset row and returns (onset, variant, status, now).
Injector = Callable[[pd.DataFrame, np.random.Generator, float], tuple[int, str, str, float]]


def _onset(frame: pd.DataFrame, rng: np.random.Generator, lo: float = 0.15, hi: float = 0.85) -> int:
    n = len(frame)
    return int(rng.integers(max(int(n * lo), 60), max(int(n * hi), 61)))


def _nan(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    at = _onset(frame, rng, 0.05, 0.95)
    frame.loc[at:, "loss"] = np.nan
    frame.loc[at:, "grad_norm"] = np.inf
    frame.attrs["_end"] = at + 1  # the guard stops the run there
    return at, "stop", "stopped", now


def _grad_explosion(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    at = _onset(frame, rng)
    n = len(frame)
    if rng.random() < 0.5:  # diverging: grad norm grows exponentially, the loss follows, then NaN
        length = int(rng.integers(4, 15))
        growth = np.exp(np.arange(1, length + 1) * np.log(rng.uniform(100, 1e4)) / length)
        end = min(at + length, n)
        frame.loc[at : end - 1, "grad_norm"] *= growth[: end - at]
        frame.loc[at + 2 : end - 1, "loss"] *= np.linspace(1.1, 3.0, max(end - at - 2, 0))
        if end < n:
            frame.loc[end, ["loss", "grad_norm"]] = [np.nan, np.inf]
            frame.attrs["_end"] = end + 1
        return at, "diverging", "failed", now
    width = int(rng.integers(1, 4))  # a short burst that recovers
    frame.loc[at : at + width - 1, "grad_norm"] *= rng.uniform(30, 300)
    return at, "burst", "finished", now


def _loss_spike(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    at = _onset(frame, rng)
    width = int(rng.integers(1, 6))
    decay = np.exp(-np.arange(width) / max(width, 1))
    frame.loc[at : at + width - 1, "loss"] *= 1 + (rng.uniform(2, 5) - 1) * decay[: min(width, len(frame) - at)]
    return at, f"width{width}", "finished", now


def _lr_anomaly(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    lr = frame["lr"].to_numpy()
    peak = int(np.argmax(lr))
    n = len(frame)
    variant = str(rng.choice(["zero", "frozen", "jump"]))
    # in the first half of the decay, where the schedule is clearly moving
    at = int(rng.integers(peak + (n - peak) // 10 + 20, peak + (n - peak) // 2))
    if variant == "zero":
        frame.loc[at:, "lr"] = 0.0
    elif variant == "frozen":
        frame.loc[at:, "lr"] = lr[at - 1]
    else:  # the scheduler restarted or the lr was scaled by mistake
        frame.loc[at:, "lr"] = lr[at:] * rng.uniform(3, 10)
    return at, variant, "finished", now


def _throughput_drop(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    at = _onset(frame, rng)
    factor = rng.uniform(1.8, 7.0)
    old = frame["step_time"].to_numpy()
    extra = old[at:] * (factor - 1)
    variant = str(rng.choice(["input", "compute"]))
    frame.loc[at:, "step_time"] = old[at:] + extra
    frame.loc[at:, "throughput"] = frame["throughput"].to_numpy()[at:] / factor
    if variant == "input":
        frame.loc[at:, "data_time"] = frame["data_time"].to_numpy()[at:] + extra
    _retime(frame, old)
    return at, variant, "finished", float(frame["t"].iloc[-1]) + 1.0


def _overfitting(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    evals = np.flatnonzero(frame["eval_loss"].notna().to_numpy())
    first = int(rng.integers(len(evals) // 3, max(len(evals) - 12, len(evals) // 3 + 1)))
    at = int(evals[first])
    eval_loss = frame["eval_loss"].to_numpy()
    level = eval_loss[at]
    rise = rng.uniform(0.01, 0.04)  # relative rise per evaluation after the best one
    k = np.arange(len(evals) - first)
    target = level * (1 + rise * k) * np.exp(0.005 * rng.standard_normal(k.size))
    frame.loc[evals[first:], "eval_loss"] = np.maximum(target, eval_loss[evals[first:]])
    return at, f"rise{rise * 100:.0f}%", "finished", now


def _sawtooth(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    at = _onset(frame, rng)
    period = int(rng.integers(2, 5))  # the detector looks for periods up to window/repeats = 4 points
    swing = rng.uniform(0.4, 1.5)  # peak-to-peak, relative to the step time
    phase = (np.arange(len(frame) - at) % period) / period
    old = frame["step_time"].to_numpy()
    new = old.copy()
    new[at:] *= 1 + swing * phase
    frame["step_time"] = new
    frame["throughput"] = frame["throughput"].to_numpy() * old / new
    _retime(frame, old)
    return at, f"period{period}", "finished", now


def _stalled(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    at = _onset(frame, rng, 0.3, 0.95)
    frame.attrs["_end"] = at + 1
    t = frame["t"].to_numpy()
    interval = float(np.median(np.diff(t[max(0, at - 100) : at + 1])))
    return at, "hung", "running", float(t[at]) + interval  # ``now`` is advanced by the benchmark


def _plateau(frame: pd.DataFrame, rng: np.random.Generator, now: float) -> tuple[int, str, str, float]:
    """The loss never gets going: its noise around the level of its first points, for the whole run.

    What the real runs' labeller calls a plateau (``plateau_stuck``) is no progress at a trivial level; a loss
    that goes flat after its descent is convergence (no note). The noise is the run's own (its relative
    spread around its rolling median, away from the fast first drop, which that median lags).
    """
    loss = frame["loss"].to_numpy()
    level = float(np.median(loss[:10]))
    tail = np.log(loss / _smooth(loss))[len(loss) // 2 :]
    spread = float(1.4826 * np.median(np.abs(tail - np.median(tail))))
    frame["loss"] = level * rng.lognormal(0.0, spread, len(loss))
    return 0, "flat_from_start", "finished", now


def _smooth(values: np.ndarray, window: int = 51) -> np.ndarray:
    return pd.Series(values).rolling(window, center=True, min_periods=1).median().to_numpy()


def _retime(frame: pd.DataFrame, old_step_time: np.ndarray) -> None:
    """Recompute ``t`` after step times changed: each interval grows by the extra time of its steps."""
    t = frame["t"].to_numpy()
    steps = frame["step"].to_numpy()
    log_every = int(steps[1] - steps[0]) if len(steps) > 1 else 1
    dt = np.diff(t, prepend=t[0])
    extra = (frame["step_time"].to_numpy() - old_step_time) * log_every
    extra[0] = 0.0
    frame["t"] = t[0] + np.cumsum(dt + extra)


_INJECTORS: dict[str, Injector] = {
    "nan": _nan,
    "grad_explosion": _grad_explosion,
    "loss_spike": _loss_spike,
    "lr_anomaly": _lr_anomaly,
    "throughput_drop": _throughput_drop,
    "overfitting": _overfitting,
    "sawtooth": _sawtooth,
    "stalled": _stalled,
    "plateau": _plateau,
}


# --------------------------------------------------------------------------- scoring
@dataclass(frozen=True)
class Detection:
    """How a labelled run was diagnosed.

    ``delay`` is the number of logged points after the onset that ``diagnose`` needed to see before
    it flagged the injected kind (0 = on the onset point itself); for ``stalled`` it is the seconds
    of silence needed. ``early`` lists warning/error findings of any kind that began before the onset.
    """

    detected: bool
    delay: float | None
    early: tuple[str, ...]
    finding: object | None


_TOLERANCE_ROWS = 32  # a finding may place its start this far before the true onset (window-based detectors)


def score(run: Labelled, settings=None, max_delay: int = 100_000) -> Detection:
    """Find the smallest prefix of ``run`` past its onset on which ``diagnose`` flags the injected kind."""
    from monitor_cb.diagnosis.engine import diagnose  # local: synthetic data must not need the engine

    full = diagnose(run.frame, settings, status=run.status, now=run.now)
    early = tuple(f.kind for f in full if f.level >= 1 and run.onset_step is not None and _before(f, run))
    if run.kind is None:
        return Detection(False, None, tuple(f.kind for f in full if f.level >= 1), None)
    if run.kind == "stalled":
        return _score_stalled(run, settings, early)
    onset = run.onset_row
    n = len(run.frame)

    def hit(k: int):
        part = run.frame.iloc[: min(onset + 1 + k, n)]
        return _match(diagnose(part, settings, status=run.status, now=run.now), run)

    last_miss, k = -1, 0
    while True:
        found = hit(k)
        if found is not None or onset + 1 + k >= n or k >= max_delay:
            break
        last_miss, k = k, max(1, 2 * k)
    if found is None:
        return Detection(False, None, early, None)
    lo, hi = last_miss, k  # miss at lo, hit at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if hit(mid) is not None:
            hi = mid
        else:
            lo = mid
    return Detection(True, float(hi), early, hit(hi))


def _match(findings: list, run: Labelled):
    floor_row = max(run.onset_row - _TOLERANCE_ROWS, 0)
    floor_step = int(run.frame["step"].iloc[floor_row])
    need = 0 if run.kind == "plateau" else 1
    for f in findings:
        if f.kind == run.kind and f.level >= need and (f.end_step or f.step) >= floor_step:
            return f
    return None


def _before(f, run: Labelled) -> bool:
    floor_row = max(run.onset_row - _TOLERANCE_ROWS, 0)
    return (f.end_step or f.step) < int(run.frame["step"].iloc[floor_row])


def _score_stalled(run: Labelled, settings, early: tuple[str, ...]) -> Detection:
    """Seconds of silence after the last record before ``stalled`` is reported."""
    from monitor_cb.diagnosis.engine import diagnose

    last = float(run.frame["t"].iloc[-1])
    lo, hi = 0.0, 7 * 86400.0

    def hit(silence: float):
        found = diagnose(run.frame, settings, status="running", now=last + silence)
        return next((f for f in found if f.kind == "stalled"), None)

    if hit(hi) is None:
        return Detection(False, None, early, None)
    while hi - lo > 0.5:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if hit(mid) is not None else (mid, hi)
    return Detection(True, hi, early, hit(hi))
