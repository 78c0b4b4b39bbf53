"""LiveMonitor under real ``Model.train`` / ``Model.fit`` on the CPU (GRAPH_MODE, tiny networks)."""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import Callback, Model

from monitor_cb import LiveMonitor, TrainOneStepWithGradNorm
from monitor_cb.train.writer import MonitorWarning
from tests.collector.ms_helpers import (
    BATCH,
    Net,
    PoisonedLoss,
    Recorder,
    batches,
    ce,
    dataset,
    host_grad_norm,
    read_meta,
    read_raw,
    read_records,
    train_records,
)

pytestmark = pytest.mark.mindspore


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # MindSpore drops rank_0/ and kernel_meta/ into the cwd
    for name in ("RANK_ID", "RANK_SIZE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


def test_list_schedule_records_steps_lr_loss_and_timing(tmp_path: Path) -> None:
    net = Net()
    lrs = [0.01 * (i + 1) for i in range(12)]
    model = Model(net, ce(), nn.SGD(net.trainable_params(), learning_rate=lrs))
    monitor, recorder = LiveMonitor(tmp_path / "run", log_interval=3, config={"lr": "list"}), Recorder()
    model.train(2, dataset(6), callbacks=[monitor, recorder], dataset_sink_mode=False)

    records = read_records(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [3, 6, 9, 12]  # 12 steps / interval 3, strictly increasing
    assert [r["epoch"] for r in records] == [1, 1, 2, 2]
    for r in records:
        assert r["lr"] == pytest.approx(lrs[r["step"] - 1], rel=1e-6)  # the rate used at that step
        assert r["loss"] == pytest.approx(recorder.outputs[r["step"] - 1], rel=1e-6)
        # no upper bound: the first interval holds graph compilation, which a loaded machine makes any length
        assert r["step_time"] > 0 and 0 <= r["data_time"] < r["step_time"]
        assert r["throughput"] == pytest.approx(BATCH / r["step_time"], rel=1e-6)
        assert r["samples"] == BATCH * r["step"]
        assert r["mem_host_rss"] > 10_000_000
        assert "grad_norm" not in r and "tokens_per_s" not in r  # 2-D float inputs are not tokens
    meta = read_meta(tmp_path / "run")
    assert meta["status"] == "finished" and meta["reason"] is None
    assert meta["batch_size"] == BATCH and meta["total_steps"] == 12 and meta["epochs"] == 2
    assert meta["mindspore_version"] == ms.__version__ and meta["config"]["lr"] == "list"
    assert {"optimizer", "lr_schedule", "batch_size", "epochs", "dataset_size"} <= set(meta["config"]), "captured"
    assert meta["output_layout"] == "plain" and meta["rank"] == 0 and meta["world_size"] == 1


def test_learning_rate_schedule_cell_matches_at_every_step(tmp_path: Path) -> None:
    net = Net()
    schedule = nn.CosineDecayLR(min_lr=0.001, max_lr=0.1, decay_steps=6)
    model = Model(net, ce(), nn.Momentum(net.trainable_params(), learning_rate=schedule, momentum=0.9))
    model.train(1, dataset(8), callbacks=[LiveMonitor(tmp_path, log_interval=1)], dataset_sink_mode=False)
    records = read_records(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(1, 9))
    for r in records:
        k = min(r["step"] - 1, 6)  # CosineDecayLR holds min_lr after decay_steps
        expected = 0.001 + 0.5 * (0.1 - 0.001) * (1 + math.cos(math.pi * k / 6))
        assert r["lr"] == pytest.approx(expected, rel=1e-5)


def test_group_learning_rates_and_custom_train_cell(tmp_path: Path) -> None:
    net = Net()
    groups = [
        {"params": net.hidden.trainable_params(), "lr": [0.1, 0.2, 0.3, 0.4]},
        {"params": net.out.trainable_params(), "lr": [0.01, 0.02, 0.03, 0.04]},
    ]
    optimizer = nn.SGD(groups, learning_rate=[0.5] * 4)
    cell = nn.TrainOneStepCell(nn.WithLossCell(net, ce()), optimizer)  # Model(cell): cb_params.optimizer is None
    Model(cell).train(1, dataset(4), callbacks=[LiveMonitor(tmp_path, log_interval=2)], dataset_sink_mode=False)
    records = read_records(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["lr"], r["lr_group1"]) for r in records] == [
        (2, pytest.approx(0.2), pytest.approx(0.02)),
        (4, pytest.approx(0.4), pytest.approx(0.04)),
    ]


def test_component_losses_from_a_dict_output(tmp_path: Path) -> None:
    class DictTrainCell(nn.Cell):
        def __init__(self, net: nn.Cell, optimizer: nn.Optimizer) -> None:
            super().__init__()
            self.net, self.optimizer, self.ce = net, optimizer, ce()
            self.grad = ms.ops.GradOperation(get_by_list=True)

        def parts(self, x: ms.Tensor, y: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor]:
            logits = self.net(x)
            return self.ce(logits, y), 0.1 * (logits**2).mean()

        def total(self, x: ms.Tensor, y: ms.Tensor) -> ms.Tensor:
            cls, reg = self.parts(x, y)
            return cls + reg

        def construct(self, x: ms.Tensor, y: ms.Tensor) -> dict:
            cls, reg = self.parts(x, y)
            grads = self.grad(self.total, self.optimizer.parameters)(x, y)
            return {"loss": ms.ops.depend(cls + reg, self.optimizer(grads)), "cls": cls, "reg": reg}

    net = Net()
    recorder = Recorder()
    cell = DictTrainCell(net, nn.SGD(net.trainable_params(), 0.05))
    Model(cell).train(1, dataset(4), callbacks=[LiveMonitor(tmp_path, log_interval=2), recorder])
    records = read_records(tmp_path / "metrics.jsonl")
    assert len(records) == 2
    for r in records:
        returned = recorder.outputs[r["step"] - 1]
        assert r["loss"] == pytest.approx(returned["loss"])
        assert r["loss_cls"] == pytest.approx(returned["cls"]) and r["loss_reg"] == pytest.approx(returned["reg"])
        assert r["loss"] == pytest.approx(r["loss_cls"] + r["loss_reg"], rel=1e-5)
        assert r["lr"] == pytest.approx(0.05)


def test_grad_norm_cell_matches_a_host_side_computation(tmp_path: Path) -> None:
    net = Net()
    loss_net = nn.WithLossCell(net, ce())
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.0)  # weights fixed: each batch's norm is checkable
    model = Model(TrainOneStepWithGradNorm(loss_net, optimizer))
    model.train(1, dataset(4), callbacks=[LiveMonitor(tmp_path, log_interval=1)], dataset_sink_mode=False)
    records = read_records(tmp_path / "metrics.jsonl")
    data = batches(4)
    assert len(records) == 4
    for r in records:
        x, y, _ = data[r["step"] - 1]
        assert r["grad_norm"] == pytest.approx(host_grad_norm(loss_net, optimizer.parameters, x, y), rel=1e-5)
    assert read_meta(tmp_path)["output_layout"] == "grad_norm"


def test_grad_norm_cell_clips_but_reports_the_pre_clip_norm() -> None:
    net = Net()
    loss_net = nn.WithLossCell(net, ce())
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    cell = TrainOneStepWithGradNorm(loss_net, nn.SGD(net.trainable_params(), 1.0), clip_norm=1e-3)
    x, y, _ = batches(1)[0]
    expected = host_grad_norm(loss_net, net.trainable_params(), x, y)
    _, norm = cell(ms.Tensor(x), ms.Tensor(y))
    step = np.sqrt(sum(((p.asnumpy() - b) ** 2).sum() for p, b in zip(net.trainable_params(), before, strict=True)))
    assert float(norm.asnumpy()) == pytest.approx(expected, rel=1e-5)
    assert step == pytest.approx(1e-3, rel=1e-3)  # lr 1 x clipped norm


def test_eval_metrics_under_fit_are_tagged_with_the_train_step(tmp_path: Path) -> None:
    net = Net()
    eval_net = nn.WithEvalCell(net, ce())
    model = Model(
        TrainOneStepWithGradNorm(nn.WithLossCell(net, ce()), nn.SGD(net.trainable_params(), 0.05)),
        eval_network=eval_net,
        metrics={"loss": nn.Loss(), "accuracy": nn.Accuracy()},
        eval_indexes=[0, 1, 2],
    )
    model.fit(2, dataset(5), dataset(3, seed=9), callbacks=[LiveMonitor(tmp_path, log_interval=5)])
    records = read_records(tmp_path / "metrics.jsonl")
    evals = [r for r in records if "eval_loss" in r]
    assert [(r["step"], r["epoch"]) for r in evals] == [(5, 1), (10, 2)]  # not eval's own batch count (3)
    for r in evals:
        assert 0 < r["eval_loss"] < 10 and 0 <= r["eval_accuracy"] <= 1 and "loss" not in r
    train = train_records(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in train] == [5, 10]
    # Not an absolute bound (a loaded machine makes steps of any length): the 5 steps of the second interval
    # took part of the wall time between its two records, which also held the first epoch's evaluation.
    # That eval time is left out of step_time is tested with explicit clocks in test_timing.py.
    assert 0 < train[1]["step_time"] * 5 <= (train[1]["t"] - train[0]["t"]) * 1.01 + 1e-3


def _nan_model(tmp_path: Path, nan_from: int, **options: object) -> tuple[LiveMonitor, Recorder, Model]:
    net = Net()
    model = Model(nn.TrainOneStepCell(PoisonedLoss(net), nn.SGD(net.trainable_params(), 0.05)))
    return LiveMonitor(tmp_path, **options), Recorder(), model


def test_nan_loss_is_recorded_as_the_string_nan_and_warned(tmp_path: Path) -> None:
    monitor, recorder, model = _nan_model(tmp_path, 5, log_interval=2)
    with pytest.warns(MonitorWarning, match="non-finite loss at step 6"):  # warn mode reads logged steps only
        model.train(1, dataset(8, nan_from=5, poison=True), callbacks=[monitor, recorder])
    assert len(recorder.steps) == 8  # warn mode keeps training
    assert math.isnan(recorder.outputs[4]) and not math.isnan(recorder.outputs[3])
    raw = read_raw(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["loss"]) for r in raw] == [
        (2, pytest.approx(recorder.outputs[1])),
        (4, pytest.approx(recorder.outputs[3])),
        (6, "NaN"),  # the string, not null, not missing
        (8, "NaN"),
    ]
    assert "null" not in (tmp_path / "metrics.jsonl").read_text()
    assert read_meta(tmp_path)["status"] == "finished"


def test_stop_option_stops_within_one_step_and_says_why(tmp_path: Path) -> None:
    monitor, recorder, model = _nan_model(tmp_path, 6, log_interval=10, on_nan="stop", nan_patience=2)
    with pytest.warns(MonitorWarning) as caught:
        model.train(3, dataset(8, nan_from=6, poison=True), callbacks=[monitor, recorder])
    assert [str(w.message) for w in caught] == [
        "non-finite loss at step 6; stopping after 2 consecutive steps",
        "non-finite loss at step 7: stopping training (stopped: non-finite loss at step 7)",
    ]
    assert recorder.steps == [1, 2, 3, 4, 5, 6, 7]  # second consecutive NaN at 7: stop after that step
    raw = read_raw(tmp_path / "metrics.jsonl")
    assert [(r["step"], r.get("loss"), r.get("event")) for r in raw] == [
        (6, "NaN", None),
        (7, "NaN", None),
        (7, None, "guard_stop"),
    ]
    assert raw[-1]["reason"] == "stopped: non-finite loss at step 7"
    meta = read_meta(tmp_path)
    assert meta["status"] == "stopped" and meta["reason"] == "stopped: non-finite loss at step 7"
    assert monitor.stop_reason == meta["reason"]


def test_grad_norm_limit_stops_training(tmp_path: Path) -> None:
    net = Net()
    model = Model(TrainOneStepWithGradNorm(nn.WithLossCell(net, ce()), nn.SGD(net.trainable_params(), 0.01)))
    recorder = Recorder()
    monitor = LiveMonitor(tmp_path, log_interval=100, on_nan="stop", max_grad_norm=1e-6)
    with pytest.warns(MonitorWarning, match="gradient norm above limit"):
        model.train(1, dataset(5), callbacks=[monitor, recorder])
    assert recorder.steps == [1]
    assert read_meta(tmp_path)["reason"].startswith("stopped: gradient norm above limit")


def test_exception_in_training_closes_the_run_as_failed(tmp_path: Path) -> None:
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    with pytest.raises(RuntimeError, match="boom at step 3"):
        model.train(1, dataset(6), callbacks=[LiveMonitor(tmp_path, log_interval=1), Recorder(raise_at=3)])
    meta = read_meta(tmp_path)
    assert meta["status"] == "failed" and "boom at step 3" in meta["reason"]
    assert [r["step"] for r in read_records(tmp_path / "metrics.jsonl")] == [1, 2, 3]


def test_second_train_call_appends_a_new_segment_with_continuing_steps(tmp_path: Path) -> None:
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    monitor = LiveMonitor(log_file=tmp_path / "exp" / "metrics.jsonl", log_interval=2)  # the article's spelling
    model.train(1, dataset(4), callbacks=[monitor])
    model.train(1, dataset(4), callbacks=[monitor])  # MindSpore restarts cur_step_num at 1 here
    records = read_records(tmp_path / "exp" / "metrics.jsonl")
    assert [(r["seg"], r["step"]) for r in records] == [(1, 2), (1, 4), (2, 6), (2, 8)]
    meta = read_meta(tmp_path / "exp")
    assert meta["segment"] == 2 and meta["status"] == "finished" and meta["first_step"] == 5


def test_each_rank_writes_its_own_file_and_rank_zero_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK_ID", "1")
    monkeypatch.setenv("RANK_SIZE", "2")
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    model.train(1, dataset(2), callbacks=[LiveMonitor(tmp_path / "a", log_interval=1)])
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["metrics.rank1.jsonl", "metrics.rank1.meta.json"]
    assert {r["rank"] for r in read_records(tmp_path / "a" / "metrics.rank1.jsonl")} == {1}
    model.train(1, dataset(2), callbacks=[LiveMonitor(tmp_path / "b", log_interval=1, rank_zero_only=True)])
    assert not (tmp_path / "b").exists()


def test_loss_scale_layout_logs_scale_and_overflow(tmp_path: Path) -> None:
    class CpuLossScaleCell(nn.TrainOneStepWithLossScaleCell):
        """NPUGetFloatStatusV2 is Ascend-only: judge overflow by isfinite on CPU."""

        def get_overflow_status(self, status: object, compute_output: tuple) -> ms.Tensor:
            return ms.ops.logical_not(ms.ops.stack([ms.ops.isfinite(g).all() for g in compute_output]).all())

    net = Net()
    cell = CpuLossScaleCell(
        nn.WithLossCell(net, ce()), nn.SGD(net.trainable_params(), 0.01), ms.Tensor(1024.0, ms.float32)
    )
    Model(cell).train(1, dataset(2), callbacks=[LiveMonitor(tmp_path, log_interval=1)])
    records = read_records(tmp_path / "metrics.jsonl")
    assert [(r["loss_scale"], r["overflow"]) for r in records] == [(1024.0, False), (1024.0, False)]
    assert read_meta(tmp_path)["output_layout"] == "loss_scale"


def test_token_inputs_give_tokens_per_second_and_overrides_win(tmp_path: Path) -> None:
    class Bag(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.head = nn.Embedding(10, 4), nn.Dense(4, 2)

        def construct(self, tokens: ms.Tensor) -> ms.Tensor:
            return self.head(self.embed(tokens).mean(axis=1))

    rng = np.random.default_rng(0)
    data = [(rng.integers(0, 10, (BATCH, 7)).astype(np.int32), np.zeros(BATCH, np.int32)) for _ in range(2)]
    net = Bag()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    model.train(
        1,
        ms.dataset.GeneratorDataset(data, ["t", "y"], shuffle=False),
        callbacks=[LiveMonitor(tmp_path / "a", log_interval=1)],
    )
    model.train(
        1,
        ms.dataset.GeneratorDataset(data, ["t", "y"], shuffle=False),
        callbacks=[LiveMonitor(tmp_path / "b", log_interval=1, batch_size=2, seq_length=100)],
    )
    a, b = read_records(tmp_path / "a" / "metrics.jsonl"), read_records(tmp_path / "b" / "metrics.jsonl")
    assert all(r["tokens_per_s"] == pytest.approx(r["throughput"] * 7) for r in a)
    assert all(r["tokens_per_s"] == pytest.approx(r["throughput"] * 100) for r in b)
    assert all(r["throughput"] == pytest.approx(2 / r["step_time"]) for r in b)
    assert read_meta(tmp_path / "a")["seq_length"] == 7 and read_meta(tmp_path / "b")["batch_size"] == 2


def test_no_file_is_opened_before_training(tmp_path: Path) -> None:
    LiveMonitor(tmp_path / "never", log_interval=5)
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs a run directory"),
        ({"log_dir": "a", "log_file": "b/metrics.jsonl"}, "either log_dir or log_file"),
        ({"log_dir": "a", "log_interval": 0}, "log_interval must be a positive integer"),
        ({"log_dir": "a", "batch_size": 2.5}, "batch_size"),
        ({"log_dir": "a", "on_nan": "panic"}, "on_nan"),
        ({"log_dir": "a", "layout": "yolo"}, "unknown output layout"),
    ],
)
def test_bad_arguments_are_refused_up_front(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LiveMonitor(**kwargs)


def test_a_wrong_layout_warns_once_and_falls_back(tmp_path: Path) -> None:
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train(1, dataset(3), callbacks=[LiveMonitor(tmp_path, log_interval=1, layout="mindformers")])
    layout_warnings = [w for w in caught if "layout 'mindformers'" in str(w.message)]
    assert len(layout_warnings) == 1
    assert [r["step"] for r in read_records(tmp_path / "metrics.jsonl")] == [1, 2, 3]


def test_sink_mode_on_cpu_falls_back_to_one_step_per_callback(tmp_path: Path) -> None:
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    recorder = Recorder()
    model.train(
        2, dataset(6), callbacks=[LiveMonitor(tmp_path, log_interval=4), recorder], dataset_sink_mode=True, sink_size=3
    )
    assert recorder.steps == list(range(1, 13))  # each epoch still runs the whole dataset
    assert [(r["step"], r["samples"]) for r in read_records(tmp_path / "metrics.jsonl")] == [(4, 16), (8, 32), (12, 48)]
    meta = read_meta(tmp_path)
    assert meta["dataset_sink_mode"] is False and meta["total_steps"] == 12  # batch_num says 3 here


def test_max_grad_norm_without_a_norm_warns_once(tmp_path: Path) -> None:
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    with pytest.warns(MonitorWarning, match="returns no gradient norm") as caught:
        model.train(1, dataset(3), callbacks=[LiveMonitor(tmp_path, log_interval=1, max_grad_norm=10.0)])
    assert len(caught) == 1
    assert len(read_records(tmp_path / "metrics.jsonl")) == 3


class SlowSteps(Callback):
    """Makes each step last ``seconds`` so the sampler gets to run during a short test."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_step_end(self, run_context: Any) -> None:
        time.sleep(self.seconds)  # the test is about wall time: steps must take some


def test_telemetry_samples_join_the_last_logged_step(tmp_path: Path) -> None:
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    monitor = LiveMonitor(tmp_path, log_interval=2, telemetry_interval=0.05)
    model.train(1, dataset(12), callbacks=[monitor, SlowSteps(0.05)])
    everything = read_records(tmp_path / "metrics.jsonl", telemetry=True)
    logged_steps = {r["step"] for r in everything if "loss" in r}
    samples = [r for r in everything if "sys_cpu_percent" in r]
    assert len(samples) >= 3
    assert {r["step"] for r in samples} <= logged_steps, "samples carry a step that has a train record"
    assert all(r["mem_host_rss"] > 0 and 0 <= r["sys_mem_percent"] <= 100 for r in samples)
    assert read_meta(tmp_path)["status"] == "finished"


def test_telemetry_off(tmp_path: Path) -> None:
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    model.train(
        1, dataset(6), callbacks=[LiveMonitor(tmp_path, log_interval=2, telemetry_interval=None), SlowSteps(0.02)]
    )
    assert not [r for r in read_records(tmp_path / "metrics.jsonl", telemetry=True) if "sys_cpu_percent" in r]


@pytest.mark.parametrize("segment", [b'"abc"', b"[1]", b"1e400"])
def test_a_corrupt_previous_metadata_file_does_not_stop_the_monitor(tmp_path: Path, segment: bytes) -> None:
    """A previous run's metadata with a hostile ``segment``: the new run is recorded all the same."""
    import decimal

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.meta.json").write_bytes(b'{"segment": ' + segment + b', "status": "crashed"}')
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), 0.01))
    config = {"lr": np.float64(0.01), "layers": np.array([8, 2]), "wd": decimal.Decimal("0.0001")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train(1, dataset(4), callbacks=[LiveMonitor(run, log_interval=2, config=config)])
    assert not [str(w.message) for w in caught if issubclass(w.category, MonitorWarning)]
    assert [(r["seg"], r["step"]) for r in train_records(run / "metrics.jsonl")] == [(1, 2), (1, 4)]
    meta = read_meta(run)
    assert meta["status"] == "finished" and meta["segment"] == 1
    user_keys = {k: meta["config"][k] for k in ("lr", "layers", "wd")}
    assert user_keys == {"lr": 0.01, "layers": [8, 2], "wd": 0.0001}
    assert meta["config"]["optimizer"]["type"] == "SGD", "beside what Model.train says"
