"""The live page on a multi-rank run: the lowest rank drawn, the others aggregated at ingest, never merged."""

from __future__ import annotations

import math
import time
from pathlib import Path

from monitor_cb.train.writer import MetricsWriter
from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, charts, run_entry, texts


def write_job(root: Path, ranks: int = 4, steps: int = 150) -> None:
    """Rank 2 logs a NaN loss at step 60; rank 3 is 2x slower from step 40 on."""
    start = time.time() - steps
    for rank in range(ranks):
        with MetricsWriter(root / "job", rank=rank, world_size=ranks, fsync_interval=0) as writer:
            for step in range(1, steps + 1):
                slow = 2.0 if rank == 3 and step >= 40 else 1.0
                loss = math.nan if rank == 2 and step == 60 else 2.0 - step * 0.005 + rank * 0.001
                writer.log_at(
                    start + step,
                    step=step,
                    loss=loss,
                    lr=1e-3,
                    step_time=0.1 * slow * (1 + 0.01 * math.sin(step + rank)),
                    data_time=0.01,
                )


def test_lowest_rank_drawn_other_ranks_nan_marked_and_straggler_found(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "logs"
    write_job(root)
    monkeypatch.setenv("MONITOR_LOGDIR", str(root))
    at = run_entry(DASHBOARD, {"run": "job"})
    assert_ok(at)
    loss_chart = charts(at)[0]
    assert "loss" in [t.get("name") for t in loss_chart["data"]]
    markers = [t for t in loss_chart["data"] if t.get("name") == "loss non-finite"]
    assert markers and any("at step 60 (rank 2)" in text for text in markers[0]["text"])
    assert "straggler" in texts(at) and "rank 3" in texts(at)
    from pages import _shared

    store = _shared.get_store(str(root))  # the page's store (one per server process)
    assert store._runs["job"].merged == {}  # no ranks x steps frame was built
