"""Fixtures for the dashboard's AppTests: a temporary log root and runs written by MetricsWriter."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.train.writer import MetricsWriter

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = str(REPO / "dashboard.py")


def write_run(
    root: Path,
    name: str,
    steps: int = 200,
    *,
    close: str | None = "finished",
    nan_from: int | None = None,
    t0: float | None = None,
    **extra_meta: Any,
) -> MetricsWriter:
    """A run under ``root/name`` with ``steps`` records (loss, lr, throughput, grad_norm, eval every 50)."""
    writer = MetricsWriter(root / name, rank=0, world_size=1, fsync_interval=0, extra_meta=extra_meta or None)
    start = time.time() - steps * 0.1 if t0 is None else t0
    for step in range(1, steps + 1):
        loss = 3.0 * math.exp(-step / 80) + 0.1
        if nan_from is not None and step >= nan_from:
            loss = math.nan
        writer.log_at(
            start + step * 0.1,
            step=step,
            epoch=1 + step // 100,
            loss=loss,
            lr=1e-3 * min(1.0, step / 20),
            throughput=800.0 + step % 7,
            grad_norm=1.0 + (step % 13) / 10,
            samples=step * 32,
        )
        if step % 50 == 0:
            writer.log_at(start + step * 0.1 + 0.01, step=step, eval_loss=loss * 1.1, eval_accuracy=0.5)
    writer.flush()
    if close:
        writer.close(close)
    return writer


@pytest.fixture
def log_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty log root the dashboard reads (through ``MONITOR_LOGDIR``)."""
    root = tmp_path / "logs"
    root.mkdir()
    monkeypatch.setenv("MONITOR_LOGDIR", str(root))
    yield root
