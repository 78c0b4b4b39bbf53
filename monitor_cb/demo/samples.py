"""Synthetic but realistic finished runs, written instantly in the exact on-disk format.

Used as the dashboard's embedded default (no MindSpore, no training) and by tests. A run is
described by a frozen :class:`RunSpec`; curves are drawn from a seeded generator on the recipe of
:mod:`monitor_cb.demo.curves`, which the detectors' test runs share (warmup + cosine lr, noisy power-law
loss, grad-norm bumps, input hiccups), plus noisy throughput and periodic eval. Failures are injected
by ``faults``: small callables applied to every record, so a later diagnosis task can add its own
(a NaN, a spike, a stall) without touching the generator.

Files are written by the real :class:`monitor_cb.train.writer.MetricsWriter` (``log_at`` for timestamps in
the past), so they are byte for byte what a training run leaves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from monitor_cb.demo.curves import bumps, hiccups, power_law_loss, warmup_cosine
from monitor_cb.record import meta_path_for, metrics_filename
from monitor_cb.train.writer import MetricsWriter

_EVAL_STEPS = 20  # an eval pass costs about this many train steps of wall time
_GIB = 2**30


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
    if end not in (None, "failed", "stopped"):
        raise ValueError(f"end must be None, 'failed' or 'stopped', got {end!r}")

    def fault(record_step: int, record: dict[str, Any]) -> dict[str, Any] | EndRun:
        if key not in record or record_step < step:
            return record
        record = {**record, key: math.nan}
        if "grad_norm" in record:
            record["grad_norm"] = math.inf
        if end == "stopped":
            return EndRun("stopped", f"stopped: non-finite {key} at step {record_step}", record, "guard_stop")
        if end == "failed":
            return EndRun("failed", f"RuntimeError: {key} is NaN at step {record_step}", record)
        return record

    return fault


def diverge_at(step: int, ramp: int = 60, end: str | None = "stopped") -> Fault:
    """A divergence: over ``ramp`` steps before ``step`` the grad norm grows ~30x and the loss creeps
    up, then the loss is NaN at ``step`` (ended as in :func:`nan_at`). The precursor a detector should see."""
    if ramp < 1:
        raise ValueError(f"ramp must be >= 1, got {ramp}")
    nan = nan_at(step, "loss", end)

    def fault(record_step: int, record: dict[str, Any]) -> dict[str, Any] | EndRun:
        if record_step >= step:
            return nan(record_step, record)
        if record_step < step - ramp or "loss" not in record:
            return record
        progress = (record_step - (step - ramp)) / ramp  # 0 -> 1 along the ramp
        changed = {**record, "loss": record["loss"] * (1.0 + 0.6 * progress**3)}
        if "grad_norm" in record:
            changed["grad_norm"] = record["grad_norm"] * math.exp(3.4 * progress)
        return changed

    return fault


def spike_at(step: int, key: str = "loss", factor: float = 10.0, width: int = 1) -> Fault:
    """A fault multiplying ``key`` by ``factor`` for ``width`` steps from ``step`` (a recoverable spike)."""

    def fault(record_step: int, record: dict[str, Any]) -> dict[str, Any] | EndRun:
        if key in record and step <= record_step < step + width:
            return {**record, key: record[key] * factor}
        return record

    return fault


def stop_at(step: int, reason: str = "KeyboardInterrupt") -> Fault:
    """A fault ending the run as ``stopped`` at ``step`` (a user interrupt)."""

    def fault(record_step: int, record: dict[str, Any]) -> dict[str, Any] | EndRun:
        if record_step >= step and "loss" in record:
            return EndRun("stopped", reason, record)
        return record

    return fault


def iter_records(spec: RunSpec, now: float | None = None) -> Iterator[dict[str, Any]]:
    """The run's records in file order (decoded floats, NaN as ``float('nan')``), faults applied.

    An ``EndRun`` from a fault ends the iteration; the outcome is what :func:`write_run` stores.
    """
    return _Simulation(spec, now).records()


def write_run(root: str | Path, spec: RunSpec, now: float | None = None) -> Path:
    """Write ``root/spec.name/metrics.jsonl`` and ``metrics.meta.json`` (final status); return the run directory.

    Existing files of that run are replaced, so calling it twice gives the same run, not a resume.
    """
    now = time.time() if now is None else now
    sim = _Simulation(spec, now)
    run_dir = Path(root) / spec.name
    metrics = run_dir / metrics_filename(0, 1)
    for old in (metrics, meta_path_for(metrics)):  # the writer would append as a resumed segment
        old.unlink(missing_ok=True)
    writer = MetricsWriter(
        run_dir,
        rank=0,
        world_size=1,
        config=_config(spec),
        run_name=spec.name,
        queue_size=2 * spec.steps // spec.log_every + 64,  # everything fits: nothing is dropped
        fsync_interval=0,
        extra_meta=_extra_meta(spec),
    )
    writer.update_meta(start_time=sim.start_time, first_start_time=sim.start_time)
    for record in sim.records():
        metrics_only = {k: v for k, v in record.items() if k not in ("step", "t", "rank", "seg")}
        writer.log_at(record["t"], step=record["step"], **metrics_only)
    writer.close(sim.status, sim.reason, timeout=30.0, end_time=sim.end_time)
    return run_dir


def sample_specs(n_runs: int = 4, steps: int = 3000, seed: int = 0) -> list[RunSpec]:
    """A family of runs differing in lr, batch size and seed; the second one hits a NaN loss and stops."""
    if n_runs < 1:
        raise ValueError(f"n_runs must be >= 1, got {n_runs}")
    family = ((3e-4, 32), (1e-3, 64), (1e-4, 32), (6e-4, 128))
    specs = []
    for i in range(n_runs):
        lr, batch = family[i % len(family)]
        run_seed = seed + i
        faults: tuple[Fault, ...] = ()
        if i == 1:  # the aggressive lr diverges: grad norm blows up, then a NaN loss the guard stops on
            faults = (diverge_at(max(2, int(steps * 0.62)), ramp=max(1, min(60, steps // 10))),)
        specs.append(
            RunSpec(
                name=f"run{i + 1:02d}-lr{lr:g}-bs{batch}-seed{run_seed}",
                steps=steps,
                lr=lr,
                batch_size=batch,
                seed=run_seed,
                eval_every=max(steps // 15, 1),
                steps_per_epoch=max(steps // 3, 1),
                seq_length=512 if i % 2 == 0 else None,
                loss_components=("ce", "aux") if i == 0 else (),
                step_time=0.12 * (batch / 32) ** 0.8,
                faults=faults,
            )
        )
    return specs


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
    now = time.time() if now is None else now
    specs = list(specs) if specs is not None else sample_specs(n_runs, steps, seed)
    end = now - 600.0
    placed = []
    for spec in reversed(specs):  # the last run ends 10 minutes ago, earlier ones before it
        start = spec.start_time if spec.start_time is not None else end - _planned_duration(spec)
        placed.append(replace(spec, start_time=start))
        end = start - 300.0
    return [write_run(root, spec, now) for spec in reversed(placed)]


# ----------------------------------------------------------------------------- the simulation
class _Simulation:
    """One run's curves, drawn once from the spec's seed; ``records()`` replays them with faults."""

    def __init__(self, spec: RunSpec, now: float | None) -> None:
        if spec.steps < 1 or spec.log_every < 1 or spec.batch_size < 1:
            raise ValueError(f"steps, log_every and batch_size must be >= 1 in {spec}")
        self.spec = spec
        now = time.time() if now is None else now
        self.start_time = spec.start_time if spec.start_time is not None else now - 600.0 - _planned_duration(spec)
        self.status = "finished"
        self.reason: str | None = None
        self.end_time = self.start_time
        self._curves = _curves(spec, self.start_time)

    def records(self) -> Iterator[dict[str, Any]]:
        """Train and eval records in file order; sets ``status``/``reason``/``end_time`` when exhausted."""
        for record in self._raw_records():
            outcome = _apply_faults(self.spec.faults, record)
            if isinstance(outcome, EndRun):
                yield from self._end(outcome, record)
                return
            self.end_time = outcome["t"]
            yield outcome
        self.end_time += 1.0

    def _end(self, outcome: EndRun, record: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if outcome.status not in ("failed", "stopped"):
            raise ValueError(f"a fault ended the run with status {outcome.status!r}; use 'failed' or 'stopped'")
        self.status, self.reason = outcome.status, outcome.reason
        self.end_time = record["t"]
        if outcome.record is not None:
            yield outcome.record
        if outcome.event is not None:
            self.end_time = record["t"] + 0.01
            yield {**_head(record, self.end_time), "event": outcome.event, "reason": outcome.reason}

    def _raw_records(self) -> Iterator[dict[str, Any]]:
        c = self._curves
        spec = self.spec
        columns = {k: v.tolist() for k, v in c.items() if k not in ("step", "t", "eval_t")}
        steps = c["step"].tolist()
        times = c["t"].tolist()
        eval_t = c["eval_t"].tolist()
        for i, step in enumerate(steps):
            record: dict[str, Any] = {"step": step, "t": times[i], "rank": 0, "seg": 1}
            for key, values in columns.items():
                if not key.startswith("eval_"):
                    record[key] = values[i]
            yield record
            if spec.eval_every and step % spec.eval_every == 0:
                yield {
                    **_head(record, eval_t[i]),
                    "eval_loss": columns["eval_loss"][i],
                    "eval_accuracy": columns["eval_accuracy"][i],
                }


def _head(record: dict[str, Any], t: float) -> dict[str, Any]:
    return {"step": record["step"], "t": t, "rank": record["rank"], "seg": record["seg"]}


def _apply_faults(faults: Sequence[Fault], record: dict[str, Any]) -> dict[str, Any] | EndRun:
    for fault in faults:
        outcome = fault(record["step"], record)
        if isinstance(outcome, EndRun):
            return outcome
        record = outcome
    return record


def _planned_duration(spec: RunSpec) -> float:
    evals = spec.steps // spec.eval_every if spec.eval_every else 0
    return spec.step_time * (spec.steps + evals * _EVAL_STEPS)


def _lr_schedule(spec: RunSpec, steps: np.ndarray) -> np.ndarray:
    warmup = spec.warmup_steps if spec.warmup_steps is not None else max(spec.steps // 20, 1)
    return warmup_cosine(steps, spec.lr, warmup, spec.lr * spec.min_lr_ratio, total=spec.steps)


def _curves(spec: RunSpec, start_time: float) -> dict[str, np.ndarray]:
    """Every metric for every training step, then kept at the logged steps."""
    rng = np.random.default_rng(spec.seed)
    n = spec.steps
    all_steps = np.arange(1, n + 1)
    lr = _lr_schedule(spec, all_steps)
    # Progress is the integral of the lr: warmup starts slowly and a cosine tail flattens the curve.
    progress = np.cumsum(lr) / 3e-4 * (spec.batch_size / 32) ** 0.5
    clean = power_law_loss(progress / 150.0, 1.6, 8.8, 0.55)
    noise_scale = 0.035 * (32 / spec.batch_size) ** 0.5 * (1 + 4 * lr / 1e-3)
    loss = clean * (1.0 + noise_scale * rng.standard_normal(n))

    bump = np.zeros(n)
    for at, profile in bumps(rng, n, height=(2.0, 7.0), decay=6.0, max_length=40):
        bump[at : at + profile.size] += profile
    grad_norm = (0.4 + 2.5 * (clean - 1.5) / 8.9) * rng.lognormal(0.0, 0.15, n) * (1.0 + bump)

    step_time = spec.step_time * rng.lognormal(0.0, 0.04, n)
    stall = hiccups(rng, n, spec.step_time, rate=2.0 / 1000)  # the input pipeline hiccups now and then
    data_time = spec.step_time * (0.03 + 0.01 * rng.random(n)) + stall
    step_time = step_time + stall
    eval_pause = np.zeros(n)
    if spec.eval_every:
        eval_pause[spec.eval_every :: spec.eval_every] = spec.step_time * _EVAL_STEPS
    t = start_time + np.cumsum(step_time) + np.cumsum(eval_pause)
    eval_noise = 1.0 + 0.01 * rng.standard_normal(n)
    eval_loss = (clean * 1.03 + 0.15 * np.clip(progress / progress[-1] - 0.7, 0, None)) * eval_noise
    eval_accuracy = np.clip(0.93 - 0.85 * (eval_loss - 1.6) / 8.8, 0.0, 1.0)

    device = 2.0 * _GIB + spec.batch_size * 48 * 2**20 + (spec.seq_length or 0) * 2**20
    mem_device = device * (1.0 + 0.02 * rng.random(n))
    host = 3.1 * _GIB + 180 * 2**20 * all_steps / n + 8 * 2**20 * rng.standard_normal(n)

    keep = all_steps % spec.log_every == 0
    keep[0] = True
    # Logged values are means over the logging interval, as the collector reports them.
    window = spec.log_every
    curves: dict[str, np.ndarray] = {
        "step": all_steps[keep],
        "t": t[keep],
        "epoch": ((all_steps - 1) // max(spec.steps_per_epoch, 1) + 1)[keep],
        "loss": loss[keep],
    }
    if spec.loss_components:
        # Components sum to the total, as a network returning (total, parts...) reports them.
        k = len(spec.loss_components)
        shares = np.full((k - 1, n), 0.8 / max(k - 1, 1)) * (1 + 0.05 * rng.standard_normal((k - 1, n)))
        parts = [loss * share for share in shares]
        parts.append(loss - np.sum(parts, axis=0))
        for name, part in zip(spec.loss_components, parts, strict=True):
            curves[f"loss_{name}"] = part[keep]
    throughput = spec.batch_size / _interval_mean(step_time, window)
    curves |= {
        "lr": lr[keep],
        "throughput": throughput[keep],
    }
    if spec.seq_length:
        curves["tokens_per_s"] = (throughput * spec.seq_length)[keep]
    curves |= {
        "samples": (all_steps * spec.batch_size)[keep],
        "step_time": _interval_mean(step_time, window)[keep],
        "data_time": _interval_mean(data_time, window)[keep],
        "grad_norm": grad_norm[keep],
        "mem_device": mem_device.astype(np.int64)[keep],
        "mem_device_peak": np.maximum.accumulate(mem_device * 1.18).astype(np.int64)[keep],
        "mem_host_rss": host.astype(np.int64)[keep],
        "eval_loss": eval_loss[keep],
        "eval_accuracy": eval_accuracy[keep],
        "eval_t": (t + spec.step_time * _EVAL_STEPS * 0.9)[keep],
    }
    return curves


def _interval_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` steps (the collector averages over its logging interval)."""
    if window <= 1:
        return values
    cumulative = np.concatenate(([0.0], np.cumsum(values)))
    idx = np.arange(1, values.size + 1)
    lo = np.maximum(idx - window, 0)
    return (cumulative[idx] - cumulative[lo]) / (idx - lo)


def _config(spec: RunSpec) -> dict[str, Any]:
    return {
        "lr": spec.lr,
        "batch_size": spec.batch_size,
        "seed": spec.seed,
        "warmup_steps": spec.warmup_steps if spec.warmup_steps is not None else max(spec.steps // 20, 1),
        "min_lr_ratio": spec.min_lr_ratio,
        "total_steps": spec.steps,
        "schedule": "warmup_cosine",
    }


def _extra_meta(spec: RunSpec) -> dict[str, Any]:
    extra: dict[str, Any] = {"batch_size": spec.batch_size, "total_steps": spec.steps, "synthetic": True}
    if spec.seq_length:
        extra["seq_length"] = spec.seq_length
    return extra
