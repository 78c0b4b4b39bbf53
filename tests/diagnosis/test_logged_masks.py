"""A column that stops being logged is "not logged", never a NaN to alarm about (through the real store)."""

from __future__ import annotations

from pathlib import Path

from monitor_cb.diagnosis import diagnose
from monitor_cb.ingest import RunStore
from monitor_cb.train.writer import MetricsWriter


def write(run: Path, *, nan_at: int | None = None) -> None:
    with MetricsWriter(run) as writer:
        for step in range(1, 101):
            extra = {"grad_norm": 1.0 + 0.01 * (step % 7)} if step <= 50 else {}  # grad norm only at first
            loss = float("nan") if step == nan_at else 2.0 - 0.01 * step
            writer.log(step=step, loss=loss, lr=1e-3, **extra)


def findings_for(root: Path, run_id: str) -> list:
    data = RunStore(root).read(run_id)
    return diagnose(data.frame, logged=data.masks)


def test_a_column_that_stops_being_logged_raises_no_nan_alarm(tmp_path: Path) -> None:
    write(tmp_path / "run")
    assert [f for f in findings_for(tmp_path, "run") if f.kind == "nan"] == []


def test_a_logged_nan_is_still_found_with_masks(tmp_path: Path) -> None:
    write(tmp_path / "run", nan_at=70)
    (nan,) = [f for f in findings_for(tmp_path, "run") if f.kind == "nan"]
    assert nan.step == 70 and nan.severity == "error" and "loss" in nan.message
