"""The Runs page on real runs without metadata (issue 36, item 6): no column of "no status recorded" on every
row, and Group by offers the parts of the runs' names and their source (JSONL, TensorBoard) when no run
recorded a config. (The table's height, as tall as its runs, is in tests/views/test_runs_table_height.py.)"""

from __future__ import annotations

from pathlib import Path

import tensorboardX

from tests.app.helpers import assert_ok, run_entry
from tests.app.real_root import real_runs_root

ENTRY = str(Path(__file__).with_name("runs_app.py"))
REAL = ["gpt2_124m_shakespeare", "gpt2_finetune_log", "d2_hakaton2020", "d2_medical_waste", "gptlora"]


def write_tensorboard_run(root: Path) -> None:
    """A run tensorboardX writes (explicit wall times, as a real SummaryWriter in a training loop)."""
    writer = tensorboardX.SummaryWriter(str(root / "tb_run"), flush_secs=3600)
    for step in range(1, 61):
        writer.add_scalar("loss", 2.0 - step / 60, step, walltime=1.7e9 + step)
    writer.close()


def test_real_runs_without_metadata(log_root: Path) -> None:
    real_runs_root(log_root, REAL)
    write_tensorboard_run(log_root)
    at = run_entry(ENTRY)
    assert_ok(at)
    table = at.dataframe[0]
    assert len(table.value) == 6
    assert "reason" not in table.value.columns, "no run's reason says more than its status"
    options = at.selectbox(key="runs_group").options
    assert {"status", "source", "name.1"} <= set(options), options
    at.selectbox(key="runs_group").set_value("source").run()
    assert_ok(at)
    groups = next(d.value for d in at.dataframe if "source" in d.value.columns)
    assert dict(zip(groups["source"], groups["runs"], strict=True)) == {"JSONL": "5", "TensorBoard": "1"}
    at.selectbox(key="runs_group").set_value("name.1").run()
    groups = next(d.value for d in at.dataframe if "name.1" in d.value.columns)
    assert dict(zip(groups["name.1"], groups["runs"], strict=True)) == {
        "gpt2": "2",
        "d2": "2",
        "gptlora": "1",
        "tb": "1",
    }
