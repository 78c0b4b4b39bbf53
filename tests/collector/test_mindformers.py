"""MindFormers 1.9: YAML-built LiveMonitor, and training a cell with MindFormers' output layout on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mindformers")

import mindspore as ms
from mindformers.core.callback import build_callback
from mindformers.tools.register import MindFormerConfig
from mindformers.wrapper.wrapper import MFPipelineWithLossScaleCell, MFTrainOneStepCell
from mindspore import nn, ops
from mindspore.train import Model

import monitor_cb.mindformers  # noqa: F401  (registers LiveMonitor)
from monitor_cb.train.callback import LiveMonitor
from monitor_cb.train.cells import global_grad_norm
from monitor_cb.train.extract import layout_for_cell
from tests.collector.ms_helpers import Net, Recorder, ce, dataset, read_meta, read_records

pytestmark = pytest.mark.mindspore

YAML = """\
callbacks:
  - type: MFLossMonitor
  - type: LiveMonitor
    log_dir: {run_dir}
    log_interval: 2
    run_name: yaml-built
    config:
      model: tiny
"""


class CpuMFTrainOneStepCell(nn.TrainOneStepCell):
    """Returns MindFormers' ``(loss, overflow, scaling_sens, learning_rate, global_norm)`` on the CPU.

    ``MFTrainOneStepCell`` itself needs Ascend kernels; like it, this computes the lr
    in-graph before the optimizer runs and the global norm before the update.
    """

    output_layout = "mindformers"

    def __init__(self, network: nn.Cell, optimizer: nn.Optimizer) -> None:
        super().__init__(network, optimizer)
        self.scaling_sens = ms.Tensor(1.0, ms.float32)

    def construct(self, *inputs: Any) -> tuple:
        loss = self.network(*inputs)
        grads = self.grad_no_sens(self.network, self.weights)(*inputs)
        learning_rate = self.optimizer.get_lr()
        global_norm = global_grad_norm(grads)
        loss = ops.depend(loss, self.optimizer(grads))
        return loss, ops.logical_not(ops.isfinite(loss)), self.scaling_sens, learning_rate, global_norm


def build_from_yaml(tmp_path: Path) -> list:
    path = tmp_path / "run.yaml"
    path.write_text(YAML.format(run_dir=tmp_path / "run"))
    return build_callback(MindFormerConfig(str(path)).callbacks)


def test_yaml_entry_builds_a_live_monitor_with_its_own_keys(tmp_path: Path) -> None:
    callbacks = build_from_yaml(tmp_path)
    assert [type(c).__name__ for c in callbacks] == ["MFLossMonitor", "LiveMonitor"]
    monitor = callbacks[1]
    assert isinstance(monitor, LiveMonitor) and monitor.log_interval == 2 and monitor.config == {"model": "tiny"}
    assert not (tmp_path / "run").exists()  # nothing opened before training


def test_yaml_built_monitor_parses_the_mindformers_layout_while_training(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monitor = build_from_yaml(tmp_path)[1]
    net = Net()
    lrs = [0.01 * (i + 1) for i in range(6)]
    cell = CpuMFTrainOneStepCell(nn.WithLossCell(net, ce()), nn.SGD(net.trainable_params(), learning_rate=lrs))
    recorder = Recorder()
    Model(cell).train(1, dataset(6), callbacks=[monitor, recorder], dataset_sink_mode=False)

    records = read_records(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [2, 4, 6]
    for r in records:
        loss, _, _, lr, norm = recorder.outputs[r["step"] - 1]
        assert r["loss"] == pytest.approx(loss) and r["grad_norm"] == pytest.approx(norm) and norm > 0
        assert r["lr"] == pytest.approx(lrs[r["step"] - 1]) == pytest.approx(lr)
        assert r["loss_scale"] == 1.0 and r["overflow"] is False
        assert r["throughput"] > 0
    meta = read_meta(tmp_path / "run")
    assert meta["name"] == "yaml-built" and meta["output_layout"] == "mindformers" and meta["batch_size"] == 4
    assert meta["mindformers_version"] == "1.9.0" and meta["status"] == "finished"


def test_mindformers_own_train_cells_are_recognised_by_class() -> None:
    assert layout_for_cell(MFTrainOneStepCell) == "mindformers"
    assert layout_for_cell(MFPipelineWithLossScaleCell) == "mindformers"
    assert layout_for_cell(nn.TrainOneStepWithLossScaleCell) == "loss_scale"
    assert layout_for_cell(nn.TrainOneStepCell) == "plain"
