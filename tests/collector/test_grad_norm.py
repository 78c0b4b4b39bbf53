"""``grad_norm_model``: real ``Model.train``/``Model.fit`` on the CPU log the true global gradient norm."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import amp, nn, ops
from mindspore.train import Model

from monitor_cb import LiveMonitor, TrainOneStepWithGradNorm, TrainOneStepWithLossScaleAndGradNorm, grad_norm_model
from monitor_cb.train.grad_norm import grad_norm_train_cell, with_grad_norm
from monitor_cb.train.writer import MonitorWarning
from tests.collector.ms_helpers import (
    Net,
    PoisonedLoss,
    batches,
    ce,
    dataset,
    host_grad_norm,
    read_meta,
    read_records,
    train_records,
)

pytestmark = pytest.mark.mindspore


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # MindSpore drops rank_0/ and kernel_meta/ into the cwd
    for name in ("RANK_ID", "RANK_SIZE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


def _expected_norms(net: nn.Cell, n: int) -> list[float]:
    """Host-side float64 norms of each batch's gradients (the weights do not move: lr 0)."""
    loss_net = nn.WithLossCell(net, ce())
    return [host_grad_norm(loss_net, net.trainable_params(), x, y) for x, y, _ in batches(n)]


@pytest.mark.parametrize("sink", [False, True])
def test_one_line_model_logs_the_host_computed_global_norm(tmp_path: Path, sink: bool) -> None:
    net = Net()
    expected = _expected_norms(net, 4)
    model = grad_norm_model(net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.0))
    assert type(model.train_network) is TrainOneStepWithGradNorm
    model.train(1, dataset(4), callbacks=[LiveMonitor(tmp_path, log_interval=1)], dataset_sink_mode=sink)
    records = train_records(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    for r in records:
        assert r["grad_norm"] == pytest.approx(expected[r["step"] - 1], rel=1e-5)
    meta = read_meta(tmp_path)
    assert meta["output_layout"] == "grad_norm" and meta["train_cell"] == "TrainOneStepWithGradNorm"


def test_fixed_loss_scale_reports_the_unscaled_norm(tmp_path: Path) -> None:
    """FixedLossScaleManager(drop_overflow_update=False) makes Model scale the backward pass by 128:
    the grads reach the optimizer 128x larger, the logged norm must not be."""
    net = Net()
    expected = _expected_norms(net, 3)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.0, loss_scale=128.0)
    manager = amp.FixedLossScaleManager(128.0, drop_overflow_update=False)
    model = grad_norm_model(net, ce(), optimizer, loss_scale_manager=manager)
    assert model.train_network.sens == 128.0  # the scale Model itself would have used
    model.train(1, dataset(3), callbacks=[LiveMonitor(tmp_path, log_interval=1)], dataset_sink_mode=False)
    norms = [r["grad_norm"] for r in train_records(tmp_path / "metrics.jsonl")]
    assert norms == pytest.approx(expected, rel=1e-5)


def test_training_matches_plain_model_step_for_step(tmp_path: Path) -> None:
    """Same seed, same data: the grad-norm model's losses equal those of Model's own train cell."""
    losses = []
    for build in (Model, grad_norm_model):
        ms.set_seed(7)
        net = Net()
        model = build(net, ce(), nn.Momentum(net.trainable_params(), 0.05, 0.9))
        run = tmp_path / build.__name__
        model.train(2, dataset(5), callbacks=[LiveMonitor(run, log_interval=1)], dataset_sink_mode=False)
        losses.append([r["loss"] for r in train_records(run / "metrics.jsonl")])
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    assert losses[0][0] != pytest.approx(losses[0][-1])  # it did train


def test_fit_with_metrics_builds_the_eval_network_as_model_does(tmp_path: Path) -> None:
    net = Net()
    model = grad_norm_model(
        net, ce(), nn.SGD(net.trainable_params(), 0.05), metrics={"loss": nn.Loss(), "accuracy": nn.Accuracy()}
    )
    model.fit(2, dataset(5), dataset(3, seed=9), callbacks=[LiveMonitor(tmp_path, log_interval=5)])
    records = read_records(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records if "eval_accuracy" in r] == [5, 10]
    assert all(0 < r["grad_norm"] < 100 for r in train_records(tmp_path / "metrics.jsonl"))


def test_clip_norm_is_passed_to_the_cell() -> None:
    net = Net()
    cell = grad_norm_train_cell(net, nn.SGD(net.trainable_params(), 1.0), ce(), clip_norm=1e-3)
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    x, y, _ = batches(1)[0]
    cell(ms.Tensor(x), ms.Tensor(y))
    moved = np.sqrt(sum(((p.asnumpy() - b) ** 2).sum() for p, b in zip(net.trainable_params(), before, strict=True)))
    assert moved == pytest.approx(1e-3, rel=1e-3)


def test_refusals_say_what_to_do() -> None:
    net = Net()
    with pytest.raises(ValueError, match="needs the optimizer"):
        grad_norm_model(net, ce())
    with pytest.raises(TypeError, match="layout"):
        with_grad_norm(nn.WithLossCell(net, ce()))
    # MindSpore's own refusal on the CPU, unchanged: the same arguments fail the same way with Model.
    manager = amp.DynamicLossScaleManager()
    with pytest.raises(ValueError, match="CPU"):
        grad_norm_model(net, ce(), nn.SGD(net.trainable_params(), 0.1), loss_scale_manager=manager)


def test_loss_scale_cell_is_swapped_keeping_its_update_cell() -> None:
    net = Net()
    update = nn.DynamicLossScaleUpdateCell(loss_scale_value=2.0**10, scale_factor=2, scale_window=1000)
    built = nn.TrainOneStepWithLossScaleCell(nn.WithLossCell(net, ce()), nn.SGD(net.trainable_params(), 0.1), update)
    cell = with_grad_norm(built)
    assert type(cell) is TrainOneStepWithLossScaleAndGradNorm
    assert cell.loss_scaling_manager is update and cell.network is built.network
    assert with_grad_norm(cell) is cell


class _CpuLossScaleCell(TrainOneStepWithLossScaleAndGradNorm):
    """The overflow check Ascend does with NPUGetFloatStatusV2, as an isfinite test (CPU has no such kernel)."""

    def get_overflow_status(self, status: Any, compute_output: Any) -> Any:
        finite = [ops.isfinite(g).all() for g in compute_output]
        return ops.logical_not(ops.stack(finite).all())


def test_loss_scale_layout_logs_scale_overflow_and_unscaled_norm(tmp_path: Path) -> None:
    net = Net()
    loss_net = PoisonedLoss(net)
    update = nn.DynamicLossScaleUpdateCell(loss_scale_value=2.0**10, scale_factor=2, scale_window=1000)
    cell = _CpuLossScaleCell(loss_net, nn.SGD(net.trainable_params(), 0.0), update)
    data = batches(4, nan_from=4)
    expected = [host_grad_norm(loss_net, net.trainable_params(), *d) for d in data[:3]]
    monitor = LiveMonitor(tmp_path, log_interval=1)
    with pytest.warns(MonitorWarning, match="non-finite loss at step 4"):
        Model(cell).train(1, dataset(4, nan_from=4, poison=True), callbacks=[monitor], dataset_sink_mode=False)
    records = train_records(tmp_path / "metrics.jsonl")
    assert [r["grad_norm"] for r in records[:3]] == pytest.approx(expected, rel=1e-5)
    # the scale after the step's update, as nn.TrainOneStepWithLossScaleCell returns it: halved on the overflow
    assert [r["loss_scale"] for r in records] == [1024.0, 1024.0, 1024.0, 512.0]
    assert [r["overflow"] for r in records] == [False, False, False, True]
    assert math.isnan(records[3]["grad_norm"])
    assert read_meta(tmp_path)["output_layout"] == "loss_scale_grad_norm"


def test_the_chart_note_tells_a_default_model_user_the_one_line(tmp_path: Path) -> None:
    """A real run with Model's default train cell gets the note naming that cell; with grad_norm_model, none."""
    from monitor_cb.charts.notes import grad_norm_note

    for build, run in ((Model, tmp_path / "plain"), (grad_norm_model, tmp_path / "norm")):
        net = Net()
        model = build(net, ce(), nn.SGD(net.trainable_params(), 0.05))
        model.train(1, dataset(3), callbacks=[LiveMonitor(run, log_interval=1)], dataset_sink_mode=False)
    plain_columns = {k for r in read_records(tmp_path / "plain" / "metrics.jsonl") for k in r}
    note = grad_norm_note(plain_columns, read_meta(tmp_path / "plain"))
    assert note is not None and "(TrainOneStepCell)" in note and "grad_norm_model" in note
    norm_columns = {k for r in read_records(tmp_path / "norm" / "metrics.jsonl") for k in r}
    assert grad_norm_note(norm_columns, read_meta(tmp_path / "norm")) is None


@pytest.mark.parametrize(
    ("level", "manager"),
    [("O1", None), ("O3", None), ("O2", lambda: amp.FixedLossScaleManager(1024.0, drop_overflow_update=False))],
)
def test_amp_levels_train_like_model_and_log_a_norm(tmp_path: Path, level: str, manager: Any) -> None:
    """Mixed precision as Model builds it (O2's default dynamic loss scale is refused on CPU, by MindSpore)."""
    runs = {}
    for build in (Model, grad_norm_model):
        ms.set_seed(3)
        net = Net()
        extra = {"loss_scale_manager": manager()} if manager else {}
        optimizer = nn.SGD(net.trainable_params(), 0.05, loss_scale=1024.0 if manager else 1.0)
        model = build(net, ce(), optimizer, amp_level=level, **extra)
        run = tmp_path / f"{level}-{build.__name__}"
        model.train(1, dataset(4), callbacks=[LiveMonitor(run, log_interval=1)], dataset_sink_mode=False)
        runs[build] = train_records(run / "metrics.jsonl")
    assert [r["loss"] for r in runs[grad_norm_model]] == pytest.approx([r["loss"] for r in runs[Model]], rel=1e-3)
    norms = [r["grad_norm"] for r in runs[grad_norm_model]]
    assert all(0 < n < 100 for n in norms)  # unscaled: a 1024 loss scale would show as ~1000x
