"""Sink mode, driven hook by hook: one callback covers several steps (as on Ascend/GPU).

On the CPU MindSpore silently falls back to one step per callback, so a real
sink run cannot be had here; the hooks get the ``cb_params`` MindSpore gives in
sink mode instead, and a fake clock makes the timing exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor_cb import LiveMonitor
from monitor_cb.train.writer import MonitorWarning
from tests.collector.ms_helpers import read_meta, read_records

pytestmark = pytest.mark.mindspore


class Params(dict):
    """MindSpore's cb_params: a dict with attribute access."""

    __getattr__ = dict.__getitem__


class RunContext:
    def __init__(self, params: Params) -> None:
        self.params, self.stop_requested = params, False

    def original_args(self) -> Params:
        return self.params

    def request_stop(self) -> None:
        self.stop_requested = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_sink_steps_throughput_and_step_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("monitor_cb.train.callback.time.perf_counter", clock)
    params = Params(
        cur_step_num=0,
        cur_epoch_num=1,
        epoch_num=1,
        batch_num=20,
        dataset_sink_mode=True,
        train_network=None,
        optimizer=None,
        net_outputs=None,
        train_dataset_element=None,  # not given in sink mode: batch size comes from the dataset
        train_dataset=type("Dataset", (), {"get_batch_size": lambda self: 8})(),
    )
    context = RunContext(params)
    monitor = LiveMonitor(tmp_path, log_interval=10)
    monitor.on_train_begin(context)
    for sink in range(1, 6):  # sink_size 4: cur_step_num 4, 8, ..., 20
        clock.now += 0.01  # waiting for the device queue
        monitor.on_train_step_begin(context)
        clock.now += 0.39  # four steps on the device
        params.update(cur_step_num=4 * sink, net_outputs=np.float32(1.0 / sink))
        monitor.on_train_step_end(context)
    monitor.on_train_end(context)

    records = read_records(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [12, 20]  # crossing 10 and 20, not every callback
    first, second = records
    assert first["step_time"] == pytest.approx(1.2 / 12) and second["step_time"] == pytest.approx(0.8 / 8)
    assert first["data_time"] == pytest.approx(0.03 / 12) and second["data_time"] == pytest.approx(0.02 / 8)
    assert second["throughput"] == pytest.approx(8 * 8 / 0.8) and second["samples"] == 160
    assert second["loss"] == pytest.approx(0.2)
    meta = read_meta(tmp_path)
    assert meta["batch_size"] == 8 and meta["dataset_sink_mode"] is True and meta["status"] == "finished"


def test_eval_time_is_neither_step_time_nor_data_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("monitor_cb.train.callback.time.perf_counter", clock)
    elem = [np.zeros((2, 3), np.float32)]
    params = Params(cur_step_num=0, cur_epoch_num=1, train_network=None, optimizer=None, train_dataset_element=elem)
    context = RunContext(params)
    monitor = LiveMonitor(tmp_path, log_interval=2, log_memory=False)
    monitor.on_train_begin(context)
    for step in (1, 2):
        monitor.on_train_step_begin(context)
        clock.now += 0.1
        params.update(cur_step_num=step, net_outputs=np.float32(step))
        monitor.on_train_step_end(context)
        if step == 1:  # Model.fit evaluates between steps: 5 s that belong to neither
            monitor.on_eval_begin(context)
            clock.now += 5.0
            params["eval_results"] = {"accuracy": 0.5}
            monitor.on_eval_end(context)
    monitor.on_train_end(context)
    records = read_records(tmp_path / "metrics.jsonl")
    assert [(r["step"], "eval_accuracy" in r) for r in records] == [(1, True), (2, False)]
    assert records[1]["step_time"] == pytest.approx(0.1) and records[1]["data_time"] == pytest.approx(0.0)
    assert "mem_host_rss" not in records[1]


def test_the_monitor_never_raises_into_training(tmp_path: Path) -> None:
    params = Params(cur_step_num=0, train_network=None, optimizer=None)
    context = RunContext(params)
    monitor = LiveMonitor(tmp_path, log_interval=1)
    monitor.on_train_begin(context)
    params.update(cur_step_num=1, net_outputs=object())  # nothing a loss can be read from
    with pytest.warns(MonitorWarning) as caught:
        monitor.on_train_step_end(context)
        monitor.on_train_step_end(context)  # the same step again: nothing new, no second warning
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "cannot read the train cell's outputs as layout 'plain'" in messages[0]
    monitor.on_train_end(context)
    assert read_meta(tmp_path)["status"] == "finished"
    records = read_records(tmp_path / "metrics.jsonl")  # no loss, but the step and its timing are there
    assert [r["step"] for r in records] == [1] and "loss" not in records[0] and records[0]["step_time"] > 0
