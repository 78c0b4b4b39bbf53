"""Info notes (a plateau) on the Live page's charts only when asked (issue 36, item 10): many healthy runs
got faint bands over every chart by default. Warnings and errors are always drawn; notes are always listed."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from monitor_cb.charts.findings import FINDING_SHAPE_PREFIX
from monitor_cb.train.writer import MetricsWriter
from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, charts, run_entry


def write_stuck_then_learning(root: Path) -> None:
    """600 steps at the start level (a plateau note), then the loss falls; a NaN at the end (an error)."""
    rng = np.random.default_rng(3)
    writer = MetricsWriter(root / "stuck", rank=0, world_size=1, fsync_interval=0)
    t0 = time.time() - 1000.0
    for step in range(1, 1001):
        loss = 3.0 if step <= 600 else 3.0 * math.exp(-(step - 600) / 150) + 0.2
        loss = math.nan if step == 1000 else loss * float(rng.lognormal(0.0, 0.02))
        writer.log_at(t0 + step * 0.5, step=step, loss=loss, lr=1e-3)
    writer.close("failed")


def marks(fig: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in fig["layout"].get("shapes", []) if str(s.get("name", "")).startswith(FINDING_SHAPE_PREFIX)]


def test_plateau_bands_are_drawn_only_with_the_notes_toggle(log_root: Path) -> None:
    write_stuck_then_learning(log_root)
    at = run_entry(DASHBOARD, {"run": "stuck"})
    assert_ok(at)
    loss = charts(at)[0]
    assert not any(m["name"].endswith("plateau") for m in marks(loss)), "no note band by default"
    assert any(m["name"].endswith("nan") for m in marks(loss)), "an error is always drawn"
    assert at.toggle(key="notes_on_charts").value is False
    at.toggle(key="notes_on_charts").set_value(True).run()
    assert_ok(at)
    bands = [m for m in marks(charts(at)[0]) if m["name"].endswith("plateau")]
    assert len(bands) == 1 and bands[0]["type"] == "rect" and bands[0]["x0"] <= 25, bands
