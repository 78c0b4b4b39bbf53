"""Synthetic but realistic finished runs, written instantly in the exact on-disk format.

Used as the dashboard's embedded default (no MindSpore, no training) and by tests. A run is
described by a frozen :class:`RunSpec`; curves are drawn from a seeded generator (warmup + cosine
lr, noisy power-law loss, grad-norm bumps, noisy throughput, periodic eval). Failures are injected
by ``faults``: small callables applied to every record, so a later diagnosis task can add its own
(a NaN, a spike, a stall) without touching the generator.

Timestamps lie in the past, so lines are encoded here with :func:`monitor_cb.record.encode_record`
in the byte format of :class:`monitor_cb.writer.MetricsWriter` (which stamps ``t`` with the
current time) and the metadata file is written the way the writer writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class EndRun:
    """Returned by a fault to end the run: ``record`` (if any) is written, then ``event``, then the status."""

    status: str  # "failed" or "stopped"
    reason: str
    record: dict[str, Any] | None = None
    event: str | None = None  # e.g. "guard_stop": a ``{"event": ..., "reason": ...}`` record is written


# A fault sees every record (train and eval) before it is written and returns it (changed or not)
# or an EndRun. It must not keep state between runs: build a new one per spec.
Fault = Callable[[int, dict[str, Any]], "dict[str, Any] | EndRun"]


@dataclass(frozen=True)
class RunSpec:
    """Everything that decides one synthetic run; same spec and ``now`` give the same files.

    Args:
        name: run directory name under the root.
        steps: planned training steps (``total_steps`` in the metadata).
        lr: peak learning rate (after linear warmup, then cosine to ``min_lr_ratio * lr``).
        batch_size: per-rank batch; sets ``samples`` and scales throughput.
        seed: noise seed.
        warmup_steps: linear warmup length; None = 5% of ``steps``.
        log_every: a train record every this many steps.
        eval_every: an eval record (``eval_loss``, ``eval_accuracy``) every this many steps; 0 = none.
        steps_per_epoch: for the ``epoch`` key.
        seq_length: when set, ``tokens_per_s`` is logged too.
        loss_components: names of loss parts (``("ce", "aux")`` logs ``loss_ce``, ``loss_aux``).
        step_time: mean seconds per step; sets ``t`` and throughput.
        start_time: Unix time of the first record; None = the run ended 10 minutes before ``now``.
        faults: injected failures, applied in order to every record.
    """

    name: str
    steps: int = 3000
    lr: float = 3e-4
    batch_size: int = 32
    seed: int = 0
    warmup_steps: int | None = None
    min_lr_ratio: float = 0.1
    log_every: int = 1
    eval_every: int = 200
    steps_per_epoch: int = 1000
    seq_length: int | None = None
    loss_components: tuple[str, ...] = ()
    step_time: float = 0.25
    start_time: float | None = None
    faults: tuple[Fault, ...] = field(default=(), compare=False)


def nan_at(step: int, key: str = "loss", end: str | None = "stopped") -> Fault:
    """A fault making ``key`` NaN (and ``grad_norm`` inf) at ``step``.

    With ``end="stopped"`` the run ends there as the guard would stop it (a ``guard_stop`` event and
    reason ``"stopped: non-finite loss at step N"``); ``"failed"`` ends it as a crash; None lets
    it continue with NaN from then on.
    """
    raise NotImplementedError


def spike_at(step: int, key: str = "loss", factor: float = 10.0, width: int = 1) -> Fault:
    """A fault multiplying ``key`` by ``factor`` for ``width`` steps from ``step`` (a recoverable spike)."""
    raise NotImplementedError


def stop_at(step: int, reason: str = "KeyboardInterrupt") -> Fault:
    """A fault ending the run as ``stopped`` at ``step`` (a user interrupt)."""
    raise NotImplementedError


def iter_records(spec: RunSpec, now: float | None = None) -> Iterator[dict[str, Any]]:
    """The run's records in file order (decoded floats, NaN as ``float('nan')``), faults applied.

    An ``EndRun`` from a fault ends the iteration; the outcome is what :func:`write_run` stores.
    """
    raise NotImplementedError


def write_run(root: str | Path, spec: RunSpec, now: float | None = None) -> Path:
    """Write ``root/spec.name/metrics.jsonl`` and ``metrics.meta.json`` (final status); return the run directory.

    Existing files of that run are replaced, so calling it twice gives the same run, not a resume.
    """
    raise NotImplementedError


def sample_specs(n_runs: int = 4, steps: int = 3000, seed: int = 0) -> list[RunSpec]:
    """A family of runs differing in lr, batch size and seed; the second one hits a NaN loss and stops."""
    raise NotImplementedError


def write_sample_runs(
    root: str | Path,
    n_runs: int = 4,
    steps: int = 3000,
    seed: int = 0,
    now: float | None = None,
    specs: Sequence[RunSpec] | None = None,
) -> list[Path]:
    """Write finished sample runs under ``root``; return their directories, oldest first.

    ``specs`` replaces the default family from :func:`sample_specs` (then ``n_runs``, ``steps`` and
    ``seed`` are ignored); runs are laid out back to back in time, the last ending shortly before ``now``.
    """
    raise NotImplementedError
