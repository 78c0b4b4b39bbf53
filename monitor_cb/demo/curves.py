"""One recipe for healthy training curves, shared by the sample runs and the detectors' test generators.

A run learns as fast as its learning rate lets it: the lr warms up linearly and decays along a
cosine (:func:`warmup_cosine`), and the loss falls along a power law of the lr's running integral
(:func:`power_law_loss`: a slow start in warmup, a flat tail). The gradient norm has the odd
decaying bump (:func:`bumps`) and the input pipeline the odd slow step (:func:`hiccups`).

Users: :mod:`monitor_cb.demo.samples` (files for the dashboard's embedded default),
:mod:`monitor_cb.testing.synthetic` (labelled single-rank runs) and
:mod:`monitor_cb.testing.synthetic_ranks` (8-rank runs). Each picks its own parameters and noise;
the functions that take a generator draw from it in a fixed order, so a seed gives the same run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Schedule:
    """The logged steps and the lr at each: linear warmup to ``peak``, then a cosine down to ``floor``."""

    steps: np.ndarray
    log_every: int
    peak: float
    warmup: int
    floor: float

    @property
    def lr(self) -> np.ndarray:
        return warmup_cosine(self.steps, self.peak, self.warmup, self.floor)


def warmup_cosine(
    steps: np.ndarray, peak: float, warmup: int, floor: float = 0.0, total: int | None = None
) -> np.ndarray:
    """The lr at ``steps``: ``peak * step / warmup`` up to ``warmup``, then a cosine to ``floor`` at ``total``.

    ``total`` defaults to the last step.
    """
    total = int(steps[-1]) if total is None else int(total)
    progress = np.clip((steps - warmup) / max(total - warmup, 1), 0, 1)
    return np.where(
        steps <= warmup, peak * steps / warmup, floor + (peak - floor) * 0.5 * (1 + np.cos(np.pi * progress))
    )


def random_schedule(
    rng: np.random.Generator, n_points: int | None, max_points: int, floors: tuple[float, ...] | None = None
) -> Schedule:
    """A random schedule: ``n_points`` logged points (log-uniform 300..``max_points`` when None), logged every
    1..10 steps, a peak lr log-uniform in 1e-4..3e-3, warmup 1..10% of the run, and the floor a random
    fraction (``floors``) of the peak (0 when ``floors`` is None)."""
    n = int(n_points) if n_points is not None else int(np.exp(rng.uniform(np.log(300), np.log(max_points))))
    log_every = int(rng.choice([1, 1, 2, 5, 10]))
    steps = np.arange(1, n + 1) * log_every
    peak = float(np.exp(rng.uniform(np.log(1e-4), np.log(3e-3))))
    warmup = int(steps[-1] * rng.uniform(0.01, 0.1)) + 1
    floor = peak * float(rng.choice(list(floors))) if floors is not None else 0.0
    return Schedule(steps, log_every, peak, warmup, floor)


def power_law_loss(work: np.ndarray, floor: float, scale: float, exponent: float) -> np.ndarray:
    """The noise-free loss after ``work`` (the lr's running integral, scaled).

    ``floor + scale * (1 + work) ** -exponent``.
    """
    return floor + scale * (1 + work) ** -exponent


@dataclass(frozen=True)
class LossCurve:
    """A random noise-free loss curve and the parameters it was drawn with."""

    clean: np.ndarray
    floor: float
    scale: float


def random_loss(rng: np.random.Generator, lr: np.ndarray) -> LossCurve:
    """A noise-free loss for the lr schedule: 50..400 units of work over the run, floor 0.5..2.5, a start
    3..9 above it, exponent 0.4..0.8."""
    work = np.cumsum(lr) / max(lr.sum(), 1e-12) * rng.uniform(50, 400)
    floor, scale = rng.uniform(0.5, 2.5), rng.uniform(3.0, 9.0)
    return LossCurve(power_law_loss(work, floor, scale, rng.uniform(0.4, 0.8)), float(floor), float(scale))


def bumps(
    rng: np.random.Generator,
    n: int,
    *,
    rate: float = 1.5 / 1000,
    height: tuple[float, float] = (0.5, 4.0),
    decay: float | tuple[float, float] = (2.0, 8.0),
    max_length: int = 30,
) -> Iterator[tuple[int, np.ndarray]]:
    """Where the gradient norm bumps (at ``rate`` per point) and each bump's profile: ``height`` times an
    exponential decay over ``decay`` points (a fixed value, or a range drawn from), at most ``max_length`` long.

    Yields ``(start, profile)``; the caller adds it (``norm * (1 + bumps)``) or multiplies it in.
    """
    for at in np.flatnonzero(rng.random(n) < rate):
        length = min(max_length, n - int(at))
        size = rng.uniform(*height)
        tau = rng.uniform(*decay) if isinstance(decay, tuple) else decay
        yield int(at), size * np.exp(-np.arange(length) / tau)


def hiccups(
    rng: np.random.Generator, shape: int | tuple[int, ...], base: float, rate: float = 3.0 / 1000
) -> np.ndarray:
    """Extra seconds of the odd slow step (an input pipeline hiccup, at ``rate``): 1..6 times ``base``, else 0."""
    slow = rng.random(shape) < rate
    return slow * base * rng.uniform(1, 6, shape)


__all__ = [
    "LossCurve",
    "Schedule",
    "bumps",
    "hiccups",
    "power_law_loss",
    "random_loss",
    "random_schedule",
    "warmup_cosine",
]
