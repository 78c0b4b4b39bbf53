"""``Model.train`` with no ``config=``: the optimizer, lr schedule, batch size, epochs and dataset size are captured."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mindspore")

from mindspore import nn
from mindspore.train import Model

from monitor_cb.train.callback import LiveMonitor
from monitor_cb.train.train_config import lr_schedule_config, optimizer_config
from tests.collector.ms_helpers import Net, ce, dataset, read_meta

pytestmark = pytest.mark.mindspore


def train(tmp_path: Path, optimizer_for: object, config: dict | None = None, epochs: int = 2) -> dict:
    net = Net()
    model = Model(net, ce(), optimizer_for(net.trainable_params()))
    monitor = LiveMonitor(tmp_path / "run", log_interval=2, config=config, telemetry_interval=None)
    model.train(epochs, dataset(4), callbacks=[monitor], dataset_sink_mode=False)
    return read_meta(tmp_path / "run")["config"]


def test_adam_with_a_cosine_schedule(tmp_path: Path) -> None:
    schedule = nn.CosineDecayLR(min_lr=1e-5, max_lr=1e-3, decay_steps=8)
    config = train(tmp_path, lambda p: nn.Adam(p, learning_rate=schedule, beta1=0.8, weight_decay=0.01))
    optimizer = config["optimizer"]
    assert optimizer["type"] == "Adam" and optimizer["use_nesterov"] is False
    assert optimizer["beta1"] == pytest.approx(0.8) and optimizer["beta2"] == pytest.approx(0.999)
    assert optimizer["eps"] == pytest.approx(1e-8) and optimizer["weight_decay"] == pytest.approx(0.01)
    assert config["lr_schedule"]["type"] == "CosineDecayLR"
    assert config["lr_schedule"]["max_lr"] == pytest.approx(1e-3) and config["lr_schedule"]["decay_steps"] == 8
    assert config["epochs"] == 2 and config["dataset_size"] == 4
    assert config["batch_size"] == 4, "the dataset yields ready batches: the first input's rows"


def test_a_per_step_list_and_the_users_config_winning(tmp_path: Path) -> None:
    lrs = nn.cosine_decay_lr(1e-5, 1e-2, total_step=8, step_per_epoch=4, decay_epoch=2)
    config = train(tmp_path, lambda p: nn.Momentum(p, lrs, momentum=0.9), {"optimizer": {"note": "mine"}, "epochs": 9})
    assert config["optimizer"]["type"] == "Momentum" and config["optimizer"]["momentum"] == pytest.approx(0.9)
    assert config["optimizer"]["note"] == "mine" and config["epochs"] == 9, "config= wins, key by key"
    schedule = config["lr_schedule"]
    assert schedule["type"] == "per_step_list" and schedule["steps"] == 8
    assert schedule["peak"] == pytest.approx(max(lrs)) and schedule["last"] == pytest.approx(lrs[-1])


def test_a_constant_lr_and_objects_without_attributes() -> None:
    net = Net()
    assert lr_schedule_config(nn.SGD(net.trainable_params(), 0.05).learning_rate) == {
        "type": "constant",
        "learning_rate": pytest.approx(0.05),
    }
    assert lr_schedule_config(None) == {} and optimizer_config(object()) == {"type": "object"}
