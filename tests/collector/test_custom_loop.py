"""A ``mindspore.value_and_grad`` loop without ``Model``: MetricsWriter + global_grad_norm + lr_metrics."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from monitor_cb import MetricsWriter, global_grad_norm, lr_metrics
from tests.collector.ms_helpers import Net, batches, ce, read_meta, read_records

pytestmark = pytest.mark.mindspore


def test_custom_loop_writes_the_same_files(tmp_path: Path) -> None:
    net = Net()
    loss_net = nn.WithLossCell(net, ce())
    lrs = [0.1, 0.05, 0.02, 0.01]
    optimizer = nn.SGD(net.trainable_params(), learning_rate=lrs)
    grad_fn = ms.value_and_grad(loss_net, None, optimizer.parameters)

    @ms.jit
    def norm_in_graph(x: ms.Tensor, y: ms.Tensor) -> ms.Tensor:
        _, grads = grad_fn(x, y)
        return global_grad_norm(grads)

    expected = []
    with MetricsWriter(tmp_path / "exp002", config={"loop": "custom"}) as writer:
        for step, (x, y, _) in enumerate(batches(4), 1):
            loss, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
            host = float(np.sqrt(sum((g.asnumpy().astype(np.float64) ** 2).sum() for g in grads)))
            assert float(norm_in_graph(ms.Tensor(x), ms.Tensor(y)).asnumpy()) == pytest.approx(host, rel=1e-5)
            optimizer(grads)
            writer.log(step=step, loss=loss, grad_norm=global_grad_norm(grads), **lr_metrics(optimizer))
            expected.append((step, float(loss.asnumpy()), host, lrs[step - 1]))

    records = read_records(tmp_path / "exp002" / "metrics.jsonl")
    got = [(r["step"], r["loss"], r["grad_norm"], r["lr"]) for r in records]
    assert got == [(s, pytest.approx(lo), pytest.approx(n, rel=1e-5), pytest.approx(lr)) for s, lo, n, lr in expected]
    assert read_meta(tmp_path / "exp002")["status"] == "finished"


def test_lr_metrics_for_every_way_an_optimizer_holds_it() -> None:
    net = Net()
    params = net.trainable_params()
    fixed = nn.SGD(params, learning_rate=0.03)
    tensor = nn.SGD(params, learning_rate=ms.Tensor(0.04, ms.float32))
    schedule = nn.SGD(params, learning_rate=nn.WarmUpLR(learning_rate=0.1, warmup_steps=10))
    groups = nn.SGD(
        [{"params": net.hidden.trainable_params(), "lr": 0.5}, {"params": net.out.trainable_params()}],
        learning_rate=0.25,
    )
    assert lr_metrics(fixed) == {"lr": pytest.approx(0.03)}
    assert lr_metrics(tensor) == {"lr": pytest.approx(0.04)}
    assert lr_metrics(schedule, step_index=4) == {"lr": pytest.approx(0.1 * 4 / 10)}
    assert lr_metrics(groups) == {"lr": pytest.approx(0.5), "lr_group1": pytest.approx(0.25)}
    assert lr_metrics(None) == {}
