"""Runs with a per-parameter family written by MetricsWriter, as a job using our callback writes them."""

from __future__ import annotations

import math
from pathlib import Path

from monitor_cb.testing.synthetic_families import FamilyRun
from monitor_cb.train.writer import MetricsWriter


def write_family_run(root: Path, name: str, run: FamilyRun, *, close: str = "finished", t0: float = 1.7e9) -> None:
    """Every row of ``run.frame`` as one record (NaN cells of the family: not logged), at explicit times."""
    writer = MetricsWriter(root / name, rank=0, world_size=1, fsync_interval=0)
    frame = run.frame
    family = [c for c in frame.columns if c.startswith(f"{run.prefix}/")]
    base = ["loss", "lr", "grad_norm"]
    for i, row in enumerate(frame.itertuples(index=False)):
        values = dict(zip(frame.columns, row, strict=True))
        record = {k: float(values[k]) for k in base if k in values}
        record.update({k: float(values[k]) for k in family if not math.isnan(values[k])})
        writer.log_at(t0 + i * 0.5, step=int(values["step"]), **record)
    writer.flush()
    writer.close(close)
