"""Runs written with the real writer for the runs-table tests (sweeps over lr and seed)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from monitor_cb.train.writer import MetricsWriter


def write_sweep_run(
    root: Path,
    name: str,
    *,
    lr: float,
    seed: int,
    steps: int = 100,
    status: str | None = "finished",
    reason: str | None = None,
    nan_from: int | None = None,
    optimizer: str = "adam",
    t0: float | None = None,
    extra_config: dict[str, Any] | None = None,
    eval_every: int = 25,
) -> MetricsWriter:
    """A run whose loss decays faster with a larger lr; eval loss/accuracy every ``eval_every`` steps.

    Step ``s`` is logged at ``t0 + s`` (default t0: now, the writer's start) and the run ends at
    ``t0 + steps + 1``, so its duration is ``steps + 1`` seconds.
    """
    config = {"lr": lr, "seed": seed, "optim": {"name": optimizer, "betas": [0.9, 0.999]}, **(extra_config or {})}
    writer = MetricsWriter(root / name, rank=0, world_size=1, config=config, fsync_interval=0)
    t0 = time.time() if t0 is None else t0
    rate = 50.0 * lr / 1e-3
    for step in range(1, steps + 1):
        loss = 2.0 * math.exp(-step * rate / 1000.0) + 0.1 + 0.01 * seed
        if nan_from is not None and step >= nan_from:
            loss = math.nan
        writer.log_at(t0 + step, step=step, loss=loss, lr=lr, throughput=100.0)
        if step % eval_every == 0:
            accuracy = 1.0 - loss / 3.0 if math.isfinite(loss) else math.nan
            writer.log_at(t0 + step + 0.5, step=step, eval_loss=loss * 1.1, eval_accuracy=accuracy)
    writer.flush()
    if status is not None:
        writer.close(status, reason, end_time=t0 + steps + 1)
    return writer
