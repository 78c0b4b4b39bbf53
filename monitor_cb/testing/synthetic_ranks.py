"""Labelled synthetic multi-rank runs: healthy data-parallel ranks, or one slow or one diverging rank.

Frames come in the shape ``RunStore.read(run_id).frame`` returns for a multi-rank run (one row per step and
rank, sorted by step then rank). A healthy run has one training trend shared by every rank (the model
is the same), per-rank batch noise on loss and local grad norm, and step times that are correlated
across ranks (a common per-step factor: contention, collective waits, slow checkpoint steps on every
rank) times a small fixed per-rank speed difference (hardware variation, a few percent) and per-rank
noise, with the odd single-step hiccup on a random rank and a slow step on rank 0 at each checkpoint
save. :func:`labelled_ranks_run` injects one ``straggler`` or ``rank_divergence`` at a random step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor_cb.demo.curves import bumps, hiccups, random_loss, random_schedule

RANK_FAILURE_KINDS: tuple[str, ...] = ("straggler", "rank_divergence")


@dataclass(frozen=True)
class LabelledRanks:
    """A merged multi-rank frame and what was injected (``kind`` None: healthy).

    ``onset_step`` is the first step of the failure, ``onset_point`` its position among the run's
    logged steps (0-based), ``rank`` the rank it was injected on, ``size`` its strength (slowdown
    factor for a straggler, final departure in cross-rank sigmas for a divergence).
    """

    frame: pd.DataFrame
    kind: str | None
    variant: str
    rank: int | None
    onset_point: int | None
    onset_step: int | None
    size: float | None
    seed: int
    world: int


@dataclass
class _Ranks:
    """Per-rank arrays, shape (n_points, world), before they become a frame."""

    steps: np.ndarray
    loss: np.ndarray
    loss_sigma: np.ndarray  # the per-step cross-rank noise of the loss (absolute)
    grad: np.ndarray
    grad_sigma: float  # cross-rank noise of log(grad)
    step_time: np.ndarray
    data_time: np.ndarray
    lr: np.ndarray
    t0: float
    batch: int


def healthy_ranks(seed: int, n_points: int | None = None, world: int = 8) -> _Ranks:
    """The arrays of a healthy run (``n_points`` random 300..5,000, log-uniform, when None)."""
    rng = np.random.default_rng(seed)
    schedule = random_schedule(rng, n_points, 5_000)
    steps, log_every, lr = schedule.steps, schedule.log_every, schedule.lr
    n = steps.size
    curve = random_loss(rng, lr)
    clean, floor_loss, scale = curve.clean, curve.floor, curve.scale

    # one shared per-step wobble (every rank sees the same model), then per-rank batch noise
    rel = rng.uniform(0.015, 0.06) / np.sqrt(log_every) ** 0.5
    common = np.exp(0.5 * rel * rng.standard_normal(n))[:, None]
    loss = clean[:, None] * common * np.exp(rel * rng.standard_normal((n, world)))
    loss_sigma = clean * rel

    grad_sigma = float(rng.uniform(0.08, 0.25))
    grad_level = (0.3 + 2.0 * (clean - floor_loss) / scale)[:, None]
    grad = grad_level * np.exp(0.5 * grad_sigma * rng.standard_normal((n, 1)))
    grad = grad * np.exp(grad_sigma * rng.standard_normal((n, world)))
    for at, profile in bumps(rng, n, decay=4.0):  # bumps felt by every rank
        grad[at : at + profile.size] *= 1 + profile[:, None]

    base = rng.uniform(0.05, 0.6)
    shared = np.exp(rng.uniform(0.02, 0.1) * rng.standard_normal((n, 1)))  # correlated across ranks
    speed = np.exp(rng.uniform(0.0, 0.04) * rng.standard_normal((1, world)))  # hardware variation
    own = np.exp(rng.uniform(0.02, 0.08) * rng.standard_normal((n, world)))
    step_time = base * shared * speed * own
    data_time = base * rng.uniform(0.01, 0.08) * np.exp(0.2 * rng.standard_normal((n, world)))
    extra = hiccups(rng, (n, world), base)  # one slow step on one rank (an input hiccup)
    data_time, step_time = data_time + extra, step_time + extra
    ckpt_every = int(rng.choice([50, 100, 200, 500]))
    step_time[ckpt_every - 1 :: ckpt_every, 0] += base * rng.uniform(2, 10)  # rank 0 saves the checkpoint
    step_time[0] *= rng.uniform(5, 30)  # graph compilation, on every rank
    return _Ranks(
        steps,
        loss,
        loss_sigma,
        grad,
        grad_sigma,
        step_time,
        data_time,
        lr,
        1.76e9 + rng.uniform(0, 1e7),
        int(rng.choice([16, 32, 64])),
    )


def to_frame(r: _Ranks) -> pd.DataFrame:
    """The merged frame: rows by step then rank; ``t`` per rank from its own step times."""
    n, world = r.step_time.shape
    log_every = int(r.steps[1] - r.steps[0]) if n > 1 else 1
    t = r.t0 + np.cumsum(np.max(r.step_time, axis=1) * log_every)[:, None] + 1e-3 * np.arange(world)[None, :]
    ranks = np.broadcast_to(np.arange(world), (n, world))
    return pd.DataFrame(
        {
            "step": np.repeat(r.steps, world).astype(np.int64),
            "t": t.ravel(),
            "rank": ranks.ravel().astype(np.int64),
            "seg": np.ones(n * world, dtype=np.int64),
            "loss": r.loss.ravel(),
            "lr": np.repeat(r.lr, world),
            "grad_norm": r.grad.ravel(),
            "throughput": (r.batch / r.step_time).ravel(),
            "step_time": r.step_time.ravel(),
            "data_time": r.data_time.ravel(),
        }
    )


def healthy_ranks_run(seed: int, n_points: int | None = None, world: int = 8) -> pd.DataFrame:
    """A healthy merged ``world``-rank frame."""
    return to_frame(healthy_ranks(seed, n_points, world))


def labelled_ranks_run(
    kind: str | None,
    seed: int,
    n_points: int | None = None,
    world: int = 8,
    *,
    variant: str | None = None,
    size: float | None = None,
) -> LabelledRanks:
    """A healthy run (``kind=None``) or one with ``straggler`` / ``rank_divergence`` injected on one rank.

    ``variant`` and ``size`` (slowdown factor; departure in cross-rank sigmas) default to random draws
    (straggler: compute / throttle / input / sync_input, 1.4..3x; divergence: loss_jump / loss_drift /
    grad, 6..20 sigmas). ``sync_input``: the rank waits for data and the others wait for it in the
    all-reduce, so every rank's step time grows alike and only ``data_time`` tells them apart.
    """
    r = healthy_ranks(seed, n_points, world)
    if kind is None:
        return LabelledRanks(to_frame(r), None, "healthy", None, None, None, None, seed, world)
    if kind not in RANK_FAILURE_KINDS:
        raise ValueError(f"unknown failure kind {kind!r}; expected one of {RANK_FAILURE_KINDS}")
    rng = np.random.default_rng(seed + 104_729)
    n = r.step_time.shape[0]
    at = int(rng.integers(max(int(0.15 * n), 40), max(int(0.85 * n), 41)))
    rank = int(rng.integers(0, world))
    inject = _straggler if kind == "straggler" else _divergence
    variant, size = inject(r, rng, at, rank, variant, size)
    return LabelledRanks(to_frame(r), kind, variant, rank, at, int(r.steps[at]), size, seed, world)


def _ramp(n: int, at: int, length: int) -> np.ndarray:
    """0 before ``at``, rising linearly to 1 over ``length`` points, then 1."""
    return np.clip((np.arange(n) - at + 1) / max(length, 1), 0, 1)


def _straggler(
    r: _Ranks, rng: np.random.Generator, at: int, rank: int, variant: str | None, size: float | None
) -> tuple[str, float]:
    n = r.step_time.shape[0]
    factor = float(rng.uniform(1.4, 3.0)) if size is None else float(size)
    variant = str(rng.choice(["compute", "throttle", "input", "sync_input"])) if variant is None else variant
    # thermal throttling: clocks drop over a while; otherwise slow from the onset
    ramp = int(rng.integers(10, 60)) if variant == "throttle" else 1
    grow = _ramp(n, at, ramp)
    old = r.step_time[:, rank].copy()
    extra = old * (factor - 1) * grow
    if variant == "sync_input":  # waits for data; the others wait for it in the all-reduce: equal step times
        r.data_time[:, rank] += extra
        r.step_time += extra[:, None]
        return variant, factor
    r.step_time[:, rank] = old + extra
    if variant == "input":  # the extra time is spent waiting for data
        r.data_time[:, rank] += extra
    return variant, factor


def _divergence(
    r: _Ranks, rng: np.random.Generator, at: int, rank: int, variant: str | None, size: float | None
) -> tuple[str, float]:
    n = r.loss.shape[0]
    variant = str(rng.choice(["loss_jump", "loss_drift", "grad"])) if variant is None else variant
    sigmas = float(rng.uniform(6, 20)) if size is None else float(size)  # how far it ends up, in cross-rank sigmas
    if variant == "loss_jump":  # e.g. a corrupt shard from here on
        r.loss[at:, rank] += sigmas * r.loss_sigma[at:]
    elif variant == "loss_drift":  # the rank's data drifts away over 20..200 points
        r.loss[:, rank] += sigmas * r.loss_sigma * _ramp(n, at, int(rng.integers(20, 200)))
    else:  # local grad norm off by a factor (a faulty device, a replica out of sync)
        sign = 1.0 if rng.random() < 0.7 else -1.0
        r.grad[at:, rank] *= np.exp(sign * sigmas * r.grad_sigma)
    return variant, sigmas


__all__ = [
    "RANK_FAILURE_KINDS",
    "LabelledRanks",
    "healthy_ranks_run",
    "labelled_ranks_run",
]


# --------------------------------------------------------------------------- scoring
@dataclass(frozen=True)
class RankDetection:
    """How a labelled run was diagnosed by the rank detectors.

    ``delay``: logged points after the onset the detectors needed to see before flagging the injected
    kind on the injected rank (0 = on the onset point). ``false``: findings of either rank kind that are
    not the injected one (another rank, another kind, or before the onset).
    """

    detected: bool
    delay: int | None
    false: tuple[str, ...]
    finding: object | None


def rank_findings(frame: pd.DataFrame, settings=None) -> list:
    """The findings of the rank detectors alone (what ``diagnose`` adds for a multi-rank frame)."""
    from monitor_cb.diagnosis.engine import RANK_DETECTORS
    from monitor_cb.diagnosis.settings import DiagnosisSettings

    settings = settings or DiagnosisSettings()
    return [f for d in RANK_DETECTORS.values() for f in d(frame, settings)]


def score_ranks(run: LabelledRanks, settings=None) -> RankDetection:
    """Smallest prefix past the onset (in logged points) on which the injected kind is flagged on its rank."""
    full = rank_findings(run.frame, settings)
    if run.kind is None:
        return RankDetection(False, None, tuple(f"{f.kind}@rank{f.rank}" for f in full), None)
    false = tuple(f"{f.kind}@rank{f.rank}" for f in full if not _is_hit(f, run))
    step_col = run.frame["step"].to_numpy()
    steps = np.unique(step_col)
    onset = run.onset_point

    def hit(k: int):
        end = np.searchsorted(step_col, steps[min(onset + k, steps.size - 1)], side="right")
        return next((f for f in rank_findings(run.frame.iloc[:end], settings) if _is_hit(f, run)), None)

    last = steps.size - 1 - onset
    if hit(last) is None:
        return RankDetection(False, None, false, None)
    lo, hi = -1, last  # a miss at lo (none before the onset), a hit at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if hit(mid) is not None else (mid, hi)
    return RankDetection(True, hi, false, hit(hi))


def _is_hit(f, run: LabelledRanks) -> bool:
    return f.kind == run.kind and f.rank == run.rank and (f.end_step or f.step) >= run.onset_step


__all__ += ["RankDetection", "rank_findings", "score_ranks"]
